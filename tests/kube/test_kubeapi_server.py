"""Behaviour of the local API server that the client helpers and the watcher rely on."""

import json
import threading

import pytest
from kubernetes import client as k8s
from kubernetes import watch

from karpenter_lambda.sim.kubeapi import KubeAPIServer, StoreError, strategic_merge_patch


def test_clock_uid_rv_generate_name_and_conflicts():
    t = [1_700_000_000.0]
    srv = KubeAPIServer(clock=lambda: t[0])
    st = srv.store
    a = st.create("pods", {"metadata": {"generateName": "web-"}, "spec": {"containers": []}})
    assert a["metadata"]["name"].startswith("web-") and a["metadata"]["creationTimestamp"] == "2023-11-14T22:13:20Z"
    assert a["status"]["phase"] == "Pending" and a["spec"]["schedulerName"] == "default-scheduler"
    b = st.create("nodes", {"metadata": {"name": "n"}})
    assert int(b["metadata"]["resourceVersion"]) > int(a["metadata"]["resourceVersion"]) and a["metadata"]["uid"] != b["metadata"]["uid"]
    with pytest.raises(StoreError) as e:
        st.create("nodes", {"metadata": {"name": "n"}})
    assert e.value.code == 409
    stale = dict(b, metadata=dict(b["metadata"]))
    st.patch("nodes", "n", {"metadata": {"labels": {"x": "1"}}})
    with pytest.raises(StoreError) as e:
        st.update("nodes", stale)
    assert e.value.code == 409 and "has been modified" in e.value.message
    with pytest.raises(StoreError) as e:
        st.create("nodes", {"metadata": {"name": "Bad_Name"}})
    assert e.value.code == 422 and "metadata.name" in e.value.message


def test_strategic_merge_conditions_and_finalizers():
    pod = {"metadata": {"finalizers": ["a"]}, "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]}}
    out = strategic_merge_patch(pod, {"metadata": {"finalizers": ["b"]}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    assert out["metadata"]["finalizers"] == ["a", "b"]
    assert out["status"]["conditions"] == [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}]
    out = strategic_merge_patch(out, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}, "status": {"conditions": [{"type": "Ready", "$patch": "delete"}]}})
    assert out["metadata"]["finalizers"] == ["b"] and [c["type"] for c in out["status"]["conditions"]] == ["PodScheduled"]


def test_status_subresource_and_namespace_cascade(server):
    core = k8s.CoreV1Api(server.api_client())
    server.store.create("nodes", {"metadata": {"name": "n"}, "spec": {"providerID": "p"}})
    core.patch_node_status("n", {"spec": {"providerID": "changed"}, "status": {"capacity": {"cpu": "2"}}}, _content_type="application/merge-patch+json")
    n = server.store.get("nodes", "n")
    assert n["spec"]["providerID"] == "p" and n["status"]["capacity"] == {"cpu": "2"}
    server.store.create("pods", {"metadata": {"name": "p", "namespace": "team"}, "spec": {}})
    core.delete_namespace("team", _preload_content=False)
    assert server.store.get("pods", "p", "team") is None


def test_watch_with_the_official_client_and_label_selector(server):
    core = k8s.CoreV1Api(server.api_client())
    rv = core.list_pod_for_all_namespaces().metadata.resource_version
    got = []
    done = threading.Event()

    def consume():
        w = watch.Watch()
        for ev in w.stream(core.list_namespaced_pod, "default", label_selector="app=web", resource_version=rv, timeout_seconds=5):
            got.append((ev["type"], ev["object"].metadata.name))
            if len(got) == 3:
                w.stop()
        done.set()

    t = threading.Thread(target=consume)
    t.start()
    st = server.store
    st.create("pods", {"metadata": {"name": "other", "labels": {"app": "db"}}, "spec": {"containers": []}})
    st.create("pods", {"metadata": {"name": "web", "labels": {"app": "web"}}, "spec": {"containers": []}})
    st.create("pods", {"metadata": {"name": "web", "namespace": "ns2", "labels": {"app": "web"}}, "spec": {"containers": []}})
    st.patch("pods", "web", {"metadata": {"annotations": {"a": "b"}}}, "default")
    st.delete("pods", "web", "default")
    assert done.wait(5)
    t.join()
    assert got == [("ADDED", "web"), ("MODIFIED", "web"), ("DELETED", "web")]


def test_watch_410_when_history_is_short():
    srv = KubeAPIServer(history_size=2)
    srv.start()
    try:
        core = k8s.CoreV1Api(srv.api_client())
        rv = core.list_node().metadata.resource_version
        for i in range(4):
            srv.store.create("nodes", {"metadata": {"name": f"n{i}"}})
        resp = core.list_node(watch=True, resource_version=rv, timeout_seconds=1, _preload_content=False)
        ev = json.loads(resp.data.splitlines()[0])
        assert ev["type"] == "ERROR" and ev["object"]["code"] == 410 and ev["object"]["reason"] == "Expired"
        # a recent enough resourceVersion still works
        recent = srv.store.resource_version
        srv.store.create("nodes", {"metadata": {"name": "late"}})
        resp = core.list_node(watch=True, resource_version=str(recent), timeout_seconds=1, _preload_content=False)
        assert [json.loads(line)["object"]["metadata"]["name"] for line in resp.data.splitlines()] == ["late"]
    finally:
        srv.stop()


def test_discovery_and_unsupported_patch(server):
    api = server.api_client()
    assert k8s.CoreApi(api).get_api_versions().versions == ["v1"]
    groups = {g.name for g in k8s.ApisApi(api).get_api_versions().groups}
    assert {"apps", "policy"} <= groups
    res = json.loads(k8s.CoreV1Api(api).get_api_resources(_preload_content=False).data)
    assert {r["name"] for r in res["resources"]} >= {"pods", "nodes", "events"}
    server.store.create("nodes", {"metadata": {"name": "n"}})
    import urllib.error
    import urllib.request

    req = urllib.request.Request(server.url + "/api/v1/nodes/n", data=b"\xa1\x61a\x01", method="PATCH",
                                 headers={"Content-Type": "application/apply-patch+cbor"})
    with pytest.raises(urllib.error.HTTPError) as e:    # the client refuses the type itself: raw HTTP, as kubectl's
        urllib.request.urlopen(req)
    assert e.value.code == 415


def test_the_runtimeclass_admission_on_pod_create():
    from karpenter_lambda.sim.kubeapi import ObjectStore, StoreError

    store = ObjectStore()
    store.create("runtimeclasses", {"metadata": {"name": "kata"}, "handler": "kata",
                                    "overhead": {"podFixed": {"cpu": "250m"}}})
    pod = store.create("pods", {"metadata": {"name": "p"}, "spec": {"runtimeClassName": "kata", "containers": []}})
    assert pod["spec"]["overhead"] == {"cpu": "250m"}
    with pytest.raises(StoreError) as e:
        store.create("pods", {"metadata": {"name": "q"}, "spec": {"runtimeClassName": "gvisor", "containers": []}})
    assert e.value.code == 403 and 'pods "q" is forbidden: RuntimeClass gvisor not found' in str(e.value)


def test_the_limitranger_admission_on_pod_create():
    from karpenter_lambda.sim.kubeapi import ObjectStore, StoreError

    store = ObjectStore()
    store.create("limitranges", {"metadata": {"name": "d"}, "spec": {"limits": [
        {"type": "Container", "defaultRequest": {"cpu": "250m"}, "max": {"cpu": "1"}}]}}, "default")
    pod = store.create("pods", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}, "default")
    assert pod["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "1"}, "requests": {"cpu": "250m"}}
    other = store.create("pods", {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}, "elsewhere")
    assert "resources" not in other["spec"]["containers"][0]   # another namespace's pods are not touched
    with pytest.raises(StoreError) as e:
        store.create("pods", {"metadata": {"name": "q"}, "spec": {"containers": [
            {"name": "c", "resources": {"limits": {"cpu": "2"}}}]}}, "default")
    assert e.value.code == 403 and "maximum cpu usage per Container is 1, but limit is 2" in str(e.value)
