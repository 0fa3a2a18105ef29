#!/usr/bin/env python
"""What the whole control plane costs a month at list prices (issue 32 item 1): ``simulate``'s ``controlPlaneCost``
on a quiet 100-node cluster and on a churning one.

    python bench/control_plane_cost.py [--case quiet|churn|both] [--nodes 100] [--settle 20m] [--measure 60m] [--json]
                                       [--shortcuts on|off]

Both cases run the real handlers, watcher, moto and local Kubernetes API of ``simulate`` (``sim.simulator.Simulation``)
with two changes that make the figure a month's: the quiet stretches ``simulate`` skips are not skipped (Lambda runs
every sweep on its schedule), and the meter is reset once the cluster has settled (``--settle``), so the launches of
the start are not counted; what follows for ``--measure`` is priced (``sim/cost.py``).

* ``quiet``: ``--nodes`` pods of 1.5 vCPU on a NodePool of m5.large (one pod per node), nothing changing.
* ``churn``: the same cluster and a 20-pod Deployment scaled 20 -> 60 -> 20 every 10 minutes (nodes launched and
  consolidated all the time).

One JSON line per case: ``{"case", "nodes", "simulatedSeconds", "measuredSeconds", "wallSeconds", "totalPerMonth",
"byService": {...}, "functions": {name: {meanBilledMs, invocationsPerMonth, costPerMonth, awsCallsPerInvocation}},
"sweeps": {name: {invocations, awsCalls: {min, median, max}, billedMs: {min, median, max}}}, "shortcuts",
"controlPlaneCost": {...}}``; ``sweeps`` comes from the cost meter's per-invocation log (the cheapest sweep is a
skipped one when the shortcuts are on, the dearest a full one).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "layers", "core", "python"))

BASE = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: default}}
spec:
  template:
    spec:
      requirements:
        - {{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}}
        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
  disruption: {{consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 1m}}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  role: KarpenterNodeRole-bench
  amiSelectorTerms: [{{alias: al2023@latest}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: sim}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: sim}}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: steady, namespace: default}}
spec:
  replicas: {nodes}
  selector: {{matchLabels: {{app: steady}}}}
  template:
    metadata: {{labels: {{app: steady}}}}
    spec:
      containers:
        - {{name: app, image: app, resources: {{requests: {{cpu: 1500m, memory: 1Gi}}}}}}
"""

CHURN = """
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: churn, namespace: default}}
spec:
  replicas: 20
  selector: {{matchLabels: {{app: churn}}}}
  template:
    metadata: {{labels: {{app: churn}}}}
    spec:
      containers:
        - {{name: app, image: app, resources: {{requests: {{cpu: 900m, memory: 1Gi}}}}}}
---
apiVersion: karpenter-lambda.io/v1alpha1
kind: Scenario
metadata: {{name: churn}}
spec:
  steps:
{steps}
"""


def _seconds(text: str) -> float:
    from karpenter_lambda.sim.clock import parse_duration

    return parse_duration(text)


def manifests(case: str, nodes: int, until: float, settle: float) -> str:
    text = BASE.format(nodes=nodes)
    if case == "churn":
        steps, t, up = [], settle, True
        while t < until:
            steps.append(f"    - {{at: {int(t)}s, scale: {{kind: Deployment, namespace: default, name: churn, "
                         f"replicas: {60 if up else 20}}}}}")
            t, up = t + 600.0, not up
        text += CHURN.format(steps="\n".join(steps))
    return text


def run(case: str, nodes: int, settle: float, measure: float) -> dict:
    from karpenter_lambda.sim.simulator import Simulation

    class _Month(Simulation):
        """Sweeps on their schedule all the time (no quiet stretch skipped); the meter reset once settled."""

        def _skip_target(self):
            return None

        def _track_replicas(self) -> None:
            super()._track_replicas()
            meter = getattr(self, "cost_meter", None)
            if meter is not None and meter.invocation_log is None:
                meter.invocation_log = []
            if not getattr(self, "_bench_reset", False) and self.clock.elapsed >= settle:
                self._bench_reset = True
                self.cost_meter.reset(at=self.clock.elapsed)

    until = settle + measure
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"{case}.yaml")
        with open(path, "w") as fh:
            fh.write(manifests(case, nodes, until, settle))
        started = time.perf_counter()
        sim = _Month([path], until=until)
        result = sim.run()
        wall = time.perf_counter() - started
    doc = result.control_plane_cost or {}
    log = list(getattr(getattr(sim, "cost_meter", None), "invocation_log", None) or [])
    services = ("lambda", "dynamodb", "sqs", "eventbridge", "cloudwatch", "logs", "xray")
    return {
        "case": case, "nodes": len(result.nodeclaims), "podsBound": result.pods_bound, "podsTotal": result.pods_total,
        "simulatedSeconds": round(result.elapsed, 1), "measuredSeconds": doc.get("simulatedSeconds"),
        "wallSeconds": round(wall, 1), "totalPerMonth": doc.get("totalPerMonth"),
        "byService": {k: (doc.get(k) or {}).get("costPerMonth") for k in services},
        "functions": {n: {k: f[k] for k in ("meanBilledMs", "meanCpuMs", "invocationsPerMonth", "costPerMonth",
                                             "awsCallsPerInvocation", "kubeCallsPerInvocation")}
                      for n, f in (doc.get("functions") or {}).items()},
        "sweeps": sweep_calls(log),
        "shortcuts": shortcuts_enabled(),
        "controlPlaneCost": doc,
    }


def sweep_calls(log: list[dict]) -> dict:
    """Per scheduled sweep, from the cost meter's invocations measured: AWS calls and billed ms of the cheapest
    (a skipped sweep, with the shortcuts on), the median and the dearest (a full one)."""
    out: dict = {}
    for name in ("consolidation", "drift", "lifecycle"):
        rows = [r for r in log if r["function"] == name]
        if not rows:
            continue
        calls = sorted(r["awsCalls"] for r in rows)
        billed = sorted(r["billedMs"] for r in rows)
        out[name] = {"invocations": len(rows), "awsCalls": {"min": calls[0], "median": statistics.median(calls),
                                                            "max": calls[-1]},
                     "billedMs": {"min": billed[0], "median": statistics.median(billed), "max": billed[-1]}}
    return out


def shortcuts_enabled() -> bool:
    from karpenter_lambda.controllers.sweep_shortcuts import enabled

    return enabled()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", choices=["quiet", "churn", "both"], default="both")
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--settle", default="20m", help="virtual time before measuring (the launches of the start)")
    ap.add_argument("--measure", default="60m", help="virtual time measured after --settle")
    ap.add_argument("--json", action="store_true", help="one JSON line per case (the full controlPlaneCost included)")
    ap.add_argument("--shortcuts", choices=["on", "off"], default="on",
                    help="off: KARPENTER_LAMBDA_SWEEP_SHORTCUTS=false (every sweep in full, as before issue 32)")
    a = ap.parse_args(argv)
    if a.shortcuts == "off":
        os.environ["KARPENTER_LAMBDA_SWEEP_SHORTCUTS"] = "false"
    cases = ["quiet", "churn"] if a.case == "both" else [a.case]
    for case in cases:
        row = run(case, a.nodes, _seconds(a.settle), _seconds(a.measure))
        if a.json:
            print(json.dumps(row), flush=True)
        else:
            from karpenter_lambda.sim.cost_render import cost_lines

            print(f"{case}: {row['nodes']} nodes, {row['podsBound']}/{row['podsTotal']} pods bound, measured "
                  f"{row['measuredSeconds']:.0f} s virtual after {a.settle} ({row['wallSeconds']} s wall)")
            print("\n".join(cost_lines(row["controlPlaneCost"])), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
