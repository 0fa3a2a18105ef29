"""Instance types per EC2NodeClass, cached per process (the AWS cloud provider's catalog, Karpenter's instance-type
provider).

EC2 descriptions are fetched once per process (moto's full call takes seconds); the built instance types
(with their prices) are kept ``CATALOG_TTL_SECONDS`` of real time, so a warm Lambda container picks up new
prices (Pricing API / spot history through the DynamoDB price cache).

This is the catalog real launches and consolidation decide on, so offerings priced by an estimate (no real
spot price: no history, or DescribeSpotPriceHistory failed) are **unavailable** here, as in Karpenter, unless
``$KARPENTER_LAMBDA_ESTIMATED_PRICES=available`` (the simulator sets it: moto has no real spot prices).

Capacity follows the deployment's VM memory overhead and reserved ENIs (Karpenter's ``--vm-memory-overhead-percent``,
``--reserved-enis``), given by the caller (``AWSCloudProvider``, from ``runtime.Config``) and part of the cache key.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time

from ..adapters.aws import ec2_catalog
from ..catalog.allocatable import DEFAULT_VM_MEMORY_OVERHEAD_PERCENT

log = logging.getLogger(__name__)

CATALOG_TTL_SECONDS = 300.0
_catalog_cache: dict[tuple, tuple[float, list]] = {}


def _catalog_key(nodeclass, zones, unavailable, reservations=(), placement_group_id=None,
                 placement_group_strategy=None) -> tuple:
    spec = json.dumps(nodeclass.spec if nodeclass is not None else None, sort_keys=True, default=str)
    return (hashlib.sha256(spec.encode()).hexdigest(), tuple(sorted(zones or ())), tuple(sorted(unavailable)),
            tuple(reservations), placement_group_id, placement_group_strategy)


def default_catalog_loader(ec2, region: str, nodeclass, zones: list[str] | None, unavailable: set, *,
                           pricing=None, price_cache=None, estimated_available: bool | None = None,
                           reservations=(), placement_group_id: str | None = None,
                           placement_group_strategy: str | None = None,
                           vm_memory_overhead_percent: float = DEFAULT_VM_MEMORY_OVERHEAD_PERCENT,
                           reserved_enis: int = 0) -> list:
    """Instance types for one EC2NodeClass (cached per process by nodeclass spec, zones, unavailable set, for
    CATALOG_TTL_SECONDS).  Prices: on-demand from the Pricing API (``pricing`` client) and spot from the price
    history, both through the DynamoDB ``price_cache`` when given; the bundled table otherwise.  Spot offerings
    with no real price carry the estimate and are unavailable unless ``estimated_available`` (default:
    ``$KARPENTER_LAMBDA_ESTIMATED_PRICES``, see ``ec2_catalog.estimated_prices_available``).  ``reservations`` (the
    EC2NodeClass's resolved capacity reservations, with their available counts: part of the cache key) add
    ``reserved`` offerings; ``placement_group_id`` labels the types and ``placement_group_strategy`` (the resolved
    group's strategy) drops the types that do not support it (``catalog.instancetypes.incompatibility``).
    ``vm_memory_overhead_percent`` / ``reserved_enis``: the deployment's catalog settings
    (``runtime.catalog_settings``), part of the cache key."""
    if estimated_available is None:
        estimated_available = ec2_catalog.estimated_prices_available()
    reservations = tuple(reservations or ())
    key = (region, bool(estimated_available), float(vm_memory_overhead_percent), int(reserved_enis)) + _catalog_key(
        nodeclass, zones, unavailable, reservations, placement_group_id, placement_group_strategy)
    hit = _catalog_cache.get(key)
    now = time.monotonic()
    if hit is not None and now - hit[0] < CATALOG_TTL_SECONDS:
        return hit[1]
    clients = {"ec2": ec2, "pricing": pricing}
    types = ec2_catalog.load_catalog(clients, region, nodeclass=nodeclass, unavailable=frozenset(unavailable),
                                     zones=zones, cache=price_cache, estimated_available=estimated_available,
                                     reservations=reservations, placement_group_id=placement_group_id,
                                     placement_group_strategy=placement_group_strategy,
                                     vm_memory_overhead_percent=vm_memory_overhead_percent, reserved_enis=reserved_enis)
    estimated = sum(1 for it in types for o in it.offerings if o.price_estimated)
    if estimated:
        log.warning("catalog %s: %d spot offerings have no real price (estimated); %s", region, estimated,
                    f"kept available (${ec2_catalog.ESTIMATED_PRICES_ENV}=available)" if estimated_available
                    else "unavailable for launch")
    if len(_catalog_cache) > 64:
        _catalog_cache.clear()
    _catalog_cache[key] = (now, types)
    return types
