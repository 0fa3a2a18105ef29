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

from karpenter_lambda.sim import moto_patch


def install() -> bool:
    """Patch ``SQSBackend.is_message_valid_based_on_retention_period`` (once)."""
    import moto.sqs.models as sqs_models   # its unix_time read at each call: sim/faults/queues.py puts SQS on a clock
    from moto.sqs.models import SQSBackend

    def make(original: Any) -> Any:
        def is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
            queue = self.queues.get(queue_name)
            period = getattr(queue, "message_retention_period", None) if queue is not None else None
            if period is None:
                return original(self, queue_name, message)
            return period + message.sent_timestamp / 1000 > sqs_models.unix_time()
        return is_message_valid_based_on_retention_period

    return moto_patch.replace(SQSBackend, "is_message_valid_based_on_retention_period", make)


def uninstall() -> None:
    from moto.sqs.models import SQSBackend

    moto_patch.restore(SQSBackend, "is_message_valid_based_on_retention_period")
