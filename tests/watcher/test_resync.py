"""Resync: pods that stay pending with an unchanged resourceVersion are re-sent (issue 4 item 1).

The watcher's clock is injected (FakeClock); its resync thread polls it every 20 ms of real time,
so nothing here sleeps.
"""

import json
import threading

import pytest

from karpenter_lambda.sim.kubeapi import KubeAPIServer
from karpenter_lambda_watcher import MAX_MESSAGE_BYTES, pod_message, run, slim_pod
from karpenter_lambda_watcher.watcher import _PodHandler, Stats

from watcher_testutil import FakeClock, drain, pending_pod

RESYNC = dict(resync_seconds=60, resync_poll=0.02)


def _pods(msgs):
    return sorted((m["pod"]["metadata"]["name"], bool(m.get("resync"))) for m in msgs if m["type"] == "pod")


def _ticked(w, clock, seconds):
    """Advance the clock, then wait until the resync thread has looked at it at least twice."""
    clock.advance(seconds)
    seen = w.stats.resync_checks
    w.wait(lambda s: s.resync_checks >= seen + 2)


def test_unchanged_pending_pod_is_resent_after_the_interval(kube, sqs, queues, start_watcher):
    pod_url, event_url = queues
    clock = FakeClock()
    for name in ("stuck", "bound-later", "deleted-later", "nominated-later"):
        kube.store.create("pods", pending_pod(name))
    with start_watcher(pod_url, event_url, clock=clock, **RESYNC) as w:
        w.wait(lambda s: s.messages_sent >= 4 and s.pods_pending == 4)
        first = drain(sqs, pod_url)
        assert _pods(first) == [("bound-later", False), ("deleted-later", False), ("nominated-later", False), ("stuck", False)]
        assert all("resync" not in m for m in first)
        rv = {m["pod"]["metadata"]["name"]: m["pod"]["metadata"]["resourceVersion"] for m in first}

        # not due yet: 59 s after the send
        _ticked(w, clock, 59)
        assert w.stats.pods_resynced == 0

        # in between: one is bound, one deleted, one nominated by the kube-scheduler (no longer provisionable)
        kube.store.bind("default", "bound-later", "n1")
        kube.store.delete("pods", "deleted-later", "default")
        kube.store.patch("pods", "nominated-later", {"status": {"nominatedNodeName": "n2"}}, "default", subresource="status")
        w.wait(lambda s: s.pods_pending == 1 and s.events_forwarded >= 2 and s.messages_sent >= 4 + 2)

        _ticked(w, clock, 1)  # 60 s: due
        w.wait(lambda s: s.pods_resynced == 1 and s.messages_sent >= 7)
        _ticked(w, clock, 30)  # just re-sent: not due again for 60 s
        assert w.stats.pods_resynced == 1
        again = drain(sqs, pod_url)
        _ticked(w, clock, 30)
        w.wait(lambda s: s.pods_resynced == 2 and s.messages_sent >= 8)
    assert _pods(again) == [("stuck", True)]
    m = again[0]
    assert m["resync"] is True and m["type"] == "pod" and m["cluster"] == "test-cluster"
    # the same pod state as the first send, with a fresh sentAt
    assert m["pod"]["metadata"]["resourceVersion"] == rv["stuck"]
    assert m["pod"]["spec"]["containers"] == [{"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]
    assert _pods(drain(sqs, pod_url)) == [("stuck", True)]
    assert w.stats.pods_forwarded == 4  # resyncs are counted apart


def test_a_changed_pod_is_forwarded_normally_and_its_timer_restarts(kube, sqs, queues, start_watcher):
    pod_url, _ = queues
    clock = FakeClock()
    kube.store.create("pods", pending_pod("a"))
    with start_watcher(pod_url, clock=clock, **RESYNC) as w:
        w.wait(lambda s: s.messages_sent >= 1)
        _ticked(w, clock, 40)
        kube.store.patch("pods", "a", {"metadata": {"labels": {"v": "2"}}}, "default")
        w.wait(lambda s: s.pods_forwarded >= 2 and s.messages_sent >= 2)
        _ticked(w, clock, 25)  # 65 s after the first send, 25 after the update
        assert w.stats.pods_resynced == 0
        _ticked(w, clock, 35)
        w.wait(lambda s: s.pods_resynced == 1 and s.messages_sent >= 3)
    msgs = drain(sqs, pod_url)
    assert [bool(m.get("resync")) for m in msgs] == [False, False, True]
    assert msgs[2]["pod"]["metadata"]["labels"] == {"app": "a", "v": "2"}
    assert msgs[2]["pod"]["metadata"]["resourceVersion"] == msgs[1]["pod"]["metadata"]["resourceVersion"]


def test_resync_zero_disables(kube, sqs, queues, start_watcher):
    pod_url, _ = queues
    clock = FakeClock()
    kube.store.create("pods", pending_pod("a"))
    with start_watcher(pod_url, clock=clock, resync_seconds=0, resync_poll=0.02) as w:
        w.wait(lambda s: s.messages_sent >= 1)
        clock.advance(10_000)
        kube.store.create("pods", pending_pod("b"))  # something to wait on
        w.wait(lambda s: s.messages_sent >= 2)
    assert w.stats.pods_resynced == 0 and w.stats.resync_checks == 0 and w.stats.pods_pending == 0
    assert _pods(drain(sqs, pod_url)) == [("a", False), ("b", False)]


def test_map_survives_a_relist(sqs, queues, start_watcher):
    pod_url, _ = queues
    clock = FakeClock()
    kube = KubeAPIServer(history_size=3)
    kube.start()
    try:
        kube.store.create("pods", pending_pod("kept"))
        kube.store.create("pods", pending_pod("gone-during-gap"))
        kube.store.create("pods", pending_pod("bound-during-gap"))
        with start_watcher(pod_url, host=kube.url, clock=clock, **RESYNC) as w:
            w.wait(lambda s: s.messages_sent >= 3 and s.pods_pending == 3 and kube.open_watches >= 1)
            drain(sqs, pod_url)
            _ticked(w, clock, 30)
            # keep the watcher out while more changes than the history holds happen -> 410 -> relist
            kube.add_fault(503, times=10**6, path=r"watch=true")
            kube.drop_watches()
            w.wait(lambda s: s.api_errors >= 1)
            kube.store.delete("pods", "gone-during-gap", "default")
            kube.store.bind("default", "bound-during-gap", "n1")
            for i in range(4):
                kube.store.create("pods", pending_pod(f"new{i}"))
            kube.clear_faults()
            w.wait(lambda s: s.relists_410 >= 1 and s.pods_forwarded >= 7 and s.pods_pending == 5)
            w.wait(lambda s: s.messages_sent >= 7)
            assert _pods(drain(sqs, pod_url)) == [(f"new{i}", False) for i in range(4)]
            # "kept" keeps its last send (t=0) through the relist: due at t=60, the new pods at t=90
            _ticked(w, clock, 30)
            w.wait(lambda s: s.pods_resynced == 1 and s.messages_sent >= 8)
            assert _pods(drain(sqs, pod_url)) == [("kept", True)]
            _ticked(w, clock, 30)
            w.wait(lambda s: s.pods_resynced == 5 and s.messages_sent >= 12)
            assert _pods(drain(sqs, pod_url)) == [(f"new{i}", True) for i in range(4)]
    finally:
        kube.stop()


def test_resync_batches_respect_sqs_limits(kube, sqs, queues, start_watcher):
    pod_url, _ = queues
    clock = FakeClock()
    big = "x" * (70 * 1024)
    for i in range(5):
        p = pending_pod(f"big{i}")
        p["metadata"]["annotations"] = {"blob": big}
        kube.store.create("pods", p)
    for i in range(12):
        kube.store.create("pods", pending_pod(f"small{i:02d}"))
    with start_watcher(pod_url, clock=clock, **RESYNC) as w:
        w.wait(lambda s: s.messages_sent >= 17)
        drain(sqs, pod_url)
        batches = w.stats.batches_sent
        _ticked(w, clock, 60)
        w.wait(lambda s: s.pods_resynced == 17 and s.messages_sent >= 34)
    msgs = drain(sqs, pod_url)
    assert len(msgs) == 17 and all(m["resync"] is True for m in msgs)
    # 5 bodies of ~70 KiB need >= 2 requests under 256 KiB; 17 entries need >= 2 requests of <= 10
    assert w.stats.batches_sent - batches >= 3
    assert all(len(json.dumps(m).encode()) <= MAX_MESSAGE_BYTES for m in msgs)


class _CollectingSender:
    def __init__(self):
        self.sent = []

    def submit(self, url, body, key=""):
        self.sent.append((url, json.loads(body), key))

    def backlog(self):
        return 0


def test_map_is_bounded_oldest_dropped(caplog):
    clock = FakeClock()
    stats = Stats()
    sender = _CollectingSender()
    h = _PodHandler("c", sender, "q", None, stats, dedupe_size=100, resync_seconds=60, resync_max_pods=3, clock=clock)
    h.on_list_begin()
    h.on_list_end()
    for i in range(5):
        p = pending_pod(f"p{i}")
        p["metadata"].update({"uid": f"u{i}", "resourceVersion": str(10 + i)})
        clock.advance(1)
        with caplog.at_level("WARNING", logger="karpenter_lambda_watcher"):
            h.on_event("ADDED", p)
    assert stats.pods_pending == 3 and stats.resync_evicted == 2
    assert any("resync map full" in r.getMessage() for r in caplog.records)
    sender.sent.clear()
    clock.advance(100)
    assert h.resync_due() == 3
    assert [b["pod"]["metadata"]["name"] for _u, b, _k in sender.sent] == ["p2", "p3", "p4"]
    # every re-send has its own key (a FIFO queue would otherwise drop it as a duplicate)
    assert len({k for _u, _b, k in sender.sent}) == 3 and all("/resync-" in k for _u, _b, k in sender.sent)


def test_pod_message_resync_key_and_room():
    p = pending_pod("x")
    p["metadata"]["uid"] = "u"
    normal, resync = json.loads(pod_message(p, "c")), json.loads(pod_message(p, "c", resync=True))
    assert "resync" not in normal and resync["resync"] is True
    assert {k: v for k, v in resync.items() if k not in ("resync", "sentAt")} == {k: v for k, v in normal.items() if k != "sentAt"}
    # a pod whose plain body would be 5 bytes under the limit: its annotations are dropped so that
    # the re-send (14 bytes more) fits too
    p["metadata"]["annotations"] = {"a": ""}
    base = len(json.dumps({"type": "pod", "cluster": "c", "sentAt": "2026-01-01T00:00:00.00Z", "pod": slim_pod(p)}, separators=(",", ":")))
    p["metadata"]["annotations"] = {"a": "z" * (MAX_MESSAGE_BYTES - 5 - base)}
    for body in (pod_message(p, "c"), pod_message(p, "c", resync=True)):
        assert body is not None and len(body.encode()) <= MAX_MESSAGE_BYTES
        assert json.loads(body)["truncated"] == ["metadata.annotations"]


@pytest.mark.parametrize(
    "kw,msg",
    [
        ({"resync_seconds": -1}, "resync_seconds (RESYNC_SECONDS) must be a number >= 0"),
        ({"resync_seconds": "60"}, "resync_seconds (RESYNC_SECONDS) must be a number >= 0"),
        ({"resync_max_pods": 0}, "resync_max_pods (RESYNC_MAX_PODS) must be an integer >= 1"),
        ({"resync_poll": 0}, "resync_poll must be a number > 0"),
    ],
)
def test_bad_resync_arguments_are_refused(kw, msg):
    with pytest.raises(ValueError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        run(None, None, "q", "c", threading.Event(), **kw)


def test_provisioner_parses_resync_messages_like_first_sends():
    from karpenter_lambda.controllers.messages import parse_body

    p = pending_pod("x")
    p["metadata"]["uid"] = "u-1"
    first = parse_body(pod_message(p, "prod"), cluster="prod")
    again = parse_body(pod_message(p, "prod", resync=True), cluster="prod")
    assert again is not None and again.uid == first.uid == "u-1"
    assert again.pod == first.pod and again.key == "default/x"
