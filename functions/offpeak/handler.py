"""Off-peak Lambda: EventBridge Scheduler at each OffPeakSchedule window's start and end (in its time zone) and a
periodic reconcile (every offpeakIntervalMinutes).  Whatever invoked it, it converges the cluster to what should hold
now (scaled-down workloads, NodePool overrides, drains; restores at the end), so a missed or doubled invocation
changes nothing.  See docs/offpeak.md."""

from __future__ import annotations

import os

from aws_lambda_powertools import Logger, Metrics

from karpenter_lambda.controllers.handlers import run_sweep
from karpenter_lambda.controllers.offpeak import OffPeakController

KIND = "offpeak"
logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or f"karpenter-lambda-{KIND}")
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "KarpenterLambda")


def _build(env):
    return OffPeakController.from_environment(env, logger=logger)


def handler(event, context):
    if isinstance(event, dict) and event.get("schedule"):
        logger.info("invoked for a window edge", extra={"schedule": event.get("schedule"), "edge": event.get("edge")})
    return run_sweep(KIND, _build, metrics, lambda r: r.metric_counts())
