"""`simulate --save-state DIR` saves the simulated cluster; `--state DIR` runs `get`, `disruption plan` and
`offpeak status` against it offline (in-process moto + the local Kubernetes API seeded from DIR), with no AWS
credentials at all."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXE = str(Path(sys.executable).parent / "karpenter-lambda")

WORKLOAD = """apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx, resources: {requests: {cpu: "1", memory: 1Gi}}}]
"""


def _env(tmp_path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and not k.startswith("KARPENTER_LAMBDA_")}
    env.update({"AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent",
                "AWS_EC2_METADATA_DISABLED": "true", "HOME": str(tmp_path)})
    return env


def _run(tmp_path, *argv, env=None):
    return subprocess.run([EXE, *argv], env=env or _env(tmp_path), capture_output=True, text=True, timeout=300, cwd=tmp_path)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("state")
    (tmp / "web.yaml").write_text(WORKLOAD)
    out = tmp / "saved"
    proc = _run(tmp, "simulate", "--quiet", "--json", "--save-state", str(out), str(ROOT / "examples" / "default.yaml"),
                str(tmp / "web.yaml"))
    assert proc.returncode == 0, proc.stderr
    return tmp, out, json.loads(proc.stdout)


@pytest.fixture(scope="module")
def nodeclaims_listing(saved):
    """``--state DIR get nodeclaims`` against the saved state, run once for the tests that read its output (the
    command reads the saved state and changes nothing)."""
    tmp, out, _result = saved
    return _run(tmp, "--state", str(out), "get", "nodeclaims")


def test_save_state_writes_the_store_the_cluster_and_ec2(saved):
    tmp, out, result = saved
    names = {c["name"] for c in result["nodeClaims"]}
    assert names
    state = json.loads((out / "state.json").read_text())
    kinds = {(i.get("kind") or {}).get("S") for i in state["items"]}
    assert {"NodePool", "EC2NodeClass", "NodeClaim"} <= kinds
    kube = json.loads((out / "kube.json").read_text())
    assert {n["metadata"]["name"] for n in kube["nodes"]} == {c["nodeName"] for c in result["nodeClaims"]}
    assert sum(1 for p in kube["pods"] if p["metadata"]["name"].startswith("web-")) == 3
    ec2 = json.loads((out / "ec2.json").read_text())
    assert len([i for i in ec2["instances"] if i["State"]["Name"] in ("pending", "running")]) == len(names)


def test_commands_read_the_saved_state_without_aws(saved, nodeclaims_listing):
    tmp, out, result = saved
    names = {c["name"] for c in result["nodeClaims"]}
    proc = _run(tmp, "--state", str(out), "disruption", "plan", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["nodes"]
    assert {r["nodeClaim"] for r in rows} == names
    assert all(r["reason"] != "Drifted" for r in rows), rows     # the served EC2 matches what the NodeClaims recorded
    proc = nodeclaims_listing
    assert proc.returncode == 0, proc.stderr
    for n in names:
        assert n in proc.stdout
    env = _env(tmp)
    env["KARPENTER_LAMBDA_STATE_DIR"] = str(out)
    proc = _run(tmp, "offpeak", "status", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "OffPeakSchedules" in proc.stdout or "OffPeakSchedules" in proc.stderr


def _seconds(age: str) -> int:
    unit = {"s": 1, "m": 60, "h": 3600, "d": 86400}[age[-1]]
    return int(age[:-1]) * unit


def test_get_reads_ages_readiness_and_budgets_in_the_saved_states_terms(saved, nodeclaims_listing):
    """Issue 31 item 6: AGE in the saved run's clock (not 0s against the wall clock), a NodePool's READY from its
    EC2NodeClass, budgets as YAML (not Python lists)."""
    tmp, out, result = saved
    state_time = json.loads((out / "state.json").read_text())["time"]
    proc = nodeclaims_listing
    assert proc.returncode == 0, proc.stderr
    header, *rows = proc.stdout.splitlines()
    age_col = header.split().index("AGE")
    ages = [_seconds(r.split()[age_col]) for r in rows]
    launched = {c["name"]: c for c in result["nodeClaims"]}
    assert ages and all(a >= 60 for a in ages), proc.stdout   # the nodes joined minutes before the run stopped
    assert state_time > 0 and launched
    proc = _run(tmp, "--state", str(out), "get", "nodepools", "-o", "wide")
    assert proc.returncode == 0, proc.stderr
    header, *rows = proc.stdout.splitlines()
    ready = header.split().index("READY")
    assert [r.split()[ready] for r in rows] == ["True"] * len(rows), proc.stdout
    assert "{nodes: 10%}" in proc.stdout and "[" not in proc.stdout.split("BUDGETS")[1].split("{")[0], proc.stdout


def test_state_dir_errors_exit_2(tmp_path):
    proc = _run(tmp_path, "--state", str(tmp_path / "nope"), "get", "nodeclaims")
    assert proc.returncode == 2 and "--state" in proc.stderr and "simulate --save-state" in proc.stderr
    proc = _run(tmp_path, "--state", str(tmp_path), "delete", "nodepool", "x")
    assert proc.returncode == 2 and "--state works with" in proc.stderr
