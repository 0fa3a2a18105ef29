"""The Scenario document of `simulate` (a contract): parsing errors, the workload controller, AMI releases, a run."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from karpenter_lambda.api.scenario import ScenarioError, parse_scenario
from karpenter_lambda.sim.kubeapi import ObjectStore
from karpenter_lambda.sim.simulator import Simulation
from karpenter_lambda.sim.workloads import WorkloadController

REPO = Path(__file__).resolve().parents[2]


def _doc(steps, **spec):
    return {"apiVersion": "karpenter-lambda.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "night"},
            "spec": {"steps": steps, **spec}}


@pytest.mark.parametrize("steps, expected", [
    ([{"at": "10m", "scale": {"kind": "Deployment", "name": "web", "replicas": -1}}],
     "s.yaml:2: Scenario/night: spec.steps[0].scale.replicas: must be an integer >= 0"),
    ([{"at": "1m", "scale": {"kind": "Deployment", "name": "a", "replicas": 1}, "delete": {"kind": "Deployment", "name": "a"}}],
     "spec.steps[0]: exactly one action per step"),
    ([{"at": "1m", "explode": {}}], "spec.steps[0].explode: unknown action"),
    ([{"at": "soon", "delete": {"kind": "Deployment", "name": "a"}}], "spec.steps[0].at: must be a duration"),
    ([{"at": "5m", "delete": {"kind": "Deployment", "name": "a"}}, {"at": "1m", "delete": {"kind": "Deployment", "name": "b"}}],
     "spec.steps[1].at: steps must be in time order"),
    ([{"at": "1m", "delete": {"kind": "Gadget", "name": "a"}}], "spec.steps[0].delete.kind: must be one of"),
    ([{"at": "1m", "releaseAMI": {"family": "plan9"}}], "spec.steps[0].releaseAMI.family: must be one of"),
])
def test_bad_scenarios_name_the_step_and_field(steps, expected):
    with pytest.raises(ScenarioError) as e:
        parse_scenario(_doc(steps), "s.yaml", 2)
    assert expected in str(e.value)


def test_good_scenario_parses():
    sc = parse_scenario(_doc([{"at": "90s", "scale": {"kind": "Deployment", "name": "web", "replicas": 0}},
                              {"at": "1h30m", "releaseAMI": {"family": "al2023"}}], startTime="2026-12-07T18:00:00Z"))
    assert [(s.index, s.at, s.action) for s in sc.steps] == [(0, 90.0, "scale"), (1, 5400.0, "releaseAMI")]
    assert sc.start_time == 1796666400.0


def _deployment(replicas, image="nginx"):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": image}]}}}}


def test_workload_controller_recreates_scales_replaces_and_deletes():
    store = ObjectStore()

    class Server:
        pass

    server = Server()
    server.store = store
    wc = WorkloadController(server)
    wc.add(_deployment(2))
    assert wc.reconcile() == 2
    pods = store.list("pods")
    assert len(pods) == 2 and wc.reconcile() == 0
    gone = pods[0]
    store.delete("pods", gone["metadata"]["name"], "default")  # evicted
    assert wc.reconcile() == 1
    again = {p["metadata"]["name"]: p for p in store.list("pods")}
    assert len(again) == 2 and again[gone["metadata"]["name"]]["metadata"]["uid"] != gone["metadata"]["uid"]
    wc.scale("Deployment", "default", "web", 1)
    wc.reconcile()
    assert len(store.list("pods")) == 1
    wc.add(_deployment(1, image="nginx:2"))  # a new template replaces the pods
    wc.reconcile()
    (pod,) = store.list("pods")
    assert pod["spec"]["containers"][0]["image"] == "nginx:2"
    assert wc.replicas() == [{"kind": "Deployment", "namespace": "default", "name": "web", "replicas": 1}]
    wc.delete("Deployment", "default", "web")
    assert store.list("pods") == [] and wc.replicas() == []


def test_release_ami_moves_latest_and_keeps_the_pinned_alias():
    import boto3
    from moto import mock_aws

    from karpenter_lambda.adapters.aws.amis import alias_parameters
    from karpenter_lambda.sim.aws import SimAccount

    with mock_aws():
        acct = SimAccount("c", "us-east-1", "1.31").create([], "https://127.0.0.1:1")
        ssm = boto3.client("ssm", region_name="us-east-1")

        def get(version):
            return ssm.get_parameter(Name=alias_parameters("al2023", "1.31", version)[0][0])["Parameter"]["Value"]

        first = get("latest")
        assert get("v20250101") == first
        assert acct.release_ami("al2023") == "v20250102"
        assert get("latest") != first
        assert get("v20250101") == first          # a pinned alias keeps its AMI
        assert get("v20250102") == get("latest")


def test_a_scenario_run_scales_deletes_and_records_cost(tmp_path):
    work = tmp_path / "work.yaml"
    work.write_text(json.dumps(_deployment(2) | {"spec": {**_deployment(2)["spec"], "template": {
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}}))
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(json.dumps(_doc([
        {"at": "3m", "scale": {"kind": "Deployment", "namespace": "default", "name": "web", "replicas": 5}},
        {"at": "6m", "releaseAMI": {"family": "al2023"}},
    ], startTime="2026-12-07T18:00:00Z")))
    result = Simulation([REPO / "examples" / "default.yaml", work, scenario], progress=lambda m: None).run()
    d = result.to_dict()
    assert d["startTime"] == "2026-12-07T18:00:00Z"
    assert d["workloads"] == [{"kind": "Deployment", "namespace": "default", "name": "web", "replicas": 5,
                               "history": [{"time": 0.0, "replicas": 2}, {"time": 180.0, "replicas": 5}]}]
    assert d["pods"] == {"total": 5, "bound": 5}
    steps = [e for e in d["events"] if e["type"] == "ScenarioStep"]
    assert [(e["object"], e["time"]) for e in steps] == [("step/0", 180.0), ("step/1", 360.0)]
    assert len(d["costTimeline"]) >= 2 and d["costTimeline"][-1]["nodes"] == len(d["nodeClaims"])
    assert d["costTimeline"][-1]["costPerHour"] > d["costTimeline"][0]["costPerHour"]
    assert d["simulatedSeconds"] >= 360.0


def test_unknown_kind_is_exit_2_naming_it(tmp_path):
    f = tmp_path / "x.yaml"
    f.write_text("apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\n")
    p = subprocess.run([sys.executable, "-m", "karpenter_lambda", "simulate", str(REPO / "examples" / "default.yaml"), str(f),
                        "--quiet"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "Gadget/g" in p.stderr and "does not know the kind" in p.stderr


def test_bad_scenario_is_exit_2_naming_the_step(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text(json.dumps(_doc([{"at": "1m", "scale": {"kind": "Deployment", "name": "web", "replicas": "two"}}])))
    p = subprocess.run([sys.executable, "-m", "karpenter_lambda", "simulate", str(REPO / "examples" / "default.yaml"), str(f),
                        "--quiet"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert f"{f}:0: Scenario/night: spec.steps[0].scale.replicas: must be an integer >= 0" in p.stderr


def test_apply_replaces_a_nodepool(tmp_path):
    import yaml

    docs = list(yaml.safe_load_all((REPO / "examples" / "default.yaml").read_text()))
    nodepool = next(d for d in docs if d["kind"] == "NodePool")
    limited = json.loads(json.dumps(nodepool))
    limited["spec"]["limits"] = {"cpu": "0"}
    work = tmp_path / "work.yaml"
    dep = _deployment(1)
    dep["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1", "memory": "1Gi"}}
    work.write_text(json.dumps(dep))
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(json.dumps(_doc([
        {"at": "2m", "apply": limited},
        {"at": "3m", "scale": {"kind": "Deployment", "namespace": "default", "name": "web", "replicas": 2}},
    ])))
    result = Simulation([REPO / "examples" / "default.yaml", work, scenario], progress=lambda m: None).run()
    assert result.pods_bound == 1 and len(result.nodeclaims) == 1
    (pending,) = result.unschedulable
    assert "limit" in pending["reason"]


@pytest.mark.parametrize("args, expected", [
    ({"kind": "Meteor", "nodePool": "default"}, "spec.steps[0].interrupt.kind: must be one of"),
    ({"kind": "SpotInterruption"}, "spec.steps[0].interrupt.nodePool: required"),
    ({"kind": "SpotInterruption", "nodePool": "p", "count": 0}, "spec.steps[0].interrupt.count: must be an integer >= 1"),
    ({"kind": "StateChange", "nodePool": "p"}, "spec.steps[0].interrupt.state: must be one of"),
    ({"kind": "SpotInterruption", "nodePool": "p", "state": "terminated"}, "spec.steps[0].interrupt.state: only for kind StateChange"),
])
def test_bad_interrupt_steps_name_the_field(args, expected):
    with pytest.raises(ScenarioError) as e:
        parse_scenario(_doc([{"at": "1m", "interrupt": args}]), "s.yaml", 0)
    assert expected in str(e.value)


def test_interrupt_step_parses():
    sc = parse_scenario(_doc([{"at": "2m", "interrupt": {"kind": "StateChange", "nodePool": "default", "count": 2,
                                                         "state": "terminated"}}]))
    (step,) = sc.steps
    assert step.action == "interrupt" and step.args["count"] == 2
    assert step.describe() == "StateChange (terminated) for the 2 oldest NodeClaim(s) of NodePool default"


def test_a_step_deletes_a_pod_given_in_the_files(tmp_path):
    """A bare Pod of the manifests is held by the run's workload controller like the others: a ``delete`` step removes
    it (its node then empties), instead of stopping the run with "does not exist"."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "solo", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}
    work = tmp_path / "work.yaml"
    work.write_text(json.dumps(pod))
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(json.dumps(_doc([{"at": "3m", "delete": {"kind": "Pod", "namespace": "default", "name": "solo"}}])))
    sim = Simulation([REPO / "examples" / "default.yaml", work, scenario], until=240.0, progress=lambda m: None)
    result = sim.run()
    steps = [e for e in result.to_dict()["events"] if e["type"] == "ScenarioStep"]
    assert [e["object"] for e in steps] == ["step/0"]
    assert sim.server.store.get("pods", "solo", "default") is None
