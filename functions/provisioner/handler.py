"""Provisioner Lambda: SQS pod queue (the watcher's messages) -> Provisioner.provision -> EC2 CreateFleet.

Every record's body is parsed and validated first (Powertools BatchProcessor, :class:`SqsBatch`): a malformed body
fails that record only (it is reported in ``batchItemFailures`` and, after the queue's redrive count, lands in the
DLQ) with a log line naming the problem.  The valid pods of the batch are then provisioned together in one
scheduling round.  If provisioning itself fails, every valid record is reported failed so SQS redelivers them
(provisioning is idempotent: see docs/provisioning.md).  ``ProvisioningErrors`` counts a failed round (1) or the
launch errors of a round (alarmed: the function itself does not fail in either case).
"""

from __future__ import annotations

import os
import time

from aws_lambda_powertools import Logger, Metrics

from karpenter_lambda.controllers import environment, runtime
from karpenter_lambda.controllers.handlers import SqsBatch, emit_metrics, traced
from karpenter_lambda.controllers.messages import parse_body
from karpenter_lambda.controllers.provision import Provisioner

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or "karpenter-lambda-provisioner")
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "KarpenterLambda")


def handler(event, context):
    started = time.perf_counter()
    env = environment.get_environment()
    cluster = env.config.cluster

    def parse(body: str):
        msg = parse_body(body, cluster)
        return None if msg is None else (msg.uid, msg.pod)

    batch = SqsBatch(parse, logger).process(event)
    if not batch.items:
        return batch.response()
    try:
        provisioner = Provisioner.from_environment(env, logger=logger)
        report = traced("provision", lambda: provisioner.provision(list(batch.items.values())))
        runtime.publish("provision", report)
        counts = {"NodesLaunched": len(report.launched), "PodsScheduled": report.pods_scheduled,
                  "CostPerHour": round(report.cost_per_hour, 6), "ProvisioningErrors": len(report.errors)}
    except Exception:
        logger.exception("provisioning failed; every valid record is returned for redelivery",
                         extra={"pods": len(batch.items)})
        batch.fail_all_valid()
        counts = {"ProvisioningErrors": 1}   # the function succeeds (records go back to SQS): only this metric tells
    emit_metrics(metrics, cluster, started, counts)
    return batch.response()
