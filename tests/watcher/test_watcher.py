"""The watcher against the local Kubernetes API server and moto SQS."""

import json
import socket

import pytest

from karpenter_lambda.sim.kubeapi import KubeAPIServer
from karpenter_lambda_watcher import MAX_MESSAGE_BYTES, is_provisionable, slim_pod

from watcher_testutil import drain, pending_pod


def _names(msgs, typ="pod"):
    return sorted(f"{m['pod']['metadata']['namespace']}/{m['pod']['metadata']['name']}" for m in msgs if m["type"] == typ)


def test_forwards_only_unschedulable_pods_in_batches(kube, sqs, queues, start_watcher):
    pod_url, _ = queues
    for i in range(23):
        kube.store.create("pods", pending_pod(f"p{i:02d}"))
    kube.store.create("pods", pending_pod("bound", spec={"nodeName": "n1"}))
    ds = pending_pod("ds-pod")
    ds["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u1", "controller": True}]
    kube.store.create("pods", ds)
    static = pending_pod("static")
    static["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u2"}]
    kube.store.create("pods", static)
    fresh = pending_pod("fresh")
    fresh["status"] = {"phase": "Pending"}  # not yet judged by the scheduler
    kube.store.create("pods", fresh)
    with start_watcher(pod_url) as w:
        w.wait(lambda s: s.messages_sent >= 23)
        kube.store.create("pods", pending_pod("late", ns="team-a"))
        w.wait(lambda s: s.messages_sent >= 24)
    msgs = drain(sqs, pod_url)
    assert _names(msgs) == sorted([f"default/p{i:02d}" for i in range(23)] + ["team-a/late"])
    assert w.stats.batches_sent >= 3  # 23 listed pods cannot go in fewer than 3 batches of <= 10
    m = next(m for m in msgs if m["pod"]["metadata"]["name"] == "p00")
    assert m["cluster"] == "test-cluster" and m["sentAt"].endswith("Z")
    assert m["pod"]["spec"]["containers"] == [{"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]
    assert m["pod"]["metadata"]["uid"] and m["pod"]["metadata"]["resourceVersion"]


def test_slim_pod_keeps_scheduling_fields_only():
    pod = pending_pod("x")
    pod["metadata"]["annotations"] = {"a": "1", "kubectl.kubernetes.io/last-applied-configuration": "{...}"}
    pod["spec"].update(
        {
            "nodeSelector": {"kubernetes.io/arch": "arm64"},
            "tolerations": [{"key": "k", "operator": "Exists"}],
            "initContainers": [{"name": "i", "image": "busybox", "restartPolicy": "Always", "command": ["sh"], "resources": {"requests": {"cpu": "1"}}}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "pvc-1"}}, {"name": "cfg", "configMap": {"name": "c"}}],
            "serviceAccountName": "sa",
            "priority": 100,
            "overhead": {"cpu": "250m"},
        }
    )
    s = slim_pod(pod)
    assert s["metadata"]["annotations"] == {"a": "1"}
    assert s["spec"]["initContainers"] == [{"name": "i", "resources": {"requests": {"cpu": "1"}}, "restartPolicy": "Always"}]
    assert s["spec"]["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "pvc-1"}}]
    assert "serviceAccountName" not in s["spec"] and "status" not in s
    assert s["spec"]["priority"] == 100 and s["spec"]["overhead"] == {"cpu": "250m"}


@pytest.mark.parametrize(
    "mutate,expected",
    [
        (lambda p: None, True),
        (lambda p: p["spec"].__setitem__("nodeName", "n"), False),
        (lambda p: p["metadata"].__setitem__("deletionTimestamp", "2026-01-01T00:00:00Z"), False),
        (lambda p: p["status"].__setitem__("nominatedNodeName", "n"), False),
        (lambda p: p["status"]["conditions"][0].__setitem__("reason", "SchedulerError"), False),
        (lambda p: p["metadata"].__setitem__("ownerReferences", [{"kind": "DaemonSet", "name": "d"}]), False),
        (lambda p: p["metadata"].__setitem__("ownerReferences", [{"kind": "ReplicaSet", "name": "r"}]), True),
        (lambda p: p["status"].__setitem__("phase", "Failed"), False),
    ],
)
def test_is_provisionable(mutate, expected):
    p = pending_pod("x")
    mutate(p)
    assert is_provisionable(p) is expected


def test_dedupe_on_repeated_events_and_resend_on_new_version(kube, sqs, queues, start_watcher):
    pod_url, _ = queues
    kube.store.create("pods", pending_pod("a"))
    with start_watcher(pod_url) as w:
        w.wait(lambda s: s.messages_sent >= 1)
        # the same pod at the same resourceVersion again: a relist after the history is compacted
        kube.store.create("configmaps", {"metadata": {"name": "unrelated"}}, "default")
        kube.store.compact()
        kube.drop_watches()
        w.wait(lambda s: s.relists_410 >= 1 and s.pods_deduped >= 1)
        kube.store.create("pods", pending_pod("b"))
        w.wait(lambda s: s.messages_sent >= 2)
        # a new resourceVersion of a still-pending pod is forwarded again
        kube.store.patch("pods", "a", {"metadata": {"labels": {"x": "1"}}}, "default")
        w.wait(lambda s: s.messages_sent >= 3)
    msgs = drain(sqs, pod_url)
    assert sorted(m["pod"]["metadata"]["name"] for m in msgs) == ["a", "a", "b"]
    assert len({(m["pod"]["metadata"]["uid"], m["pod"]["metadata"]["resourceVersion"]) for m in msgs}) == 3


def test_large_pods_split_batches_under_256k(kube, sqs, queues, start_watcher):
    pod_url, _ = queues
    big = "x" * (70 * 1024)
    for i in range(8):
        p = pending_pod(f"big{i}")
        p["metadata"]["annotations"] = {"blob": big}
        kube.store.create("pods", p)
    huge = pending_pod("huge")
    huge["metadata"]["annotations"] = {"blob": "y" * (300 * 1024)}
    kube.store.create("pods", huge)
    with start_watcher(pod_url, flush_interval=0.5) as w:
        w.wait(lambda s: s.messages_sent >= 9)
    msgs = drain(sqs, pod_url)
    assert _names(msgs) == sorted([f"default/big{i}" for i in range(8)] + ["default/huge"])
    # 3 bodies of ~70 KiB fit in 256 KiB, 4 do not: 8 big pods need at least 3 batches
    assert w.stats.batches_sent >= 3
    h = next(m for m in msgs if m["pod"]["metadata"]["name"] == "huge")
    assert h["truncated"] == ["metadata.annotations"] and "annotations" not in h["pod"]["metadata"]
    assert all(len(json.dumps(m).encode()) <= MAX_MESSAGE_BYTES for m in msgs)


def test_resume_from_last_resource_version_after_dropped_stream(kube, sqs, queues, start_watcher):
    pod_url, _ = queues
    kube.store.create("pods", pending_pod("a"))
    with start_watcher(pod_url) as w:
        w.wait(lambda s: s.messages_sent >= 1)
        w.wait(lambda s: kube.open_watches >= 1)
        rv_before = kube.store.resource_version
        kube.drop_watches()
        kube.store.create("pods", pending_pod("b"))
        w.wait(lambda s: s.messages_sent >= 2)
        assert w.stats.lists == 1  # resumed, not relisted
        assert w.stats.connect_errors + w.stats.watch_restarts >= 1
    resumed = [p for (_m, p, _c) in kube.requests("GET", r"watch=true") if f"resourceVersion={rv_before}" in p]
    assert resumed, kube.requests("GET", "watch=true")
    assert sorted(m["pod"]["metadata"]["name"] for m in drain(sqs, pod_url)) == ["a", "b"]


@pytest.mark.parametrize("official", [False, True], ids=["own-client", "official-client"])
def test_relist_on_410_gone(sqs, queues, start_watcher, official):
    pod_url, event_url = queues
    kube = KubeAPIServer(history_size=3)
    kube.start()
    try:
        kube.store.create("pods", pending_pod("a"))
        kube.store.create("pods", pending_pod("gone-during-gap", spec={"nodeName": "n1"}))
        with start_watcher(pod_url, event_url, host=kube.url, official=official) as w:
            w.wait(lambda s: s.messages_sent >= 1 and kube.open_watches >= 2)
            # keep the watcher out while more changes than the history holds happen
            kube.add_fault(503, times=10**6, path=r"watch=true")
            kube.drop_watches()
            w.wait(lambda s: s.api_errors >= 1)
            for i in range(5):
                kube.store.create("pods", pending_pod(f"n{i}"))
            kube.store.delete("pods", "gone-during-gap", "default")
            kube.clear_faults()
            w.wait(lambda s: s.relists_410 >= 1 and s.lists >= 3 and s.pods_forwarded >= 6)
            w.wait(lambda s: s.messages_sent >= 6 + 1)
        pods = drain(sqs, pod_url)
        assert sorted(m["pod"]["metadata"]["name"] for m in pods) == ["a", "n0", "n1", "n2", "n3", "n4"]
        events = drain(sqs, event_url)
        deleted = [e for e in events if e["type"] == "pod-deleted"]
        assert [e["pod"]["name"] for e in deleted] == ["gone-during-gap"]
        assert deleted[0]["pod"]["nodeName"] == "n1"
    finally:
        kube.stop()


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_backoff_on_connection_refused_then_connects(sqs, queues, start_watcher):
    pod_url, _ = queues
    port = _free_port()
    with start_watcher(pod_url, host=f"http://127.0.0.1:{port}") as w:
        w.wait(lambda s: s.connect_errors >= 3)
        assert w.stats.lists == 0
        kube = KubeAPIServer(port=port)
        kube.start()
        try:
            kube.store.create("pods", pending_pod("a"))
            w.wait(lambda s: s.messages_sent >= 1)
        finally:
            w.stop.set()
            w.thread.join(timeout=10)
            kube.stop()
    assert [m["pod"]["metadata"]["name"] for m in drain(sqs, pod_url)] == ["a"]


@pytest.mark.parametrize("official", [False, True], ids=["own-client", "official-client"])
def test_api_errors_are_retried(kube, sqs, queues, start_watcher, official):
    pod_url, _ = queues
    kube.store.create("pods", pending_pod("a"))
    kube.add_fault(500, times=2, method="GET", path=r"/api/v1/pods\?")
    with start_watcher(pod_url, official=official) as w:
        w.wait(lambda s: s.messages_sent >= 1)
    assert w.stats.api_errors >= 2
    assert "HTTP 500" in w.stats.last_error
    assert [m["pod"]["metadata"]["name"] for m in drain(sqs, pod_url)] == ["a"]


def test_node_and_pod_lifecycle_events(kube, sqs, queues, start_watcher):
    pod_url, event_url = queues
    from karpenter_lambda.sim.nodes import make_node, set_node_ready

    kube.store.create("nodes", make_node("n1", "aws:///us-east-1a/i-1", "m5.large", "us-east-1a", {"cpu": "2", "memory": "8Gi", "pods": "29"}))
    kube.store.create("pods", pending_pod("p"))
    with start_watcher(pod_url, event_url) as w:
        w.wait(lambda s: s.events_forwarded >= 1 and s.messages_sent >= 2)
        set_node_ready(kube.store, "n1")
        w.wait(lambda s: s.events_forwarded >= 2)
        # a change that matters to nobody (an annotation) sends nothing
        kube.store.patch("nodes", "n1", {"metadata": {"annotations": {"heartbeat": "1"}}})
        kube.store.bind("default", "p", "n1")
        w.wait(lambda s: s.events_forwarded >= 3)
        kube.store.delete("pods", "p", "default")
        kube.store.delete("nodes", "n1")
        w.wait(lambda s: s.events_forwarded >= 5)
        w.wait(lambda s: s.messages_sent >= 1 + 5)
    events = drain(sqs, event_url)
    kinds = [(e["type"], e.get("event")) for e in events]
    assert kinds.count(("node", "ADDED")) == 1 and kinds.count(("node", "MODIFIED")) == 1 and kinds.count(("node", "DELETED")) == 1
    added = next(e for e in events if e.get("event") == "ADDED")
    modified = next(e for e in events if e.get("event") == "MODIFIED")
    assert added["node"]["ready"] == "False" and modified["node"]["ready"] == "True"
    assert added["node"]["providerID"] == "aws:///us-east-1a/i-1"
    assert added["node"]["labels"]["node.kubernetes.io/instance-type"] == "m5.large"
    bound = next(e for e in events if e["type"] == "pod-bound")
    assert bound["pod"]["name"] == "p" and bound["pod"]["nodeName"] == "n1"
    assert any(e["type"] == "pod-deleted" and e["pod"]["name"] == "p" for e in events)


def test_sqs_failed_entries_are_retried(kube, sqs, queues, start_watcher):
    pod_url, _ = queues
    calls = {"n": 0}

    def fail_first(params, **_):
        calls["n"] += 1
        if calls["n"] == 1:  # SQS answers: every entry failed server-side
            return {
                "Successful": [],
                "Failed": [{"Id": e["Id"], "SenderFault": False, "Code": "InternalError", "Message": "try again"} for e in params["Entries"]],
            }
        return None

    sqs.meta.events.register("before-call.sqs.SendMessageBatch", fail_first)
    for i in range(3):
        kube.store.create("pods", pending_pod(f"p{i}"))
    with start_watcher(pod_url) as w:
        w.wait(lambda s: s.messages_sent >= 3)
    assert w.stats.entries_retried >= 3
    assert sorted(m["pod"]["metadata"]["name"] for m in drain(sqs, pod_url)) == ["p0", "p1", "p2"]


def test_synced_resource_version_and_unsent_gauge_say_when_the_watcher_caught_up(kube, sqs, queues, start_watcher):
    """Stats.synced + messages_unsent == 0 is the simulator's signal that every pod change so far reached SQS."""
    pod_url, _ = queues

    def caught_up(s) -> bool:
        rv = s.synced.get("pods")
        return rv is not None and int(rv) >= kube.store.last_change("pods") and s.messages_unsent == 0

    with start_watcher(pod_url, flush_interval=0.3) as w:
        w.wait(lambda s: s.lists >= 1)
        assert w.stats.synced["pods"] == str(kube.store.resource_version)    # the list's resourceVersion
        for i in range(3):
            kube.store.create("pods", pending_pod(f"q{i}"))
        kube.store.create("nodes", {"metadata": {"name": "n-other"}})          # not a pod: moves no pod target
        w.wait(caught_up)
        # caught up means sent: all three are in the queue now, although the sender batches for 0.3 s
        assert w.stats.messages_sent == 3 and w.stats.messages_unsent == 0
        assert _names(drain(sqs, pod_url)) == ["default/q0", "default/q1", "default/q2"]
        assert int(w.stats.synced["pods"]) >= kube.store.last_change("pods")
