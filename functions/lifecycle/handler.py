"""Lifecycle Lambda (EventBridge schedule, every minute): NodeClaim registration/initialization,
registration timeout, garbage collection of orphan instances and of NodeClaims whose instance is gone."""

from __future__ import annotations

import os
import time

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit

from karpenter_lambda.controllers import environment, runtime

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or "karpenter-lambda-lifecycle")
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "KarpenterLambda")


def handler(event, context):
    started = time.perf_counter()
    env = environment.get_environment()
    from karpenter_lambda.controllers.lifecycle import Lifecycle

    lifecycle = Lifecycle.from_environment(env, logger=logger)
    tracer = runtime.get_tracer()
    if tracer is not None:
        with tracer.provider.in_subsegment("## sweep"):
            report = lifecycle.sweep(runtime.now())
    else:
        report = lifecycle.sweep(runtime.now())
    runtime.publish("lifecycle", report)
    metrics.add_dimension(name="cluster", value=env.config.cluster)
    metrics.add_metric(name="NodesTerminated", unit=MetricUnit.Count, value=len(report.terminated))
    metrics.add_metric(name="NodesRegistered", unit=MetricUnit.Count, value=len(report.registered))
    metrics.add_metric(name="DecisionLatencyMs", unit=MetricUnit.Milliseconds,
                       value=round((time.perf_counter() - started) * 1000, 1))
    metrics.flush_metrics()
    return report.to_dict()
