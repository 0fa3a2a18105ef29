"""Instance types per EC2NodeClass, cached per process (the AWS cloud provider's catalog).

EC2 descriptions are fetched once per process (moto's full call takes seconds); the built instance types
(with their prices) are kept ``CATALOG_TTL_SECONDS`` of real time, so a warm Lambda container picks up new
prices (Pricing API / spot history through the DynamoDB price cache).
"""

from __future__ import annotations

import hashlib
import json
import time

CATALOG_TTL_SECONDS = 300.0
_catalog_cache: dict[tuple, tuple[float, list]] = {}


def _catalog_key(nodeclass, zones, unavailable) -> tuple:
    spec = json.dumps(nodeclass.spec if nodeclass is not None else None, sort_keys=True, default=str)
    return (hashlib.sha256(spec.encode()).hexdigest(), tuple(sorted(zones or ())), tuple(sorted(unavailable)))


def default_catalog_loader(ec2, region: str, nodeclass, zones: list[str] | None, unavailable: set, *,
                           pricing=None, price_cache=None) -> list:
    """Instance types for one EC2NodeClass (cached per process by nodeclass spec, zones, unavailable set, for
    CATALOG_TTL_SECONDS).  Prices: on-demand from the Pricing API (``pricing`` client) and spot from the price
    history, both through the DynamoDB ``price_cache`` when given; the bundled table / estimate otherwise."""
    key = (region,) + _catalog_key(nodeclass, zones, unavailable)
    hit = _catalog_cache.get(key)
    now = time.monotonic()
    if hit is not None and now - hit[0] < CATALOG_TTL_SECONDS:
        return hit[1]
    from ..adapters.aws import ec2_catalog

    clients = {"ec2": ec2, "pricing": pricing}
    types = ec2_catalog.load_catalog(clients, region, nodeclass=nodeclass, unavailable=frozenset(unavailable),
                                     zones=zones, cache=price_cache)
    if len(_catalog_cache) > 64:
        _catalog_cache.clear()
    _catalog_cache[key] = (now, types)
    return types
