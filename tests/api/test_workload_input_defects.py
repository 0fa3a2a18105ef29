"""Workload inputs that were planned wrongly or crashed `validate` / `plan` / `simulate`:

* a ``hostNetwork`` pod's container ports get ``hostPort = containerPort`` as the API server defaults them
  (``SetDefaults_Pod``), so two such pods on one port need two nodes;
* a suspended Job or CronJob (or a CronJob whose job template is suspended) creates no pod;
* a Pod without ``spec`` / with ``spec:`` empty / with ``containers: []``, a bad ``metadata.namespace``, an object
  without a name, a null list item (a lone ``-``), a string ``matchLabels``, a negative RuntimeClass overhead: errors
  naming the field, as the API server refuses them, never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from karpenter_lambda.api.kuberules_objects import kube_errors, rule_errors
from karpenter_lambda.api.manifests import load_text
from karpenter_lambda.api.workloads import default_host_network_ports, expand
from karpenter_lambda.cli.main import main

DEFAULT = Path(__file__).resolve().parents[2] / "examples" / "default.yaml"
CONTAINER = {"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}


def _pod(name: str, spec: dict | None, **meta) -> dict:
    doc = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, **meta}}
    if spec is not None:
        doc["spec"] = spec
    return doc


def _job(name: str, spec: dict, kind: str = "Job") -> dict:
    template = {"spec": {"restartPolicy": "Never", "containers": [CONTAINER]}}
    if kind == "CronJob":
        return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
                "spec": {"schedule": "*/5 * * * *", **spec.get("cron", {}),
                         "jobTemplate": {"spec": {**spec.get("job", {}), "template": template}}}}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": {**spec, "template": template}}


def _errors(doc: dict) -> list[str]:
    return [f"{e.path}: {e.message}" for e in kube_errors(doc)]


# -- 1. hostNetwork pods: hostPort defaulted from containerPort -------------------------------------------------------
def test_host_network_ports_get_their_container_port_as_host_port():
    spec = {"hostNetwork": True,
            "initContainers": [{"name": "i", "ports": [{"containerPort": 80}]}],
            "containers": [{"name": "c", "ports": [{"containerPort": 9100}, {"containerPort": 53, "hostPort": 5353},
                                                    {"containerPort": 8080, "hostPort": 0}]}]}
    pod = expand(_pod("hn", spec)).pods[0]
    ports = pod["spec"]["containers"][0]["ports"]
    assert [p["hostPort"] for p in ports] == [9100, 5353, 8080]     # explicit 5353 kept, 0 means unset
    assert pod["spec"]["initContainers"][0]["ports"][0]["hostPort"] == 80
    assert "hostPort" not in spec["containers"][0]["ports"][0]      # the manifest itself is not changed


def test_only_host_network_pods_and_pods_not_templates_are_defaulted():
    plain = expand(_pod("p", {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]})).pods[0]
    assert "hostPort" not in plain["spec"]["containers"][0]["ports"][0]
    template = {"metadata": {"labels": {"app": "a"}},
                "spec": {"hostNetwork": True, "containers": [{"name": "c", "ports": [{"containerPort": 9100}]}]}}
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
              "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "a"}}, "template": template}}
    w = expand(deploy)
    assert [p["spec"]["containers"][0]["ports"][0]["hostPort"] for p in w.pods] == [9100, 9100]
    # since Kubernetes 1.28 the API server defaults pods, not templates: the ReplicaSet and a DaemonSet keep theirs
    assert "hostPort" not in w.controllers[0]["spec"]["template"]["spec"]["containers"][0]["ports"][0]
    ds = expand({**deploy, "kind": "DaemonSet"}).daemonsets[0]
    assert "hostPort" not in ds["spec"]["template"]["spec"]["containers"][0]["ports"][0]


def test_host_network_defaulting_leaves_malformed_specs_alone():
    for spec in ({"hostNetwork": True, "containers": None}, {"hostNetwork": True, "containers": [None, {"ports": "x"}]},
                 {"hostNetwork": True, "containers": [{"ports": [None, {"name": "p"}]}]}, None, "x"):
        before = json.dumps(spec)
        default_host_network_ports(spec)
        assert json.dumps(spec) == before


def test_plan_puts_two_host_network_pods_on_one_port_on_two_nodes(tmp_path, capsys):
    ports = {"name": "c", "image": "x", "ports": [{"containerPort": 9100}], "resources": {"requests": {"cpu": "100m"}}}
    docs = [_pod(f"hn{i}", {"hostNetwork": True, "containers": [ports]}) for i in (1, 2)]
    path = tmp_path / "hostnet.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    assert main(["plan", "--json", str(DEFAULT), str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert sorted(sorted(c["pods"]) for c in out["nodeClaims"]) == [["default/hn1"], ["default/hn2"]]


# -- 2. suspended Jobs and CronJobs create no pods --------------------------------------------------------------------
@pytest.mark.parametrize("doc, pods", [
    (_job("j", {"suspend": True, "parallelism": 3}), 0),
    (_job("j", {"suspend": False, "parallelism": 3}), 3),
    (_job("cj", {"cron": {"suspend": True}}, "CronJob"), 0),
    (_job("cj", {"job": {"suspend": True}}, "CronJob"), 0),        # each Job it creates is suspended
    (_job("cj", {"cron": {"suspend": False}, "job": {"parallelism": 2}}, "CronJob"), 2),
])
def test_suspended_jobs_and_cronjobs_create_no_pods(doc, pods):
    w = expand(doc)
    assert (len(w.pods), w.issues) == (pods, [])


def test_a_suspended_job_still_reports_a_bad_count_with_its_path():
    w = expand(_job("cj", {"cron": {"suspend": True}, "job": {"parallelism": "two"}}, "CronJob"), "f.yaml", 3)
    assert [str(i) for i in w.issues] == ["f.yaml:3: CronJob/cj: spec.jobTemplate.spec.parallelism: must be a "
                                          "non-negative integer, got 'two'"]


# -- 3/4. what the API server refuses, as errors naming the field -----------------------------------------------------
@pytest.mark.parametrize("doc", [_pod("a", None), _pod("a", {}), _pod("a", {"containers": []})])
def test_a_pod_without_containers_is_refused(doc):
    assert _errors(doc) == ["spec.containers: Required value"]


def test_a_template_without_containers_is_refused_at_its_path():
    doc = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
           "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": {"metadata": {"labels": {"app": "a"}}}}}
    assert _errors(doc) == ["spec.template.spec.containers: Required value"]


def test_a_pod_with_spec_null_is_an_error_not_a_traceback():
    result = load_text("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n", "p.yaml", accept_kinds={"Pod"})
    assert [str(i) for i in result.issues] == ["p.yaml:0: Pod/a: spec.containers: Required value"]
    assert expand({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}, "spec": None}).pods[0]["spec"] == {}


def test_a_namespace_that_is_not_a_dns_label_is_refused_on_namespaced_kinds_only():
    assert _errors(_pod("a", {"containers": [CONTAINER]}, namespace="Bad_NS")) == [
        'metadata.namespace: Invalid value: "Bad_NS": a lowercase RFC 1123 label must consist of lower case '
        "alphanumeric characters or '-', and must start and end with an alphanumeric character"]
    sc = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "gp3", "namespace": "Bad_NS"},
          "provisioner": "ebs.csi.aws.com"}
    assert _errors(sc) == []   # cluster-scoped: the API server ignores its namespace


@pytest.mark.parametrize("meta", [None, {}, {"name": ""}])
def test_an_object_without_a_name_is_refused(meta):
    sc = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": meta, "provisioner": "ebs.csi.aws.com"}
    assert _errors(sc) == ["metadata.name: Required value: name or generateName is required"]


def test_namespace_and_service_names_follow_their_own_rules():
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a.b"}}
    assert [e.path for e in rule_errors(ns)] == ["metadata.name"]
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "1web"}, "spec": {"ports": [{"port": 80}]}}
    assert "a DNS-1035 label" in _errors(svc)[0]
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "system:x:y"}}
    assert rule_errors(role) == []


@pytest.mark.parametrize("yaml_text, errors", [
    ("spec:\n  containers:\n  -\n  - {name: c, image: x}\n", ["spec.containers[0]: Invalid value: null: must be an object"]),
    ("spec:\n  initContainers:\n  -\n  containers: [{name: c, image: x}]\n",
     ["spec.initContainers[0]: Invalid value: null: must be an object"]),
    ("spec:\n  topologySpreadConstraints:\n  -\n  containers:\n  - name: c\n    image: x\n    ports:\n    -\n",
     ["spec.containers[0].ports[0]: Invalid value: null: must be an object",
      "spec.topologySpreadConstraints[0]: Invalid value: null: must be an object"]),
    ("spec:\n  containers: [{name: c, image: x}]\n  affinity:\n    nodeAffinity:\n"
     "      preferredDuringSchedulingIgnoredDuringExecution:\n      -\n",
     ["spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]: Invalid value: null: must be "
      "an object"]),
])
def test_a_lone_dash_in_a_list_of_objects_is_refused(yaml_text, errors):
    doc = yaml.safe_load("apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n" + yaml_text)
    assert sorted(_errors(doc)) == errors


def test_a_null_in_a_list_of_strings_is_left_to_the_api_server():
    doc = _pod("a", {"containers": [{**CONTAINER, "args": [None, "x"]}]})
    assert _errors(doc) == []


@pytest.mark.parametrize("selector", [{"matchLabels": "app=web"}, {"matchExpressions": [{}]},
                                      {"matchExpressions": [{"key": ["a"], "operator": "In", "values": ["x"]}]},
                                      {"matchExpressions": [{"key": "app", "operator": "In", "values": "web"}]}])
def test_a_malformed_selector_is_an_error_not_a_traceback(selector):
    doc = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
           "spec": {"selector": selector, "template": {"metadata": {"labels": {"app": "web"}},
                                                       "spec": {"containers": [CONTAINER]}}}}
    errors = _errors(doc)
    assert errors and all(e.startswith("spec.selector.") for e in errors)


def test_a_negative_runtime_class_overhead_is_refused():
    rc = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "kata"}, "handler": "kata",
          "overhead": {"podFixed": {"cpu": "-1", "memory": "100Mi", "memroy": "1"}},
          "scheduling": {"tolerations": [{"operator": "Bogus"}]}}
    errors = _errors(rc)
    assert 'overhead.podFixed.cpu: Invalid value: "-1": must be greater than or equal to 0' in errors
    assert any(e.startswith("overhead.podFixed[memroy]: Invalid value") and "did you mean memory?" in e for e in errors)
    assert any(e.startswith("scheduling.tolerations[0].operator: Unsupported value") for e in errors)
    assert _errors({**rc, "handler": "Kata", "overhead": {"podFixed": {"cpu": "250m"}}, "scheduling": {}}) == [
        'handler: Invalid value: "Kata": a lowercase RFC 1123 label must consist of lower case alphanumeric '
        "characters or '-', and must start and end with an alphanumeric character"]


def test_non_string_keys_are_read_as_the_api_server_reads_them():
    doc = yaml.safe_load("apiVersion: v1\nkind: Pod\nmetadata: {name: a, labels: {1: a, true: b}}\nspec:\n"
                         "  containers: [{name: c, image: x, resources: {requests: {1: 2}}}]\n")
    assert [e.path for e in kube_errors(doc)] == ["spec.containers[0].resources.requests[1]"]


@pytest.mark.parametrize("text", [
    "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n",
    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector:\n    matchLabels: app=web\n"
    "  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers: [{name: c, image: x}]\n",
    "apiVersion: v1\nkind: Pod\nmetadata: {name: d}\nspec:\n  containers:\n  -\n  - {name: c, image: x}\n",
    "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: kata}\nhandler: kata\n"
    "overhead: {podFixed: {cpu: '-1'}}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: k}\n"
    "spec: {runtimeClassName: kata, containers: [{name: c, image: x}]}\n",
])
def test_plan_refuses_what_crashed_it_with_exit_1(tmp_path, capsys, text):
    path = tmp_path / "w.yaml"
    path.write_text(text)
    assert main(["plan", str(DEFAULT), str(path)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"{path}:0: " in err


def test_host_network_ports_must_match_and_ports_must_be_valid():
    spec = {"hostNetwork": True, "containers": [{"name": "c", "image": "x", "ports": [
        {"containerPort": 53, "hostPort": 5353}, {"containerPort": 9100}, {"containerPort": 80, "hostPort": 80},
        {"containerPort": 0}, {"containerPort": 70000, "protocol": "tcp"}]}]}
    assert _errors(_pod("a", spec)) == [
        "spec.containers[0].ports[0].containerPort: Invalid value: 53: must match `hostPort` when `hostNetwork` is true",
        "spec.containers[0].ports[3].containerPort: Required value",
        "spec.containers[0].ports[4].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
        'spec.containers[0].ports[4].protocol: Unsupported value: "tcp": supported values: "SCTP", "TCP", "UDP"']
    # without hostNetwork a hostPort may differ from the containerPort
    assert _errors(_pod("a", {"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 53, "hostPort": 5353}]}]})) == []


def test_non_string_mapping_keys_load_as_kubectl_writes_them():
    """kubectl's YAML-to-JSON step writes ``1:`` and ``true:`` keys as "1" and "true": a nodeSelector ``{1: a}`` asks for
    label "1", and ``1`` and ``true`` stay two keys (Python would merge them, 1 == True)."""
    from karpenter_lambda.api.manifests import load_text

    text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {1: a, true: b}}\n"
            "spec: {nodeSelector: {1: a}, containers: [{name: c, image: x}]}\n")
    res = load_text(text, "k.yaml", allow_other_kinds=True)
    assert res.issues == []
    (pod,) = res.objects
    assert pod.doc["metadata"]["labels"] == {"1": "a", "true": "b"} and pod.doc["spec"]["nodeSelector"] == {"1": "a"}
