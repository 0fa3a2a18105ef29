"""EventBridge Scheduler schedules at each OffPeakSchedule window's start and end (the nodePools folder's schedules).

For every OffPeakSchedule of the folder, two ``AWS::Scheduler::Schedule`` resources invoke the off-peak function:
one at the window's start (``spec.schedule``) and one at its end (start + ``spec.duration``), both evaluated by
EventBridge Scheduler in the schedule's ``spec.timeZone`` (``ScheduleExpressionTimezone``), so a 20:00 start stays
20:00 local across daylight-saving changes, as the function computes it.  The conversion to EventBridge's
``cron(...)`` and its limits are in :mod:`infra.offpeak_cron`.

Each target sends ``{"schedule": NAME, "edge": "start"|"end"}`` (the function logs it and converges the whole
cluster anyway), with the flexible time window off, 3 retries within an hour, and a dead-letter queue (SSE, TLS
only, alarmed by Monitoring).  One role for all schedules, trusted by ``scheduler.amazonaws.com`` for this account
only, may ``lambda:InvokeFunction`` on the off-peak function and ``sqs:SendMessage`` to that dead-letter queue
(Scheduler delivers failed events with its execution role), nothing else.

Where EventBridge cannot express an edge, no schedule is created for it and synth prints a warning
(``karpenter-lambda:offpeak-schedule``, fatal with ``cdk synth --strict``): the periodic reconcile
(``offpeakIntervalMinutes``) then starts or ends that window, late by at most its interval.  The same holds for a
start or end in the hour skipped by a spring-forward change, which EventBridge Scheduler skips (the function itself
would start at the first valid instant): the reconcile catches it.  Schedules applied later with the CLI get no
Scheduler schedules; the reconcile runs them.
"""

from __future__ import annotations

import json
import re

from aws_cdk import Annotations, Aws, Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from .offpeak_cron import CronConversionError, end_expression_or_reason, to_eventbridge_cron

RETRY_ATTEMPTS = 3
MAX_EVENT_AGE_SECONDS = 3600
WARNING_ID = "karpenter-lambda:offpeak-schedule"


def edge_expressions(schedule: str, duration_seconds: int) -> tuple[str | None, str | None, list[str]]:
    """(start cron or None, end cron or None, the problems as ``field: message`` lines) of one OffPeakSchedule."""
    try:
        start = to_eventbridge_cron(schedule)
    except CronConversionError as e:
        return None, None, [f"spec.schedule: {e}: neither its start nor its end can be an EventBridge schedule"]
    end, reason = end_expression_or_reason(schedule, duration_seconds)
    return start, end, [] if end else [f"spec.duration: {reason}: its end cannot be an EventBridge schedule"]


def _construct_id(name: str) -> str:
    return "".join(w.capitalize() for w in re.split(r"[^A-Za-z0-9]+", name) if w) or "Schedule"


class OffPeakSchedules(Construct):
    """``schedules`` ((name, edge) -> CfnSchedule), ``role``, ``dlq`` (None when no edge is expressible),
    ``warnings`` (the lines printed as synth warnings)."""

    def __init__(self, scope: Construct, construct_id: str, *, cluster: str, schedules: list,
                 function: lambda_.IFunction, interval_minutes: int) -> None:
        super().__init__(scope, construct_id)
        self.cluster = cluster
        self.function = function
        self.schedules: dict[tuple[str, str], scheduler.CfnSchedule] = {}
        self.warnings: list[str] = []
        self.role: iam.Role | None = None
        self.dlq: sqs.Queue | None = None
        used: set[str] = set()
        for obj in sorted(schedules, key=lambda o: o.name):
            start, end, problems = edge_expressions(obj.schedule, obj.duration_seconds)
            for problem in problems:
                line = (f"OffPeakSchedule/{obj.name}: {problem}; the periodic reconcile (every {interval_minutes} "
                        "min, offpeakIntervalMinutes) acts on it instead")
                self.warnings.append(line)
                Annotations.of(self).add_warning_v2(WARNING_ID, line)
            base = _construct_id(obj.name)
            while base in used:
                base += "X"
            used.add(base)
            for edge, expression in (("start", start), ("end", end)):
                if expression is not None:
                    self.schedules[(obj.name, edge)] = self._schedule(f"{base}{edge.capitalize()}", obj, edge, expression)

    def _target_resources(self) -> None:
        """The dead-letter queue and the role, created with the first schedule."""
        if self.role is not None:
            return
        self.dlq = sqs.Queue(self, "DeadLetter", encryption=sqs.QueueEncryption.SQS_MANAGED, enforce_ssl=True,
                             retention_period=Duration.days(14))
        self.role = iam.Role(
            self,
            "Role",
            description=f"karpenter-lambda {self.cluster}: EventBridge Scheduler invokes the off-peak function",
            assumed_by=iam.ServicePrincipal("scheduler.amazonaws.com",
                                            conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}}),
        )
        self.role.add_to_policy(iam.PolicyStatement(sid="InvokeOffPeak", actions=["lambda:InvokeFunction"],
                                                    resources=[self.function.function_arn]))
        self.role.add_to_policy(iam.PolicyStatement(sid="DeadLetter", actions=["sqs:SendMessage"],
                                                    resources=[self.dlq.queue_arn]))

    def _schedule(self, construct_id: str, obj, edge: str, expression: str) -> scheduler.CfnSchedule:
        self._target_resources()
        what = obj.schedule if edge == "start" else f"{obj.schedule} + {obj.duration_seconds}s"
        schedule = scheduler.CfnSchedule(
            self,
            construct_id,
            description=f"karpenter-lambda {self.cluster}: OffPeakSchedule {obj.name} window {edge} ({what}, {obj.time_zone})"[:512],
            schedule_expression=expression,
            schedule_expression_timezone=obj.time_zone,
            flexible_time_window=scheduler.CfnSchedule.FlexibleTimeWindowProperty(mode="OFF"),
            state="ENABLED",
            target=scheduler.CfnSchedule.TargetProperty(
                arn=self.function.function_arn,
                role_arn=self.role.role_arn,
                input=json.dumps({"schedule": obj.name, "edge": edge}),
                retry_policy=scheduler.CfnSchedule.RetryPolicyProperty(
                    maximum_retry_attempts=RETRY_ATTEMPTS, maximum_event_age_in_seconds=MAX_EVENT_AGE_SECONDS),
                dead_letter_config=scheduler.CfnSchedule.DeadLetterConfigProperty(arn=self.dlq.queue_arn),
            ),
        )
        schedule.node.add_dependency(self.role)   # the role's policy exists before the first invocation
        return schedule
