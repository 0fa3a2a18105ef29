"""Provisioner Lambda: SQS pod queue (the watcher's messages) -> Provisioner.provision -> EC2 CreateFleet.

Every record's body is parsed and validated first (Powertools BatchProcessor): a malformed body fails
that record only (it is reported in ``batchItemFailures`` and, after the queue's redrive count, lands
in the DLQ) with a log line naming the problem.  The valid pods of the batch are then provisioned
together in one scheduling round.  If provisioning itself fails, every valid record is reported
failed so SQS redelivers them (provisioning is idempotent: see docs/provisioning.md).
"""

from __future__ import annotations

import os
import time

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType

from karpenter_lambda.controllers import environment, runtime
from karpenter_lambda.controllers.messages import MalformedMessage, parse_body

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or "karpenter-lambda-provisioner")
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "KarpenterLambda")


class _Batch:
    def __init__(self, cluster: str):
        self.cluster = cluster
        self.pods: dict[str, dict] = {}   # uid -> pod (latest resourceVersion wins)
        self.record_of: dict[str, list[str]] = {}  # uid -> messageIds

    def record_handler(self, record):
        try:
            msg = parse_body(record.body, self.cluster)
        except MalformedMessage as e:
            logger.error("malformed SQS message", extra={"messageId": record.message_id, "problem": str(e)})
            raise
        if msg is None:
            return "ignored"
        self.pods[msg.uid] = msg.pod
        self.record_of.setdefault(msg.uid, []).append(record.message_id)
        return msg.key


def handler(event, context):
    started = time.perf_counter()
    env = environment.get_environment()
    cluster = env.config.cluster
    batch = _Batch(cluster)
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    records = (event or {}).get("Records") or []
    with processor(records=records, handler=batch.record_handler):
        processor.process()
    response = processor.response()
    failed_ids = {f["itemIdentifier"] for f in response.get("batchItemFailures", [])}
    try:
        if batch.pods:
            tracer = runtime.get_tracer()
            from karpenter_lambda.controllers.provision import Provisioner

            provisioner = Provisioner.from_environment(env, logger=logger)
            if tracer is not None:
                with tracer.provider.in_subsegment("## provision"):
                    report = provisioner.provision(list(batch.pods.values()))
            else:
                report = provisioner.provision(list(batch.pods.values()))
            runtime.publish("provision", report)
            metrics.add_dimension(name="cluster", value=cluster)
            metrics.add_metric(name="NodesLaunched", unit=MetricUnit.Count, value=len(report.launched))
            metrics.add_metric(name="PodsScheduled", unit=MetricUnit.Count, value=report.pods_scheduled)
            metrics.add_metric(name="CostPerHour", unit=MetricUnit.Count, value=round(report.cost_per_hour, 6))
            metrics.add_metric(name="DecisionLatencyMs", unit=MetricUnit.Milliseconds,
                               value=round((time.perf_counter() - started) * 1000, 1))
            metrics.flush_metrics()
    except Exception:
        logger.exception("provisioning failed; every valid record is returned for redelivery",
                         extra={"pods": len(batch.pods)})
        for ids in batch.record_of.values():
            failed_ids.update(ids)
        return {"batchItemFailures": [{"itemIdentifier": i} for i in sorted(failed_ids)]}
    return {"batchItemFailures": [{"itemIdentifier": i} for i in sorted(failed_ids)]}
