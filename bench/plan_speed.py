#!/usr/bin/env python
"""Wall time of the offline ``plan`` command, as a user runs it (a fresh process each time).

    python bench/plan_speed.py [--runs N] [--json] [-f FILE ...] [--region R]

(AWS_REGION / AWS_DEFAULT_REGION are dropped from the children's environment: the region is plan's
default, us-east-1, unless ``--region`` is given.)

Runs ``python -m karpenter_lambda plan -f examples/default.yaml -f examples/workloads/web.yaml --json``
N times (default 3) and times each process; then one more process calls ``cli.plan.build_plan`` on the
same files for the split (``catalog_seconds``: instance types + prices, ``solve_seconds``) and the pod
count.  Target (issue 10 item 6): median <= 2 s (it was ~8-13 s when the catalog went through mock_aws).

JSON (one line): {"command", "wall_seconds": [...], "median", "catalog_seconds", "solve_seconds", "pods",
"node_claims", "cost_per_hour"}.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_FILES = ["examples/default.yaml", "examples/workloads/web.yaml"]

SPLIT = """
import json, sys
from karpenter_lambda.cli.plan import build_plan
result, info = build_plan(sys.argv[2:], sys.argv[1])
print(json.dumps(info))
"""


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.join(REPO, "layers", "core", "python"), env.get("PYTHONPATH")]))
    for var in ("KARPENTER_LAMBDA_CATALOG_SOURCE", "AWS_REGION", "AWS_DEFAULT_REGION"):
        env.pop(var, None)  # plan's offline mode chooses its source itself; the region is plan's default or --region
    return env


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="timed runs of the command (default 3)")
    ap.add_argument("-f", dest="files", action="append", help="manifest files (default: the web example)")
    ap.add_argument("--region", default=None, help="passed to plan (default: plan's own default, us-east-1)")
    ap.add_argument("--json", action="store_true", help="print only the JSON line")
    a = ap.parse_args(argv)
    files = a.files or DEFAULT_FILES
    region_args = ["--region", a.region] if a.region else []
    cmd = [sys.executable, "-m", "karpenter_lambda", "plan", *[x for f in files for x in ("-f", f)], *region_args, "--json"]
    env = _env()
    walls: list[float] = []
    plan = None
    for _ in range(a.runs):
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
        walls.append(round(time.perf_counter() - t0, 3))
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr[-4000:])
            return 1
        plan = json.loads(proc.stdout)
    proc = subprocess.run([sys.executable, "-c", SPLIT, a.region or "us-east-1", *files], cwd=REPO, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        return 1
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    row = {
        "command": " ".join(["python -m karpenter_lambda plan", *(f"-f {f}" for f in files), *region_args, "--json"]),
        "wall_seconds": walls,
        "median": round(statistics.median(walls), 3) if walls else None,
        "catalog_seconds": round(info["catalog_seconds"], 3),
        "solve_seconds": round(info["solve_seconds"], 3),
        "pods": info["pods"],
        "node_claims": len(plan["nodeClaims"]) if plan else None,
        "cost_per_hour": plan["costPerHour"] if plan else None,
    }
    print(json.dumps(row), flush=True)
    if not a.json:
        print(f"plan: median {row['median']}s over {len(walls)} runs {walls}; catalog {row['catalog_seconds']}s, "
              f"solve {row['solve_seconds']}s, {row['pods']} pods -> {row['node_claims']} NodeClaims", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
