"""How fast `simulate` runs and what a quiet sweep costs (issue 32): JSON on stdout.

* ``sim40_4h``: a 40-pod, 2-NodePool cluster (examples/demo/nodepools.yaml: web 20 spread over zones, api 12,
  batch 8 on the tainted spot pool) simulated for 4 h virtual: wall seconds, and per function its invocations,
  AWS calls and wall seconds;
* ``quiet100``: 100 nodes (100 pods with hostname anti-affinity) simulated for 20 min virtual; the consolidation
  sweeps once the cluster is quiet: AWS calls and milliseconds of a skipped sweep (median) and of a full one;
* ``week200``: 200 nodes simulated for 7 days virtual: wall seconds;
* ``tiny5m``: the fixed cost, the CLI for one pod and 5 minutes virtual in a fresh process: wall and CPU seconds.

Every case also reports ``cpu_seconds`` (this process's, or the child's): on a shared machine the wall figure
moves with the load, the CPU figure much less.

``python bench/sim_speed.py [--only tiny5m,sim40_4h,quiet100,week200] [--shortcuts on|off] [--save-events DIR]``
(``--shortcuts off`` sets ``KARPENTER_LAMBDA_SWEEP_SHORTCUTS=false``: every sweep in full, as before issue 32;
``--save-events DIR`` writes each in-process case's ``simulate --json`` document, less its ``controlPlaneCost``
(billed durations are wall-clock figures), to ``DIR/<case>.json``, to compare runs before and after a speed-up).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "layers" / "core" / "python"))

CASES = ("tiny5m", "sim40_4h", "quiet100", "week200")
SAVE_EVENTS: dict[str, Path] = {}   # case -> file: where _simulate writes the run's document (--save-events)
SKIPPED = "cluster unchanged since a sweep that found nothing"


def _deployment(name: str, replicas: int, cpu: str, memory: str, *, spread: bool = False, hostname: bool = False,
                batch: bool = False) -> dict:
    spec: dict = {"containers": [{"name": name, "image": name, "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
    if spread:
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                              "whenUnsatisfiable": "DoNotSchedule",
                                              "labelSelector": {"matchLabels": {"app": name}}}]
    if hostname:
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": name}}, "topologyKey": "kubernetes.io/hostname"}]}}
    if batch:
        spec["tolerations"] = [{"key": "workload", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}]
        spec["nodeSelector"] = {"workload": "batch"}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}


def _nodes_pool(limit_cpu: str) -> str:
    return f"""
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: default}}
spec:
  template:
    spec:
      requirements:
        - {{key: kubernetes.io/arch, operator: In, values: [amd64]}}
        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
        - {{key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, c5]}}
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
  limits: {{cpu: "{limit_cpu}"}}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  role: KarpenterNodeRole-bench
  amiSelectorTerms: [{{alias: al2023@latest}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: bench}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: bench}}}}]
"""


class Recorder:
    """Each handler call: function, virtual time, wall seconds, AWS calls (botocore's one entry point)."""

    def __init__(self):
        import botocore.client

        from karpenter_lambda.sim import feeds

        self.rows: list[dict] = []
        self._ops: collections.Counter | None = None
        original_call, original_handler = botocore.client.BaseClient._make_api_call, feeds.FeedsMixin._call_handler
        rec = self

        def api_call(client, op, params):
            if rec._ops is not None:
                rec._ops[f"{client.meta.service_model.service_name}:{op}"] += 1
            return original_call(client, op, params)

        def call_handler(sim, fn, event, name):
            rec._ops, logs_before = collections.Counter(), _log_len(sim)
            t = time.perf_counter()
            try:
                return original_handler(sim, fn, event, name)
            finally:
                rec.rows.append({"function": name, "at": sim.clock.elapsed, "ms": (time.perf_counter() - t) * 1000,
                                 "calls": sum(rec._ops.values()), "ops": dict(rec._ops),
                                 "skipped": SKIPPED in _log_tail(sim, logs_before)})
                rec._ops = None

        botocore.client.BaseClient._make_api_call = api_call
        feeds.FeedsMixin._call_handler = call_handler

    def per_function(self) -> dict:
        out: dict = {}
        for r in self.rows:
            f = out.setdefault(r["function"], {"invocations": 0, "aws_calls": 0, "wall_seconds": 0.0})
            f["invocations"] += 1
            f["aws_calls"] += r["calls"]
            f["wall_seconds"] = round(f["wall_seconds"] + r["ms"] / 1000, 3)
        return out


def _log_len(sim) -> int:
    return len(sim.handler_logs.getvalue()) if sim.handler_logs is not None else 0


def _log_tail(sim, start: int) -> str:
    return sim.handler_logs.getvalue()[start:] if sim.handler_logs is not None else ""


def _simulate(files: list[Path], until: float, rec: Recorder, case: str) -> dict:
    import io

    from karpenter_lambda.sim.simulator import Simulation

    rec.rows.clear()
    t, cpu = time.perf_counter(), time.process_time()
    res = Simulation(files, until=until, handler_logs=io.StringIO()).run()
    wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    bound = sum(len(nc.get("pods") or []) for nc in res.to_dict().get("nodeClaims", []))
    if case in SAVE_EVENTS:
        doc = res.to_dict()
        doc.pop("controlPlaneCost", None)
        SAVE_EVENTS[case].write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return {"wall_seconds": round(wall, 2), "cpu_seconds": round(cpu, 2), "simulated_seconds": until, "events": len(res.events),
            "nodeclaims": len(res.to_dict().get("nodeClaims", [])), "pods_bound": bound,
            "functions": rec.per_function()}


def sim40(tmp: Path, rec: Recorder) -> dict:
    work = tmp / "work40.yaml"
    work.write_text(yaml.safe_dump_all([_deployment("web", 20, "500m", "512Mi", spread=True),
                                        _deployment("api", 12, "1", "2Gi"),
                                        _deployment("batch", 8, "2", "4Gi", batch=True)]))
    return {"command": "simulate examples/demo/nodepools.yaml work40.yaml --until 4h",
            **_simulate([ROOT / "examples" / "demo" / "nodepools.yaml", work], 4 * 3600.0, rec, "sim40_4h")}


def _nodes_files(tmp: Path, n: int) -> list[Path]:
    pools, work = tmp / f"pool{n}.yaml", tmp / f"work{n}.yaml"
    pools.write_text(_nodes_pool(str(4 * n)))
    work.write_text(yaml.safe_dump_all([_deployment("app", n, "500m", "512Mi", hostname=True)]))
    return [pools, work]


def quiet100(tmp: Path, rec: Recorder) -> dict:
    out = _simulate(_nodes_files(tmp, 100), 20 * 60.0, rec, "quiet100")
    sweeps = [r for r in rec.rows if r["function"] == "consolidation"]
    skipped = [r for r in sweeps if r["skipped"]]
    full = [r for r in sweeps if not r["skipped"]]
    last_full = full[-1] if full else None
    return {"command": "simulate pool100.yaml work100.yaml --until 20m (100 pods, hostname anti-affinity)", **out,
            "consolidation_sweeps": len(sweeps), "skipped_sweeps": len(skipped),
            "quiet_sweep_aws_calls": max((r["calls"] for r in skipped), default=None),
            "quiet_sweep_ms_median": round(statistics.median(r["ms"] for r in skipped), 1) if skipped else None,
            "quiet_sweep_ops": skipped[-1]["ops"] if skipped else None,
            "full_sweep_aws_calls": last_full["calls"] if last_full else None,
            "full_sweep_ms": round(last_full["ms"], 1) if last_full else None}


def week200(tmp: Path, rec: Recorder) -> dict:
    return {"command": "simulate pool200.yaml work200.yaml --until 168h (200 pods, hostname anti-affinity)",
            **_simulate(_nodes_files(tmp, 200), 7 * 24 * 3600.0, rec, "week200")}


def tiny5m(tmp: Path, rec: Recorder) -> dict:
    """The fixed cost of a simulate: the CLI in a fresh process (imports, moto, the Kubernetes API, the first
    catalog load) for one pod and 5 minutes virtual, as the end-to-end tests pay it."""
    import resource
    import subprocess

    pod = tmp / "onepod.yaml"
    pod.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "one", "namespace": "default"},
                                   "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {
                                       "requests": {"cpu": "1", "memory": "1Gi"}}}]}}))
    cmd = [sys.executable, "-m", "karpenter_lambda", "simulate", str(ROOT / "examples" / "default.yaml"), str(pod),
           "--until", "5m", "--quiet"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "layers" / "core" / "python")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"command": "python -m karpenter_lambda simulate examples/default.yaml onepod.yaml --until 5m --quiet",
            "exit": done.returncode, "wall_seconds": round(wall, 2), "cpu_seconds": round(cpu, 2)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=",".join(CASES), help=f"comma-separated cases ({', '.join(CASES)})")
    ap.add_argument("--shortcuts", choices=("on", "off"), default="on")
    ap.add_argument("--save-events", metavar="DIR", help="write each in-process case's simulate --json document "
                                                         "(without controlPlaneCost) to DIR/<case>.json")
    ap.add_argument("--json", action="store_true", help="accepted for bench/run_all.py (the output is always JSON)")
    args = ap.parse_args(argv)
    cases = [c.strip() for c in args.only.split(",") if c.strip()]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        ap.error(f"unknown case(s): {', '.join(unknown)}")
    os.environ["KARPENTER_LAMBDA_SWEEP_SHORTCUTS"] = "true" if args.shortcuts == "on" else "false"
    if args.save_events:
        Path(args.save_events).mkdir(parents=True, exist_ok=True)
        SAVE_EVENTS.update({c: Path(args.save_events) / f"{c}.json" for c in cases if c != "tiny5m"})
    rec = Recorder()
    out: dict = {"shortcuts": args.shortcuts, "cpu_count": os.cpu_count()}
    with tempfile.TemporaryDirectory() as d:
        for case in cases:
            out[case] = {"tiny5m": tiny5m, "sim40_4h": sim40, "quiet100": quiet100, "week200": week200}[case](Path(d), rec)
    _judge(out)
    # --json (bench/run_all.py, make bench): one line, as every benchmark prints; otherwise indented for people
    json.dump(out, sys.stdout, indent=None if args.json else 2, separators=(",", ":") if args.json else None)
    sys.stdout.write("\n")
    return 0


# issue 32's targets: sim40_4h <= 10 s wall, week200 <= 120 s wall; a quiet consolidation sweep <= 5 AWS calls and
# <= 100 ms (the median of the skipped sweeps)
TARGETS = {"sim40_4h": {"wall_seconds": 10.0}, "week200": {"wall_seconds": 120.0},
           "quiet100": {"quiet_sweep_aws_calls": 5, "quiet_sweep_ms_median": 100.0}}


def _judge(out: dict) -> None:
    """Each measured case with a target gets ``target`` and ``ok`` (every figure at or under its target)."""
    for case, target in TARGETS.items():
        row = out.get(case)
        if isinstance(row, dict):
            row["target"] = dict(target)
            row["ok"] = all(row.get(k) is not None and row[k] <= v for k, v in target.items())


if __name__ == "__main__":
    raise SystemExit(main())
