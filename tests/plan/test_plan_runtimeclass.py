"""plan and simulate apply the RuntimeClass admission to the pods they build (api/runtimeclass.py): a kata pod of
6 CPU with a 2-CPU ``overhead.podFixed`` needs 8 CPU, more than a c6g.2xlarge holds; without the class in the files
plan says the overhead is not counted, and a class the files lack while having others refuses the pods."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from karpenter_lambda.cli.main import main
from karpenter_lambda.sim.simulator import Simulation, SimulationError

DEFAULT = Path(__file__).resolve().parents[2] / "examples" / "default.yaml"
KATA = """apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: kata}
handler: kata
overhead:
  podFixed: {cpu: "2", memory: 2Gi}
"""
POD = """apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  runtimeClassName: kata
  containers:
  - {name: c, image: x, resources: {requests: {cpu: "6", memory: 1Gi}}}
"""


def _plan(capsys, tmp_path, *texts, status=0):
    files = []
    for i, text in enumerate(texts):
        files.append(tmp_path / f"f{i}.yaml")
        files[-1].write_text(text)
    argv = ["plan", "--json", "-f", str(DEFAULT)] + [a for f in files for a in ("-f", str(f))]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == status, (out, err)
    return (json.loads(out) if status == 0 else None), err


def test_plan_counts_the_class_overhead(capsys, tmp_path):
    with_class, err = _plan(capsys, tmp_path, KATA + "---\n" + POD)
    without, err2 = _plan(capsys, tmp_path, POD)
    big, small = with_class["nodeClaims"][0]["instanceType"], without["nodeClaims"][0]["instanceType"]
    # 8 CPU do not fit an 8-vCPU node's allocatable: the next size up, unlike the 6 CPU alone
    assert big != small and with_class["costPerHour"] > without["costPerHour"], (big, small)
    assert "warning" not in err
    assert "name RuntimeClass kata, which is not in the given files: its overhead and scheduling are not counted" in err2


def test_plan_and_simulate_refuse_pods_of_a_class_the_files_lack(capsys, tmp_path):
    other = KATA.replace("name: kata", "name: gvisor")
    _, err = _plan(capsys, tmp_path, other + "---\n" + POD, status=1)
    assert "the API server would refuse these pods:\npods of default/p: RuntimeClass kata not found" in err
    (tmp_path / "w.yaml").write_text(POD)
    with pytest.raises(SimulationError, match="pods of default/p: RuntimeClass kata not found"):
        Simulation([DEFAULT, tmp_path / "w.yaml"], until=60.0).run()


def test_simulate_admits_the_pod_with_its_class_overhead(capsys, tmp_path):
    with_class, _ = _plan(capsys, tmp_path, KATA + "---\n" + POD)
    without, _ = _plan(capsys, tmp_path, POD)
    (tmp_path / "w.yaml").write_text(KATA + "---\n" + POD)
    res = Simulation([DEFAULT, tmp_path / "w.yaml"], until=180.0).run()
    (claim,) = res.nodeclaims
    # the simulated API server admitted the pod with the class's overhead: Karpenter sized the node for 8 CPU, as
    # plan does with the class, and the kube-scheduler bound the pod there
    assert res.pods_bound == 1
    assert claim["instanceType"] == with_class["nodeClaims"][0]["instanceType"] != \
        without["nodeClaims"][0]["instanceType"]
