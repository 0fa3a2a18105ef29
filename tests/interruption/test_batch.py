"""Batch behaviour: a bad body is logged and fails alone (never the others), counted once, and after maxReceiveCount
is kept in the DLQ; a record whose action failed for a transient reason (EC2 throttling, Kubernetes 429) is returned
in batchItemFailures, redelivered by SQS, and after maxReceiveCount lands in the DLQ."""

import contextlib
import json

from botocore.exceptions import ClientError
from karpenter_lambda.api.labels import has_disrupted_taint
from karpenter_lambda.controllers import runtime

from .interruption_world import spot_warning, state_change


def throttle(ec2, operation: str, code: str = "RequestLimitExceeded"):
    """Every ``operation`` call on this client fails with ``code`` (a botocore event hook; no retries by botocore)."""
    def hook(**kwargs):
        raise ClientError({"Error": {"Code": code, "Message": "Request limit exceeded."},
                           "ResponseMetadata": {"HTTPStatusCode": 503}}, operation)

    ec2.meta.events.register(f"before-call.ec2.{operation}", hook)
    return lambda: ec2.meta.events.unregister(f"before-call.ec2.{operation}", hook)


def test_malformed_and_unknown_bodies_never_fail_the_good_record(iw):
    w = iw.w
    (a,) = iw.nodes_with_pods([1])
    iid = a["instance"]["InstanceId"]
    unknown = spot_warning(iid, w.clock.isoformat())
    unknown["detail-type"] = "EC2 Instance Launch Successful"
    iw.send_raw("{not json", json.dumps(unknown))
    iw.put(state_change(iid, "stopping", w.clock.isoformat()))
    event = iw.receive(expect=3)
    ids = {json.loads(r["body"]).get("detail-type") if r["body"].startswith("{\"") else "bad": r["messageId"]
           for r in event["Records"]}
    bad = sorted([ids["bad"], ids["EC2 Instance Launch Successful"]])
    assert iw.invoke(event) == {"batchItemFailures": [{"itemIdentifier": i} for i in bad]}
    r = iw.report
    assert [(d["nodeClaim"], d["reason"]) for d in r.disrupted] == [(a["nodeClaim"].name, "InstanceStopped")]
    assert sorted((m["messageId"], m["errorClass"]) for m in r.malformed) == \
        sorted([(ids["bad"], "MalformedEvent"), (ids["EC2 Instance Launch Successful"], "UnknownEventType")])
    assert r.metric_counts()["InterruptionMessagesMalformed"] == 2
    logs = w.logs.getvalue()
    assert ids["bad"] in logs and ids["EC2 Instance Launch Successful"] in logs and "body is not JSON" in logs
    # nothing lost: the good record acted and is gone; the bad ones are redelivered (counted once, not again) and
    # after the queue's maxReceiveCount (3) SQS moves them to the DLQ, where an operator can read them
    for receive in (2, 3):
        again = iw.receive(expect=2)
        assert {x["attributes"]["ApproximateReceiveCount"] for x in again["Records"]} == {str(receive)}
        assert iw.invoke(again) == {"batchItemFailures": [{"itemIdentifier": i} for i in bad]}
        assert iw.report.malformed == []
    iw.receive(expect=0)                                     # the 4th receive: SQS has moved them
    assert iw.queue_depth() == 0 and iw.queue_depth(iw.dlq_url) == 2


def test_throttling_is_retried_then_dead_lettered(iw):
    w = iw.w
    (a,) = iw.nodes_with_pods([1])
    iid, name = a["instance"]["InstanceId"], a["nodeClaim"].name
    w.ec2.terminate_instances(InstanceIds=[iid])
    from karpenter_lambda.sim.nodes import set_node_ready

    set_node_ready(w.server, a["node"]["metadata"]["name"], False)
    stop = throttle(w.ec2, "DescribeInstances")
    iw.put(state_change(iid, "terminated", w.clock.isoformat()))
    event = iw.receive(expect=1)
    mid = event["Records"][0]["messageId"]
    assert iw.invoke(event) == {"batchItemFailures": [{"itemIdentifier": mid}]}
    (err,) = iw.report.errors
    assert err["transient"] is True and "RequestLimitExceeded" in err["error"] and err["messageId"] == mid
    assert w.store.get("NodeClaim", name) is not None  # not removed yet: the record comes back
    for _ in range(2):  # redelivered until maxReceiveCount (3) ...
        assert iw.invoke(iw.receive(expect=1)) == {"batchItemFailures": [{"itemIdentifier": mid}]}
    iw.receive(expect=0)  # ... then SQS moves it to the DLQ
    assert iw.queue_depth(iw.dlq_url) == 1
    stop()


def test_throttling_then_success_on_redelivery(iw):
    w = iw.w
    (a,) = iw.nodes_with_pods([1])
    iid, name = a["instance"]["InstanceId"], a["nodeClaim"].name
    w.ec2.terminate_instances(InstanceIds=[iid])
    stop = throttle(w.ec2, "DescribeInstances", code="Throttling")
    iw.put(state_change(iid, "terminated", w.clock.isoformat()))
    assert iw.invoke(iw.receive(expect=1))["batchItemFailures"]
    stop()
    assert iw.invoke(iw.receive(expect=1)) == {"batchItemFailures": []}
    assert iw.report.deleted == [{"nodeClaim": name, "reason": "InstanceTerminated"}]
    assert w.store.get("NodeClaim", name) is None and iw.queue_depth() == 0


def test_throttled_replacement_launch_is_retried_without_a_second_deletion(iw):
    w = iw.w
    (a,) = iw.nodes_with_pods([2])
    iid, name = a["instance"]["InstanceId"], a["nodeClaim"].name
    stop = throttle(w.ec2, "CreateFleet")
    iw.put(spot_warning(iid, w.clock.isoformat()))
    event = iw.receive(expect=1)
    assert iw.invoke(event) == {"batchItemFailures": [{"itemIdentifier": event["Records"][0]["messageId"]}]}
    r = iw.report
    # the instance is going away: the drain is not held back by the failed launch
    assert [d["replacements"] for d in r.disrupted] == [[]] and r.errors[0]["transient"] is True
    deleting_at = w.store.get("NodeClaim", name).metadata["deletionTimestamp"]
    assert len(w.instances()) == 1
    stop()
    assert iw.invoke(iw.receive(expect=1)) == {"batchItemFailures": []}
    r = iw.report
    assert r.disrupted == [] and r.errors == []
    (ignored,) = r.ignored
    assert ignored["reason"] == "NodeClaim already deleting" and len(ignored["replacements"]) == 1
    assert len(w.instances()) == 2
    assert w.store.get("NodeClaim", name).metadata["deletionTimestamp"] == deleting_at


def test_kubernetes_429_is_retried(iw):
    w = iw.w
    (a,) = iw.nodes_with_pods([1])
    iid, name = a["instance"]["InstanceId"], a["nodeClaim"].name
    w.env.kube._sleep = lambda s: None  # the client's own backoff (injectable) would only slow the test down
    w.server.add_fault(429, times=100, method="PATCH", path="/api/v1/nodes/")
    iw.put(state_change(iid, "stopping", w.clock.isoformat()))
    event = iw.receive(expect=1)
    assert iw.invoke(event) == {"batchItemFailures": [{"itemIdentifier": event["Records"][0]["messageId"]}]}
    assert iw.report.errors[0]["transient"] is True
    # the deletion mark comes first, then the taint (so a sweep's stale-taint cleanup never sees the taint of a
    # NodeClaim not yet deleting); the taint failed and the record is retried
    assert w.store.get("NodeClaim", name).metadata.get("deletionTimestamp")
    assert not has_disrupted_taint(w.server.store.get("nodes", a["node"]["metadata"]["name"]))
    w.server.clear_faults()
    assert iw.invoke(iw.receive(expect=1)) == {"batchItemFailures": []}
    assert [x["reason"] for x in iw.report.ignored] == ["NodeClaim already deleting"]
    assert has_disrupted_taint(w.server.store.get("nodes", a["node"]["metadata"]["name"]))   # set by the redelivery


def test_a_failing_controller_returns_every_valid_record(iw):
    w = iw.w
    (a,) = iw.nodes_with_pods([1])
    w.env.kube._sleep = lambda s: None
    w.server.add_fault(503, times=100, method="GET", path="/api/v1/pods")  # the snapshot cannot be loaded
    iw.send_raw("not json")
    iw.put(state_change(a["instance"]["InstanceId"], "stopping", w.clock.isoformat()))
    event = iw.receive(expect=2)
    good = [r["messageId"] for r in event["Records"] if r["body"] != "not json"]
    bad = [r["messageId"] for r in event["Records"] if r["body"] == "not json"]
    assert iw.invoke(event) == {"batchItemFailures": [{"itemIdentifier": i} for i in sorted(good + bad)]}
    assert len(iw.report.malformed) == 1


def test_a_throttled_ec2nodeclass_read_retries_the_record_and_the_node_still_goes(iw):
    """DescribeSubnets throttled while the replacement is worked out: the EC2NodeClass is not "not ready" (nothing is
    decided on it, no pod called unschedulable); the record comes back for the replacement, and the instance's
    deletion and taint are not held back."""
    w = iw.w
    (a,) = iw.nodes_with_pods([2])
    iid, name = a["instance"]["InstanceId"], a["nodeClaim"].name
    w.clock.advance(600)                                   # past the resolver's cache: subnets are read again
    stop = throttle(w.ec2, "DescribeSubnets")
    iw.put(spot_warning(iid, w.clock.isoformat()))
    event = iw.receive(expect=1)
    assert iw.invoke(event) == {"batchItemFailures": [{"itemIdentifier": event["Records"][0]["messageId"]}]}
    r = iw.report
    (err,) = r.errors
    assert err["transient"] is True and "EC2NodeClass default could not be resolved" in err["error"]
    assert [(d["reason"], d["replacements"], d["unschedulable"]) for d in r.disrupted] == [("SpotInterrupted", [], [])]
    assert w.store.get("NodeClaim", name).metadata.get("deletionTimestamp")
    assert has_disrupted_taint(w.server.store.get("nodes", a["node"]["metadata"]["name"]))
    stop()
    assert iw.invoke(iw.receive(expect=1)) == {"batchItemFailures": []}   # the redelivery launches the replacement
    (ignored,) = iw.report.ignored
    assert ignored["reason"] == "NodeClaim already deleting" and len(ignored["replacements"]) == 1


def test_a_failure_working_out_the_replacement_does_not_hold_back_the_deletion(iw):
    """Reading the unavailable offerings (a DynamoDB Query) fails: an exception, not a failed launch.  The NodeClaim
    is still marked deleting and tainted now; the record comes back for the replacement."""
    w = iw.w
    (a,) = iw.nodes_with_pods([2])
    iid, name = a["instance"]["InstanceId"], a["nodeClaim"].name
    cache = w.env.unavailable

    def hook(params=None, **kw):
        body = params.get("body")
        if cache.table_name in (body.decode() if isinstance(body, bytes) else str(body)):   # that table's reads only
            raise ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow down"},
                               "ResponseMetadata": {"HTTPStatusCode": 400}}, "Query")

    cache.client.meta.events.register("before-call.dynamodb.Query", hook)
    iw.put(spot_warning(iid, w.clock.isoformat()))
    event = iw.receive(expect=1)
    assert iw.invoke(event) == {"batchItemFailures": [{"itemIdentifier": event["Records"][0]["messageId"]}]}
    (err,) = iw.report.errors
    assert err["transient"] is True and "ProvisionedThroughputExceededException" in err["error"]
    assert w.store.get("NodeClaim", name).metadata.get("deletionTimestamp")
    assert has_disrupted_taint(w.server.store.get("nodes", a["node"]["metadata"]["name"]))
    cache.client.meta.events.unregister("before-call.dynamodb.Query", hook)
    assert iw.invoke(iw.receive(expect=1)) == {"batchItemFailures": []}
    assert len(w.instances()) == 2                         # the replacement, on the redelivery


def test_an_event_id_never_collides_with_a_bad_body(iw):
    """A hand-sent event whose id is ``invalid#1`` next to a bad body: both are handled (the bad body's key cannot be
    an event id): the event acts, the bad body alone fails."""
    w = iw.w
    (a,) = iw.nodes_with_pods([1])
    ev = state_change(a["instance"]["InstanceId"], "stopping", w.clock.isoformat())
    ev["id"] = "invalid#1"
    iw.send_raw(json.dumps(ev), "{garbage")
    event = iw.receive(expect=2)
    bad = next(r["messageId"] for r in event["Records"] if r["body"] == "{garbage")
    assert iw.invoke(event) == {"batchItemFailures": [{"itemIdentifier": bad}]}
    r = iw.report
    assert [(d["nodeClaim"], d["reason"]) for d in r.disrupted] == [(a["nodeClaim"].name, "InstanceStopped")]
    assert [m["messageId"] for m in r.malformed] == [bad]


def test_a_record_without_a_message_id_is_left_out_and_the_others_proceed(iw):
    """Lambda's SQS event source always sets messageId; a record without one cannot be named in batchItemFailures.
    It is logged and left out instead of failing the whole batch with a KeyError."""
    w = iw.w
    (a,) = iw.nodes_with_pods([1])
    iw.put(state_change(a["instance"]["InstanceId"], "stopping", w.clock.isoformat()))
    event = iw.receive(expect=1)
    event["Records"] += [{"body": "{}", "eventSource": "aws:sqs"}, "not a record"]
    hook = lambda kind, r: iw.reports.append(r) if kind == "interruption" else None  # noqa: E731
    runtime.REPORT_HOOKS.append(hook)
    try:
        with contextlib.redirect_stdout(w.logs):
            resp = iw.handler.handler(event, None)
    finally:
        runtime.REPORT_HOOKS.remove(hook)
    assert resp == {"batchItemFailures": []}
    assert [(d["nodeClaim"], d["reason"]) for d in iw.report.disrupted] == [(a["nodeClaim"].name, "InstanceStopped")]
    logs = w.logs.getvalue()
    assert logs.count("SQS record skipped: not an object with a messageId") == 2
