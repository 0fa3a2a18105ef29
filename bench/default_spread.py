#!/usr/bin/env python
"""Default topology spread (Karpenter v1.15's scheduler config): what it costs a provisioning solve.

    python bench/default_spread.py [--pods N] [--workloads W] [--runs R] [--constraints zone|system] [--json]

``N`` pending pods (default 2,000) of ``W`` Deployments (default 40; each pod owned by its Deployment's apps/v1
ReplicaSet, half of the Deployments also selected by a Service), on the real catalog (moto's us-east-1 data, zones
a..c).  Timed, per run, on a fresh snapshot: the injection step (``apply_default_spread``: the selector deduced per
workload and the constraints given to every pod without its own) and ``scheduling_input`` + ``solve``, once without
defaults and once with the defaults: ``zone`` (the default), a zone ``DoNotSchedule`` maxSkew 1; ``system``, that
and a hostname ``ScheduleAnyway`` maxSkew 3 (the kube-scheduler's system defaults, the zone one made strict).  Reported: the medians, the pods given the defaults
(every one), the NodeClaims and zones used with and without, and ``max_zone_skew``: over the Deployments, the largest
difference between the pods of one Deployment in two zones (at most 1 with the zone default).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "layers", "core", "python"))
sys.path.insert(0, HERE)

from scheduling import ZONES, nodepool, real_catalog  # noqa: E402

from karpenter_lambda.api.snapshot import ClusterSnapshot  # noqa: E402
from karpenter_lambda.scheduling import solve  # noqa: E402
from karpenter_lambda.scheduling.default_spread import apply_default_spread  # noqa: E402
from karpenter_lambda.scheduling.inputs import scheduling_input  # noqa: E402

DEFAULTS = ({"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"},
            {"maxSkew": 3, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway"})
CONSTRAINTS = {"zone": DEFAULTS[:1], "system": DEFAULTS}
CPU = ["250m", "500m", "1", "2"]
MEM = ["512Mi", "1Gi", "2Gi", "4Gi"]


def make(count: int, workloads: int):
    """(pods, Services, ReplicaSets)."""
    pods, services, replicasets = [], [], []
    for w in range(workloads):
        app = f"app{w}"
        rs = f"{app}-5d8f7c"
        replicasets.append({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                            "metadata": {"name": rs, "namespace": "default", "uid": f"rs-{w}"},
                            "spec": {"selector": {"matchLabels": {"app": app}}}})
        if w % 2 == 0:
            services.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": app, "namespace": "default"},
                             "spec": {"selector": {"app": app}}})
    for i in range(count):
        w = i % workloads
        app = f"app{w}"
        pods.append({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": f"{app}-5d8f7c-{i}", "namespace": "default", "uid": f"uid-{i}",
                                  "labels": {"app": app, "pod-template-hash": "5d8f7c"},
                                  "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                       "name": f"{app}-5d8f7c", "uid": f"rs-{w}", "controller": True}]},
                     "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {
                         "cpu": CPU[w % 4], "memory": MEM[(w // 4) % 4]}}}]},
                     "status": {"phase": "Pending"}})
    return pods, services, replicasets


def run(types, count: int, workloads: int, defaults: tuple):
    gc.collect()
    pods, services, replicasets = make(count, workloads)
    np_ = nodepool()
    t0 = time.perf_counter()
    snap = ClusterSnapshot(now=0.0, nodepools={np_.name: np_}, pods=pods, instance_types={np_.name: types},
                           default_spread=defaults, services=services, workload_controllers=replicasets)
    pending = snap.pending_pods()
    apply_default_spread(snap)
    t1 = time.perf_counter()
    inp, _ = scheduling_input(snap, pending)
    res = solve(inp)
    t2 = time.perf_counter()
    given = sum(1 for p in snap.pods if (p.get("spec") or {}).get("topologySpreadConstraints"))
    return t1 - t0, t2 - t1, res, given


def max_zone_skew(res) -> int:
    per: dict[str, Counter] = {}
    for c in res.nodeclaims:
        for key in c.pods:
            app = key.split("/", 1)[1].split("-", 1)[0]
            per.setdefault(app, Counter())[c.zone] += 1
    skew = 0
    for counts in per.values():
        values = [counts.get(z, 0) for z in ZONES]
        skew = max(skew, max(values) - min(values))
    return skew


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pods", type=int, default=2000)
    ap.add_argument("--workloads", type=int, default=40)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--constraints", choices=sorted(CONSTRAINTS), default="zone")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    types = real_catalog()
    run(types, a.pods, a.workloads, ())   # warm the per-type caches both sets share
    times: dict = {"off": ([], []), "on": ([], [])}
    results = {}
    for _ in range(a.runs):
        for name, defaults in (("off", ()), ("on", CONSTRAINTS[a.constraints])):
            inject, solve_s, res, given = run(types, a.pods, a.workloads, defaults)
            times[name][0].append(inject)
            times[name][1].append(solve_s)
            results[name] = (res, given)
    off, on = results["off"][0], results["on"][0]
    row = {"benchmark": "default_spread", "constraints": a.constraints, "pods": a.pods, "workloads": a.workloads, "runs": a.runs,
           "instance_types": len(types),
           "inject_ms": round(statistics.median(times["on"][0]) * 1000, 2),
           "solve_seconds_without_defaults": round(statistics.median(times["off"][1]), 4),
           "solve_seconds_with_defaults": round(statistics.median(times["on"][1]), 4),
           "pods_given_defaults": results["on"][1],
           "nodes_without_defaults": len(off.nodeclaims), "nodes_with_defaults": len(on.nodeclaims),
           "zones_without_defaults": len({c.zone for c in off.nodeclaims}),
           "zones_with_defaults": len({c.zone for c in on.nodeclaims}),
           "max_zone_skew_without_defaults": max_zone_skew(off), "max_zone_skew_with_defaults": max_zone_skew(on),
           "unschedulable_with_defaults": len(on.unschedulable),
           "cost_per_hour_without_defaults": round(off.cost_per_hour, 4),
           "cost_per_hour_with_defaults": round(on.cost_per_hour, 4)}
    row["ok"] = (row["pods_given_defaults"] == a.pods and row["max_zone_skew_with_defaults"] <= 1
                 and not row["unschedulable_with_defaults"])
    if a.json:
        print(json.dumps(row))
    else:
        for k, v in row.items():
            print(f"{k:34} {v}")
    return 0 if row["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
