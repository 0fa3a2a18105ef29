"""What every Lambda handler shares, so ``functions/<name>/handler.py`` stays thin (<= 60 code lines).

* :func:`traced` -- run a controller call inside a Powertools Tracer subsegment when tracing is on (the Tracer is
  built lazily: it costs ~0.6 s).
* :func:`emit_metrics` -- the ``cluster`` dimension, the given non-zero counts and (event-driven functions only)
  ``DecisionLatencyMs``, flushed once.
* :func:`run_sweep` -- a scheduled sweep: environment, traced run, published report, metrics from the report.
* :class:`SqsBatch` -- Powertools batch processing of SQS records with a per-record parser; malformed records fail
  alone (``batchItemFailures``), the valid ones are collected for one controller call, and
  :meth:`SqsBatch.fail_all_valid` returns every valid record for redelivery when that call fails.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType

from . import environment, runtime


def traced(name: str, fn: Callable[[], Any]) -> Any:
    tracer = runtime.get_tracer()
    if tracer is None:
        return fn()
    with tracer.provider.in_subsegment(f"## {name}"):
        return fn()


def emit_metrics(metrics, cluster: str, started: float, counts: dict[str, float], *, latency: bool = True) -> None:
    """A count is published only when it is not zero: CloudWatch bills a custom metric for every hour it has data,
    so zeros every minute made each of the ~28 counts a full-month metric ($0.30 each, most of the quiet control
    plane's bill; README "What it costs to run").  Alarms treat missing data as not breaching, sums are unchanged."""
    metrics.add_dimension(name="cluster", value=cluster)
    published = 0
    for name, value in counts.items():
        if value:
            metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
            published += 1
    if latency:   # the event-driven functions' decision latency; a sweep's is Lambda's own (free) Duration metric
        metrics.add_metric(name="DecisionLatencyMs", unit=MetricUnit.Milliseconds,
                           value=round((time.perf_counter() - started) * 1000, 1))
        published += 1
    if published:
        metrics.flush_metrics()
    else:   # nothing to say: no empty EMF line (and no Powertools warning)
        metrics.clear_metrics()


def run_sweep(kind: str, build: Callable[[Any], Any], metrics, counts: Callable[[Any], dict[str, float]]) -> dict:
    """``build(env)`` returns an object with ``sweep(now)``; its report is published and counted."""
    started = time.perf_counter()
    env = environment.get_environment()
    controller = build(env)
    report = traced(f"{kind} sweep", lambda: controller.sweep(runtime.now()))
    runtime.publish(kind, report)
    emit_metrics(metrics, env.config.cluster, started, counts(report), latency=False)
    return report.to_dict()


class SqsBatch:
    """Parse every record with ``parse(body) -> (key, item) | None``; items are kept by key (the latest wins).

    A record whose body fails to parse -- whatever the exception -- fails alone, logged with its message id and the
    problem (SQS redelivers it and after the queue's ``maxReceiveCount`` moves it to the DLQ).  ``receives``: each
    record's ``ApproximateReceiveCount`` (1 when absent).  A record that is not an object or has no ``messageId``
    cannot be reported in ``batchItemFailures`` (Lambda's SQS event source always sets one): it is logged and left
    out rather than failing the whole batch."""

    def __init__(self, parse: Callable[[str], tuple[Any, Any] | None], logger):
        self.parse = parse
        self.logger = logger
        self.items: dict[Any, Any] = {}
        self.records_of: dict[Any, list[str]] = {}
        self.failed: set[str] = set()
        self.receives: dict[str, int] = {}

    def _record(self, record):
        try:
            got = self.parse(record.body)
        except Exception as e:
            problem = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
            self.logger.error("malformed SQS message", extra={"messageId": record.message_id, "problem": problem})
            raise
        if got is None:
            return "ignored"
        key, item = got
        self.items[key] = item
        self.records_of.setdefault(key, []).append(record.message_id)
        return key

    def process(self, event: dict) -> "SqsBatch":
        records = (event or {}).get("Records") if isinstance(event, dict) else None
        usable = []
        for i, r in enumerate(records if isinstance(records, list) else []):
            if not isinstance(r, dict) or not isinstance(r.get("messageId"), str) or not r.get("messageId"):
                self.logger.error("SQS record skipped: not an object with a messageId (Lambda's SQS event source "
                                  "always sets one)", extra={"record": i})
                continue
            usable.append(r)
            attrs = r.get("attributes") if isinstance(r.get("attributes"), dict) else {}
            count = str(attrs.get("ApproximateReceiveCount") or "1")
            self.receives[r["messageId"]] = int(count) if count.isdigit() else 1
        processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        with processor(records=usable, handler=self._record):
            processor.process()
        self.failed = {f["itemIdentifier"] for f in processor.response().get("batchItemFailures", [])}
        return self

    def fail_all_valid(self) -> None:
        for ids in self.records_of.values():
            self.failed.update(ids)

    def response(self) -> dict:
        return {"batchItemFailures": [{"itemIdentifier": i} for i in sorted(self.failed)]}
