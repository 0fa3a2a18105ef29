#!/usr/bin/env python
"""Fault-injection run (issue 21): the real handlers against moto and the local Kubernetes API, faults at random points.

    python bench/faults.py [--json] [--seeds N] [--first S] [--rounds R] [--settle R] [--rate P] [--verbose]
                           [--no-mutations]

Per seed: a NodePool (spot + on-demand, WhenEmptyOrUnderutilized, budget 2 nodes) and 2-4 Deployments; ``--rounds``
rounds of one virtual minute each (Deployments scaled, pods sent to the provisioner, kubelets join, lifecycle,
consolidation and drift sweeps, spot interruptions) with faults on; then faults off and the same rounds until the
cluster is quiet, 16 virtual minutes on (past the registration timeout and GC), quiet again (at most ``--settle``
rounds); then the counters, from ground truth.  What is injected and how each counter is computed:
docs/reliability.md and karpenter_lambda/sim/faults/.

The invariants (karpenter_lambda/sim/faults/invariants.py) are checked after every round of every seed; then each
recovery path is switched off in turn (sim/faults/mutations.py) and the scripted run through every path
(sim/faults/targeted.py) must FAIL with it, caught by the invariant the mutation names.

Prints one line per seed (``--verbose``) and a summary; with ``--json`` one JSON object whose keys are a contract:
faults_injected (injected faults that hit, nothing else), leaked_instances, lost_pods, stuck_pods, stranded_taints,
budget_overruns, double_launches (plus seeds, faults_by_kind, crash_coverage, crash_sites, seconds,
unsettled_seeds, failing_seeds; retries and scenario_events (counted apart from the faults), invariant_violations
{name: count}, violations (the first ones, with time and detail), dead_letters, targeted (the scripted run without
a mutation), mutations {name: caught_by}, mutations_uncaught, mutation_seconds).
Exit 1 when a loss counter is not 0, an invariant was violated or a mutation was not caught.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "layers", "core", "python"))

from karpenter_lambda.sim.faults import COUNTER_KEYS, INVARIANT_NAMES, LOSS_KEYS, run_seed  # noqa: E402
from karpenter_lambda.sim.faults.mutations import MUTATIONS  # noqa: E402
from karpenter_lambda.sim.faults.targeted import run_targeted  # noqa: E402


def mutations(verbose: bool = False) -> dict:
    """The scripted run without a mutation (must hold), then with each (must be caught): {name: caught_by}."""
    t0 = time.perf_counter()
    base = run_targeted()
    caught: dict = {}
    for name, m in MUTATIONS.items():
        r = run_targeted(name)
        fired = [k for k in m.caught_by if r["invariant_violations"].get(k) or r.get(k)]
        caught[name] = fired[0] if fired else None
        if verbose:
            print(f"mutation {name}: caught by {caught[name]} ({r['stopped'] or 'not stopped'}, "
                  f"{r['detail']['virtual_minutes']} virtual min)", file=sys.stderr, flush=True)
    return {"targeted": {"invariant_violations": {k: v for k, v in base["invariant_violations"].items() if v},
                         "losses": {k: base[k] for k in LOSS_KEYS if base[k]}, "faults_injected": base["faults_injected"],
                         "violations": base["violations"]},
            "mutations": caught, "mutations_uncaught": sorted(k for k, v in caught.items() if v is None),
            "mutation_seconds": round(time.perf_counter() - t0, 1)}


def run(seeds: list[int], rounds: int, settle: int, rate: float, verbose: bool = False) -> dict:
    total = Counter()
    kinds = Counter()
    retries = Counter()
    events = Counter()
    dead = Counter()
    inv = Counter({n: 0 for n in INVARIANT_NAMES})
    violations: list = []
    failing = []
    unsettled = []
    points: dict = {}
    most: Counter = Counter()
    sites: Counter = Counter()
    wpoints: dict = {}
    wmost: Counter = Counter()
    t0 = time.perf_counter()
    for s in seeds:
        t = time.perf_counter()
        r = run_seed(s, rounds=rounds, settle_rounds=settle, rate=rate)
        for k in COUNTER_KEYS:
            total[k] += r[k]
        kinds.update(r["faults"])
        retries.update(r["retries"])
        events.update(r["scenario_events"])
        dead.update(r["dead_letters"])
        inv.update(r["invariant_violations"])
        violations += [{"seed": s, **v} for v in r["violations"]][:5]
        for name, n in r["crash_points"]:
            points.setdefault(name, set()).add(n)
        sites.update(r["crash_sites"])
        for name, n in r["write_crash_points"]:
            wpoints.setdefault(name, set()).add(n)
        for name, n in r["writes_seen"].items():
            wmost[name] = max(wmost[name], n)
        for name, n in r["calls_seen"].items():
            most[name] = max(most[name], n)
        if not r["detail"]["settled"]:
            unsettled.append(s)
        bad = {k: r[k] for k in LOSS_KEYS if r[k]}
        bad.update({f"invariant:{k}": v for k, v in r["invariant_violations"].items() if v})
        if bad:
            failing.append({"seed": s, **bad, "detail": r["detail"]})
        if verbose:
            print(f"seed {s}: faults {r['faults_injected']} " + " ".join(f"{k}={r[k]}" for k in LOSS_KEYS)
                  + f" invariants violated {sum(r['invariant_violations'].values())}"
                  + f" ({time.perf_counter() - t:.1f}s, {r['detail']['virtual_minutes']} virtual min)", file=sys.stderr, flush=True)
            if bad:
                print("   " + json.dumps(r["detail"], default=str)[:2000], file=sys.stderr, flush=True)
    out = {k: total[k] for k in COUNTER_KEYS}
    out.update({"seeds": len(seeds), "first_seed": seeds[0] if seeds else None, "rounds": rounds,
                "faults_by_kind": dict(sorted(kinds.items())), "seconds": round(time.perf_counter() - t0, 1),
                "crash_coverage": {name: {"positions_crashed": len(points.get(name, ())), "max_external_calls": most[name],
                                          "write_positions_crashed": len(wpoints.get(name, ())),
                                          "max_write_calls": wmost[name]}
                                   for name in sorted(most)},
                "crash_sites": dict(sorted(sites.items())),
                "retries": dict(sorted(retries.items())), "scenario_events": dict(sorted(events.items())),
                "invariant_violations": dict(inv), "violations": violations[:20], "dead_letters": dict(dead),
                "unsettled_seeds": unsettled, "failing_seeds": failing})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--seeds", type=int, default=14)
    ap.add_argument("--first", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=24, help="rounds (virtual minutes) with faults on")
    ap.add_argument("--settle", type=int, default=40, help="at most this many rounds with faults off")
    ap.add_argument("--rate", type=float, default=0.7, help="share of invocations that get a fault plan")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--no-mutations", action="store_true", help="skip the mutation runs")
    a = ap.parse_args(argv)
    logging.disable(logging.WARNING)
    sys.stdout = open(os.devnull, "w")   # a handler's stray output (metrics) must not mix with the JSON line
    out = run(list(range(a.first, a.first + a.seeds)), a.rounds, a.settle, a.rate, a.verbose)
    if not a.no_mutations:
        out.update(mutations(a.verbose))
    sys.stdout = sys.__stdout__   # the handlers' stdout redirections are over
    if a.json:
        print(json.dumps(out, default=str), flush=True)
    else:
        print(f"{out['seeds']} seeds, {out['faults_injected']} faults injected in {out['seconds']} s")
        for k in LOSS_KEYS:
            print(f"  {k:18} {out[k]}")
        print("  by kind: " + ", ".join(f"{k}={v}" for k, v in out["faults_by_kind"].items()))
        print("  retries: " + ", ".join(f"{k}={v}" for k, v in out["retries"].items()))
        print("  invariants violated: " + ", ".join(f"{k}={v}" for k, v in out["invariant_violations"].items()))
        for name, by in (out.get("mutations") or {}).items():
            print(f"  mutation {name:24} caught by {by}")
    bad = any(out[k] for k in LOSS_KEYS) or any(out["invariant_violations"].values())
    bad = bad or bool(out.get("mutations_uncaught")) or bool((out.get("targeted") or {}).get("invariant_violations"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
