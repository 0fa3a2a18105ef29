"""The interruption queue's EventBridge rules: exactly Karpenter's set, routed to the interruption SQS queue.

Five rules (one per (source, detail-type) of ``karpenter_lambda.controllers.interruption_messages.EVENT_PATTERNS``):
``aws.ec2`` "EC2 Spot Instance Interruption Warning", "EC2 Instance Rebalance Recommendation", "EC2 Instance
State-change Notification" (only for the states acted on: stopping, stopped, shutting-down, terminated; Karpenter's
rule takes them all), "EC2 Capacity Reservation Instance Interruption Warning"; ``aws.health`` "AWS Health
Event".  The queue policy lets only EventBridge (each rule, by ``aws:SourceArn``) and SQS's own service send, as
Karpenter's CloudFormation does; TLS is enforced by the queue (``enforce_ssl``).
"""

from __future__ import annotations

import re

from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from karpenter_lambda.controllers.interruption_messages import EVENT_PATTERNS


def _rule_id(detail_type: str) -> str:
    return "".join(w.capitalize() for w in re.findall(r"[A-Za-z0-9]+", detail_type))


class InterruptionRules(Construct):
    """``rules``: the EventBridge rules feeding ``queue``."""

    def __init__(self, scope: Construct, construct_id: str, *, queue: sqs.IQueue, cluster: str) -> None:
        super().__init__(scope, construct_id)
        self.rules: list[events.Rule] = []
        for pattern in EVENT_PATTERNS:
            (source,), (detail_type,) = pattern["source"], pattern["detail-type"]
            detail = pattern.get("detail")   # the state-change rule: only the states the handler acts on
            self.rules.append(events.Rule(
                self,
                _rule_id(detail_type),
                description=f"karpenter-lambda {cluster}: {detail_type} ({source}) -> interruption queue",
                event_pattern=events.EventPattern(source=[source], detail_type=[detail_type], detail=detail),
                targets=[targets.SqsQueue(queue)],
            ))
        queue.add_to_resource_policy(iam.PolicyStatement(
            sid="AllowSQSService",
            actions=["sqs:SendMessage"],
            principals=[iam.ServicePrincipal("sqs.amazonaws.com")],
            resources=[queue.queue_arn],
        ))
