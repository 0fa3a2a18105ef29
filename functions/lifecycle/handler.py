"""Lifecycle Lambda (EventBridge schedule, every minute): NodeClaim registration/initialization,
registration timeout, garbage collection of orphan instances and of NodeClaims whose instance is gone,
and deletion of NodeClaims marked deleting (finalizer honoured).  ``LifecycleErrors`` counts the steps that failed
in a sweep that itself succeeded (alarmed; a failed sweep is the function's own Errors)."""

from __future__ import annotations

import os

from aws_lambda_powertools import Logger, Metrics

from karpenter_lambda.controllers.handlers import run_sweep
from karpenter_lambda.controllers.lifecycle import Lifecycle

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or "karpenter-lambda-lifecycle")
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "KarpenterLambda")


def _build(env):
    return Lifecycle.from_environment(env, logger=logger)


def handler(event, context):
    return run_sweep("lifecycle", _build, metrics,
                     lambda r: {"NodesTerminated": len(r.terminated), "NodesRegistered": len(r.registered),
                                "LifecycleErrors": len(r.errors),
                                "NodesRepaired": sum(1 for d in r.disrupted if d["reason"] == "Unhealthy"),
                                "StaticNodeClaimsLaunched": len(r.static_launched)})
