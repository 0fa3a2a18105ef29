"""An SQS work queue with its dead-letter queue: SSE (SQS managed), TLS only, redrive after N receives."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_sqs as sqs
from constructs import Construct

DEFAULT_MAX_RECEIVE_COUNT = 5


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
    ) -> None:
        super().__init__(scope, construct_id)
        self.dlq = sqs.Queue(
            self,
            "DeadLetter",
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            retention_period=Duration.days(14),
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
