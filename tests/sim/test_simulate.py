"""`karpenter-lambda simulate`: the real handlers + watcher on moto and the local Kubernetes API, virtual time."""

import json
import textwrap

import pytest

from karpenter_lambda.cli.main import main
from karpenter_lambda.sim.clock import VirtualClock, format_elapsed, parse_duration

SCENARIO = textwrap.dedent("""
    apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {name: default}
    spec:
      template:
        spec:
          requirements:
            - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, c5]}
            - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
          startupTaints:
            - {key: example.com/agent-not-ready, effect: NoSchedule}
          nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      limits: {cpu: "16"}
    ---
    apiVersion: karpenter.k8s.aws/v1
    kind: EC2NodeClass
    metadata: {name: default}
    spec:
      role: KarpenterNodeRole-sim
      amiSelectorTerms: [{alias: al2023@latest}]
      subnetSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
      securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
    ---
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: web, namespace: default}
    spec:
      replicas: 3
      selector: {matchLabels: {app: web}}
      template:
        metadata: {labels: {app: web}}
        spec:
          containers:
            - name: web
              image: nginx
              resources: {requests: {cpu: 500m, memory: 512Mi}}
    ---
    apiVersion: v1
    kind: Pod
    metadata: {name: huge, namespace: default}
    spec:
      containers:
        - name: c
          image: x
          resources: {requests: {cpu: "64"}}
""")


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    p = tmp_path_factory.mktemp("sim") / "scenario.yaml"
    p.write_text(SCENARIO)
    return p


@pytest.fixture(scope="module")
def sim_json(scenario, tmp_path_factory):
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["simulate", str(scenario), "--json", "--quiet"])
    return code, json.loads(out.getvalue())


def test_json_shape_exact_keys(sim_json):
    code, doc = sim_json
    assert code == 1  # the 64-CPU pod stays unschedulable
    assert {"nodeClaims", "unschedulable", "costPerHour", "events"} <= set(doc)
    for nc in doc["nodeClaims"]:
        assert {"name", "nodePool", "instanceType", "zone", "capacityType", "pricePerHour", "nodeName", "pods"} <= set(nc)
        assert all(isinstance(p, str) and "/" in p for p in nc["pods"])
    for u in doc["unschedulable"]:
        assert set(u) >= {"pod", "reason"}
    for e in doc["events"]:
        assert set(e) >= {"time", "type", "object", "message"}
    assert isinstance(doc["costPerHour"], (int, float))


def test_scale_up_to_ready_nodes_with_cost(sim_json):
    _, doc = sim_json
    web = sorted(p for nc in doc["nodeClaims"] for p in nc["pods"])
    assert len(web) == 3 and all(p.startswith("default/web-") for p in web)
    assert all(nc["nodeName"] and nc["nodePool"] == "default" and nc["capacityType"] == "on-demand" for nc in doc["nodeClaims"])
    assert all(nc["instanceType"].split(".")[0] in ("m5", "c5") for nc in doc["nodeClaims"])
    assert doc["costPerHour"] == pytest.approx(sum(nc["pricePerHour"] for nc in doc["nodeClaims"]), abs=1e-6)
    assert doc["costPerHour"] > 0
    assert [u["pod"] for u in doc["unschedulable"]] == ["default/huge"]
    assert "limits" in doc["unschedulable"][0]["reason"] or "fit" in doc["unschedulable"][0]["reason"] or "cpu" in doc["unschedulable"][0]["reason"]
    types = [e["type"] for e in doc["events"]]
    order = ["PodPending", "ProvisionerInvoked", "NodeClaimLaunched", "NodeJoined", "NodeReady", "PodBound",
             "NodeClaimRegistered", "NodeClaimInitialized"]
    firsts = [types.index(t) for t in order[:6]]
    assert firsts == sorted(firsts)
    assert "NodeClaimInitialized" in types
    times = [e["time"] for e in doc["events"]]
    assert times == sorted(times)
    launched = next(e for e in doc["events"] if e["type"] == "NodeClaimLaunched")
    joined = next(e for e in doc["events"] if e["type"] == "NodeJoined")
    assert joined["time"] - launched["time"] == pytest.approx(30.0)  # default join delay, virtual seconds


def test_until_stops_early_and_human_output(scenario, capsys, monkeypatch):
    # a deployment's settings in the user's shell must not leak into the simulation
    unreachable = "http://127.0.0.1:9"
    for var, value in {"KARPENTER_LAMBDA_KUBE_ENDPOINT": unreachable, "AWS_ENDPOINT_URL_EC2": unreachable,
                       "AWS_ENDPOINT_URL_SQS": unreachable, "KARPENTER_LAMBDA_KUBERNETES_VERSION": "1.19"}.items():
        monkeypatch.setenv(var, value)
    code = main(["simulate", "-f", str(scenario), "--until", "20s", "--quiet"])  # -f FILE, as for plan
    import os

    assert os.environ["KARPENTER_LAMBDA_KUBE_ENDPOINT"] == unreachable  # restored afterwards
    out = capsys.readouterr().out
    assert "Timeline (virtual time)" in out and "NodeClaimLaunched" in out
    assert "NodeJoined" not in out  # nodes join 30 s after launch
    assert "reached --until 20.0s" in out
    # launched for but not bound yet at --until: the reason says so (not "no provisioning decision yet")
    web = [line for line in out.splitlines() if line.startswith("unschedulable: default/web-")]
    assert len(web) == 3 and all("nominated to NodeClaim default-" in line for line in web)
    assert code == 1


def test_bad_input_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: x}\nspec: {template: {spec: {}}}\n")
    assert main(["simulate", str(bad), "--quiet"]) == 2
    assert "invalid manifests" in capsys.readouterr().err
    assert main(["simulate", str(tmp_path / "missing.yaml"), "--quiet"]) == 2
    assert main(["simulate", str(bad), "--until", "soon"]) == 2
    capsys.readouterr()
    assert main(["simulate", "--quiet"]) == 2  # no FILE at all: a usage error naming what is missing
    assert "at least one manifest FILE is required" in capsys.readouterr().err
    assert main(["simulate", "-f", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml: no such file" in capsys.readouterr().err


def test_clock_and_durations():
    c = VirtualClock(start=1000.0)
    c.advance(90)
    assert c() == 1090.0 and c.elapsed == 90.0
    with pytest.raises(ValueError):
        c.advance(-1)
    assert parse_duration("1h30m") == 5400 and parse_duration("90s") == 90 and parse_duration("2.5m") == 150
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration("5 minutes")
    assert format_elapsed(75.5) == "1m15.5s"
