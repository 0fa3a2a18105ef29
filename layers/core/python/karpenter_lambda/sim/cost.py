"""What the control plane costs to run: the pure model of ``simulate``'s ``controlPlaneCost`` (issue 32 item 1).

:mod:`.cost_meter` counts, per function invocation, what Lambda and the services it calls would bill (the handler's
CPU time, its AWS calls by operation, DynamoDB request units, SQS requests, log bytes, EMF metrics) into a
:class:`Usage`; :func:`monthly` prices a 30.4-day month of it at the list prices of :mod:`.cost_prices`:

* a scheduled function runs every interval all month (the simulator skips quiet stretches, Lambda does not): its
  invocations per month are ``month / interval`` and each costs the mean of the invocations measured;
* a queue-triggered function runs as often per month as it ran per simulated second;
* what the functions call scales with their invocations; the watcher's SQS sends with the simulated time.

The billed duration of one invocation (:func:`billed_ms`): the handler's own CPU time (AWS calls excluded), slowed
by the function's CPU share below 1,769 MB, plus each AWS call's assumed latency and each Kubernetes API request's,
rounded up to the millisecond.  Nothing here does I/O.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from . import cost_prices as P


@dataclass
class FunctionUsage:
    """One function's measured invocations, summed."""

    name: str
    memory_mb: int
    architecture: str
    interval_seconds: float | None = None   # a scheduled function's interval; None: queue-triggered
    invocations: int = 0
    billed_ms: int = 0          # sum of :func:`billed_ms` over the invocations
    cpu_ms: float = 0.0         # the handler thread's CPU outside AWS calls
    wall_ms: float = 0.0        # wall time of the handler in the simulator (moto and the local API included)
    aws_calls: Counter = field(default_factory=Counter)   # "service:Operation" -> calls
    kube_calls: int = 0
    rru: float = 0.0
    wru: float = 0.0
    sqs_requests: int = 0
    events_put: int = 0
    log_bytes: int = 0
    hours: set[int] = field(default_factory=set)          # the virtual hours (elapsed // 3600) it ran in


@dataclass
class Usage:
    """Everything a run measured."""

    functions: dict[str, FunctionUsage] = field(default_factory=dict)
    # EMF metric (function, namespace, name, ((dimension, value), ...)) -> (the function, the virtual hours it had data)
    metrics: dict[tuple, tuple[str, set[int]]] = field(default_factory=dict)
    watcher_calls: Counter = field(default_factory=Counter)    # the in-cluster watcher's AWS calls
    watcher_sqs_requests: int = 0
    queue_sources: int = 0      # SQS queues a function reads (Lambda's event source polls each)


def aws_call_ms(service: str, operation: str) -> float:
    return P.AWS_OPERATION_MS.get((service, operation), P.AWS_CALL_MS.get(service, P.AWS_CALL_MS_DEFAULT))


def billed_ms(cpu_ms: float, memory_mb: int, calls: list[tuple[str, str]], kube_calls: int) -> int:
    """One invocation's billed duration: CPU slowed by the function's CPU share, plus the calls' latency, rounded up."""
    share = max(1.0, P.LAMBDA_FULL_VCPU_MB / max(1, memory_mb))
    ms = cpu_ms * share + sum(aws_call_ms(s, o) for s, o in calls) + kube_calls * P.KUBE_CALL_MS
    g = P.LAMBDA_BILLING_GRANULARITY_MS
    return max(g, int(math.ceil(ms / g - 1e-9)) * g)


# -- DynamoDB request units, estimated from item sizes (moto's ConsumedCapacity is a constant) ---------------------

def _value_size(v) -> int:
    if not isinstance(v, dict) or len(v) != 1:
        return 1
    (t, x), = v.items()
    if t == "S":
        return len(str(x).encode())
    if t == "N":
        return len(str(x).lstrip("-").replace(".", "")) // 2 + 1
    if t == "B":
        return len(x) if isinstance(x, (bytes, bytearray)) else len(str(x)) * 3 // 4
    if t in ("BOOL", "NULL"):
        return 1
    if t == "M":
        return 3 + sum(len(k.encode()) + _value_size(e) + 1 for k, e in (x or {}).items())
    if t == "L":
        return 3 + sum(_value_size(e) + 1 for e in (x or []))
    if t in ("SS", "NS", "BS"):
        return sum(_value_size({t[0]: e}) for e in (x or []))
    return 1


def item_size(item: dict | None) -> int:
    """An item's size as DynamoDB counts it: attribute names plus values (low-level, typed form)."""
    return sum(len(k.encode()) + _value_size(v) for k, v in (item or {}).items())


def _units(nbytes: int, unit: int) -> int:
    return max(1, math.ceil(nbytes / unit))


def _read(nbytes: int, consistent: bool) -> float:
    return _units(nbytes, P.DYNAMODB_READ_UNIT_BYTES) * (1.0 if consistent else 0.5)


def request_units(operation: str, params: dict, response: dict | None) -> tuple[float, float]:
    """(read, write) request units of one DynamoDB call, from its parameters and its answer (None: it failed; a
    refused conditional write still costs its write)."""
    r = response or {}
    consistent = bool(params.get("ConsistentRead"))
    if operation == "GetItem":
        return _read(item_size(r.get("Item")), consistent), 0.0
    if operation in ("Query", "Scan"):
        return _read(sum(item_size(i) for i in r.get("Items") or []), consistent), 0.0
    if operation == "BatchGetItem":
        items = [i for rows in (r.get("Responses") or {}).values() for i in rows]
        return sum(_read(item_size(i), consistent) for i in items) or 0.5, 0.0
    if operation == "TransactGetItems":
        return sum(2 * _read(item_size(x.get("Item")), True) for x in r.get("Responses") or []) or 2.0, 0.0
    if operation == "PutItem":
        return 0.0, float(_units(item_size(params.get("Item")), P.DYNAMODB_WRITE_UNIT_BYTES))
    if operation == "UpdateItem":
        after = r.get("Attributes")
        size = item_size(after) if after else item_size(params.get("Key")) + item_size(params.get("ExpressionAttributeValues"))
        return 0.0, float(_units(size, P.DYNAMODB_WRITE_UNIT_BYTES))
    if operation == "DeleteItem":
        return 0.0, float(_units(item_size(r.get("Attributes")), P.DYNAMODB_WRITE_UNIT_BYTES))
    if operation == "BatchWriteItem":
        reqs = [q for rows in (params.get("RequestItems") or {}).values() for q in rows]
        return 0.0, float(sum(_units(item_size((q.get("PutRequest") or {}).get("Item")), P.DYNAMODB_WRITE_UNIT_BYTES)
                              for q in reqs))
    if operation == "TransactWriteItems":
        total = 0
        for t in params.get("TransactItems") or []:
            (kind, body), = t.items()
            size = item_size(body.get("Item")) if kind == "Put" else item_size(body.get("Key")) + item_size(
                body.get("ExpressionAttributeValues"))
            total += 2 * _units(size, P.DYNAMODB_WRITE_UNIT_BYTES)
        return 0.0, float(total)
    return 0.0, 0.0


def sqs_requests(operation: str, params: dict) -> int:
    """Billed SQS requests of one call: one per 64 KB chunk of what it sends (a receive or delete is one)."""
    if operation == "SendMessage":
        return _units(len(str(params.get("MessageBody", "")).encode()), P.SQS_CHUNK_BYTES)
    if operation == "SendMessageBatch":
        size = sum(len(str(e.get("MessageBody", "")).encode()) for e in params.get("Entries") or [])
        return _units(size, P.SQS_CHUNK_BYTES)
    return 1


def metric_months(usage: Usage, elapsed_seconds: float) -> float:
    """Custom metrics are billed by the hour they have data in: each metric's share of the hours its function ran
    (a scheduled function runs every hour of the month), or of the simulated hours (a queue-triggered one)."""
    all_hours = max(1, math.ceil(elapsed_seconds / 3600.0))
    total = 0.0
    for fn, hours in usage.metrics.values():
        f = usage.functions.get(fn)
        ran = len(f.hours) if f is not None and f.interval_seconds else all_hours
        total += min(1.0, len(hours) / max(1, ran))
    return total


# -- a month at list prices -------------------------------------------------------------------------------------

def _r(x: float, digits: int = 4) -> float:
    return round(x, digits)


def monthly(usage: Usage, elapsed_seconds: float) -> dict:
    """The ``controlPlaneCost`` document: the run's counts and a month of them at list prices."""
    elapsed = max(1e-9, float(elapsed_seconds))
    per_sim_second = P.SECONDS_PER_MONTH / elapsed
    functions: dict[str, dict] = {}
    calls, calls_month = Counter(), 0.0
    rru = wru = sqs_month = events_month = logs_month = invocations_month = scheduled_month = 0.0
    lambda_cost = 0.0
    for name, f in sorted(usage.functions.items()):
        per_month = (P.SECONDS_PER_MONTH / f.interval_seconds if f.interval_seconds
                     else f.invocations * per_sim_second)
        scale = per_month / f.invocations if f.invocations else 0.0
        gb = f.memory_mb / 1024.0
        gbs = f.billed_ms * scale / 1000.0 * gb
        cold = P.COLD_STARTS_PER_FUNCTION_PER_DAY * P.HOURS_PER_MONTH / 24.0 * P.COLD_START_SECONDS * gb if f.invocations else 0.0
        price = P.LAMBDA_GB_SECOND[f.architecture]
        cost = (gbs + cold) * price + per_month * P.LAMBDA_PER_REQUEST if f.invocations else 0.0
        lambda_cost += cost
        functions[name] = {
            "invocations": f.invocations, "billedMs": f.billed_ms,
            "meanBilledMs": _r(f.billed_ms / f.invocations, 1) if f.invocations else 0.0,
            "meanCpuMs": _r(f.cpu_ms / f.invocations, 1) if f.invocations else 0.0,
            "meanWallMs": _r(f.wall_ms / f.invocations, 1) if f.invocations else 0.0,
            "memoryMb": f.memory_mb, "architecture": f.architecture,
            "trigger": "schedule" if f.interval_seconds else "queue",
            "invocationsPerMonth": _r(per_month if f.invocations else 0.0, 1),
            "awsCallsPerInvocation": _r(sum(f.aws_calls.values()) / f.invocations, 2) if f.invocations else 0.0,
            "awsCalls": dict(sorted(f.aws_calls.items())),
            "kubeCallsPerInvocation": _r(f.kube_calls / f.invocations, 2) if f.invocations else 0.0,
            "gbSecondsPerMonth": _r(gbs + cold, 1),
            "costPerMonth": _r(cost),
        }
        calls.update(f.aws_calls)
        calls_month += sum(f.aws_calls.values()) * scale
        rru += f.rru * scale
        wru += f.wru * scale
        sqs_month += f.sqs_requests * scale
        events_month += f.events_put * scale
        if not f.interval_seconds:     # Lambda's event source deletes each batch it handed over (one request)
            sqs_month += per_month if f.invocations else 0.0
        logs_month += f.log_bytes * scale + P.LAMBDA_PLATFORM_LOG_BYTES * (per_month if f.invocations else 0.0)
        invocations_month += per_month if f.invocations else 0.0
        scheduled_month += per_month if (f.interval_seconds and f.invocations) else 0.0
    polls = usage.queue_sources * P.SQS_EVENT_SOURCE_POLLERS * P.SECONDS_PER_MONTH / P.SQS_LONG_POLL_SECONDS
    watcher_sqs = usage.watcher_sqs_requests * per_sim_second
    ddb_cost = rru * P.DYNAMODB_PER_RRU + wru * P.DYNAMODB_PER_WRU
    sqs_cost = (sqs_month + polls + watcher_sqs) * P.SQS_PER_REQUEST
    eb_cost = scheduled_month * P.EVENTBRIDGE_PER_SCHEDULED_INVOCATION + events_month * P.EVENTBRIDGE_PER_EVENT
    metric_month = metric_months(usage, elapsed)
    cw_cost = metric_month * P.CLOUDWATCH_PER_METRIC_MONTH
    logs_cost = logs_month / 1e9 * P.CLOUDWATCH_LOGS_PER_GB
    xray_cost = invocations_month * P.XRAY_PER_TRACE
    total = lambda_cost + ddb_cost + sqs_cost + eb_cost + cw_cost + logs_cost + xray_cost
    return {
        "simulatedSeconds": _r(elapsed, 3),
        "region": P.REGION,
        "pricesRead": P.PRICES_READ,
        "functions": functions,
        "awsCalls": dict(sorted(calls.items())),
        "awsCallsPerMonth": _r(calls_month, 0),
        "lambda": {"invocationsPerMonth": _r(invocations_month, 0), "costPerMonth": _r(lambda_cost)},
        "dynamodb": {"rru": _r(sum(f.rru for f in usage.functions.values()), 1),
                     "wru": _r(sum(f.wru for f in usage.functions.values()), 1),
                     "rruPerMonth": _r(rru, 0), "wruPerMonth": _r(wru, 0), "costPerMonth": _r(ddb_cost)},
        "sqs": {"requests": sum(f.sqs_requests for f in usage.functions.values()),
                "watcherRequests": usage.watcher_sqs_requests,
                "requestsPerMonth": _r(sqs_month + watcher_sqs, 0), "eventSourcePollsPerMonth": _r(polls, 0),
                "costPerMonth": _r(sqs_cost)},
        "eventbridge": {"scheduledInvocationsPerMonth": _r(scheduled_month, 0),
                        "events": sum(f.events_put for f in usage.functions.values()), "costPerMonth": _r(eb_cost)},
        "cloudwatch": {"metrics": len(usage.metrics), "metricMonths": _r(metric_month, 2),
                       "metricsByFunction": dict(sorted(Counter(fn for fn, _h in usage.metrics.values()).items())),
                       "costPerMonth": _r(cw_cost)},
        "logs": {"bytes": sum(f.log_bytes for f in usage.functions.values()), "bytesPerMonth": _r(logs_month, 0),
                 "costPerMonth": _r(logs_cost)},
        "xray": {"tracesPerMonth": _r(invocations_month, 0), "costPerMonth": _r(xray_cost)},
        "totalPerMonth": _r(total),
        "notCounted": NOT_COUNTED,
        "assumptions": assumptions(),
    }


NOT_COUNTED = [
    "the EKS control plane ($0.10/h, the same with Karpenter) and the Kubernetes API requests (no charge)",
    "the watcher's pod in the cluster (its SQS sends are counted)",
    "DynamoDB and CloudWatch Logs storage, data transfer, alarms and dashboards",
    "free tiers (Lambda, SQS, X-Ray, EventBridge Scheduler, CloudWatch): the figures are list prices without them",
]


def assumptions() -> list[str]:
    return [
        f"list prices in {P.REGION} read {P.PRICES_READ} (sim/cost_prices.py names each source page)",
        "a month is 730 h; a scheduled function runs every interval all month, each invocation costing the mean "
        "of those measured; queue-triggered functions and the watcher at the run's rate",
        "billed duration = the handler thread's CPU time outside AWS calls x max(1, 1769 MB / memory) + "
        "per-call latency (DynamoDB 6 ms, SQS 10 ms, EC2 120 ms, CreateFleet 1.5 s, ...) + 10 ms per "
        "Kubernetes API request, rounded up to 1 ms; this machine's core taken as one Lambda vCPU",
        f"{P.COLD_STARTS_PER_FUNCTION_PER_DAY} cold starts per function per day of {P.COLD_START_SECONDS} s "
        "(INIT billed)",
        "DynamoDB request units estimated from item sizes (moto's ConsumedCapacity is a constant)",
        f"Lambda's SQS event source polls each queue with {P.SQS_EVENT_SOURCE_POLLERS} pollers, "
        f"{P.SQS_LONG_POLL_SECONDS:.0f} s long polls, empty or not",
        "every invocation traced by X-Ray (one a second is sampled); an EMF metric is billed for the hours it has "
        "data in, in the share of hours it had data while its function ran",
        "a queue-triggered invocation adds the event source's DeleteMessageBatch (one SQS request)",
        f"log bytes = the handlers' log lines and EMF documents + {P.LAMBDA_PLATFORM_LOG_BYTES} B of "
        "START/END/REPORT per invocation",
    ]
