"""sim/kubeapi/store: ``list(..., shared=True)`` hands out the stored objects themselves (the simulator's read-only
passes and the LIST answer no longer deep-copy every object); that is safe only because no write changes a stored
object in place. Held here: what a shared list returned stays as it was through every kind of write, and a LIST over
HTTP (which drops each item's kind) leaves the stored objects whole."""

from __future__ import annotations

import copy

import pytest

from karpenter_lambda.adapters.kube.client import KubeClient


def _pod(name: str, labels: dict | None = None) -> dict:
    return {"metadata": {"name": name, "namespace": "default", "labels": labels or {"app": "web"},
                         "finalizers": ["test/hold"] if name == "held" else []},
            "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "1"}}}]}}


@pytest.fixture
def server(kube_api_server):
    return kube_api_server


def test_a_shared_list_is_the_stored_objects_and_no_write_changes_them(server):
    store = server.store
    for name in ("a", "b", "held", "gone"):
        store.create("pods", _pod(name))
    store.create("nodes", {"metadata": {"name": "n1", "labels": {"zone": "a"}}})
    shared = store.list("pods", shared=True)
    assert [p["metadata"]["name"] for p in shared] == ["a", "b", "gone", "held"]
    assert all(x is y for x, y in zip(shared, store.list("pods", shared=True)))     # no copies
    assert all(x is not y for x, y in zip(shared, store.list("pods")))              # the default still copies
    nodes = store.list("nodes", shared=True)
    before = copy.deepcopy(shared), copy.deepcopy(nodes)

    store.bind("default", "a", "n1")
    store.patch("pods", "b", {"metadata": {"labels": {"app": "api"}}}, "default", "merge")
    store.patch("pods", "b", [{"op": "add", "path": "/metadata/annotations", "value": {"x": "y"}}], "default", "json")
    store.patch("pods", "b", {"status": {"conditions": [{"type": "PodScheduled", "status": "False"}]}}, "default",
                "strategic", subresource="status")
    fresh = store.get("pods", "b")
    fresh["spec"]["priority"] = 5
    store.update("pods", fresh)
    store.delete("pods", "held")          # a finalizer: only marked
    store.delete("pods", "gone")
    store.patch("nodes", "n1", {"spec": {"unschedulable": True}}, None, "merge")
    store.delete("nodes", "n1")

    assert (shared, nodes) == before
    now = {p["metadata"]["name"]: p for p in store.list("pods", shared=True)}
    assert now["a"]["spec"]["nodeName"] == "n1" and now["b"]["spec"]["priority"] == 5
    assert now["held"]["metadata"].get("deletionTimestamp") and "gone" not in now


def test_a_list_over_http_leaves_the_stored_objects_whole(server):
    server.store.create("pods", _pod("a"))
    client = KubeClient.from_host(server.url)
    try:
        listed = client.list_pods("default")
        again = client.list_pods("default")
    finally:
        client.close()
    assert [p["metadata"]["name"] for p in listed] == ["a"] and listed == again
    assert "kind" not in listed[0]                         # as the API server answers a list's items
    stored = server.store.list("pods", shared=True)[0]
    assert stored["kind"] == "Pod" and stored["apiVersion"] == "v1"
