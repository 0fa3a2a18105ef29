"""On-demand prices from the AWS Pricing API, with the DynamoDB cache and the bundled fallback.

``fetch_on_demand_prices(pricing_client, region)`` asks ``GetProducts`` the way Karpenter does
(service AmazonEC2, regionCode, Linux, no pre-installed software, capacitystatus Used,
marketoption OnDemand; once for tenancy Shared / "Compute Instance" and once for tenancy
Dedicated / "Compute Instance (bare metal)"), paginated, and parses the JSON price list with
:func:`parse_price_list`.

``on_demand_prices(pricing_client, region, cache=None)`` is what callers use: a fresh cache entry,
else the API (result stored in the cache), else a stale cache entry, else ``None`` meaning "use
the bundled table" -- every fallback is logged with its reason.  moto does not implement the
Pricing API (404), so offline runs take the bundled path.

The Pricing API lives in ``us-east-1`` (``cn-northwest-1`` for China); it is not reachable
from GovCloud, so ``us-gov-*`` regions always use the bundled table.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Iterable

from ...catalog.pricing import SOURCE_BUNDLED, SOURCE_PRICING_API, partition_of
from .pricing_cache import PriceCache

log = logging.getLogger(__name__)

__all__ = ["parse_price_list", "fetch_on_demand_prices", "on_demand_prices", "pricing_api_region", "OnDemandResult"]

_BASE_FILTERS = (
    ("serviceCode", "AmazonEC2"),
    ("preInstalledSw", "NA"),
    ("operatingSystem", "Linux"),
    ("capacitystatus", "Used"),
    ("marketoption", "OnDemand"),
)
_QUERIES = (
    (("tenancy", "Shared"), ("productFamily", "Compute Instance")),
    (("tenancy", "Dedicated"), ("productFamily", "Compute Instance (bare metal)")),
)


def pricing_api_region(region: str) -> str | None:
    """Where to call the Pricing API for ``region`` (None when it cannot be reached from that partition)."""
    part = partition_of(region)
    if part == "aws-cn":
        return "cn-northwest-1"
    if part == "aws-us-gov":
        return None
    return "us-east-1"


def parse_price_list(items: Iterable[Any], currencies: tuple[str, ...] = ("USD", "CNY")) -> dict[str, float]:
    """``{instance_type: hourly price}`` from GetProducts ``PriceList`` entries (JSON strings or dicts).

    Reads ``product.attributes.instanceType`` and every ``terms.OnDemand.*.priceDimensions.*``
    ``pricePerUnit`` in the first currency present; zero prices are skipped (as Karpenter does) and
    the lowest non-zero price of a type wins.  A malformed entry raises ``ValueError`` naming its index.
    """
    out: dict[str, float] = {}
    for i, raw in enumerate(items):
        try:
            doc = json.loads(raw) if isinstance(raw, (str, bytes)) else raw
        except json.JSONDecodeError as e:
            raise ValueError(f"PriceList[{i}]: invalid JSON: {e.msg}") from None
        if not isinstance(doc, dict):
            raise ValueError(f"PriceList[{i}]: expected an object")
        name = ((doc.get("product") or {}).get("attributes") or {}).get("instanceType")
        if not name:
            continue  # not an instance SKU
        terms = (doc.get("terms") or {}).get("OnDemand") or {}
        for term_id, term in terms.items():
            for dim_id, dim in ((term or {}).get("priceDimensions") or {}).items():
                per_unit = (dim or {}).get("pricePerUnit") or {}
                cur = next((c for c in currencies if c in per_unit), None)
                if cur is None:
                    continue
                try:
                    price = float(per_unit[cur])
                except (TypeError, ValueError):
                    raise ValueError(
                        f"PriceList[{i}].terms.OnDemand.{term_id}.priceDimensions.{dim_id}.pricePerUnit.{cur}: "
                        f"not a number: {per_unit[cur]!r}"
                    ) from None
                if price <= 0:
                    continue
                if name not in out or price < out[name]:
                    out[name] = price
    return out


def fetch_on_demand_prices(pricing_client: Any, region: str) -> dict[str, float]:
    """Call GetProducts (paginated) for ``region``; raises on any API error."""
    result: dict[str, float] = {}
    paginator = pricing_client.get_paginator("get_products")
    for extra in _QUERIES:
        filters = [{"Type": "TERM_MATCH", "Field": f, "Value": v} for f, v in (("regionCode", region), *_BASE_FILTERS, *extra)]
        for page in paginator.paginate(ServiceCode="AmazonEC2", Filters=filters, FormatVersion="aws_v1"):
            for name, price in parse_price_list(page.get("PriceList") or []).items():
                if name not in result or price < result[name]:
                    result[name] = price
    return result


@dataclass(frozen=True)
class OnDemandResult:
    """``prices`` is None when the caller should use the bundled table; ``reason`` says why."""

    prices: dict[str, float] | None
    source: str
    reason: str


def on_demand_prices(pricing_client: Any | None, region: str, cache: PriceCache | None = None) -> OnDemandResult:
    """Fresh cache -> Pricing API (then cached) -> stale cache -> bundled (``prices=None``)."""
    stale = None
    if cache is not None:
        try:
            entry = cache.get("on-demand", region)
        except Exception as e:  # cache trouble must not stop pricing
            log.warning("price cache read failed for %s: %s", region, e)
            entry = None
        if entry is not None and entry.fresh and entry.prices:
            return OnDemandResult(entry.prices, SOURCE_PRICING_API, "fresh cache entry")
        stale = entry
    api_region = pricing_api_region(region)
    if pricing_client is None:
        reason = "no pricing client"
    elif api_region is None:
        reason = f"the Pricing API is not reachable from {partition_of(region)}"
    else:
        try:
            prices = fetch_on_demand_prices(pricing_client, region)
            if not prices:
                raise ValueError("GetProducts returned no on-demand prices")
        except Exception as e:
            reason = f"Pricing API failed: {e}"
        else:
            if cache is not None:
                try:
                    cache.put("on-demand", region, prices, SOURCE_PRICING_API)
                except Exception as e:
                    log.warning("price cache write failed for %s: %s", region, e)
            return OnDemandResult(prices, SOURCE_PRICING_API, "fetched from the Pricing API")
    if stale is not None and stale.prices:
        log.warning("on-demand prices for %s: %s; using the stale cache entry", region, reason)
        return OnDemandResult(stale.prices, SOURCE_PRICING_API, f"{reason}; stale cache entry used")
    log.warning("on-demand prices for %s: %s; using the bundled table", region, reason)
    return OnDemandResult(None, SOURCE_BUNDLED, f"{reason}; bundled table used")
