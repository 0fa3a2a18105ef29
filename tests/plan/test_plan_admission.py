"""plan and simulate apply the API server's admission to the pods they build.

RuntimeClass (api/runtimeclass.py): a kata pod of 6 CPU with a 2-CPU ``overhead.podFixed`` needs 8 CPU, more than a
c6g.2xlarge holds; without any class in the files the pod is taken as it is with a warning that its overhead is not
counted, and a class the files lack while having others refuses the pods.  LimitRanger (api/limitrange.py): containers without requests get their
namespace's defaults, and a limit above a ``max`` refuses the pods."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from karpenter_lambda.cli.main import main
from karpenter_lambda.sim.simulator import Simulation, SimulationError

from manifests import workload

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
    assert "Pod/p: warning: RuntimeClass kata is not among the objects given: plan and simulate do not count its " \
           "overhead, node selector or tolerations (add the RuntimeClass)" in err2


def test_plan_and_simulate_refuse_pods_of_a_class_the_files_lack(capsys, tmp_path):
    other = KATA.replace("name: kata", "name: gvisor")
    _, err = _plan(capsys, tmp_path, other + "---\n" + POD, status=1)
    assert "the API server would refuse these pods:\npods of default/p: RuntimeClass kata not found" in err
    (tmp_path / "w.yaml").write_text(other + "---\n" + POD)
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


LIMITS = """apiVersion: v1
kind: LimitRange
metadata: {name: defaults, namespace: default}
spec:
  limits:
  - {type: Container, defaultRequest: {cpu: "1", memory: 1Gi}, default: {cpu: "2", memory: 2Gi}}
"""
NO_REQUESTS = yaml.safe_dump(workload("nores", {"containers": [{"name": "c", "image": "nginx"}]}, replicas=10))


def test_plan_and_simulate_give_containers_their_namespace_limit_range_defaults(capsys, tmp_path):
    # ten pods without requests: one small node for nothing, or 10 CPU and 10 GiB with the namespace's defaults
    bare, _ = _plan(capsys, tmp_path, NO_REQUESTS)
    limited, _ = _plan(capsys, tmp_path, LIMITS + "---\n" + NO_REQUESTS)
    assert len(bare["nodeClaims"]) == 1 and limited["costPerHour"] > 2 * bare["costPerHour"]
    (tmp_path / "w.yaml").write_text(LIMITS + "---\n" + NO_REQUESTS)
    res = Simulation([DEFAULT, tmp_path / "w.yaml"], until=180.0).run()
    assert res.pods_bound == 10
    assert sorted(c["instanceType"] for c in res.nodeclaims) == sorted(c["instanceType"] for c in limited["nodeClaims"])
    # a limit above the LimitRange's max: the API server refuses the pods, and plan says so
    capped = LIMITS.replace('default: {cpu: "2", memory: 2Gi}}', 'default: {cpu: "2", memory: 2Gi}, max: {cpu: "2"}}')
    over = yaml.safe_dump(workload("nores", {"containers": [{"name": "c", "image": "nginx",
                                                             "resources": {"limits": {"cpu": "4"}}}]}, replicas=10))
    _, err = _plan(capsys, tmp_path, capped + "---\n" + over, status=1)
    assert "maximum cpu usage per Container is 2, but limit is 4 (container c)" in err


def test_plan_notes_the_objects_it_does_not_read(capsys, tmp_path):
    quota = "apiVersion: v1\nkind: ResourceQuota\nmetadata: {name: q}\nspec: {hard: {pods: '2'}}\n"
    _, err = _plan(capsys, tmp_path, quota + "---\n" + LIMITS + "---\n" + NO_REQUESTS)
    assert "plan: note: not read (plan builds pods from workloads, RuntimeClasses and LimitRanges only): " \
           "ResourceQuota/q\n" in err
    _, err = _plan(capsys, tmp_path, LIMITS + "---\n" + NO_REQUESTS)
    assert "not read" not in err


def test_plan_loads_one_price_book_for_several_nodeclasses(capsys, caplog, tmp_path):
    # the GPU example has its own EC2NodeClass: two catalogs, one price book (one fallback warning, not one per class)
    import logging

    gpu = DEFAULT.parent / "gpu.yaml"
    (tmp_path / "p.yaml").write_text(POD.replace("runtimeClassName: kata\n  ", ""))
    with caplog.at_level(logging.WARNING, logger="karpenter_lambda.adapters.aws.pricing"):
        code = main(["plan", "--json", "-f", str(DEFAULT), "-f", str(gpu), "-f", str(tmp_path / "p.yaml")])
    assert code == 0, capsys.readouterr()
    fallbacks = [r for r in caplog.records if "using the bundled table" in r.getMessage()]
    assert len(fallbacks) == 1, [r.getMessage() for r in fallbacks]
