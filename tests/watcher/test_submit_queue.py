"""The watcher's submit queue is bounded (issue 21 defect 10): when the SQS sender falls behind, new messages are
dropped instead of growing memory without limit; the drop is counted and logged by pod name, handed to on_drop (the
dedupe key is forgotten), and the pods go out later (moto SQS)."""

import json
import logging

import pytest

from karpenter_lambda_watcher import Stats
from karpenter_lambda_watcher.watcher import SqsBatchSender


def _body(name: str) -> str:
    return json.dumps({"type": "pod", "cluster": "c", "pod": {"metadata": {"namespace": "default", "name": name}}})


def test_a_full_submit_queue_drops_counts_and_names_the_pods(sqs, queues, caplog):
    pod_url, _ = queues
    stats = Stats()
    forgotten = []
    sender = SqsBatchSender(sqs, stats, flush_interval=0.01, on_drop=lambda url, key: forgotten.append(key),
                            max_queue=3, drop_log_interval=0.0)
    caplog.set_level(logging.WARNING, logger="karpenter_lambda_watcher")
    # the sender thread is not running yet: as if SQS were too slow to keep up
    accepted = [sender.submit(pod_url, _body(f"p{i}"), key=f"uid{i}/1") for i in range(5)]
    assert accepted == [True, True, True, False, False]
    assert sender.backlog() == 3
    assert stats.as_dict()["messages_dropped"] == 2 and stats.as_dict()["submit_dropped"] == 2
    text = "\n".join(r.getMessage() + json.dumps(getattr(r, "json", {})) for r in caplog.records)
    assert "submit queue full (3 messages)" in text and "default/p3" in text and "default/p4" in text
    sender.start()
    sender.close()
    assert forgotten == ["uid3/1", "uid4/1"]           # handed to on_drop by the sender thread
    got = sqs.receive_message(QueueUrl=pod_url, MaxNumberOfMessages=10)["Messages"]
    assert sorted(json.loads(m["Body"])["pod"]["metadata"]["name"] for m in got) == ["p0", "p1", "p2"]


def test_max_queue_is_checked():
    with pytest.raises(ValueError, match="SUBMIT_QUEUE_MAX"):
        SqsBatchSender(None, Stats(), max_queue=0)


def test_pods_dropped_by_a_full_queue_are_re_sent_by_the_resync(sqs, queues):
    from karpenter_lambda_watcher.watcher import _PodHandler

    from watcher_testutil import FakeClock, pending_pod

    pod_url, _ = queues
    clock, stats = FakeClock(), Stats()
    sender = SqsBatchSender(sqs, stats, flush_interval=0.01, max_queue=2)
    h = _PodHandler("c", sender, pod_url, None, stats, dedupe_size=100, resync_seconds=60, clock=clock)
    sender.on_drop = h.forget
    h.on_list_begin()
    h.on_list_end()
    for i in range(5):   # the sender is not running yet (SQS too slow): 2 queued, 3 dropped
        p = pending_pod(f"p{i}")
        p["metadata"].update({"uid": f"u{i}", "resourceVersion": "1"})
        h.on_event("ADDED", p)
    assert stats.as_dict()["submit_dropped"] == 3 and stats.as_dict()["pods_pending"] == 5
    sender.start()
    assert stats.wait_for(lambda s: s.messages_sent >= 2)
    names: set[str] = set()
    for _ in range(10):   # each resync sends what the queue has room for; the pods sent least recently first
        clock.advance(61)
        assert 0 < h.resync_due() <= 2
        assert stats.wait_for(lambda s: sender.backlog() == 0)
        names |= _received(sqs, pod_url)
        if len(names) == 5:
            break
    sender.close()
    assert sorted(names) == ["p0", "p1", "p2", "p3", "p4"]
    assert stats.as_dict()["submit_dropped"] == 3     # the resync never overfilled the queue


def _received(sqs, url) -> set[str]:
    names = set()
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if not got:
            return names
        names |= {json.loads(m["Body"])["pod"]["metadata"]["name"] for m in got}
        sqs.delete_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                                                        for i, m in enumerate(got)])
