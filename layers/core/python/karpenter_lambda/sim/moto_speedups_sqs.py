"""A faster moto for the embedded environment: a received message's retention checked from its queue's own field.

moto 5.2's ``receive_message`` checks each message it hands out with ``is_message_valid_based_on_retention_period``,
which asks ``get_queue_attributes(name, ["MessageRetentionPeriod"])``: that builds the queue's whole attribute map
(every attribute name converted with a regex, the message counts) three times for one number. A 4-hour simulation
spent about 10 ms a ReceiveMessage there. The period is the queue's ``message_retention_period`` attribute (the
field ``get_queue_attributes`` reads, by the same name conversion), so it is read directly; a queue without it (moto
would raise) takes moto's own path. ``tests/sim/test_speed_sqs.py`` holds the answers equal to moto's own.
"""

from __future__ import annotations

from typing import Any


def install() -> bool:
    """Patch ``SQSBackend.is_message_valid_based_on_retention_period`` (once)."""
    import moto.sqs.models as sqs_models   # its unix_time read at each call: sim/faults/queues.py puts SQS on a clock
    from moto.sqs.models import SQSBackend

    if getattr(SQSBackend, "karpenter_lambda_fast_retention", False):
        return True
    original = SQSBackend.is_message_valid_based_on_retention_period

    def is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
        queue = self.queues.get(queue_name)
        period = getattr(queue, "message_retention_period", None) if queue is not None else None
        if period is None:
            return original(self, queue_name, message)
        return period + message.sent_timestamp / 1000 > sqs_models.unix_time()

    SQSBackend.is_message_valid_based_on_retention_period = is_message_valid_based_on_retention_period
    SQSBackend.karpenter_lambda_fast_retention = True
    SQSBackend.karpenter_lambda_retention_original = original
    return True


def uninstall() -> None:
    from moto.sqs.models import SQSBackend

    if getattr(SQSBackend, "karpenter_lambda_fast_retention", False):
        SQSBackend.is_message_valid_based_on_retention_period = SQSBackend.karpenter_lambda_retention_original
        SQSBackend.karpenter_lambda_fast_retention = False
