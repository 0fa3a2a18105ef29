"""The local API server as kubectl and the official client see it (issue 31 item 4): dry run, discovery, server-side
apply and a clean 415 (OpenAPI and tables: test_kubeapi_openapi_tables.py).  Requests are the official ``kubernetes``
client's, or raw HTTP with exactly kubectl's paths and headers."""

import http.client
import json
import threading
import urllib.request

import pytest
from kubernetes import client as k8s

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "labels": {"app": "web"}},
       "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


def _raw(server, method, path, body=None, headers=None, conn=None):
    c = conn or http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    c.request(method, path, body=data, headers={"Content-Type": "application/json", **(headers or {})})
    r = c.getresponse()
    return r.status, r.getheaders(), r.read()


def test_dry_run_changes_nothing_on_any_write_and_no_watch_sees_it(server):
    core = k8s.CoreV1Api(server.api_client())
    core.create_namespaced_pod("default", POD)
    server.store.create("nodes", {"metadata": {"name": "n1"}})
    server.store.bind("default", "web", "n1")
    server.store.create("poddisruptionbudgets", {"metadata": {"name": "web"}, "spec": {
        "minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
    rv = server.store.resource_version
    events = []
    done = threading.Event()

    def watch():
        _, _, data = _raw(server, "GET", f"/api/v1/pods?watch=true&resourceVersion={rv}&timeoutSeconds=1")
        events.extend(json.loads(line) for line in data.splitlines() if line.strip())
        done.set()

    t = threading.Thread(target=watch)
    t.start()
    made = core.create_namespaced_pod("default", dict(POD, metadata={"name": "new"}), dry_run="All")
    assert made.metadata.name == "new" and made.metadata.uid and not made.metadata.resource_version
    web_rv = server.store.get("pods", "web")["metadata"]["resourceVersion"]
    patched = core.patch_namespaced_pod("web", "default", {"metadata": {"labels": {"x": "1"}}}, dry_run="All")
    assert patched.metadata.labels["x"] == "1" and patched.metadata.resource_version == web_rv   # the current one
    cur = core.read_namespaced_pod("web", "default")
    cur.metadata.labels["y"] = "2"
    assert core.replace_namespaced_pod("web", "default", cur, dry_run="All").metadata.labels["y"] == "2"
    core.delete_namespaced_pod("web", "default", dry_run="All")
    core.patch_node("n1", {"spec": {"unschedulable": True}}, dry_run="All")   # kubectl drain --dry-run=server's cordon
    # an eviction's dry run (in its DeleteOptions, as kubectl drain sends it) answers 201 and deletes nothing
    server.store.patch("poddisruptionbudgets", "web", {"spec": {"minAvailable": 0}})
    rv = server.store.resource_version
    status, _, body = _raw(server, "POST", "/api/v1/namespaces/default/pods/web/eviction",
                           {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web"},
                            "deleteOptions": {"dryRun": ["All"]}})
    assert status == 201, body
    assert server.store.resource_version == rv
    web = server.store.get("pods", "web")
    assert web is not None and "x" not in web["metadata"]["labels"] and "y" not in web["metadata"]["labels"]
    assert server.store.get("pods", "new") is None and not server.store.get("nodes", "n1").get("spec", {}).get("unschedulable")
    done.wait(5)
    t.join(5)
    assert [e["object"]["metadata"]["name"] for e in events] == []   # only the budget changed, no pod event
    with pytest.raises(k8s.ApiException) as e:
        core.delete_namespaced_pod("web", "default", dry_run="Some")
    assert e.value.status == 400


def test_eviction_dry_run_still_honours_the_budget(server):
    server.store.create("pods", dict(POD, metadata=dict(POD["metadata"])))
    server.store.bind("default", "web", "n1")
    server.store.create("poddisruptionbudgets", {"metadata": {"name": "web"}, "spec": {
        "minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
    rv = server.store.resource_version
    status, headers, body = _raw(server, "POST", "/api/v1/namespaces/default/pods/web/eviction?dryRun=All",
                                 {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web"}})
    assert status == 429 and json.loads(body)["details"]["causes"][0]["reason"] == "DisruptionBudget"
    assert "Retry-After" not in dict(headers)   # as the real server: kubectl drain retries every 5 s
    assert server.store.resource_version == rv


def test_a_pod_evicted_and_not_replaced_yet_still_counts_against_max_unavailable(server):
    """The disruption controller's expected count for maxUnavailable is the controller's replicas: after one of a
    3-replica Deployment's pods is evicted (its ReplicaSet has not made the new one yet), a second eviction is
    refused.  Seen in a simulation: three nodes drained at once evicted all three pods of a maxUnavailable 1 budget."""
    server.store.create("deployments", {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                                        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                                                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {}}}})
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f7c9b6a", "uid": "rs", "controller": True}
    for i in range(3):
        server.store.create("pods", {**POD, "metadata": {"name": f"web-{i}", "labels": {"app": "web"},
                                                         "ownerReferences": [owner]}})
        server.store.bind("default", f"web-{i}", "n1")
    server.store.create("poddisruptionbudgets", {"metadata": {"name": "web"}, "spec": {
        "maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
    body = {"apiVersion": "policy/v1", "kind": "Eviction"}
    status, _, _ = _raw(server, "POST", "/api/v1/namespaces/default/pods/web-0/eviction", {**body, "metadata": {"name": "web-0"}})
    assert status in (200, 201) and server.store.get("pods", "web-0") is None
    status, _, raw = _raw(server, "POST", "/api/v1/namespaces/default/pods/web-1/eviction", {**body, "metadata": {"name": "web-1"}})
    assert status == 429 and "allows 0 disruptions now" in raw.decode()
    # the Deployment scaled down to 2 by hand: the missing pod is no longer expected, one more may go
    server.store.update_scale("deployments", "web", {"spec": {"replicas": 2}}, "default", "merge")
    status, _, _ = _raw(server, "POST", "/api/v1/namespaces/default/pods/web-1/eviction", {**body, "metadata": {"name": "web-1"}})
    assert status in (200, 201)


def test_discovery_lists_eviction_binding_status_short_names_and_categories(server):
    core = {r["name"]: r for r in json.load(urllib.request.urlopen(server.url + "/api/v1"))["resources"]}
    ev = core["pods/eviction"]
    # kubectl drain evicts only when it finds exactly this (else it DELETEs, bypassing the budgets)
    assert (ev["group"], ev["version"], ev["kind"], ev["verbs"]) == ("policy", "v1", "Eviction", ["create"])
    assert core["pods/binding"]["verbs"] == ["create"] and core["pods/status"]["kind"] == "Pod"
    assert core["nodes/status"]["verbs"] == ["get", "patch", "update"]
    assert (core["pods"]["shortNames"], core["nodes"]["shortNames"], core["namespaces"]["shortNames"]) == (["po"], ["no"], ["ns"])
    assert core["pods"]["categories"] == ["all"] and "categories" not in core["nodes"]
    apps = {r["name"]: r for r in json.load(urllib.request.urlopen(server.url + "/apis/apps/v1"))["resources"]}
    assert [apps[p]["shortNames"] for p in ("deployments", "statefulsets", "daemonsets", "replicasets")] == [
        ["deploy"], ["sts"], ["ds"], ["rs"]]
    pdb = {r["name"]: r for r in json.load(urllib.request.urlopen(server.url + "/apis/policy/v1"))["resources"]}
    assert pdb["poddisruptionbudgets"]["shortNames"] == ["pdb"]


def test_an_unsupported_patch_reads_the_body_and_the_connection_stays_in_step(server):
    server.store.create("nodes", {"metadata": {"name": "n"}})
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    status, _, _ = _raw(server, "PATCH", "/api/v1/nodes/n", b'{"metadata":{"labels":{"a":"b"}}}' * 50,
                        {"Content-Type": "application/apply-patch+cbor"}, conn)
    assert status == 415
    status, _, body = _raw(server, "GET", "/api/v1/nodes/n", conn=conn)   # same kept-alive connection
    assert status == 200 and json.loads(body)["metadata"]["name"] == "n"


def _apply(api, name, body, manager, force=None):
    kw = {"field_manager": manager, "_content_type": "application/apply-patch+yaml"}
    if force is not None:
        kw["force"] = force
    return api.patch_namespaced_config_map(name, "default", body, **kw)


def test_server_side_apply_creates_merges_removes_and_reports_conflicts(server):
    core = k8s.CoreV1Api(server.api_client())
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "labels": {"a": "1"}},
          "data": {"x": "1", "y": "2"}}
    made = _apply(core, "cfg", cm, "kubectl")
    assert made.data == {"x": "1", "y": "2"}
    mf = server.store.get("configmaps", "cfg")["metadata"]["managedFields"]
    assert [(m["manager"], m["operation"]) for m in mf] == [("kubectl", "Apply")]
    assert mf[0]["fieldsV1"] == {"f:metadata": {"f:labels": {"f:a": {}}}, "f:data": {"f:x": {}, "f:y": {}}}
    # a second manager owns z; the first drops y (removed) and keeps x
    _apply(core, "cfg", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"z": "3"}}, "other")
    out = _apply(core, "cfg", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"x": "1"}},
                 "kubectl")
    assert out.data == {"x": "1", "z": "3"} and out.metadata.labels in (None, {})
    # changing the other manager's field is a conflict, unless forced
    with pytest.raises(k8s.ApiException) as e:
        _apply(core, "cfg", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"z": "9"}}, "kubectl")
    doc = json.loads(e.value.body)
    assert e.value.status == 409 and doc["details"]["causes"][0]["field"] == ".data.z"
    assert "conflict with \"other\"" in doc["message"]
    out = _apply(core, "cfg", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"z": "9"}},
                 "kubectl", force=True)
    assert out.data == {"z": "9"}
    managers = {m["manager"]: m for m in server.store.get("configmaps", "cfg")["metadata"]["managedFields"]}
    assert set(managers) == {"kubectl"} and managers["kubectl"]["fieldsV1"] == {"f:data": {"f:z": {}}}
    with pytest.raises(k8s.ApiException) as e:
        core.patch_namespaced_config_map("cfg", "default", cm, _content_type="application/apply-patch+yaml")
    assert e.value.status == 400 and "fieldManager is required" in e.value.body


def test_server_side_apply_merges_containers_by_name_and_honours_dry_run(server):
    apps = k8s.AppsV1Api(server.api_client())
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {
        "replicas": 2, "selector": {"matchLabels": {"app": "d"}}, "template": {
            "metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}}}}
    kw = {"field_manager": "m", "_content_type": "application/apply-patch+yaml"}
    apps.patch_namespaced_deployment("d", "default", dep, **kw)
    dep["spec"]["template"]["spec"]["containers"] = [{"name": "a", "image": "a:2"}]
    rv = server.store.resource_version
    dry = apps.patch_namespaced_deployment("d", "default", dep, dry_run="All", **kw)
    assert [c.image for c in dry.spec.template.spec.containers] == ["a:2"] and server.store.resource_version == rv
    assert [c["image"] for c in server.store.get("deployments", "d")["spec"]["template"]["spec"]["containers"]] == ["a:1", "b:1"]
    out = apps.patch_namespaced_deployment("d", "default", dep, **kw)
    assert [(c.name, c.image) for c in out.spec.template.spec.containers] == [("a", "a:2")]   # b no longer applied
