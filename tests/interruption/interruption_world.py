"""Test harness for the interruption handler: a World (moto + local Kubernetes API + virtual clock) with an
interruption queue fed by EventBridge rules (the five patterns of docs/interruption.md), real-shaped events as AWS
documents them, and the real handler (functions/interruption/handler.py) on Lambda-shaped SQS events."""

from __future__ import annotations

import contextlib
import json
import uuid

import manifests as shared
from karpenter_lambda.controllers import runtime
from karpenter_lambda.controllers.interruption_messages import EVENT_PATTERNS
from karpenter_lambda.sim.simulator import _LambdaContext, _sqs_record, load_module, repo_root
from karpenter_lambda.sim.world import World, make_pod

def manifests(rebalance_replace: bool = False, budgets: str = '[{nodes: "10%"}]') -> str:
    """The shared NodePool (tests/manifests.py) named ``spot``, on spot capacity, and the default EC2NodeClass."""
    ann = {"karpenter-lambda.io/rebalance-replace": "true"} if rebalance_replace else {}
    return shared.pair(name="spot", annotations=ann, capacity_types=("spot",), families=("m5", "c5", "m6i"),
                       consolidate_after="10m", budgets=budgets)


# -- real-shaped EventBridge events: karpenter_lambda.sim.interruption_events (shared with the simulator) -----------
from karpenter_lambda.sim.interruption_events import (ACCOUNT, capacity_reservation_interruption,  # noqa: E402,F401
                                                      health_scheduled_change, rebalance, spot_warning, state_change)


class InterruptionWorld:
    """``World`` + the interruption queue, its DLQ, the five EventBridge rules and the real handler."""

    def __init__(self, world: World):
        self.w = world
        self.reports: list = []
        sqs = world.sqs
        self.dlq_url = sqs.create_queue(QueueName=f"{world.cluster}-interruption-dlq")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=self.dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self.queue_url = sqs.create_queue(QueueName=f"{world.cluster}-interruption", Attributes={
            "MessageRetentionPeriod": "300", "VisibilityTimeout": "30",
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "3"})})["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        import boto3

        self.events = boto3.client("events", region_name=world.region)
        for i, pattern in enumerate(EVENT_PATTERNS):
            self.events.put_rule(Name=f"{world.cluster}-interruption-{i}", EventPattern=json.dumps(pattern))
            self.events.put_targets(Rule=f"{world.cluster}-interruption-{i}", Targets=[{"Id": "queue", "Arn": arn}])
        self.handler = load_module(repo_root() / "functions" / "interruption" / "handler.py", "world_interruption_handler")
        h = getattr(self.handler.logger, "registered_handler", None)
        if h is not None and hasattr(h, "setStream"):
            h.setStream(world.logs)

    # -- delivery ---------------------------------------------------------------------------------------------
    def put(self, *events: dict) -> None:
        """Publish events on the default bus as AWS does (source, detail-type, detail, resources, time)."""
        entries = [{"Source": e["source"], "DetailType": e["detail-type"], "Detail": json.dumps(e["detail"]),
                    "Resources": e["resources"]} for e in events]
        out = self.events.put_events(Entries=entries)
        assert out["FailedEntryCount"] == 0, out

    def send_raw(self, *bodies: str) -> None:
        for b in bodies:
            self.w.sqs.send_message(QueueUrl=self.queue_url, MessageBody=b)

    def receive(self, expect: int | None = None) -> dict:
        msgs = []
        while True:
            got = self.w.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10,
                                             VisibilityTimeout=3600, AttributeNames=["All"]).get("Messages", [])
            if not got:
                break
            msgs.extend(got)
        if expect is not None:
            assert len(msgs) == expect, [m["Body"] for m in msgs]
        self.last_messages = msgs
        return {"Records": [_sqs_record(m, self.queue_url, self.w.region) for m in msgs]}

    def invoke(self, event: dict) -> dict:
        """The real handler on ``event``; acknowledged records are deleted, failed ones made visible again (as the
        Lambda SQS event source does)."""
        hook = lambda kind, r: self.reports.append(r) if kind == "interruption" else None  # noqa: E731
        runtime.REPORT_HOOKS.append(hook)
        try:
            with contextlib.redirect_stdout(self.w.logs):
                resp = self.handler.handler(event, _LambdaContext(f"{self.w.cluster}-interruption"))
        finally:
            runtime.REPORT_HOOKS.remove(hook)
        failed = {f["itemIdentifier"] for f in resp.get("batchItemFailures", [])}
        for r in event["Records"]:
            if r["messageId"] in failed:
                self.w.sqs.change_message_visibility(QueueUrl=self.queue_url, ReceiptHandle=r["receiptHandle"],
                                                     VisibilityTimeout=0)
            else:
                self.w.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=r["receiptHandle"])
        return resp

    def deliver(self, *events: dict) -> dict:
        """put -> receive -> invoke; returns the handler's response (the report is ``self.report``)."""
        self.put(*events)
        return self.invoke(self.receive(expect=len(events)))

    @property
    def report(self):
        return self.reports[-1]

    def queue_depth(self, url: str | None = None) -> int:
        attrs = self.w.sqs.get_queue_attributes(QueueUrl=url or self.queue_url, AttributeNames=[
            "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
        return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])

    # -- cluster set-up ---------------------------------------------------------------------------------------
    def nodes_with_pods(self, counts: list[int], cpu: str = "500m") -> list[dict]:
        """One running, initialized node per entry of ``counts`` with that many bound pods (launched one by one so
        each gets its own node); returns [{instance, nodeClaim, node, pods}]."""
        out = []
        for n, count in enumerate(counts):
            pods = self.w.add_pods([make_pod(f"app{n}-{i}", cpu=cpu, memory="512Mi", owner=f"app{n}")
                                    for i in range(count)])
            before = {i["InstanceId"] for i in self.w.instances()}
            self.w.provision(self.w.sqs_event(pods))
            (inst,) = [i for i in self.w.instances() if i["InstanceId"] not in before]
            node = self.w.join(inst, ready=True)
            self.w.sweep()
            self.w.schedule()
            nc = self.nodeclaim_of(inst["InstanceId"])
            bound = [p for p in self.w.server.store.list("pods") if (p.get("spec") or {}).get("nodeName") == node["metadata"]["name"]]
            assert len(bound) == count and nc.is_true("Initialized"), (len(bound), nc.status)
            out.append({"instance": inst, "nodeClaim": nc, "node": node, "pods": bound})
        return out

    def nodeclaim_of(self, iid: str):
        for nc in self.w.store.list("NodeClaim"):
            if (nc.status.get("providerID") or "").endswith("/" + iid):
                return nc
        return None

    def state(self, iid: str) -> str:
        r = self.w.ec2.describe_instances(InstanceIds=[iid])["Reservations"]
        return r[0]["Instances"][0]["State"]["Name"]
