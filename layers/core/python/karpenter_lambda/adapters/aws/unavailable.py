"""The unavailable-offerings cache: (instance type, zone, capacity type) that just failed to launch.

Karpenter keeps an in-memory cache with a 3-minute TTL of offerings that returned an
insufficient-capacity error, so the next scheduling round skips them.  Lambda invocations
share nothing in memory, so the cache lives in DynamoDB:

* table: env ``KARPENTER_LAMBDA_CACHE_TABLE`` (default ``karpenter-lambda-cache``),
  hash key ``pk`` (S), range key ``sk`` (S), TTL attribute ``ttl`` (epoch seconds);
* item: ``pk = "unavailable#<cluster>"``, ``sk = "<type>|<zone>|<capacity type>"``,
  ``ttl`` (integer epoch seconds, for DynamoDB's TTL deleter), ``expiresAt`` (exact expiry,
  number), ``reason``, ``markedAt``.

DynamoDB deletes expired items lazily (up to days later), so :meth:`all` ignores items whose
``expiresAt`` has passed by the injected clock.  The clock is injectable so the simulator can
run on virtual time.
"""

from __future__ import annotations

import os
import time
from decimal import Decimal
from typing import Callable, Iterable

DEFAULT_CACHE_TABLE = "karpenter-lambda-cache"
CACHE_TABLE_ENV = "KARPENTER_LAMBDA_CACHE_TABLE"
CLUSTER_ENV = "KARPENTER_LAMBDA_CLUSTER"
DEFAULT_TTL_SECONDS = 180

Offering = tuple[str, str, str]  # (instance type, zone, capacity type)


def _num(value: float) -> str:
    return repr(float(value))


class UnavailableOfferings:
    """DynamoDB-backed set of offerings that recently failed with insufficient capacity.

    ``UnavailableOfferings(table_name=None, region=None, endpoint_url=None, ttl_seconds=180,
    clock=time.time, cluster_name=None, client=None)``.  ``cluster_name`` defaults to env
    ``KARPENTER_LAMBDA_CLUSTER`` or ``"default"``; ``client`` may be an existing boto3
    DynamoDB client.
    """

    def __init__(
        self,
        table_name: str | None = None,
        region: str | None = None,
        endpoint_url: str | None = None,
        ttl_seconds: float = DEFAULT_TTL_SECONDS,
        clock: Callable[[], float] = time.time,
        cluster_name: str | None = None,
        client=None,
    ):
        self.table_name = table_name or os.environ.get(CACHE_TABLE_ENV) or DEFAULT_CACHE_TABLE
        self.ttl_seconds = float(ttl_seconds)
        if self.ttl_seconds <= 0:
            raise ValueError(f"ttl_seconds must be positive, got {ttl_seconds!r}")
        self.clock = clock
        self.cluster_name = cluster_name or os.environ.get(CLUSTER_ENV) or "default"
        if client is None:  # the controllers pass theirs (controllers/environment.py); same botocore settings here
            import boto3
            from botocore.config import Config

            kwargs = {"config": Config(retries={"mode": "standard", "total_max_attempts": 3},
                                       connect_timeout=3, read_timeout=15)}
            if region:
                kwargs["region_name"] = region
            if endpoint_url:
                kwargs["endpoint_url"] = endpoint_url
            client = boto3.client("dynamodb", **kwargs)
        self.client = client

    # -- keys ----------------------------------------------------------------------
    @property
    def pk(self) -> str:
        return f"unavailable#{self.cluster_name}"

    @staticmethod
    def sort_key(instance_type: str, zone: str, capacity_type: str) -> str:
        for name, v in (("instance_type", instance_type), ("zone", zone), ("capacity_type", capacity_type)):
            if not v or "|" in v:
                raise ValueError(f"{name} must be a non-empty string without '|', got {v!r}")
        return f"{instance_type}|{zone}|{capacity_type}"

    # -- table ---------------------------------------------------------------------
    def ensure_table(self) -> None:
        """Create the cache table (pk/sk, on-demand billing, TTL on ``ttl``) when missing. For tests and the simulator."""
        try:
            self.client.create_table(
                TableName=self.table_name,
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                AttributeDefinitions=[
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                ],
                BillingMode="PAY_PER_REQUEST",
            )
        except self.client.exceptions.ResourceInUseException:
            return
        self.client.get_waiter("table_exists").wait(TableName=self.table_name, WaiterConfig={"Delay": 1, "MaxAttempts": 30})
        try:
            self.client.update_time_to_live(
                TableName=self.table_name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "ttl"}
            )
        except Exception:  # noqa: BLE001 - TTL already enabled or unsupported by an emulator: expiry is also checked on read
            pass

    # -- writes --------------------------------------------------------------------
    def mark(self, instance_type: str, zone: str, capacity_type: str, reason: str = "") -> None:
        """Mark one offering unavailable for ``ttl_seconds`` from now (re-marking extends it)."""
        self.mark_many([(instance_type, zone, capacity_type)], reason)

    def mark_many(self, offerings: Iterable[Offering], reason: str = "") -> None:
        now = float(self.clock())
        expires = now + self.ttl_seconds
        items = {}
        for it, zone, ct in offerings:
            sk = self.sort_key(it, zone, ct)
            items[sk] = {
                "PutRequest": {
                    "Item": {
                        "pk": {"S": self.pk},
                        "sk": {"S": sk},
                        "instanceType": {"S": it},
                        "zone": {"S": zone},
                        "capacityType": {"S": ct},
                        "reason": {"S": reason or "unavailable"},
                        "markedAt": {"N": _num(now)},
                        "expiresAt": {"N": _num(expires)},
                        "ttl": {"N": str(int(expires) + 1)},
                    }
                }
            }
        reqs = list(items.values())
        for i in range(0, len(reqs), 25):
            pending = {self.table_name: reqs[i : i + 25]}
            for _ in range(8):
                out = self.client.batch_write_item(RequestItems=pending)
                pending = out.get("UnprocessedItems") or {}
                if not pending:
                    break
            else:
                raise RuntimeError(f"could not write unavailable offerings to DynamoDB table {self.table_name}")

    def clear(self, instance_type: str, zone: str, capacity_type: str) -> None:
        """Forget one offering (e.g. when capacity is known to be back)."""
        self.client.delete_item(
            TableName=self.table_name,
            Key={"pk": {"S": self.pk}, "sk": {"S": self.sort_key(instance_type, zone, capacity_type)}},
        )

    # -- reads ---------------------------------------------------------------------
    def entries(self) -> list[dict]:
        """Unexpired entries: ``[{instanceType, zone, capacityType, reason, markedAt, expiresAt}]``."""
        now = float(self.clock())
        out = []
        kwargs = {
            "TableName": self.table_name,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": self.pk}},
            "ConsistentRead": True,
        }
        while True:
            page = self.client.query(**kwargs)
            for item in page.get("Items", []):
                expires = float(Decimal(item["expiresAt"]["N"])) if "expiresAt" in item else float(item["ttl"]["N"])
                if expires <= now:
                    continue
                out.append(
                    {
                        "instanceType": item["instanceType"]["S"],
                        "zone": item["zone"]["S"],
                        "capacityType": item["capacityType"]["S"],
                        "reason": item.get("reason", {}).get("S", ""),
                        "markedAt": float(item["markedAt"]["N"]) if "markedAt" in item else None,
                        "expiresAt": expires,
                    }
                )
            if not page.get("LastEvaluatedKey"):
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return out

    def all(self) -> set[Offering]:
        """Every offering still unavailable by the clock, as ``{(type, zone, capacity type)}``."""
        return {(e["instanceType"], e["zone"], e["capacityType"]) for e in self.entries()}

    def is_unavailable(self, instance_type: str, zone: str, capacity_type: str) -> bool:
        return (instance_type, zone, capacity_type) in self.all()
