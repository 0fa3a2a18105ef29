"""The DynamoDB tables (keys are the contract with ``karpenter_lambda.adapters.store``).

* state: ``pk`` (S) / ``sk`` (S), pynamodb ``version`` attribute for optimistic locking, TTL attribute ``ttl``
  (only launch reservations carry it: expired pod reservations are cleaned up); RETAIN.
* cache: ``pk`` (S) / ``sk`` (S), TTL attribute ``ttl`` (epoch seconds); destroyed with the stack.

Both: on-demand billing, point-in-time recovery, encryption with the AWS managed key.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

STATE_TABLE_ENV = "KARPENTER_LAMBDA_STATE_TABLE"
CACHE_TABLE_ENV = "KARPENTER_LAMBDA_CACHE_TABLE"
TTL_ATTRIBUTE = "ttl"


def _table(scope: Construct, construct_id: str, *, ttl: str | None, removal: RemovalPolicy) -> dynamodb.Table:
    return dynamodb.Table(
        scope,
        construct_id,
        partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
        sort_key=dynamodb.Attribute(name="sk", type=dynamodb.AttributeType.STRING),
        billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
        point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(point_in_time_recovery_enabled=True),
        encryption=dynamodb.TableEncryption.AWS_MANAGED,
        time_to_live_attribute=ttl,
        removal_policy=removal,
    )


class Tables(Construct):
    """``state`` and ``cache`` tables."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(scope, construct_id)
        self.state = _table(self, "State", ttl=TTL_ATTRIBUTE, removal=RemovalPolicy.RETAIN)
        self.cache = _table(self, "Cache", ttl=TTL_ATTRIBUTE, removal=RemovalPolicy.DESTROY)

    def environment(self) -> dict[str, str]:
        return {STATE_TABLE_ENV: self.state.table_name, CACHE_TABLE_ENV: self.cache.table_name}
