"""SQS as the stack deploys it, on the virtual clock: the fault run's pod and interruption queues.

* :func:`sqs_on_clock` -- moto's SQS reads the time through ``moto.sqs.models.unix_time`` / ``unix_time_millis``:
  pointed at the :class:`~karpenter_lambda.sim.clock.VirtualClock`, moto's own visibility timeouts, receive counts,
  redrive to the dead-letter queue (on the receive after ``maxReceiveCount`` receives) and retention run on virtual
  time.  Nothing here re-implements them.
* :func:`stack_queues` -- each queue's settings as the CDK stack synthesizes them, read from the same sources:
  ``infra/stack.py`` ``QUEUES`` (read as text with :mod:`ast`: that module imports the CDK), the consumer's
  ``timeoutSeconds`` in ``functions/registry.json`` and its batching window (``infra/config.py`` ``INT_PARAMS``
  default), the visibility timeout by ``infra/functions.visibility_timeout_for``'s rule (6x the timeout + the window)
  unless the queue overrides it.
* :class:`SimQueue` -- a queue + its DLQ in moto with those settings, and Lambda's event source on it: ``poll``
  receives up to the trigger's batch size of visible messages (a Lambda SQS event), ``settle`` deletes what the
  invocation acknowledged (nothing when it died: crash, timeout, unhandled error; else every record but its
  ``batchItemFailures``).  The rest comes back after the visibility timeout with its receive count raised, and
  lands in the DLQ after ``maxReceiveCount`` receives.
"""

from __future__ import annotations

import ast
import contextlib
import json
from dataclasses import dataclass
from pathlib import Path

from ..feeds import sqs_record
from ..functions import _int_params

# infra/stack.py QueueSpec's defaults, used only when the dataclass cannot be read there
_SPEC_DEFAULTS = {"retention_hours": 24, "max_receive_count": 5, "retention_seconds": None, "visibility_seconds": None}


@dataclass(frozen=True)
class QueueSettings:
    name: str
    consumer: str
    visibility_seconds: int
    max_receive_count: int
    retention_seconds: int
    batch_size: int
    consumer_timeout_seconds: int


def function_timeouts(root: Path) -> dict[str, int]:
    """Each function's Lambda timeout (seconds), from ``functions/registry.json`` (60 when unset, as infra)."""
    doc = json.loads((root / "functions" / "registry.json").read_text())
    return {f["name"]: int(f.get("timeoutSeconds", 60)) for f in doc["functions"]}


def _literal(node):
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


def _stack_specs(root: Path) -> list[dict]:
    """``QUEUES`` of infra/stack.py as dicts (QueueSpec's field defaults filled in), read from the source."""
    tree = ast.parse((root / "infra" / "stack.py").read_text())
    defaults = dict(_SPEC_DEFAULTS)
    specs: list[dict] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "QueueSpec":
            for st in node.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
                    defaults[st.target.id] = _literal(st.value)
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and target.id == "QUEUES" and getattr(node, "value", None) is not None:
            for call in getattr(node.value, "elts", []):
                if isinstance(call, ast.Call):
                    specs.append({**defaults, **{k.arg: _literal(k.value) for k in call.keywords}})
    if not specs:
        raise ValueError(f"no QueueSpec found in QUEUES of {root / 'infra' / 'stack.py'}")
    return specs


def _camel(param: str) -> str:
    """The registry names a context parameter in snake case (``pod_batch_window_seconds``), INT_PARAMS in camel case."""
    head, *rest = param.split("_")
    return head + "".join(w.capitalize() for w in rest)


def stack_queues(root: Path) -> dict[str, QueueSettings]:
    """The stack's queues by name (``pod``, ``interruption``) with the values it synthesizes."""
    doc = json.loads((root / "functions" / "registry.json").read_text())
    functions = {f["name"]: f for f in doc["functions"]}
    params = _int_params(root)
    out = {}
    for spec in _stack_specs(root):
        consumer = functions[spec["consumer"]]
        timeout = int(consumer.get("timeoutSeconds", 60))
        trigger = next((t for t in consumer.get("triggers") or [] if t.get("queue") == spec["name"]), {})
        window = int(params[_camel(trigger["windowParam"])][0]) if trigger.get("windowParam") else 0
        batch = int(params[_camel(trigger["batchSizeParam"])][0]) if trigger.get("batchSizeParam") \
            else int(trigger.get("batchSize", 10))
        retention = spec["retention_seconds"] or int(spec["retention_hours"]) * 3600
        out[spec["name"]] = QueueSettings(name=spec["name"], consumer=spec["consumer"],
                                          visibility_seconds=int(spec["visibility_seconds"] or 6 * timeout + window),
                                          max_receive_count=int(spec["max_receive_count"]),
                                          retention_seconds=int(retention), batch_size=batch,
                                          consumer_timeout_seconds=timeout)
    return out


@contextlib.contextmanager
def sqs_on_clock(clock):
    """moto's SQS on ``clock`` (visibility, receive timestamps, retention, redrive) while the block runs."""
    import moto.sqs.models as sqs_models   # moto is the [sim] extra

    saved = (sqs_models.unix_time, sqs_models.unix_time_millis)
    sqs_models.unix_time = lambda *a: clock()
    sqs_models.unix_time_millis = lambda *a: clock() * 1000.0
    try:
        yield
    finally:
        sqs_models.unix_time, sqs_models.unix_time_millis = saved


class SimQueue:
    """One queue of the stack (and its DLQ) in moto, and the Lambda event source reading it."""

    def __init__(self, sqs, settings: QueueSettings, prefix: str, region: str):
        self.sqs = sqs
        self.settings = settings
        self.region = region
        self.dlq_url = sqs.create_queue(QueueName=f"{prefix}-{settings.name}-dlq",
                                        Attributes={"MessageRetentionPeriod": str(14 * 86400)})["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=self.dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self.url = sqs.create_queue(QueueName=f"{prefix}-{settings.name}", Attributes={
            "VisibilityTimeout": str(settings.visibility_seconds),
            "MessageRetentionPeriod": str(settings.retention_seconds),
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn,
                                         "maxReceiveCount": str(settings.max_receive_count)})})["QueueUrl"]
        self.received = 0       # records handed to the function
        self.redelivered = 0    # of which with a receive count above 1 (SQS gave them again)

    def send(self, body: str) -> None:
        self.sqs.send_message(QueueUrl=self.url, MessageBody=body)

    def poll(self, limit: int | None = None) -> dict | None:
        """One Lambda SQS event of the visible messages (at most the trigger's batch size), or None."""
        limit = limit or self.settings.batch_size
        msgs: list[dict] = []
        while len(msgs) < limit:
            got = self.sqs.receive_message(QueueUrl=self.url, MaxNumberOfMessages=min(10, limit - len(msgs)),
                                           AttributeNames=["All"]).get("Messages", [])
            if not got:
                break
            msgs.extend(got)
        if not msgs:
            return None
        self.received += len(msgs)
        self.redelivered += sum(1 for m in msgs if int((m.get("Attributes") or {}).get("ApproximateReceiveCount", "1")) > 1)
        return {"Records": [sqs_record(m, self.url, self.region) for m in msgs]}

    def settle(self, event: dict, out: dict) -> list[dict]:
        """After the invocation: delete the acknowledged records; returns the records left to SQS (they come back
        after the visibility timeout).  ``out`` is the injector's outcome (``crashed``/``error``/``response``)."""
        if out.get("crashed") or out.get("error"):
            return list(event["Records"])
        failed = {f["itemIdentifier"] for f in (out.get("response") or {}).get("batchItemFailures", [])}
        left = []
        for r in event["Records"]:
            if r["messageId"] in failed:
                left.append(r)
            else:
                self.sqs.delete_message(QueueUrl=self.url, ReceiptHandle=r["receiptHandle"])
        return left

    def depth(self, dlq: bool = False) -> int:
        """ApproximateNumberOfMessages + ApproximateNumberOfMessagesNotVisible, as GetQueueAttributes answers them,
        read from moto's queue (the harness asks around every poll: no request serialized and parsed each time)."""
        queue = _moto_queue(self.dlq_url if dlq else self.url, self.region)
        return int(queue.approximate_number_of_messages) + int(queue.approximate_number_of_messages_not_visible)


def _moto_queue(url: str, region: str):
    """moto's queue behind ``url`` (``https://sqs.<region>.amazonaws.com/<account>/<name>``)."""
    from moto.sqs.models import sqs_backends   # moto is the [sim] extra

    account, name = url.rstrip("/").split("/")[-2:]
    return sqs_backends[account][region].get_queue(name)
