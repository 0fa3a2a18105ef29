"""Consolidation sweep Lambda (EventBridge schedule, every disruptionIntervalMinutes): emptiness (nodes with no
reschedulable pods for consolidateAfter) within the disruption budgets; underutilization joins this sweep next.
See docs/disruption.md."""

from __future__ import annotations

import os

from aws_lambda_powertools import Logger, Metrics

from karpenter_lambda.controllers.disrupt import DisruptionSweep
from karpenter_lambda.controllers.handlers import run_sweep

KIND = "consolidation"
logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or f"karpenter-lambda-{KIND}")
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "KarpenterLambda")


def _build(env):
    return DisruptionSweep.from_environment(env, KIND, logger=logger)


def handler(event, context):
    return run_sweep("disruption", _build, metrics, lambda r: r.metric_counts())
