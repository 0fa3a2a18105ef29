"""Interruption Lambda: SQS interruption queue (EventBridge: spot warnings, rebalance recommendations, instance state
changes, capacity reservation interruptions, AWS Health scheduled changes) -> Interruption.handle.

Every body is parsed first (Powertools BatchProcessor through :class:`SqsBatch`; the same event delivered twice in a
batch is handled once).  A malformed body or an unknown detail-type -- any failure to parse a body, whatever the
exception -- can never succeed: it is logged with its message id and the problem, counted once
(``InterruptionMessagesMalformed``, at its first receive) and returned in ``batchItemFailures`` alone, so it never
fails the other records and after the queue's ``maxReceiveCount`` it is kept in the DLQ for inspection (Karpenter
deletes such a message; here nothing is lost).  A record whose action failed (throttling, a Kubernetes 429/5xx, any
error while acting) is returned the same way: SQS redelivers it (the controller is idempotent).
``InterruptionErrors`` counts the records whose action failed (every valid one when the whole batch failed); it is
alarmed.  See docs/interruption.md.
"""

from __future__ import annotations

import os
import time

from aws_lambda_powertools import Logger, Metrics

from karpenter_lambda.controllers import environment, runtime
from karpenter_lambda.controllers.handlers import SqsBatch, emit_metrics, traced
from karpenter_lambda.controllers.interrupt import Interruption, InterruptionReport
from karpenter_lambda.controllers.interruption_messages import InterruptionMessageError, body_parser

logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or "karpenter-lambda-interruption")
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "KarpenterLambda")


def handler(event, context):
    started = time.perf_counter()
    env = environment.get_environment()
    batch = SqsBatch(body_parser(), logger).process(event)
    messages, malformed = [], []
    for key, item in batch.items.items():
        mid = batch.records_of[key][0]
        if isinstance(item, InterruptionMessageError):
            receives = batch.receives.get(mid, 1)
            logger.error("interruption message cannot be processed: returned to the queue (the DLQ keeps it after the "
                         "queue's maxReceiveCount)", extra={"messageId": mid, "problem": str(item),
                                                            "errorClass": type(item).__name__, "receiveCount": receives})
            batch.failed.add(mid)
            if receives <= 1:   # counted once, not at every redelivery
                malformed.append({"messageId": mid, "error": str(item), "errorClass": type(item).__name__})
        else:
            for problem in item.skipped:   # unusable parts (entities, optional fields): the rest is still acted on
                logger.warning("interruption event entity skipped" if problem.startswith("detail.affectedEntities")
                               else "interruption event field not read", extra={"messageId": mid, "eventId": item.id,
                                                                                "problem": problem})
            messages.append(item.with_message_ids(batch.records_of[key]))
    report, failed = InterruptionReport(), 0
    try:
        if messages:
            report = traced("interruption", lambda: Interruption.from_environment(env, logger=logger).handle(messages))
    except Exception:
        logger.exception("interruption handling failed; every valid record is returned for redelivery")
        report.retry, failed = [m.id for m in messages], len(messages)
    report.malformed = malformed
    for event_id in report.retry:
        batch.failed.update(batch.records_of.get(event_id, []))
    runtime.publish("interruption", report)
    counts = report.metric_counts()
    counts["InterruptionErrors"] += failed   # a failed batch goes back to SQS: the function itself succeeds
    emit_metrics(metrics, env.config.cluster, started, counts)
    return batch.response()
