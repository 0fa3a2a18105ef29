"""sim/moto_speedups_sqs: a received message's retention read from its queue's field must give what moto's own
check gives: the same messages received, before and after the retention period, on moto's clock as the fault
injection sets it (moto.sqs.models.unix_time)."""

from __future__ import annotations

import boto3
import moto.sqs.models as sqs_models
from moto import mock_aws

from karpenter_lambda.sim import moto_speedups_sqs

REGION = "us-east-1"


def _run(fast: bool) -> list[list[str]]:
    now = [1_000_000.0]
    saved = (sqs_models.unix_time, sqs_models.unix_time_millis)
    sqs_models.unix_time = lambda *a: now[0]
    sqs_models.unix_time_millis = lambda *a: now[0] * 1000.0
    if fast:
        assert moto_speedups_sqs.install()
    else:
        moto_speedups_sqs.uninstall()
    received: list[list[str]] = []
    try:
        with mock_aws():
            sqs = boto3.client("sqs", region_name=REGION)
            url = sqs.create_queue(QueueName="q", Attributes={"MessageRetentionPeriod": "500",
                                                              "VisibilityTimeout": "0"})["QueueUrl"]
            for i in range(4):
                sqs.send_message(QueueUrl=url, MessageBody=f"m{i}")
                now[0] += 50            # m0 at t, m1 at t+50, m2 at t+100, m3 at t+150
            for advance in (0, 340, 20):   # t+200: none expired; t+540: m0 expired (moto stops at it); t+560
                now[0] += advance
                msgs = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
                received.append(sorted(m["Body"] for m in msgs))
    finally:
        sqs_models.unix_time, sqs_models.unix_time_millis = saved
        moto_speedups_sqs.install()   # as the rest of the session runs (tests/conftest installs the speedups)
    return received


def test_retention_as_moto_checks_it():
    slow, fast = _run(False), _run(True)
    assert fast == slow
    # not vacuous: expiry changed what is received (moto stops at the first expired message in its order)
    assert fast[0] == ["m0", "m1", "m2", "m3"] and fast[1] == []
