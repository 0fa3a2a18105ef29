"""KubeClient without the generated API classes (issue 32): constructing one imports none of
``kubernetes.client.api.*`` (their imports cost ~0.65 s a cold start), and every request it sends is the one the
generated method it replaced sends (method, URL with path and query, headers including Accept, Content-Type and the
refreshed bearer token, body, timeout), compared at the official client's REST layer."""

import json
import subprocess
import sys

import pytest

from karpenter_lambda.adapters.kube.client import KubeClient

_PROBE = r"""
import sys
from karpenter_lambda.adapters.kube.client import KubeClient
clients = [KubeClient.from_host("http://127.0.0.1:1"), KubeClient.from_endpoint("https://127.0.0.1:1", None, lambda: "tok")]
print(sorted(m for m in sys.modules if m.startswith("kubernetes.client.api.")))
core = clients[0].core                       # still there for callers that want it, built on first use
print(type(core).__name__, clients[0].core is core, "kubernetes.client.api.core_v1_api" in sys.modules)
"""


def test_constructing_a_client_imports_no_generated_api():
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == "[]"
    assert out[1] == "CoreV1Api True True"


class _Raw:
    """What urllib3 hands back: ``data`` and ``release_conn``."""

    def __init__(self, doc):
        self.data = json.dumps(doc).encode()

    def release_conn(self):
        pass


class _Answer:
    """kubernetes.client.rest.RESTResponse, 200 (before kubernetes 37 the REST layer handed back urllib3's response
    itself: ``release_conn`` too)."""

    status, reason = 200, "OK"

    def __init__(self, doc):
        self.response = _Raw(doc)
        self.data = self.response.data
        self.headers = {}

    def read(self):
        return self.data

    def getheaders(self):
        return self.headers

    def release_conn(self):
        pass


@pytest.fixture
def recorded():
    """A KubeClient with a bearer token, its requests recorded at the REST layer (answers: ``answers`` in order,
    then ``{}``)."""
    kc = KubeClient.from_endpoint("https://k8s.example:6443", None, lambda: "tok-1", request_timeout=(3, 7))
    sent, answers = [], []

    def request(method, url, headers=None, body=None, post_params=None, _request_timeout=None, **kw):
        sent.append((method, url, dict(headers or {}), json.dumps(body, sort_keys=True), post_params or None,
                     _request_timeout, kw))
        return _Answer(answers.pop(0) if answers else {})

    kc.api_client.rest_client.request = request
    yield kc, sent, answers
    kc.close()


G = {"_preload_content": False, "_request_timeout": (3, 7)}   # how KubeClient called the generated methods
NODE = "ip-10-0-1-2.ec2.internal"
PATCH = {"metadata": {"labels": {"a": "b", "gone": None}}}
MERGE, STRATEGIC, JSON_PATCH = "application/merge-patch+json", "application/strategic-merge-patch+json", "application/json-patch+json"
POD = {"metadata": {"name": "p", "namespace": "team"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
EVICTION = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": "team"}}
KEDA = ("keda.sh", "v1alpha1")

# (what KubeClient is asked, the generated call it used to make)
CASES = {
    "list pods everywhere": (lambda k: k.list_pods(), lambda k: k.core.list_pod_for_all_namespaces(limit=500, **G)),
    "list pods -n": (lambda k: k.list_pods("team", "app=a", "spec.nodeName=n1"),
                     lambda k: k.core.list_namespaced_pod("team", label_selector="app=a", field_selector="spec.nodeName=n1",
                                                          limit=500, **G)),
    "pods on node": (lambda k: k.list_pods_on_node(NODE),
                     lambda k: k.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={NODE}", limit=500, **G)),
    "get pod": (lambda k: k.get_pod("team", "p"), lambda k: k.core.read_namespaced_pod("p", "team", **G)),
    "list nodes": (lambda k: k.list_nodes("karpenter.sh/nodepool in (a,b)"),
                   lambda k: k.core.list_node(label_selector="karpenter.sh/nodepool in (a,b)", limit=500, **G)),
    "get node": (lambda k: k.get_node(NODE), lambda k: k.core.read_node(NODE, **G)),
    "get node, odd name": (lambda k: k.get_node("a b/c?d"), lambda k: k.core.read_node("a b/c?d", **G)),
    "daemonsets": (lambda k: k.list_daemonsets(), lambda k: k.apps.list_daemon_set_for_all_namespaces(limit=500, **G)),
    "daemonsets -n": (lambda k: k.list_daemonsets("kube-system"),
                      lambda k: k.apps.list_namespaced_daemon_set("kube-system", limit=500, **G)),
    "pdbs": (lambda k: k.list_pdbs(), lambda k: k.policy.list_pod_disruption_budget_for_all_namespaces(limit=500, **G)),
    "pdbs -n": (lambda k: k.list_pdbs("team"), lambda k: k.policy.list_namespaced_pod_disruption_budget("team", limit=500, **G)),
    "pvcs": (lambda k: k.list_pvcs(), lambda k: k.core.list_persistent_volume_claim_for_all_namespaces(limit=500, **G)),
    "pvs": (lambda k: k.list_pvs(), lambda k: k.core.list_persistent_volume(limit=500, **G)),
    "storageclasses": (lambda k: k.list_storageclasses(), lambda k: k.storage.list_storage_class(limit=500, **G)),
    "csinodes": (lambda k: k.list_csinodes(), lambda k: k.storage.list_csi_node(limit=500, **G)),
    "create pv": (lambda k: k.create_pv({"metadata": {"name": "pv1"}}),
                  lambda k: k.core.create_persistent_volume({"metadata": {"name": "pv1"}}, **G)),
    "create pvc": (lambda k: k.create_pvc("team", {"metadata": {"name": "c"}}),
                   lambda k: k.core.create_namespaced_persistent_volume_claim("team", {"metadata": {"name": "c"}}, **G)),
    "patch pv": (lambda k: k.patch_pv("pv1", PATCH), lambda k: k.core.patch_persistent_volume("pv1", PATCH, _content_type=MERGE, **G)),
    "patch pv status": (lambda k: k.patch_pv("pv1", PATCH, "status"),
                        lambda k: k.core.patch_persistent_volume_status("pv1", PATCH, _content_type=MERGE, **G)),
    "patch pvc": (lambda k: k.patch_pvc("team", "c", PATCH),
                  lambda k: k.core.patch_namespaced_persistent_volume_claim("c", "team", PATCH, _content_type=MERGE, **G)),
    "patch pvc status": (lambda k: k.patch_pvc("team", "c", PATCH, "status"),
                         lambda k: k.core.patch_namespaced_persistent_volume_claim_status("c", "team", PATCH, _content_type=MERGE, **G)),
    "namespaces": (lambda k: k.list_namespaces("env=prod"), lambda k: k.core.list_namespace(label_selector="env=prod", limit=500, **G)),
    "deployments": (lambda k: k.list_deployments(), lambda k: k.apps.list_deployment_for_all_namespaces(limit=500, **G)),
    "deployments -n": (lambda k: k.list_deployments("team", "tier=web"),
                       lambda k: k.apps.list_namespaced_deployment("team", label_selector="tier=web", limit=500, **G)),
    "statefulsets": (lambda k: k.list_statefulsets(), lambda k: k.apps.list_stateful_set_for_all_namespaces(limit=500, **G)),
    "statefulsets -n": (lambda k: k.list_statefulsets("team"), lambda k: k.apps.list_namespaced_stateful_set("team", limit=500, **G)),
    "get deployment": (lambda k: k.get_workload("Deployment", "team", "web"),
                       lambda k: k.apps.read_namespaced_deployment("web", "team", **G)),
    "get statefulset": (lambda k: k.get_workload("StatefulSet", "team", "db"),
                        lambda k: k.apps.read_namespaced_stateful_set("db", "team", **G)),
    "scale deployment": (lambda k: k.scale_workload("Deployment", "team", "web", 3),
                         lambda k: k.apps.patch_namespaced_deployment_scale("web", "team", {"spec": {"replicas": 3}},
                                                                            _content_type=MERGE, **G)),
    "scale statefulset": (lambda k: k.scale_workload("StatefulSet", "team", "db", 0),
                          lambda k: k.apps.patch_namespaced_stateful_set_scale("db", "team", {"spec": {"replicas": 0}},
                                                                               _content_type=MERGE, **G)),
    "patch deployment": (lambda k: k.patch_workload("Deployment", "team", "web", PATCH),
                         lambda k: k.apps.patch_namespaced_deployment("web", "team", PATCH, _content_type=MERGE, **G)),
    "patch statefulset": (lambda k: k.patch_workload("StatefulSet", "team", "db", PATCH),
                          lambda k: k.apps.patch_namespaced_stateful_set("db", "team", PATCH, _content_type=MERGE, **G)),
    "hpas": (lambda k: k.list_hpas(), lambda k: k.autoscaling.list_horizontal_pod_autoscaler_for_all_namespaces(limit=500, **G)),
    "hpas -n": (lambda k: k.list_hpas("team"), lambda k: k.autoscaling.list_namespaced_horizontal_pod_autoscaler("team", limit=500, **G)),
    "patch hpa": (lambda k: k.patch_hpa("team", "web", PATCH),
                  lambda k: k.autoscaling.patch_namespaced_horizontal_pod_autoscaler("web", "team", PATCH, _content_type=MERGE, **G)),
    "scaledobjects": (lambda k: k.list_scaledobjects(),
                      lambda k: k.custom.list_cluster_custom_object(*KEDA, "scaledobjects", limit=500, **G)),
    "scaledobjects -n": (lambda k: k.list_scaledobjects("team"),
                         lambda k: k.custom.list_namespaced_custom_object(*KEDA, "team", "scaledobjects", limit=500, **G)),
    "patch scaledobject": (lambda k: k.patch_scaledobject("team", "web", PATCH),
                           lambda k: k.custom.patch_namespaced_custom_object(*KEDA, "team", "scaledobjects", "web", PATCH,
                                                                             _content_type=MERGE, **G)),
    "create node": (lambda k: k.create_node({"metadata": {"name": NODE}}), lambda k: k.core.create_node({"metadata": {"name": NODE}}, **G)),
    "create pod": (lambda k: k.create_pod(POD), lambda k: k.core.create_namespaced_pod("team", POD, **G)),
    "patch node merge": (lambda k: k.patch_node(NODE, PATCH), lambda k: k.core.patch_node(NODE, PATCH, _content_type=MERGE, **G)),
    "patch node strategic": (lambda k: k.patch_node(NODE, PATCH, "strategic"),
                             lambda k: k.core.patch_node(NODE, PATCH, _content_type=STRATEGIC, **G)),
    "patch node json": (lambda k: k.patch_node(NODE, [{"op": "remove", "path": "/spec/taints/0"}], "json"),
                        lambda k: k.core.patch_node(NODE, [{"op": "remove", "path": "/spec/taints/0"}], _content_type=JSON_PATCH, **G)),
    "cordon": (lambda k: k.cordon(NODE), lambda k: k.core.patch_node(NODE, {"spec": {"unschedulable": True}}, _content_type=MERGE, **G)),
    "patch node status": (lambda k: k.patch_node_status(NODE, PATCH),
                          lambda k: k.core.patch_node_status(NODE, PATCH, _content_type=MERGE, **G)),
    "patch pod status": (lambda k: k.patch_pod_status("team", "p", PATCH),
                         lambda k: k.core.patch_namespaced_pod_status("p", "team", PATCH, _content_type=STRATEGIC, **G)),
    "evict": (lambda k: k.evict("team", "p"), lambda k: k.core.create_namespaced_pod_eviction("p", "team", EVICTION, **G)),
    "evict_pod with grace": (lambda k: k.evict_pod("team", "p", 5),
                             lambda k: k.core.create_namespaced_pod_eviction(
                                 "p", "team", {**EVICTION, "deleteOptions": {"gracePeriodSeconds": 5}}, **G)),
    "delete pod": (lambda k: k.delete_pod("team", "p"), lambda k: k.core.delete_namespaced_pod("p", "team", **G)),
    "delete pod with grace": (lambda k: k.delete_pod("team", "p", 0),
                              lambda k: k.core.delete_namespaced_pod("p", "team", grace_period_seconds=0, **G)),
    "delete node": (lambda k: k.delete_node(NODE), lambda k: k.core.delete_node(NODE, **G)),
    "bind": (lambda k: k.bind_pod("team", "p", NODE),
             lambda k: k.core.create_namespaced_pod_binding("p", "team", {
                 "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p", "namespace": "team"},
                 "target": {"apiVersion": "v1", "kind": "Node", "name": NODE}}, **G)),
    "event": (lambda k: k.create_event(POD, "Nominated", "msg", now="2026-01-01T00:00:00Z"),
              lambda k: k.core.create_namespaced_event("team", {
                  "metadata": {"generateName": "p.", "namespace": "team"},
                  "involvedObject": {"apiVersion": "v1", "name": "p", "namespace": "team"}, "reason": "Nominated",
                  "message": "msg", "type": "Normal", "source": {"component": "karpenter"},
                  "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z", "count": 1}, **G)),
    "version": (lambda k: k.version(), lambda k: __import__("kubernetes.client", fromlist=["VersionApi"]).VersionApi(k.api_client).get_code(**G)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_request_is_the_generated_methods(recorded, case):
    kc, sent, _ = recorded
    ours, generated = CASES[case]
    ours(kc)
    mine = list(sent)
    sent.clear()
    generated(kc)
    if case == "event":
        # the generated method validated the dict into a CoreV1Event and wrote its times back as "+00:00"; the dict
        # goes as given now, times in the "Z" form the API server itself writes
        mine = [(*r[:3], r[3].replace("Z\"", "+00:00\""), *r[4:]) for r in mine]
    assert mine == sent and len(mine) == 1
    method, url, headers, *_ = mine[0]
    assert url.startswith("https://k8s.example:6443/") and headers["Accept"] == "application/json"
    assert headers["authorization"] == "Bearer tok-1"


def test_paging_sends_the_continue_token_as_the_generated_method(recorded):
    kc, sent, answers = recorded
    answers.extend([{"items": [{"a": 1}], "metadata": {"continue": "t/+=1"}}, {"items": [{"a": 2}]}])
    assert kc.list_nodes(label_selector="x=y") == [{"a": 1}, {"a": 2}]
    mine = list(sent)
    sent.clear()
    kc.core.list_node(label_selector="x=y", limit=500, **G)
    kc.core.list_node(label_selector="x=y", limit=500, _continue="t/+=1", **G)
    assert mine == sent
    assert "continue=t/%2B%3D1&labelSelector=x%3Dy&limit=500" in sent[1][1]
