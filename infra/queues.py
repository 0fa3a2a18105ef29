"""An SQS work queue with its dead-letter queue: SSE (SQS managed), TLS only, redrive after N receives.

The queue's timings must let a failed message reach its dead-letter queue: a record that a function failed (or that a
timed-out run left behind) becomes visible again only after the visibility timeout, and SQS moves it to the DLQ on the
receive after ``max_receive_count`` receives.  So the retention must outlast ``max_receive_count`` visibility windows
(:func:`check_queue_timings`, enforced at synth); otherwise a message expires, unseen, before it is ever redriven.
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_sqs as sqs
from constructs import Construct

DEFAULT_MAX_RECEIVE_COUNT = 5
DLQ_RETENTION = Duration.days(14)   # the longest SQS allows: a dead letter keeps its original enqueue time


def check_queue_timings(name: str, *, visibility_seconds: int, retention_seconds: int, max_receive_count: int,
                        consumer_timeout_seconds: int | None = None) -> None:
    """Raise ValueError (naming the queue and the numbers) unless a message can be received ``max_receive_count``
    times and still reach the DLQ before it expires, and (Lambda's own rule for SQS event sources) the visibility
    timeout is at least the consumer function's timeout."""
    if visibility_seconds >= retention_seconds:
        raise ValueError(f"queue {name}: visibility timeout {visibility_seconds} s must be below its retention "
                         f"{retention_seconds} s, or a failed message expires before it is visible again")
    if max_receive_count * visibility_seconds >= retention_seconds:
        raise ValueError(f"queue {name}: maxReceiveCount {max_receive_count} x visibility {visibility_seconds} s = "
                         f"{max_receive_count * visibility_seconds} s must be below the retention {retention_seconds} s, "
                         "or a message that keeps failing expires instead of reaching the dead-letter queue")
    if consumer_timeout_seconds is not None and visibility_seconds < consumer_timeout_seconds:
        raise ValueError(f"queue {name}: visibility timeout {visibility_seconds} s is below its consumer's timeout "
                         f"{consumer_timeout_seconds} s (Lambda refuses such an SQS event source)")


class KarpenterQueue(Construct):
    """``queue`` (consumed by a function) and ``dlq`` (messages that failed ``max_receive_count`` times)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        visibility_timeout_seconds: int,
        retention: Duration = Duration.days(4),
        max_receive_count: int = DEFAULT_MAX_RECEIVE_COUNT,
        consumer_timeout_seconds: int | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        check_queue_timings(construct_id, visibility_seconds=visibility_timeout_seconds,
                            retention_seconds=int(retention.to_seconds()), max_receive_count=max_receive_count,
                            consumer_timeout_seconds=consumer_timeout_seconds)
        self.dlq = sqs.Queue(
            self,
            "DeadLetter",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=DLQ_RETENTION,
        )
        self.queue = sqs.Queue(
            self,
            "Queue",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            visibility_timeout=Duration.seconds(visibility_timeout_seconds),
            retention_period=retention,
            dead_letter_queue=sqs.DeadLetterQueue(queue=self.dlq, max_receive_count=max_receive_count),
        )
