"""KubeClient workload helpers (Deployments, StatefulSets, the scale subresource, namespaces, HPAs, KEDA
ScaledObjects) against the local API server: real HTTP, the official client."""

import json
import urllib.request

import pytest

from karpenter_lambda.adapters.kube.client import KubeClient, KubeError
from karpenter_lambda.sim.kubeapi import KubeAPIServer


def _workload(kind, name, ns="dev", replicas=3, labels=None):
    plural = {"Deployment": "deployments", "StatefulSet": "statefulsets"}[kind]
    doc = {"metadata": {"name": name, "namespace": ns, "labels": labels or {}},
           "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    return plural, doc


def _create(server, kind, name, **kw):
    plural, doc = _workload(kind, name, **kw)
    return server.store.create(plural, doc)


def test_list_and_get_deployments_and_statefulsets(server, kc):
    _create(server, "Deployment", "web", labels={"tier": "web"})
    _create(server, "Deployment", "api", ns="staging", labels={"tier": "api"})
    _create(server, "StatefulSet", "db", replicas=2, labels={"tier": "data"})
    assert [(d["metadata"]["namespace"], d["metadata"]["name"]) for d in kc.list_deployments()] == [("dev", "web"), ("staging", "api")]
    assert [d["metadata"]["name"] for d in kc.list_deployments(namespace="staging")] == ["api"]
    assert [d["metadata"]["name"] for d in kc.list_deployments(label_selector="tier in (web,data)")] == ["web"]
    assert [s["metadata"]["name"] for s in kc.list_statefulsets(label_selector="tier=data")] == ["db"]
    assert kc.list_statefulsets(namespace="staging") == []
    got = kc.get_workload("StatefulSet", "dev", "db")
    assert got["kind"] == "StatefulSet" and got["spec"]["replicas"] == 2
    assert kc.get_workload("Deployment", "dev", "missing") is None
    with pytest.raises(ValueError, match="DaemonSet"):
        kc.get_workload("DaemonSet", "dev", "x")


def test_scale_goes_through_the_scale_subresource(server, kc):
    before = _create(server, "Deployment", "web", replicas=3)
    scale = kc.scale_workload("Deployment", "dev", "web", 0)
    assert scale["kind"] == "Scale" and scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"] == {"replicas": 0} and scale["status"]["selector"] == "app=web"
    after = server.store.get("deployments", "web", "dev")
    assert after["spec"]["replicas"] == 0
    assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1
    assert int(after["metadata"]["resourceVersion"]) > int(before["metadata"]["resourceVersion"])
    assert after["spec"]["template"] == before["spec"]["template"]   # only replicas changed
    assert server.requests("PATCH", r"/apis/apps/v1/namespaces/dev/deployments/web/scale$")
    _create(server, "StatefulSet", "db", replicas=1)
    assert kc.scale_workload("StatefulSet", "dev", "db", 4)["spec"]["replicas"] == 4
    assert server.store.get("statefulsets", "db", "dev")["spec"]["replicas"] == 4
    with pytest.raises(ValueError, match="replicas"):
        kc.scale_workload("Deployment", "dev", "web", -1)


def test_scale_of_a_missing_workload_raises_naming_it(server, kc):
    with pytest.raises(KubeError) as e:
        kc.scale_workload("StatefulSet", "prod", "ghost", 1)
    assert e.value.status == 404
    assert "statefulsets prod/ghost/scale" in str(e.value)


def test_scale_is_retried_on_429_and_5xx(server, kc):
    _create(server, "Deployment", "web", replicas=3)
    server.add_fault(429, times=2, method="PATCH", path="/deployments/web/scale", retry_after=0)
    server.add_fault(503, times=1, method="PATCH", path="/deployments/web/scale")
    assert kc.scale_workload("Deployment", "dev", "web", 1)["spec"]["replicas"] == 1
    assert kc.retried == 3
    assert [code for _, _, code in server.requests("PATCH", "/deployments/web/scale")] == [429, 429, 503, 200]
    server.add_fault(500, times=10, method="PATCH", path="/deployments/web/scale")
    with pytest.raises(KubeError) as e:
        kc.scale_workload("Deployment", "dev", "web", 2)
    assert e.value.status == 500 and "deployments dev/web/scale" in str(e.value)
    assert server.store.get("deployments", "web", "dev")["spec"]["replicas"] == 1


def test_patch_workload_annotations(server, kc):
    _create(server, "Deployment", "web")
    out = kc.patch_workload("Deployment", "dev", "web", {"metadata": {"annotations": {"a": "1", "b": "2"}}})
    assert out["metadata"]["annotations"] == {"a": "1", "b": "2"}
    out = kc.patch_workload("Deployment", "dev", "web", {"metadata": {"annotations": {"a": None}}})
    assert out["metadata"]["annotations"] == {"b": "2"}
    with pytest.raises(KubeError) as e:
        kc.patch_workload("StatefulSet", "dev", "web", {"metadata": {"annotations": {"a": "1"}}})
    assert e.value.status == 404 and "statefulsets dev/web" in str(e.value)


def test_scale_subresource_round_trip_over_http(server, kc):
    """GET, PUT (with and without a stale resourceVersion) and json-patch of .../scale, through the raw API."""
    _create(server, "StatefulSet", "db", replicas=2)
    base = f"{server.url}/apis/apps/v1/namespaces/dev/statefulsets/db/scale"

    def call(method, body=None, ctype="application/json"):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(base, data=data, method=method, headers={"Content-Type": ctype})
        try:
            with urllib.request.urlopen(req) as r:
                return r.status, json.load(r)
        except urllib.error.HTTPError as e:
            return e.code, json.load(e)

    code, scale = call("GET")
    assert code == 200 and scale["spec"]["replicas"] == 2 and scale["metadata"]["name"] == "db"
    assert scale["metadata"]["resourceVersion"] == server.store.get("statefulsets", "db", "dev")["metadata"]["resourceVersion"]
    stale = dict(scale, metadata=dict(scale["metadata"]), spec={"replicas": 7})
    scale["spec"]["replicas"] = 5
    code, put = call("PUT", scale)
    assert code == 200 and put["spec"]["replicas"] == 5
    assert server.store.get("statefulsets", "db", "dev")["spec"]["replicas"] == 5
    code, err = call("PUT", stale)                      # the resourceVersion it read is gone
    assert code == 409 and err["reason"] == "Conflict"
    code, out = call("PATCH", [{"op": "replace", "path": "/spec/replicas", "value": 0}], "application/json-patch+json")
    assert code == 200 and out["spec"]["replicas"] == 0
    code, out = call("PATCH", {"spec": {"replicas": 1}}, "application/strategic-merge-patch+json")
    assert code == 200 and server.store.get("statefulsets", "db", "dev")["spec"]["replicas"] == 1
    code, err = call("PATCH", {"spec": {"replicas": -2}}, "application/merge-patch+json")
    assert code == 422 and "spec.replicas" in err["message"]
    assert server.store.get("statefulsets", "db", "dev")["spec"]["replicas"] == 1


def test_scale_changes_are_watched_as_workload_modifications(server, kc):
    _create(server, "Deployment", "web", replicas=3)
    rv = server.store.resource_version
    kc.scale_workload("Deployment", "dev", "web", 0)
    evs = [e for e in server.store.events_after(rv) if e.plural == "deployments"]
    assert [(e.type, e.obj["spec"]["replicas"]) for e in evs] == [("MODIFIED", 0)]


def test_namespaces_by_label_selector(server, kc):
    server.store.create("namespaces", {"metadata": {"name": "dev", "labels": {"env": "dev", "offpeak": "yes"}}})
    server.store.create("namespaces", {"metadata": {"name": "prod", "labels": {"env": "prod"}}})
    assert [n["metadata"]["name"] for n in kc.list_namespaces(label_selector="env=dev")] == ["dev"]
    assert [n["metadata"]["name"] for n in kc.list_namespaces(label_selector="env")] == ["dev", "prod"]
    assert [n["metadata"]["name"] for n in kc.list_namespaces(label_selector="env,!offpeak")] == ["prod"]
    # the API server's own label, on every namespace (including the defaults)
    assert [n["metadata"]["name"] for n in kc.list_namespaces(label_selector="kubernetes.io/metadata.name=kube-system")] == ["kube-system"]
    assert len(kc.list_namespaces()) == 6


def test_hpas_list_and_patch(server, kc):
    for ns in ("dev", "prod"):
        server.store.create("horizontalpodautoscalers", {"metadata": {"name": "web", "namespace": ns}, "spec": {
            "minReplicas": 2, "maxReplicas": 10, "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}}})
    assert [(h["metadata"]["namespace"], h["spec"]["minReplicas"]) for h in kc.list_hpas()] == [("dev", 2), ("prod", 2)]
    out = kc.patch_hpa("dev", "web", {"spec": {"minReplicas": 1, "maxReplicas": 1},
                                      "metadata": {"annotations": {"karpenter-lambda.io/offpeak-original": "2-10"}}})
    assert out["spec"]["minReplicas"] == 1 and out["spec"]["scaleTargetRef"]["name"] == "web"
    assert out["apiVersion"] == "autoscaling/v2" and out["kind"] == "HorizontalPodAutoscaler"
    assert [h["spec"]["minReplicas"] for h in kc.list_hpas(namespace="prod")] == [2]
    assert server.requests("PATCH", r"/apis/autoscaling/v2/namespaces/dev/horizontalpodautoscalers/web$")
    with pytest.raises(KubeError) as e:
        kc.patch_hpa("dev", "gone", {"spec": {"minReplicas": 1}})
    assert e.value.status == 404 and "horizontalpodautoscalers dev/gone" in str(e.value)


def test_scaledobjects_list_and_patch(server, kc):
    server.store.create("scaledobjects", {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                                          "metadata": {"name": "worker", "namespace": "dev"},
                                          "spec": {"scaleTargetRef": {"name": "worker"}, "minReplicaCount": 1}})
    (so,) = kc.list_scaledobjects()
    assert so["metadata"]["name"] == "worker" and so["spec"]["minReplicaCount"] == 1
    assert kc.list_scaledobjects(namespace="prod") == []
    out = kc.patch_scaledobject("dev", "worker", {"metadata": {"annotations": {"autoscaling.keda.sh/paused-replicas": "0"}}})
    assert out["metadata"]["annotations"] == {"autoscaling.keda.sh/paused-replicas": "0"}
    assert server.store.get("scaledobjects", "worker", "dev")["metadata"]["annotations"] == {"autoscaling.keda.sh/paused-replicas": "0"}
    assert server.requests("PATCH", r"/apis/keda.sh/v1alpha1/namespaces/dev/scaledobjects/worker$")
    out = kc.patch_scaledobject("dev", "worker", {"metadata": {"annotations": {"autoscaling.keda.sh/paused-replicas": None}}})
    assert not out["metadata"].get("annotations")


def test_scaledobjects_absent_crd_is_an_empty_list(server, kc):
    # a cluster without KEDA answers 404 for the whole keda.sh group
    server.add_fault(404, times=2, method="GET", path=r"/apis/keda\.sh/", message="the server could not find the requested resource")
    assert kc.list_scaledobjects() == []
    assert kc.list_scaledobjects(namespace="dev") == []
    # other errors are not swallowed
    server.add_fault(403, times=1, method="GET", path=r"/apis/keda\.sh/")
    with pytest.raises(KubeError) as e:
        kc.list_scaledobjects()
    assert e.value.status == 403 and "scaledobjects" in str(e.value)


def test_scaledobjects_on_a_server_without_the_type(monkeypatch):
    """A server that does not serve keda.sh at all (its discovery has no such group): the list is empty."""
    from karpenter_lambda.sim import kubeapi

    monkeypatch.setattr(kubeapi, "_BY_GV", {gv: r for gv, r in kubeapi._BY_GV.items() if gv[0] != "keda.sh"})
    with KubeAPIServer() as srv:
        c = KubeClient.from_host(srv.url, backoff_base=0.001, backoff_cap=0.01)
        try:
            assert c.list_scaledobjects() == []
            assert "keda.sh" not in [g["name"] for g in json.load(urllib.request.urlopen(srv.url + "/apis"))["groups"]]
            with pytest.raises(KubeError) as e:
                c.patch_scaledobject("dev", "x", {"metadata": {"annotations": {"a": "b"}}})
            assert e.value.status == 404 and "scaledobjects.keda.sh dev/x" in str(e.value)
        finally:
            c.close()


def test_discovery_lists_the_new_groups_and_scale_subresources(server):
    groups = {g["name"]: g for g in json.load(urllib.request.urlopen(server.url + "/apis"))["groups"]}
    assert groups["autoscaling"]["preferredVersion"]["groupVersion"] == "autoscaling/v2"
    assert groups["keda.sh"]["versions"] == [{"groupVersion": "keda.sh/v1alpha1", "version": "v1alpha1"}]
    res = {r["name"]: r for r in json.load(urllib.request.urlopen(server.url + "/apis/apps/v1"))["resources"]}
    assert res["deployments/scale"]["kind"] == "Scale" and res["statefulsets/scale"]["group"] == "autoscaling"
    assert "patch" in res["deployments/scale"]["verbs"]
    hpa = json.load(urllib.request.urlopen(server.url + "/apis/autoscaling/v2"))["resources"]
    assert [(r["name"], r["kind"], r["namespaced"]) for r in hpa if "/" not in r["name"]] == [
        ("horizontalpodautoscalers", "HorizontalPodAutoscaler", True)]
