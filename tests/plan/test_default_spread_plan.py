"""``plan --scheduler-config FILE`` (Karpenter v1.15's default pod topology spread awareness): the pending pods without
topologySpreadConstraints of their own get the kube-scheduler's ``defaultConstraints``, with the selector deduced from
the Services among the files and the pods' ReplicaSet (a Deployment's, as its controller makes it); a bad file is an
input error naming the file and the field; ``--json`` adds ``defaultSpreadConstraints`` / ``defaultSpreadPods``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from karpenter_lambda.api.workloads import expand
from karpenter_lambda.cli.main import main

from manifests import workload

DEFAULT = Path(__file__).resolve().parents[2] / "examples" / "default.yaml"
ENV = "KARPENTER_LAMBDA_SCHEDULER_CONFIG"
ZONE = "topology.kubernetes.io/zone"
SMALL = {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]}
ZONE_SPREAD = {"podTopologySpread": {"defaultConstraints": [
    {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]}}
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
           "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}


@pytest.fixture(autouse=True)
def _no_shell_setting(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)


def _files(tmp_path, *docs) -> list[str]:
    path = tmp_path / "work.yaml"
    path.write_text("---\n".join(yaml.safe_dump(d) for d in docs))
    return [str(DEFAULT), str(path)]


def _config(tmp_path, doc, name="scheduler.yaml") -> str:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc))
    return str(path)


def _plan(capsys, files, *flags, json_out=True):
    code = main(["plan", *(["--json"] if json_out else []), *flags, *files])
    out, err = capsys.readouterr()
    if not out.strip():
        return code, None, err
    return code, (json.loads(out) if json_out else out), err


def _zones(out) -> list[str]:
    return sorted(c["zone"] for c in out["nodeClaims"])


def test_a_zone_default_spreads_a_deployment_over_three_zones(capsys, tmp_path):
    files = _files(tmp_path, workload("web", SMALL, replicas=3), SERVICE)
    code, out, _ = _plan(capsys, files, "--scheduler-config", _config(tmp_path, ZONE_SPREAD))
    assert code == 0 and out["unschedulable"] == []
    assert _zones(out) == ["us-east-1a", "us-east-1b", "us-east-1c"]
    assert sorted(len(c["pods"]) for c in out["nodeClaims"]) == [1, 1, 1]
    assert out["defaultSpreadConstraints"] == ZONE_SPREAD["podTopologySpread"]["defaultConstraints"]
    assert len(out["defaultSpreadPods"]) == 3 and all(p.startswith("default/web-") for p in out["defaultSpreadPods"])


def test_without_the_setting_the_three_pods_share_one_node(capsys, tmp_path):
    files = _files(tmp_path, workload("web", SMALL, replicas=3), SERVICE)
    code, out, err = _plan(capsys, files)
    assert code == 0 and len(out["nodeClaims"]) == 1 and len(out["nodeClaims"][0]["pods"]) == 3
    assert out["defaultSpreadConstraints"] == [] and out["defaultSpreadPods"] == []
    assert "not read" in err and "Service/web" in err    # without defaults a Service changes nothing: said so


def test_the_variable_is_the_default_and_the_flag_wins(capsys, tmp_path, monkeypatch):
    files = _files(tmp_path, workload("web", SMALL, replicas=3), SERVICE)
    monkeypatch.setenv(ENV, json.dumps(ZONE_SPREAD))
    code, out, _ = _plan(capsys, files)
    assert code == 0 and _zones(out) == ["us-east-1a", "us-east-1b", "us-east-1c"]
    # a file without default constraints wins over the variable: nothing is spread
    code, out, _ = _plan(capsys, files, "--scheduler-config", _config(tmp_path, "podTopologySpread: {}\n", "none.yaml"))
    assert code == 0 and len(out["nodeClaims"]) == 1 and out["defaultSpreadConstraints"] == []


def test_the_replicaset_alone_gives_the_selector_and_services_are_read(capsys, tmp_path):
    """No Service: the selector comes from the Deployment's ReplicaSet; with the setting the Service is read (no
    "not read" note naming it)."""
    files = _files(tmp_path, workload("web", SMALL, replicas=3))
    code, out, _ = _plan(capsys, files, "--scheduler-config", _config(tmp_path, ZONE_SPREAD))
    assert code == 0 and _zones(out) == ["us-east-1a", "us-east-1b", "us-east-1c"]
    files = _files(tmp_path, workload("web", SMALL, replicas=3), SERVICE)
    _, _, err = _plan(capsys, files, "--scheduler-config", _config(tmp_path, ZONE_SPREAD))
    assert "Service/web" not in err


def test_a_pod_with_its_own_constraints_or_no_selector_is_not_defaulted(capsys, tmp_path):
    own = workload("own", {**SMALL, "topologySpreadConstraints": [
        {"maxSkew": 3, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "own"}}}]},
        replicas=3)
    bare = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare"}, "spec": SMALL}   # no owner, no Service
    files = _files(tmp_path, own, bare)
    code, out, _ = _plan(capsys, files, "--scheduler-config", _config(tmp_path, ZONE_SPREAD))
    _, without, _ = _plan(capsys, files)
    assert code == 0 and out["defaultSpreadPods"] == []
    assert [(c["zone"], c["pods"]) for c in out["nodeClaims"]] == [(c["zone"], c["pods"]) for c in without["nodeClaims"]]


def test_the_human_output_states_the_defaults_in_one_line(capsys, tmp_path):
    files = _files(tmp_path, workload("web", SMALL, replicas=3), SERVICE)
    path = _config(tmp_path, ZONE_SPREAD)
    code, text, _ = _plan(capsys, files, "--scheduler-config", path, json_out=False)
    lines = [ln for ln in text.splitlines() if ln.startswith("default topology spread")]
    assert code == 0 and len(lines) == 1
    assert path in lines[0] and f"{ZONE} maxSkew 1 DoNotSchedule" in lines[0] and "given to 3 of 3 pending pod" in lines[0]
    _, text, _ = _plan(capsys, files, json_out=False)
    assert "default topology spread" not in text


@pytest.mark.parametrize("doc, field", [
    ({"podTopologySpread": {"defaultConstraints": [{"maxSkew": 0, "topologyKey": ZONE,
                                                    "whenUnsatisfiable": "DoNotSchedule"}]}},
     "podTopologySpread.defaultConstraints[0].maxSkew"),
    ({"podTopologySpread": {"defaultConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "Never"}]}},
     "podTopologySpread.defaultConstraints[0].whenUnsatisfiable"),
    ({"podTopologySpread": {"defaultConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                                    "labelSelector": {"matchLabels": {"app": "web"}}}]}},
     "podTopologySpread.defaultConstraints[0].labelSelector"),
    ({"podTopologySpread": {"defaultConstraint": []}}, "podTopologySpread.defaultConstraint"),
])
def test_a_bad_file_is_an_input_error_naming_the_file_and_the_field(capsys, tmp_path, doc, field):
    files = _files(tmp_path, workload("web", SMALL, replicas=3))
    path = _config(tmp_path, doc, "bad.yaml")
    code, out, err = _plan(capsys, files, "--scheduler-config", path)
    assert code == 1 and out is None                      # as the manifests' own errors: exit 1, no plan
    assert f"error: {path}: " in err and field in err, err


def test_a_missing_file_or_a_bad_variable_is_a_usage_error(capsys, tmp_path, monkeypatch):
    files = _files(tmp_path, workload("web", SMALL, replicas=3))
    code, _, err = _plan(capsys, files, "--scheduler-config", str(tmp_path / "nope.yaml"))
    assert code == 2 and "--scheduler-config" in err and "nope.yaml" in err and "no such file" in err
    monkeypatch.setenv(ENV, "podTopologySpread: {defaultConstraints: [{maxSkew: -1}]}")
    code, _, err = _plan(capsys, files)
    assert code == 2 and ENV in err and "defaultConstraints[0].maxSkew" in err


def test_the_expansion_returns_the_deployments_replicaset():
    dep = workload("web", SMALL, replicas=2, namespace="team")
    w = expand(dep)
    (rs,) = w.controllers
    ref = w.pods[0]["metadata"]["ownerReferences"][0]
    assert (rs["apiVersion"], rs["kind"]) == ("apps/v1", "ReplicaSet") == (ref["apiVersion"], ref["kind"])
    assert (rs["metadata"]["name"], rs["metadata"]["uid"], rs["metadata"]["namespace"]) == (ref["name"], ref["uid"], "team")
    # the Deployment's selector and the template's labels, each with the Deployment controller's pod-template-hash
    h = {"pod-template-hash": rs["metadata"]["name"].rsplit("-", 1)[1]}
    assert rs["spec"]["selector"] == {"matchLabels": {**dep["spec"]["selector"]["matchLabels"], **h}}
    assert rs["metadata"]["labels"] == {"app": "web", **h}
    assert rs["spec"]["replicas"] == 2
    assert rs["metadata"]["ownerReferences"][0]["kind"] == "Deployment" and rs["metadata"]["ownerReferences"][0]["name"] == "web"
    sts = workload("db", SMALL, kind="StatefulSet", replicas=1)
    (own,) = expand(sts).controllers
    assert own["kind"] == "StatefulSet" and own["metadata"]["uid"] == expand(sts).pods[0]["metadata"]["ownerReferences"][0]["uid"]
    assert expand(workload("j", SMALL, kind="Job")).controllers == []
