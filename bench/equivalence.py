"""Behaviour fingerprint of the code in this checkout: the refactor check of issue 22.

    python bench/equivalence.py [--quick] [--out FILE] [--compare FILE]

Prints JSON (a contract: keys are added, never renamed):

- ``plans``: for every example set, the sha256 of ``karpenter-lambda plan --json`` over it (the repo's
  ``examples/`` NodePool files each with ``examples/workloads/web.yaml``, and the demo, off-peak and spread sets);
- ``consolidation``: ``decisions_sha256`` (every sweep's commands, replacements and blocked causes) and the end
  state of ``bench/consolidation.py`` at 200 nodes x 3 sweeps and 1,000 nodes x 1 sweep (``--quick``: the first only);
- ``demo``: how the demo simulation ends (cost, node count, the nodes' type/zone/capacity type, event counts by type;
  ``--compare`` leaves out PodNominated/PodsNominated, which vary from run to run on one commit).

``--compare FILE`` compares with an earlier output (e.g. ``bench/baselines/issue22-equivalence-before.json``, made at
commit 65e50bd before the issue-22 refactor; ``bench/baselines/equivalence-2026-12-07.json``, ``--quick``, at the
commit that added it: the same plans and consolidation decisions, the demo's ``DisruptionBlocked`` count 21 where the
issue-22 one has 17, explanations made more specific; ``bench/baselines/equivalence-2026-12-07b.json``, after
consolidation took Karpenter v1.14's savings-ratio order (the 200x3 run ends at 151 nodes, $44.3634/h, instead of
148, $44.9146/h; plans and the demo unchanged); ``bench/baselines/equivalence-2026-12-07c.json``, which ``make bench``
compares with, after ``a1.*`` left AL2023 catalogs (Karpenter's compatibility check): only the off-peak set's plan
differs, its a1.2xlarge NodeClaim becoming a t4g.xlarge one, $0.8256/h -> $0.8318/h; ``bench/baselines/
equivalence-2026-12-07e.json``, after a limited NodePool's NodeClaims kept options spanning their minValues: only
``plans.spot-and-on-demand`` differs, its three r7a.medium NodeClaims listing 56 options of 54 families instead of 2
for ``minValues: 5``, the same types launched and the same $0.2518/h; ``bench/baselines/equivalence-2026-12-07f.json``,
which ``make bench`` compares with now, after a block is told once per disruption reason and cause (it was once per
cause): the demo's ``DisruptionBlocked`` count 27 instead of 21 (the drift sweep's budget blocks of nodes whose budget
block consolidation had told), nothing else; or one made on a worktree of any commit)
and exits 1 naming every difference.  The CLI runs with this checkout's package first on ``PYTHONPATH``, so the
script measures the code beside it even where another checkout is installed in the venv.
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples"


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "layers" / "core" / "python"), str(ROOT / "bench"),
                                         env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _run(args: list[str]) -> str:
    out = subprocess.run([sys.executable, *args], cwd=ROOT, env=_env(), capture_output=True, text=True)
    if out.returncode not in (0, 1, 3):   # plan exits 3 when some pod cannot be placed: still a plan
        raise SystemExit(f"{' '.join(args)} failed ({out.returncode}): {out.stderr[-2000:]}")
    return out.stdout


def example_sets() -> dict[str, list[Path]]:
    sets = {}
    for f in sorted(EX.glob("*.yaml")):
        sets[f.stem] = [f, EX / "workloads" / "web.yaml"]
    for d in ("demo", "offpeak", "spread"):
        sets[d] = [f for f in sorted((EX / d).glob("*.yaml")) if f.name not in ("scenario.yaml", "schedule.yaml")]
    return sets


# the plan --json keys the baseline was taken with: keys added since (capacityReservationId, priceOverlay,
# basePricePerHour, minValuesRelaxed, ...) are left out so the fingerprint compares decisions, not the contract's growth
PLAN_KEYS = ("nodeClaims", "unschedulable", "costPerHour", "costEstimated", "existing", "zones")
CLAIM_KEYS = ("name", "nodePool", "instanceTypes", "instanceType", "zone", "capacityType", "pricePerHour",
              "priceEstimated", "pods", "reason")


def _plan_fingerprint(text: str) -> str:
    doc = json.loads(text)
    doc = {k: doc[k] for k in PLAN_KEYS if k in doc}
    doc["nodeClaims"] = [{k: c[k] for k in CLAIM_KEYS if k in c} for c in doc.get("nodeClaims", [])]
    return hashlib.sha256((json.dumps(doc, indent=2) + "\n").encode()).hexdigest()


def plans() -> dict[str, str]:
    out = {}
    for name, files in example_sets().items():
        args = ["-m", "karpenter_lambda", "plan", "--json"]
        for f in files:
            args += ["-f", str(f)]
        out[name] = _plan_fingerprint(_run(args))
    return out


def consolidation(quick: bool) -> dict:
    runs = {"200x3": ["--nodes", "200", "--pods", "4000", "--sweeps", "3"]}
    if not quick:
        runs["1000x1"] = ["--nodes", "1000", "--pods", "20000", "--sweeps", "1"]
    out = {}
    for name, args in runs.items():
        d = json.loads(_run([str(ROOT / "bench" / "consolidation.py"), *args, "--json"]))
        out[name] = {k: d.get(k) for k in ("decisions_sha256", "nodes_final", "cost_final", "moves", "cancelled")}
    return out


def demo() -> dict:
    d = json.loads(_run(["-m", "karpenter_lambda", "simulate", *(str(EX / "demo" / f) for f in
                         ("nodepools.yaml", "workloads.yaml", "scenario.yaml")), "--json"]))
    return {"costPerHour": d["costPerHour"], "nodes": len(d["nodeClaims"]),
            "nodeShapes": sorted(f"{n['nodePool']}/{n['instanceType']}/{n['zone']}/{n['capacityType']}"
                                 for n in d["nodeClaims"]),
            "events": dict(sorted(collections.Counter(e["type"] for e in d["events"]).items())),
            "unschedulable": len(d["unschedulable"]), "simulatedSeconds": d["simulatedSeconds"],
            "stoppedBecause": d["stoppedBecause"]}


# event counts that vary from run to run on one commit (measured at b8c7a5d: PodNominated 11, 12, 12 over three demo
# runs): the watcher's real threads race the virtual clock, so a pod may be nominated in one more round.  Reported,
# not compared.
TIMING_DEPENDENT_EVENTS = ("PodNominated", "PodsNominated")


def comparable(result: dict) -> dict:
    out = json.loads(json.dumps(result))
    for k in TIMING_DEPENDENT_EVENTS:
        out.get("demo", {}).get("events", {}).pop(k, None)
    return out


def diff(a, b, path="") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += diff(a.get(k), b.get(k), f"{path}.{k}" if path else k)
        return out
    return [] if a == b else [f"{path}: {a!r} -> {b!r}"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="the small consolidation run only")
    ap.add_argument("--out", help="also write the JSON here")
    ap.add_argument("--compare", help="an earlier output to compare with (exit 1 on any difference)")
    ap.add_argument("--json", action="store_true",
                    help="one summary line instead of the document (bench/run_all.py): its fingerprint and, with "
                         "--compare, the differences")
    a = ap.parse_args(argv)
    print("plan --json over every example set ...", file=sys.stderr, flush=True)
    result = {"plans": plans()}
    print("consolidation benchmark ...", file=sys.stderr, flush=True)
    result["consolidation"] = consolidation(a.quick)
    print("demo simulation ...", file=sys.stderr, flush=True)
    result["demo"] = demo()
    text = json.dumps(result, indent=2, sort_keys=True)
    if not a.json:
        print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")
    summary = {"benchmark": "equivalence", "quick": a.quick,
               "sha256": hashlib.sha256((text + "\n").encode()).hexdigest()}
    changes: list = []
    if a.compare:
        before = json.loads(Path(a.compare).read_text())
        if a.quick:
            before.get("consolidation", {}).pop("1000x1", None)
        changes = diff(comparable(before), comparable(result))
        for c in changes:
            print(f"DIFFERENT {c}", file=sys.stderr)
        print(f"{len(changes)} difference(s) from {a.compare}", file=sys.stderr)
        summary.update({"compared_with": a.compare, "differences": len(changes), "ok": not changes,
                        "first_differences": changes[:5]})
    if a.json:
        print(json.dumps(summary))
    return 1 if changes else 0


if __name__ == "__main__":
    sys.exit(main())
