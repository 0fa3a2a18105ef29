"""KubeClient helpers against the local API server (real HTTP, the official client)."""

import pytest

from karpenter_lambda.adapters.kube.client import KubeClient, KubeError
from karpenter_lambda.sim.nodes import make_node


def _node(name="n1", **kw):
    return make_node(name, f"aws:///us-east-1a/i-{name}", "m5.large", "us-east-1a", {"cpu": "2", "memory": "8Gi", "pods": "29"}, **kw)


def _pod(name, ns="default", labels=None, node=None):
    p = {"metadata": {"name": name, "namespace": ns, "labels": labels or {}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    if node:
        p["spec"]["nodeName"] = node
    return p


def test_lists_with_selectors_and_paging(server, kc):
    for i in range(7):
        server.store.create("pods", _pod(f"p{i}", labels={"app": "a" if i % 2 else "b"}, node="n1" if i < 3 else None))
    server.store.create("pods", _pod("other", ns="team"))
    assert len(kc.list_pods()) == 8
    assert [p["metadata"]["name"] for p in kc.list_pods(label_selector="app=a")] == ["p1", "p3", "p5"]
    assert [p["metadata"]["name"] for p in kc.list_pods_on_node("n1")] == ["p0", "p1", "p2"]
    assert [p["metadata"]["name"] for p in kc.list_pods(namespace="team")] == ["other"]
    assert len(kc.list_pods(label_selector="app notin (a)")) == 5  # b pods + "other" (no label)
    # paging: the helper follows `continue` tokens
    many = KubeClient.from_host(server.url)
    server.store.create("nodes", _node("n1"))
    assert [n["metadata"]["name"] for n in many.list_nodes(label_selector="node.kubernetes.io/instance-type=m5.large")] == ["n1"]


def test_get_patch_cordon_labels_taints(server, kc):
    server.store.create("nodes", _node("n1"))
    assert kc.get_node("missing") is None
    n = kc.patch_node_labels("n1", {"karpenter.sh/nodepool": "default", "kubernetes.io/os": None})
    assert n["metadata"]["labels"]["karpenter.sh/nodepool"] == "default" and "kubernetes.io/os" not in n["metadata"]["labels"]
    assert kc.cordon("n1")["spec"]["unschedulable"] is True
    assert "unschedulable" not in kc.uncordon("n1")["spec"]
    n = kc.patch_node_taints("n1", add=[{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}], remove=["node.kubernetes.io/not-ready"])
    assert n["spec"]["taints"] == [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]
    n = kc.patch_node("n1", [{"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}}], patch_type="json")
    assert n["metadata"]["annotations"] == {"a": "b"}
    with pytest.raises(ValueError, match="patch_type"):
        kc.patch_node("n1", {}, patch_type="apply")
    with pytest.raises(ValueError, match="effect"):
        kc.patch_node_taints("n1", add=[{"key": "k", "effect": "Sometimes"}])


def test_evict_blocked_by_pdb_returns_false(server, kc):
    server.store.create("nodes", _node("n1", ready=True))
    for i in range(2):
        server.store.create("pods", _pod(f"web{i}", labels={"app": "web"}))
        server.store.bind("default", f"web{i}", "n1")
    server.store.create("poddisruptionbudgets", {"metadata": {"name": "web", "namespace": "default"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
    assert kc.evict_pod("default", "web0") is True
    assert server.store.get("pods", "web0", "default") is None
    assert kc.evict_pod("default", "web1") is False  # would leave 0 < minAvailable
    assert server.store.get("pods", "web1", "default") is not None
    assert kc.evict_pod("default", "never-existed") is True
    # the 429 of a PDB is an answer, not something to retry
    assert len(server.requests("POST", "web1/eviction")) == 1


def test_delete_and_finalizers(server, kc):
    node = _node("n1")
    node["metadata"]["finalizers"] = ["karpenter.sh/termination"]
    server.store.create("nodes", node)
    assert kc.delete_node("n1") is True
    n = kc.get_node("n1")
    assert n["metadata"]["deletionTimestamp"]  # held by the finalizer
    kc.remove_finalizer("nodes", "n1", "karpenter.sh/termination")
    assert kc.get_node("n1") is None
    assert kc.delete_node("n1") is False
    server.store.create("pods", _pod("p"))
    assert kc.delete_pod("default", "p") is True and kc.delete_pod("default", "p") is False


def test_retries_on_429_and_5xx(server, kc):
    server.store.create("nodes", _node("n1"))
    server.add_fault(429, times=2, method="GET", path="/api/v1/nodes/n1", retry_after=0)
    assert kc.get_node("n1")["metadata"]["name"] == "n1"
    server.add_fault(500, times=1, method="PATCH")
    server.add_fault(503, times=1, method="PATCH")
    assert kc.cordon("n1")["spec"]["unschedulable"] is True
    assert [c for (_m, _p, c) in server.requests("PATCH")] == [500, 503, 200]
    assert kc.retried == 4


def test_gives_up_with_a_clear_error(server):
    kc = KubeClient.from_host(server.url, retries=2, backoff_base=0.001)
    server.add_fault(500, times=10, path="/api/v1/nodes")
    with pytest.raises(KubeError) as e:
        kc.list_nodes()
    assert e.value.status == 500 and "LIST nodes" in str(e.value) and "injected fault 500" in str(e.value)
    assert len(server.requests("GET", "/api/v1/nodes")) == 3
    server.clear_faults()
    with pytest.raises(KubeError) as e:
        kc.patch_node("nope", {"metadata": {"labels": {"a": "b"}}})
    assert e.value.status == 404 and "nodes/nope" in str(e.value) and 'nodes "nope" not found' in str(e.value)


def test_connection_refused_is_retried_then_reported():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    kc = KubeClient.from_host(f"http://127.0.0.1:{port}", retries=1, backoff_base=0.001)
    with pytest.raises(KubeError) as e:
        kc.list_nodes()
    assert e.value.status == 0 and kc.retried == 1


def test_bind_events_daemonsets_version(server, kc):
    server.store.create("nodes", _node("n1", ready=True))
    server.store.create("pods", _pod("p"))
    kc.bind_pod("default", "p", "n1")
    assert kc.get_pod("default", "p")["spec"]["nodeName"] == "n1"
    with pytest.raises(KubeError) as e:
        kc.bind_pod("default", "p", "n2")
    assert e.value.status == 409
    ev = kc.create_event(kc.get_pod("default", "p"), "Nominated", "Pod should schedule on nodeclaim default-abc", "Normal")
    assert ev["involvedObject"]["kind"] == "Pod" and ev["involvedObject"]["name"] == "p"
    assert len(server.store.list("events", "default")) == 1
    server.store.create("daemonsets", {"metadata": {"name": "ds", "namespace": "kube-system"}, "spec": {}})
    assert [d["metadata"]["name"] for d in kc.list_daemonsets()] == ["ds"]
    assert kc.version()["gitVersion"].startswith("v1.")


def test_token_refresh_hook_sends_current_token(server):
    tokens = iter(["t1", "t2", "t3", "t4"])
    seen = []

    class Tok:
        def __call__(self):
            t = next(tokens)
            seen.append(t)
            return t

    kc = KubeClient.from_endpoint(server.url, None, Tok())
    kc.list_nodes()
    kc.list_nodes()
    cfg = kc.api_client.configuration
    assert cfg.api_key["BearerToken"] == seen[-1] and len(seen) >= 3  # a fresh call per request
    assert cfg.get_api_key_with_prefix("BearerToken").startswith("Bearer ")
