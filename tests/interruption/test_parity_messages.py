"""Parity with Karpenter's interruption controller on bodies it cannot fully use.

* An AWS Health scheduled change with an affected entity lacking a usable ``entityValue``: Karpenter reads the missing
  value as "" (matching no instance) and still acts on the other instances of the event; an event left with no
  instance is a no-op, acknowledged (not malformed).
* A body whose parsing fails with anything (e.g. ``RecursionError`` from deeply nested JSON): Karpenter deletes every
  message it cannot parse; here it is logged with its message id, counted as malformed and fails alone (the DLQ
  keeps it after the queue's maxReceiveCount: nothing is lost).  A failure
  while *acting* on a parsed event is still returned for redelivery."""

import json

import pytest

from karpenter_lambda.controllers.interrupt import Interruption
from karpenter_lambda.controllers.interruption_messages import MalformedEvent, parse_message

from .interruption_world import health_scheduled_change, state_change

T = "2027-06-01T12:00:00Z"


def test_unusable_entities_are_skipped_and_the_others_kept():
    doc = health_scheduled_change(["i-01"], T)
    doc["detail"]["affectedEntities"] = [
        {"entityValue": "i-01"}, {"status": "IMPAIRED"}, {"entityValue": ""}, {"entityValue": 7}, "i-03",
        {"entityValue": None}, {"entityValue": "vol-0123"}, {"entityValue": "i-02"}]
    m = parse_message(json.dumps(doc))
    assert (m.kind, m.instance_ids) == ("ScheduledChange", ("i-01", "i-02"))
    assert m.skipped == ("detail.affectedEntities[1].entityValue: required string missing",
                         "detail.affectedEntities[2].entityValue: required string missing",
                         "detail.affectedEntities[3].entityValue: must be a string, got int",
                         "detail.affectedEntities[4]: must be an object, got str",
                         "detail.affectedEntities[5].entityValue: required string missing")
    assert m.note is None


@pytest.mark.parametrize("entities", [[{"status": "IMPAIRED"}], [{"entityValue": ""}, 3], []])
def test_an_event_with_no_usable_entity_is_a_noop_not_malformed(entities):
    doc = health_scheduled_change(["i-01"], T)
    doc["detail"]["affectedEntities"] = entities
    m = parse_message(json.dumps(doc))
    assert m.instance_ids == () and "names no EC2 instance" in m.note
    # no list at all reads the same (Karpenter unmarshals a missing list as empty); a list of another type is malformed
    del doc["detail"]["affectedEntities"]
    m = parse_message(json.dumps(doc))
    assert m.instance_ids == () and "names no EC2 instance" in m.note
    doc["detail"]["affectedEntities"] = "i-01"
    with pytest.raises(MalformedEvent, match="^detail.affectedEntities: must be a list, got str"):
        parse_message(json.dumps(doc))


def test_a_body_too_deeply_nested_to_decode_is_malformed():
    with pytest.raises(MalformedEvent, match="^body is not decodable JSON"):
        parse_message("[" * 100_000 + "]" * 100_000)


def test_the_valid_instances_of_an_event_with_an_unusable_entity_are_acted_on(iw):
    w = iw.w
    a, b = iw.nodes_with_pods([1, 1], cpu="1500m")
    iid = a["instance"]["InstanceId"]
    doc = health_scheduled_change([iid], w.clock.isoformat())
    doc["detail"]["affectedEntities"] = [{"status": "IMPAIRED"}, {"entityValue": iid}]
    assert iw.deliver(doc) == {"batchItemFailures": []}
    r = iw.report
    assert [(d["nodeClaim"], d["reason"]) for d in r.disrupted] == [(a["nodeClaim"].name, "ScheduledChange")]
    assert r.malformed == [] and r.metric_counts()["InterruptionMessagesMalformed"] == 0
    mid = iw.last_messages[0]["MessageId"]
    logs = w.logs.getvalue()
    assert "interruption event entity skipped" in logs and mid in logs
    assert "detail.affectedEntities[0].entityValue: required string missing" in logs
    assert iw.queue_depth() == 0 and iw.queue_depth(iw.dlq_url) == 0


def test_an_event_with_no_usable_entity_is_acknowledged_as_a_noop(iw):
    w = iw.w
    (a,) = iw.nodes_with_pods([1])
    doc = health_scheduled_change([a["instance"]["InstanceId"]], w.clock.isoformat())
    doc["detail"]["affectedEntities"] = [{"status": "IMPAIRED"}, {"entityValue": ""}]
    assert iw.deliver(doc) == {"batchItemFailures": []}
    r = iw.report
    assert r.disrupted == [] and r.malformed == [] and r.errors == []
    (ignored,) = r.ignored
    assert ignored["kind"] == "ScheduledChange" and "names no EC2 instance" in ignored["reason"]
    assert iw.queue_depth() == 0 and iw.queue_depth(iw.dlq_url) == 0


def test_a_body_that_fails_to_parse_in_any_way_fails_alone(iw, monkeypatch):
    w = iw.w
    (a,) = iw.nodes_with_pods([1])
    iid = a["instance"]["InstanceId"]
    iw.send_raw("[" * 100_000)                        # ~100 KB: the JSON decoder raises RecursionError
    iw.put(state_change(iid, "stopping", w.clock.isoformat()))
    event = iw.receive(expect=2)
    bad = next(r["messageId"] for r in event["Records"] if r["body"].startswith("[["))
    assert iw.invoke(event) == {"batchItemFailures": [{"itemIdentifier": bad}]}
    r = iw.report
    assert [(d["nodeClaim"], d["reason"]) for d in r.disrupted] == [(a["nodeClaim"].name, "InstanceStopped")]
    assert [(m["messageId"], m["errorClass"]) for m in r.malformed] == [(bad, "MalformedEvent")]
    logs = w.logs.getvalue()
    assert bad in logs and "recursion" in logs.lower()
    assert iw.queue_depth() == 1 and iw.queue_depth(iw.dlq_url) == 0      # redelivered, then to the DLQ
    iw.receive(expect=1)   # (set aside: its visibility is extended; the next body is read alone)

    # any other exception raised while parsing is treated the same way (a record of its own, not the batch)
    def boom(body):
        raise RuntimeError("parser bug")

    from karpenter_lambda.controllers import interruption_messages
    monkeypatch.setattr(interruption_messages, "parse_message", boom)   # what the handler's body parser calls
    iw.send_raw("{}")
    event = iw.receive(expect=1)
    mid = event["Records"][0]["messageId"]
    assert iw.invoke(event) == {"batchItemFailures": [{"itemIdentifier": mid}]}
    (m,) = iw.report.malformed
    assert m["messageId"] == mid and "RuntimeError: parser bug" in m["error"]


def test_a_failure_while_acting_is_still_retried(iw, monkeypatch):
    w = iw.w
    (a,) = iw.nodes_with_pods([1])

    def fail(self, messages):
        raise RecursionError("while acting")

    monkeypatch.setattr(Interruption, "handle", fail)
    iw.put(state_change(a["instance"]["InstanceId"], "stopping", w.clock.isoformat()))
    event = iw.receive(expect=1)
    mid = event["Records"][0]["messageId"]
    assert iw.invoke(event) == {"batchItemFailures": [{"itemIdentifier": mid}]}
    assert iw.report.malformed == []
