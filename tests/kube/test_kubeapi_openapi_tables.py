"""OpenAPI v3/v2, fieldValidation and the Table output of ``kubectl get``, on the local API server (issue 31 item 4);
requests as kubectl sends them (same paths and Accept headers)."""

import json
import urllib.error
import urllib.request

import pytest

from karpenter_lambda.sim.kubeapi import KubeAPIServer
from karpenter_lambda.sim.kubeapi.tables import human_duration

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
T0 = 1_700_000_000.0


def _get(url, accept="application/json"):
    req = urllib.request.Request(url, headers={"Accept": accept})
    with urllib.request.urlopen(req) as r:
        return r.status, dict(r.headers), r.read()


def test_openapi_v3_has_what_kubectl_apply_and_explain_read(server):
    _, _, body = _get(server.url + "/openapi/v3", "application/json, */*")
    index = json.loads(body)["paths"]
    assert {"api/v1", "apis/apps/v1", "apis/policy/v1"} <= set(index)
    _, _, body = _get(server.url + index["api/v1"]["serverRelativeURL"])
    doc = json.loads(body)
    patch = doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"]
    # kubectl's QueryParamVerifierV3: the kind's PATCH operation with fieldValidation (and dryRun) parameters
    assert patch["x-kubernetes-group-version-kind"] == {"group": "", "kind": "Pod", "version": "v1"}
    assert {"fieldValidation", "dryRun", "fieldManager", "force"} <= {p["name"] for p in patch["parameters"] if p["in"] == "query"}
    schemas = doc["components"]["schemas"]
    pod = next(s for s in schemas.values() if {"group": "", "version": "v1", "kind": "Pod"} in s.get("x-kubernetes-group-version-kind", []))
    spec_ref = pod["properties"]["spec"].get("$ref") or pod["properties"]["spec"]["allOf"][0]["$ref"]
    spec = schemas[spec_ref.rsplit("/", 1)[-1]]
    assert spec_ref.endswith(".PodSpec") and "containers" in spec["required"]
    containers = spec["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name" and containers["type"] == "array"
    assert "There must be at least one container" in containers["description"]
    port = schemas[spec_ref.rsplit("/", 1)[-1].rsplit(".", 1)[0] + ".HTTPGetAction"]["properties"]["port"]
    assert port["x-kubernetes-int-or-string"] is True
    with pytest.raises(urllib.error.HTTPError) as e:
        _get(server.url + "/openapi/v3/apis/nosuch.io/v1")
    assert e.value.code == 404


def test_openapi_v2_is_json_and_protobuf_is_not_acceptable(server):
    _, _, body = _get(server.url + "/openapi/v2")
    doc = json.loads(body)
    assert doc["swagger"] == "2.0" and any(d.get("x-kubernetes-group-version-kind") == [{"group": "apps", "version": "v1", "kind": "Deployment"}]
                                           for d in doc["definitions"].values())
    assert "#/components/" not in body.decode()
    with pytest.raises(urllib.error.HTTPError) as e:   # what kubectl asks first; it then uses v3
        _get(server.url + "/openapi/v2", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
    assert e.value.code == 406


def _send(url, method, body, ctype="application/json"):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method=method, headers={"Content-Type": ctype})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, r.headers.get_all("Warning") or [], json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, [], json.loads(e.read())


def test_field_validation_strict_warn_and_ignore(server):
    # raw HTTP as kubectl sends it (the official client refuses unknown fields itself)
    bad = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "x", "imagePolicy": "y"}], "foo": 1}}
    pods = server.url + "/api/v1/namespaces/default/pods"
    code, _, doc = _send(pods + "?fieldValidation=Strict", "POST", bad)
    assert code == 400 and doc["message"] == ('strict decoding error: unknown field "spec.containers[0].imagePolicy", '
                                              'unknown field "spec.foo"')
    assert server.store.get("pods", "p") is None
    code, warnings, _ = _send(pods + "?fieldValidation=Warn", "POST", bad)
    assert code == 201 and warnings == ['299 - "unknown field \\"spec.containers[0].imagePolicy\\""',
                                        '299 - "unknown field \\"spec.foo\\""']
    merge = "application/strategic-merge-patch+json"
    assert _send(pods + "/p?fieldValidation=Strict", "PATCH", {"metadata": {"labels": {"a": "b"}}}, merge)[0] == 200
    code, _, doc = _send(pods + "/p?fieldValidation=Strict", "PATCH", {"spec": {"bogus": 1}}, merge)
    assert code == 400 and "spec.bogus" in doc["message"]
    assert _send(pods + "/p?fieldValidation=Ignore", "PATCH", {"spec": {"bogus": 1}}, merge)[0] == 200
    code, _, doc = _send(pods + "/p?fieldValidation=Loose", "PATCH", {"spec": {}}, merge)
    assert code == 400 and "Ignore, Warn or Strict" in doc["message"]


def test_human_duration_as_kubectl_writes_ages():
    assert [human_duration(s) for s in (5, 119, 150, 600, 3 * 3600 + 59, 7 * 3600 + 30 * 60, 30 * 3600, 3 * 86400 + 3600, 400 * 86400)] == [
        "5s", "119s", "2m30s", "10m", "3h", "7h30m", "30h", "3d1h", "400d"]


def test_tables_of_pods_and_nodes_on_the_server_clock():
    t = [T0]
    srv = KubeAPIServer(clock=lambda: t[0])
    srv.start()
    try:
        srv.store.create("nodes", {"metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/worker": ""}},
                                   "spec": {"unschedulable": True},
                                   "status": {"conditions": [{"type": "Ready", "status": "True"}],
                                              "addresses": [{"type": "InternalIP", "address": "10.0.0.7"}],
                                              "nodeInfo": {"kubeletVersion": "v1.31.2", "osImage": "Amazon Linux 2023",
                                                           "kernelVersion": "6.1", "containerRuntimeVersion": "containerd://1.7"}}})
        srv.store.create("pods", {"metadata": {"name": "web"}, "spec": {"containers": [{"name": "a"}, {"name": "b"}]}})
        srv.store.bind("default", "web", "n1")
        srv.store.create("pods", {"metadata": {"name": "waiting"}, "spec": {"containers": [{"name": "a"}]}})
        t[0] = T0 + 3 * 3600 + 20 * 60   # the server's clock (the simulator's virtual one), not the wall clock
        _, _, body = _get(srv.url + "/api/v1/nodes?limit=500", TABLE)
        tab = json.loads(body)
        assert (tab["kind"], tab["apiVersion"]) == ("Table", "meta.k8s.io/v1")
        cols = [(c["name"], c["priority"]) for c in tab["columnDefinitions"]]
        assert cols == [("Name", 0), ("Status", 0), ("Roles", 0), ("Age", 0), ("Version", 0), ("Internal-IP", 1),
                        ("External-IP", 1), ("OS-Image", 1), ("Kernel-Version", 1), ("Container-Runtime", 1)]
        assert tab["rows"][0]["cells"] == ["n1", "Ready,SchedulingDisabled", "worker", "3h20m", "v1.31.2", "10.0.0.7",
                                           "<none>", "Amazon Linux 2023", "6.1", "containerd://1.7"]
        assert tab["rows"][0]["object"]["kind"] == "PartialObjectMetadata" and tab["rows"][0]["object"]["metadata"]["name"] == "n1"
        _, _, body = _get(srv.url + "/api/v1/namespaces/default/pods?limit=500", TABLE)
        tab = json.loads(body)
        assert [c["name"] for c in tab["columnDefinitions"]] == ["Name", "Ready", "Status", "Restarts", "Age", "IP", "Node",
                                                                  "Nominated Node", "Readiness Gates"]
        assert [r["cells"] for r in tab["rows"]] == [
            ["waiting", "0/1", "Pending", "0", "3h20m", "<none>", "<none>", "<none>", "<none>"],
            ["web", "2/2", "Running", "0", "3h20m", "<none>", "n1", "<none>", "<none>"]]
        _, _, body = _get(srv.url + "/api/v1/namespaces/default/pods/web?includeObject=Object", TABLE)
        one = json.loads(body)
        assert len(one["rows"]) == 1 and one["rows"][0]["object"]["kind"] == "Pod" and one["rows"][0]["object"]["spec"]["nodeName"] == "n1"
        _, _, body = _get(srv.url + "/apis/apps/v1/namespaces/default/deployments", TABLE)
        assert [c["name"] for c in json.loads(body)["columnDefinitions"]] == ["Name", "Age"]
        _, _, body = _get(srv.url + "/api/v1/nodes")   # without the Table Accept: a NodeList as before
        assert json.loads(body)["kind"] == "NodeList"
    finally:
        srv.stop()


def test_watch_as_table_sends_one_row_per_event(server):
    server.store.create("pods", {"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c"}]}})
    server.store.create("pods", {"metadata": {"name": "b"}, "spec": {"containers": [{"name": "c"}]}})
    _, _, body = _get(server.url + "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=1", TABLE)
    events = [json.loads(line) for line in body.splitlines() if line.strip()]
    assert [(e["type"], e["object"]["kind"], e["object"]["rows"][0]["cells"][0]) for e in events] == [
        ("ADDED", "Table", "a"), ("ADDED", "Table", "b")]
    assert events[0]["object"]["columnDefinitions"] and events[1]["object"]["columnDefinitions"] == []
