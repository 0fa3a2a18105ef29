"""DynamoDB cache of fetched prices (on-demand from the Pricing API, spot from price history).

One item per (kind, region) in the shared cache table (env ``KARPENTER_LAMBDA_CACHE_TABLE``,
default ``karpenter-lambda-cache``; key ``pk`` (S) + ``sk`` (S); TTL attribute ``ttl``)::

    pk = "prices#<kind>#<region>"   kind: on-demand | spot
    sk = "latest"
    prices      B   zlib-compressed JSON ({type: price} or {"type|zone": price})
    source      S   where the prices came from (pricing-api, spot-history)
    fetched_at  N   epoch seconds
    ttl         N   fetched_at + retention (default 7 days): DynamoDB deletes it some time after

An entry is **fresh** while ``now - fetched_at < refresh`` (default 12 h for on-demand, 1 h for
spot).  A stale entry is still returned by :meth:`PriceCache.get` so a caller whose refresh fails
can prefer it over the bundled table.  Uses the boto3 DynamoDB client (no pynamodb model: the
item is a blob, not a state object).
"""

from __future__ import annotations

import json
import os
import time
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping

__all__ = ["PriceCache", "CachedPrices", "cache_table_name", "ensure_cache_table", "DEFAULT_TABLE"]

DEFAULT_TABLE = "karpenter-lambda-cache"
ENV_TABLE = "KARPENTER_LAMBDA_CACHE_TABLE"
DEFAULT_REFRESH_SECONDS = {"on-demand": 12 * 3600, "spot": 3600}
DEFAULT_RETENTION_SECONDS = 7 * 24 * 3600
KINDS = ("on-demand", "spot")


def cache_table_name() -> str:
    return os.environ.get(ENV_TABLE) or DEFAULT_TABLE


def ensure_cache_table(client: Any, table_name: str | None = None) -> str:
    """Create the cache table (pk/sk, on-demand billing, TTL on ``ttl``) if missing. For tests and the simulator."""
    name = table_name or cache_table_name()
    try:
        client.describe_table(TableName=name)
        return name
    except client.exceptions.ResourceNotFoundException:
        pass
    client.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    client.get_waiter("table_exists").wait(TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 30})
    client.update_time_to_live(TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "ttl"})
    return name


@dataclass(frozen=True)
class CachedPrices:
    kind: str
    region: str
    prices: dict
    source: str
    fetched_at: float
    fresh: bool


def _encode(kind: str, prices: Mapping) -> bytes:
    if kind == "spot":
        flat = {f"{t}|{z}": float(p) for (t, z), p in prices.items()}
    else:
        flat = {str(t): float(p) for t, p in prices.items()}
    return zlib.compress(json.dumps(flat, sort_keys=True, separators=(",", ":")).encode(), 6)


def _decode(kind: str, blob: bytes) -> dict:
    flat = json.loads(zlib.decompress(blob).decode())
    if kind == "spot":
        return {tuple(k.split("|", 1)): float(v) for k, v in flat.items()}
    return {k: float(v) for k, v in flat.items()}


class PriceCache:
    """Read/write fetched prices in the DynamoDB cache table."""

    def __init__(
        self,
        client: Any,
        table_name: str | None = None,
        *,
        refresh_seconds: Mapping[str, float] | float | None = None,
        retention_seconds: float = DEFAULT_RETENTION_SECONDS,
        now: Callable[[], float] = time.time,
    ):
        self.client = client
        self.table_name = table_name or cache_table_name()
        if refresh_seconds is None:
            self.refresh = dict(DEFAULT_REFRESH_SECONDS)
        elif isinstance(refresh_seconds, Mapping):
            self.refresh = {**DEFAULT_REFRESH_SECONDS, **refresh_seconds}
        else:
            self.refresh = {k: float(refresh_seconds) for k in KINDS}
        for k, v in self.refresh.items():
            if v <= 0:
                raise ValueError(f"refresh_seconds[{k}]: must be > 0, got {v!r}")
        self.retention = float(retention_seconds)
        self.now = now

    @staticmethod
    def _key(kind: str, region: str) -> dict:
        if kind not in KINDS:
            raise ValueError(f"kind: must be one of {KINDS}, got {kind!r}")
        return {"pk": {"S": f"prices#{kind}#{region}"}, "sk": {"S": "latest"}}

    def get(self, kind: str, region: str) -> CachedPrices | None:
        """The cached entry (fresh or stale), or None when absent or expired past its ``ttl``."""
        resp = self.client.get_item(TableName=self.table_name, Key=self._key(kind, region), ConsistentRead=True)
        item = resp.get("Item")
        if not item:
            return None
        now = self.now()
        if "ttl" in item and float(item["ttl"]["N"]) <= now:
            return None  # DynamoDB deletes expired items lazily; treat them as gone
        fetched_at = float(item["fetched_at"]["N"])
        return CachedPrices(
            kind=kind,
            region=region,
            prices=_decode(kind, item["prices"]["B"]),
            source=item.get("source", {}).get("S", ""),
            fetched_at=fetched_at,
            fresh=(now - fetched_at) < self.refresh[kind],
        )

    def put(self, kind: str, region: str, prices: Mapping, source: str) -> CachedPrices:
        now = self.now()
        item = {
            **self._key(kind, region),
            "prices": {"B": _encode(kind, prices)},
            "source": {"S": source},
            "fetched_at": {"N": repr(float(now))},
            "ttl": {"N": str(int(now + self.retention))},
        }
        self.client.put_item(TableName=self.table_name, Item=item)
        return CachedPrices(kind, region, dict(prices), source, float(now), True)
