"""EC2 side of the instance catalog: describe calls, per-process caches, and ``load_catalog``.

* ``fetch_instance_types(ec2)``: every ``DescribeInstanceTypes`` entry (paginated).  Cached per
  process per (endpoint, region): moto's full answer takes 4-9 s and the data changes rarely.
* ``fetch_offerings(ec2)``: ``DescribeInstanceTypeOfferings`` by availability zone, same cache.
* ``fetch_zone_ids(ec2)``: zone name -> zone id.
* ``fetch_spot_prices(ec2)``: latest price per (type, zone) from ``DescribeSpotPriceHistory``
  (Linux/UNIX, paginated); moto's placeholders (0.00001, year 2006) are dropped.  Cached per
  process for 5 minutes, and in DynamoDB when a :class:`PriceCache` is given.
* ``load_catalog(...)``: all of the above + on-demand prices (Pricing API, cache, bundled) ->
  :func:`karpenter_lambda.catalog.build_instance_types`.

**Sources.** ``load_catalog(..., source=...)`` or ``$KARPENTER_LAMBDA_CATALOG_SOURCE`` chooses where the
instance types, offerings and zone ids come from: ``ec2`` (default: the describe calls above, real AWS
or any endpoint) or ``moto-bundled`` (:mod:`.moto_catalog`: moto's data files read directly, the same
dicts in ~0.1 s instead of 6-9 s; no EC2 client needed; spot history is skipped as moto's is only
placeholders).  The argument wins over the variable.  Without moto installed (a plain ``pip install .``),
``moto-bundled`` reads the same data from the package's ``data/ec2-catalog.json.gz`` (generated from moto's
files by ``tools/gen_ec2_catalog_data.py``; :func:`bundled_ec2_data`).

**Estimated prices.** A spot offering with no real price (no spot price history for its type and zone, e.g.
under moto, or DescribeSpotPriceHistory failed with no cached answer) is priced by the deterministic estimate
and marked ``Offering.price_estimated``.  ``load_catalog(..., estimated_available=...)`` says whether such
offerings may be launched: ``True`` (the default: ``plan``, benchmarks) keeps them available, ``False`` makes
them unavailable (``available=False``), as Karpenter never launches an offering it has no price for.  The
controllers' catalog (:mod:`karpenter_lambda.cloudprovider.catalog`) decides with
:func:`estimated_prices_available`: ``$KARPENTER_LAMBDA_ESTIMATED_PRICES`` = ``unavailable`` (default, every
deployed function) or ``available`` (the simulator opts in: moto's spot history is only placeholders).
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import logging
import os
import threading
import time
from datetime import datetime, timezone
from typing import Any, Mapping

from ...catalog.allocatable import DEFAULT_VM_MEMORY_OVERHEAD_PERCENT, NodeSettings
from ...catalog.instancetypes import build_instance_types
from ...catalog.pricing import PLACEHOLDER_SPOT_PRICE, SOURCE_SPOT_HISTORY, PriceBook
from ...catalog.types import InstanceType
from . import moto_catalog
from .pricing import on_demand_prices, pricing_api_region
from .pricing_cache import PriceCache

log = logging.getLogger(__name__)

__all__ = [
    "fetch_instance_types",
    "fetch_offerings",
    "fetch_zone_ids",
    "fetch_spot_prices",
    "latest_spot_prices",
    "load_catalog",
    "load_price_book",
    "price_book_for",
    "clear_process_cache",
    "catalog_source",
    "SOURCE_EC2",
    "SOURCE_MOTO_BUNDLED",
    "SOURCE_ENV",
    "ESTIMATED_PRICES_ENV",
    "estimated_prices_available",
    "bundled_ec2_data",
    "PACKAGED_CATALOG",
]

#: Catalog sources (``load_catalog(source=...)`` / ``$KARPENTER_LAMBDA_CATALOG_SOURCE``).
SOURCE_EC2 = "ec2"
SOURCE_MOTO_BUNDLED = moto_catalog.SOURCE
SOURCE_ENV = "KARPENTER_LAMBDA_CATALOG_SOURCE"
_SOURCES = (SOURCE_EC2, SOURCE_MOTO_BUNDLED)

#: Whether offerings priced by an estimate may be launched: ``unavailable`` (default) | ``available``.
ESTIMATED_PRICES_ENV = "KARPENTER_LAMBDA_ESTIMATED_PRICES"
ESTIMATED_UNAVAILABLE = "unavailable"
ESTIMATED_AVAILABLE = "available"

#: Spot price history entries older than this are placeholders (moto answers year 2006).
_PLACEHOLDER_BEFORE = datetime(2010, 1, 1, tzinfo=timezone.utc)
SPOT_PROCESS_TTL_SECONDS = 300.0

_lock = threading.Lock()
_cache: dict[tuple, Any] = {}


#: moto's EC2 data as shipped in this package (tools/gen_ec2_catalog_data.py writes it).
PACKAGED_CATALOG = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "data", "ec2-catalog.json.gz")


def bundled_ec2_data(region: str, *, packaged: bool | None = None) -> tuple[list[dict], list[dict], dict[str, str]]:
    """(instance types, availability-zone offerings, zone ids) for ``region`` as moto answers them.

    From moto's own files when moto is installed, else (or with ``packaged=True``) from
    :data:`PACKAGED_CATALOG`; a region moto would not serve raises ``KeyError(region)`` either way.
    """
    if packaged is None:
        packaged = importlib.util.find_spec("moto") is None
    if not packaged:
        return moto_catalog.instance_types(), moto_catalog.offerings(region), moto_catalog.zone_ids(region)
    moto_catalog.check_region(region)  # botocore's endpoints.json, read as data
    key = ("packaged-catalog",)
    with _lock:
        data = _cache.get(key)
    if data is None:
        with open(PACKAGED_CATALOG, "rb") as f:
            data = json.loads(gzip.decompress(f.read()))
        with _lock:
            _cache[key] = data
    offerings = [{"InstanceType": t, "Location": z, "LocationType": "availability-zone"}
                 for t, z in data["offerings"].get(region, ())]
    return list(data["instanceTypes"]), offerings, dict(data["zoneIds"].get(region, {}))


def clear_process_cache() -> None:
    """Forget everything cached in this process (instance types, offerings, zone ids, spot prices, moto's files)."""
    with _lock:
        _cache.clear()
    moto_catalog.clear()


def catalog_source(source: str | None = None) -> str:
    """``source``, else ``$KARPENTER_LAMBDA_CATALOG_SOURCE``, else ``ec2``; ValueError for anything else."""
    chosen = source or os.environ.get(SOURCE_ENV, "").strip() or SOURCE_EC2
    if chosen not in _SOURCES:
        origin = "source" if source else f"${SOURCE_ENV}"
        raise ValueError(f"{origin}={chosen!r}: expected one of {', '.join(_SOURCES)}")
    return chosen


def estimated_prices_available(value: str | None = None) -> bool:
    """The launch path's policy for estimated prices: ``value``, else ``$KARPENTER_LAMBDA_ESTIMATED_PRICES``, else
    ``unavailable`` (False).  ``available`` (True) is for the simulator; anything else is a ValueError."""
    chosen = value or os.environ.get(ESTIMATED_PRICES_ENV, "").strip() or ESTIMATED_UNAVAILABLE
    if chosen not in (ESTIMATED_UNAVAILABLE, ESTIMATED_AVAILABLE):
        origin = "value" if value else f"${ESTIMATED_PRICES_ENV}"
        raise ValueError(f"{origin}={chosen!r}: expected {ESTIMATED_UNAVAILABLE} (default) or {ESTIMATED_AVAILABLE}")
    return chosen == ESTIMATED_AVAILABLE


def _client_key(client: Any) -> tuple[str, str]:
    meta = getattr(client, "meta", None)
    return (getattr(meta, "endpoint_url", "") or "", getattr(meta, "region_name", "") or "")


def _cached(kind: str, client: Any, load, ttl: float | None = None, refresh: bool = False):
    key = (kind, *_client_key(client))
    now = time.monotonic()
    with _lock:
        hit = _cache.get(key)
        if hit is not None and not refresh and (ttl is None or now - hit[0] < ttl):
            return hit[1]
    value = load()
    with _lock:
        _cache[key] = (now, value)
    return value


def fetch_instance_types(ec2_client: Any, *, refresh: bool = False) -> list[dict]:
    """All ``DescribeInstanceTypes`` entries (a new list each call; the dicts are shared, do not mutate)."""

    def load() -> list[dict]:
        out: list[dict] = []
        for page in ec2_client.get_paginator("describe_instance_types").paginate():
            out.extend(page.get("InstanceTypes") or [])
        return out

    return list(_cached("instance-types", ec2_client, load, refresh=refresh))


def fetch_offerings(ec2_client: Any, *, refresh: bool = False) -> list[dict]:
    """All ``DescribeInstanceTypeOfferings(LocationType="availability-zone")`` entries."""

    def load() -> list[dict]:
        out: list[dict] = []
        for page in ec2_client.get_paginator("describe_instance_type_offerings").paginate(LocationType="availability-zone"):
            out.extend(page.get("InstanceTypeOfferings") or [])
        return out

    return list(_cached("offerings", ec2_client, load, refresh=refresh))


def fetch_zone_ids(ec2_client: Any, *, refresh: bool = False) -> dict[str, str]:
    def load() -> dict[str, str]:
        resp = ec2_client.describe_availability_zones()
        return {z["ZoneName"]: z["ZoneId"] for z in resp.get("AvailabilityZones") or [] if z.get("ZoneId")}

    return dict(_cached("zone-ids", ec2_client, load, refresh=refresh))


def _is_placeholder(price: float, ts: Any) -> bool:
    if price <= PLACEHOLDER_SPOT_PRICE:
        return True
    if isinstance(ts, datetime):
        if ts.tzinfo is None:
            ts = ts.replace(tzinfo=timezone.utc)
        return ts < _PLACEHOLDER_BEFORE
    return False


def latest_spot_prices(history: Any) -> dict[tuple[str, str], float]:
    """Latest real price per (instance type, zone) from ``SpotPriceHistory`` entries; placeholders dropped."""
    latest: dict[tuple[str, str], tuple[Any, float]] = {}
    for h in history:
        try:
            price = float(h["SpotPrice"])
        except (KeyError, TypeError, ValueError):
            continue
        ts = h.get("Timestamp")
        if _is_placeholder(price, ts):
            continue
        key = (h.get("InstanceType"), h.get("AvailabilityZone"))
        if not all(key):
            continue
        prev = latest.get(key)
        if prev is None or (ts is not None and (prev[0] is None or ts > prev[0])):
            latest[key] = (ts, price)
    return {k: v[1] for k, v in latest.items()}


def fetch_spot_prices(ec2_client: Any, *, refresh: bool = False) -> dict[tuple[str, str], float]:
    """Latest real spot price per (instance type, zone), Linux/UNIX, paginated; placeholders ignored (empty under moto)."""

    def load() -> dict[tuple[str, str], float]:
        pages = ec2_client.get_paginator("describe_spot_price_history").paginate(
            ProductDescriptions=["Linux/UNIX", "Linux/UNIX (Amazon VPC)"], StartTime=datetime.now(timezone.utc)
        )
        return latest_spot_prices(h for page in pages for h in page.get("SpotPriceHistory") or [])

    return dict(_cached("spot", ec2_client, load, ttl=SPOT_PROCESS_TTL_SECONDS, refresh=refresh))


def _clients(session_or_clients: Any, region: str, endpoint_url: str | None) -> tuple[Any, Any | None]:
    """(ec2, pricing-or-None) from a boto3 Session, a dict of clients, or an EC2 client."""
    if isinstance(session_or_clients, Mapping):
        if "ec2" not in session_or_clients:
            raise ValueError("session_or_clients: a dict of clients needs an 'ec2' client")
        return session_or_clients["ec2"], session_or_clients.get("pricing")
    if hasattr(session_or_clients, "client") and not hasattr(session_or_clients, "meta"):
        session = session_or_clients
        ec2 = session.client("ec2", region_name=region, endpoint_url=endpoint_url)
        api_region = pricing_api_region(region)
        pricing = session.client("pricing", region_name=api_region, endpoint_url=endpoint_url) if api_region else None
        return ec2, pricing
    if getattr(getattr(session_or_clients, "meta", None), "service_model", None) is not None:
        return session_or_clients, None
    raise ValueError(f"session_or_clients: expected a boto3 Session, an EC2 client or {{'ec2': ..., 'pricing': ...}}, got {type(session_or_clients).__name__}")


def load_price_book(ec2_client: Any, pricing_client: Any | None, region: str, cache: PriceCache | None = None,
                    *, spot_history: bool = True) -> PriceBook:
    """Bundled table <- Pricing API (or cache) on-demand prices <- spot history (or cache).

    ``spot_history=False``: no DescribeSpotPriceHistory call, as if it answered nothing (moto's answer is
    only placeholders, dropped anyway, and takes ~3 s); a fresh cache entry is still used.  When the call
    fails, a stale cache entry (if any) is used, else no spot price is known (every spot price is then an
    estimate: ``Offering.price_estimated``).
    """
    book = PriceBook.from_bundled(region)
    od = on_demand_prices(pricing_client, region, cache)
    if od.prices:
        book = book.with_on_demand(od.prices, od.source)
    spot = None
    stale = None
    if cache is not None:
        try:
            entry = cache.get("spot", region)
            if entry is not None and entry.fresh:
                spot = entry.prices
            elif entry is not None:
                stale = entry
        except Exception as e:
            log.warning("spot price cache read failed for %s: %s", region, e)
    if spot is None:
        try:
            spot = fetch_spot_prices(ec2_client) if spot_history else {}
        except Exception as e:
            if stale is not None and stale.prices:
                log.warning("spot price history for %s failed: %s; using the stale cached prices", region, e)
                spot = stale.prices
            else:
                log.warning("spot price history for %s failed: %s; spot prices are estimates "
                            "(unavailable for launch unless estimates are allowed)", region, e)
                spot = {}
        else:
            if cache is not None:
                try:
                    cache.put("spot", region, spot, SOURCE_SPOT_HISTORY)
                except Exception as e:
                    log.warning("spot price cache write failed for %s: %s", region, e)
    return book.with_spot(spot) if spot else book


def price_book_for(session_or_clients: Any, region: str, cache: PriceCache | None = None, *,
                   endpoint_url: str | None = None, source: str | None = None) -> PriceBook:
    """The price book ``load_catalog`` would load for these clients and source (see it): a caller building
    several catalogs of one region (one per EC2NodeClass) loads it once and passes it as ``prices``."""
    if catalog_source(source) == SOURCE_MOTO_BUNDLED:
        ec2, pricing = _clients(session_or_clients, region, endpoint_url) if session_or_clients is not None else (None, None)
        return load_price_book(ec2, pricing, region, cache, spot_history=False)
    ec2, pricing = _clients(session_or_clients, region, endpoint_url)
    return load_price_book(ec2, pricing, region, cache)


def load_catalog(
    session_or_clients: Any,
    region: str,
    nodeclass: Any = None,
    unavailable: set[tuple[str, str, str]] | frozenset = frozenset(),
    cache: PriceCache | None = None,
    *,
    zones: list[str] | None = None,
    endpoint_url: str | None = None,
    prices: PriceBook | None = None,
    source: str | None = None,
    estimated_available: bool = True,
    reservations: tuple | list = (),
    placement_group_id: str | None = None,
    placement_group_strategy: str | None = None,
    vm_memory_overhead_percent: float = DEFAULT_VM_MEMORY_OVERHEAD_PERCENT,
    reserved_enis: int = 0,
) -> list[InstanceType]:
    """Instance types for ``region`` as the scheduler needs them.

    ``session_or_clients``: a boto3 Session (clients made with ``endpoint_url``), ``{"ec2": c,
    "pricing": c}``, or an EC2 client (no Pricing API then).  ``prices`` skips price loading.
    ``source`` (else ``$KARPENTER_LAMBDA_CATALOG_SOURCE``): ``ec2`` (default) or ``moto-bundled``; with
    ``moto-bundled`` ``session_or_clients`` may be None (then on-demand prices are the bundled table)
    and an unknown region raises ``KeyError(region)`` as moto does.  ``estimated_available=False`` makes offerings
    whose price is an estimate unavailable (the launch path; see the module doc).  ``reservations`` (resolved
    :class:`~karpenter_lambda.catalog.reservations.CapacityReservation` records) add ``reserved`` offerings;
    ``placement_group_id`` labels every type and ``placement_group_strategy`` drops the types that do not support
    it (``build_instance_types``).  ``vm_memory_overhead_percent`` and ``reserved_enis`` are Karpenter's
    ``--vm-memory-overhead-percent`` and ``--reserved-enis`` (``catalog.allocatable.NodeSettings``): the deployment's
    values, which the callers read once (``controllers/runtime.catalog_settings``) and pass here.
    """
    if catalog_source(source) == SOURCE_MOTO_BUNDLED:
        raw, offerings, zone_ids = bundled_ec2_data(region)
    else:
        ec2, _ = _clients(session_or_clients, region, endpoint_url)
        raw = fetch_instance_types(ec2)
        offerings = fetch_offerings(ec2)
        try:
            zone_ids = fetch_zone_ids(ec2)
        except Exception as e:
            log.warning("describe_availability_zones failed: %s; offerings carry no zone id", e)
            zone_ids = {}
    book = prices if prices is not None else price_book_for(session_or_clients, region, cache,
                                                            endpoint_url=endpoint_url, source=source)
    settings = NodeSettings.from_nodeclass(nodeclass, vm_memory_overhead_percent=vm_memory_overhead_percent,
                                           reserved_enis=reserved_enis)
    return build_instance_types(raw, offerings, book, region, nodeclass=nodeclass, zones=zones, unavailable=unavailable,
                                zone_ids=zone_ids, estimated_available=estimated_available, settings=settings,
                                reservations=reservations, placement_group_id=placement_group_id,
                                placement_group_strategy=placement_group_strategy)
