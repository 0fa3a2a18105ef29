"""The fault run's SQS (karpenter_lambda/sim/faults/queues.py): the stack's queue settings, and moto's visibility
timeout, receive count and redrive to the DLQ running on the virtual clock."""

from __future__ import annotations

import ast
import json

import boto3
from moto import mock_aws

from karpenter_lambda.sim.clock import VirtualClock
from karpenter_lambda.sim.environment import repo_root
from karpenter_lambda.sim.faults.queues import SimQueue, function_timeouts, sqs_on_clock, stack_queues


def test_settings_are_the_stacks():
    root = repo_root()
    q = stack_queues(root)
    timeouts = function_timeouts(root)
    # the interruption queue overrides the visibility (90 s, 3 receives, 300 s retention: infra/stack.py QUEUES)
    assert (q["interruption"].visibility_seconds, q["interruption"].max_receive_count,
            q["interruption"].retention_seconds) == (90, 3, 300)
    # the pod queue: 6x the provisioner's timeout + the batching window (infra/functions.visibility_timeout_for)
    window = 10
    assert q["pod"].visibility_seconds == 6 * timeouts["provisioner"] + window
    assert q["pod"].max_receive_count == 5 and q["pod"].retention_seconds == 24 * 3600
    # every QueueSpec of the stack is read
    tree = ast.parse((root / "infra" / "stack.py").read_text())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "QueueSpec"]
    assert len(calls) == len(q)
    doc = json.loads((root / "functions" / "registry.json").read_text())
    assert timeouts == {f["name"]: f.get("timeoutSeconds", 60) for f in doc["functions"]}


def test_visibility_receive_count_and_dlq_on_the_virtual_clock():
    clock = VirtualClock(1_000_000.0)
    with mock_aws(), sqs_on_clock(clock):
        sqs = boto3.client("sqs", region_name="us-east-1")
        q = SimQueue(sqs, stack_queues(repo_root())["interruption"], "t", "us-east-1")
        q.send('{"detail": {}}')
        failed = {"crashed": True, "error": "died"}
        for receive in range(1, 4):
            ev = q.poll()
            assert ev is not None and len(ev["Records"]) == 1, receive
            assert ev["Records"][0]["attributes"]["ApproximateReceiveCount"] == str(receive)
            assert q.settle(ev, failed) == ev["Records"]
            clock.advance(89)
            assert q.poll() is None            # invisible for the whole 90 s visibility timeout
            clock.advance(2)
        assert q.redelivered == 2
        assert q.poll() is None                # the 4th receive moves it to the DLQ instead
        assert q.depth(dlq=True) == 1 and q.depth() == 0


def test_acknowledged_records_are_deleted_and_failures_come_back():
    clock = VirtualClock(1_000_000.0)
    with mock_aws(), sqs_on_clock(clock):
        sqs = boto3.client("sqs", region_name="us-east-1")
        q = SimQueue(sqs, stack_queues(repo_root())["pod"], "t", "us-east-1")
        q.send("a")
        q.send("b")
        ev = q.poll()
        bad = next(r for r in ev["Records"] if r["body"] == "b")
        left = q.settle(ev, {"crashed": False, "error": None,
                             "response": {"batchItemFailures": [{"itemIdentifier": bad["messageId"]}]}})
        assert [r["body"] for r in left] == ["b"]
        clock.advance(q.settings.visibility_seconds + 1)
        again = q.poll()
        assert [r["body"] for r in again["Records"]] == ["b"]
