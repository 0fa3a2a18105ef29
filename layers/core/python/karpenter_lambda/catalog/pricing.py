"""Prices per instance type (on-demand) and per (instance type, zone) (spot). Pure.

A :class:`PriceBook` is immutable: ``with_on_demand`` / ``with_spot`` return a new
book.  Sources, recorded on every offering as ``Offering.price_source``:

* ``"pricing-api"``   on-demand price fetched from the AWS Pricing API (injected by the adapter);
* ``"bundled"``       on-demand price from the package's table (``data/ec2-on-demand-prices*.json``,
                      generated from Karpenter's own static price list);
* ``"spot-history"``  latest real price from ``DescribeSpotPriceHistory`` (injected);
* ``"spot-estimate"`` a deterministic estimate, used when no real spot price is known (see
                      :func:`estimate_spot_price`);
* ``"node-overlay"``  no price known at all: a NodeOverlay's ``price`` (set by ``catalog/overlay.py``, not here).

Bundled tables: the commercial file holds ``us-east-1`` only; like Karpenter, any other
commercial region starts from the us-east-1 prices.  ``us-gov-*`` and ``cn-*`` regions use
their partition's file (a cn region missing from it falls back to ``cn-north-1``, a us-gov
region to ``us-gov-west-1``; prices there are in the partition's currency, CNY for China).

Every price comes back as a :class:`Price` ``(price, source)`` whose ``estimated`` says whether it is an
estimate (source in :data:`ESTIMATED_SOURCES`) rather than a price AWS quoted; ``build_instance_types`` copies it
to ``Offering.price_estimated`` and, with ``estimated_available=False`` (the launch path), makes those
offerings unavailable.

Spot placeholders (moto returns ``0.00001`` for every type) are never prices: anything at or
below :data:`PLACEHOLDER_SPOT_PRICE` is dropped.
"""

from __future__ import annotations

import json
import zlib
from functools import lru_cache
from pathlib import Path
from typing import Mapping, NamedTuple

__all__ = [
    "PriceBook",
    "Price",
    "ESTIMATED_SOURCES",
    "PLACEHOLDER_SPOT_PRICE",
    "SOURCE_PRICING_API",
    "SOURCE_BUNDLED",
    "SOURCE_SPOT_HISTORY",
    "SOURCE_SPOT_ESTIMATE",
    "SOURCE_NODE_OVERLAY",
    "estimate_spot_price",
    "spot_discount",
    "bundled_on_demand_prices",
    "bundled_instance_type_names",
    "partition_of",
]

SOURCE_PRICING_API = "pricing-api"
SOURCE_BUNDLED = "bundled"
SOURCE_SPOT_HISTORY = "spot-history"
SOURCE_SPOT_ESTIMATE = "spot-estimate"
#: no price known, a NodeOverlay's ``price`` used instead (Karpenter's ``GetOverlayPrice`` fallback: catalog/overlay.py)
SOURCE_NODE_OVERLAY = "node-overlay"
#: Price sources that are estimates, not prices AWS quoted.
ESTIMATED_SOURCES = frozenset({SOURCE_SPOT_ESTIMATE})


class Price(NamedTuple):
    """One hourly price and where it came from; a 2-tuple ``(price, source)`` for older callers."""

    price: float
    source: str

    @property
    def estimated(self) -> bool:
        """True when the price is an estimate (no real price known), not one AWS quoted."""
        return self.source in ESTIMATED_SOURCES

#: moto's DescribeSpotPriceHistory answers 0.00001 for everything: treat <= this as unknown.
PLACEHOLDER_SPOT_PRICE = 0.00001

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
_FILES = {"aws": "ec2-on-demand-prices.json", "aws-us-gov": "ec2-on-demand-prices-us-gov.json", "aws-cn": "ec2-on-demand-prices-cn.json"}
_PARTITION_DEFAULT_REGION = {"aws": "us-east-1", "aws-us-gov": "us-gov-west-1", "aws-cn": "cn-north-1"}


def partition_of(region: str) -> str:
    """``aws``, ``aws-us-gov`` or ``aws-cn`` for a region name."""
    if not isinstance(region, str) or not region:
        raise ValueError(f"region: must be a non-empty string, got {region!r}")
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    if region.startswith("cn-"):
        return "aws-cn"
    return "aws"


@lru_cache(maxsize=None)
def _load_table(partition: str) -> dict:
    text = (DATA_DIR / _FILES[partition]).read_text(encoding="utf-8")
    return json.loads(text)


def bundled_on_demand_prices(region: str) -> tuple[dict[str, float], str]:
    """The bundled on-demand table for ``region``: ``(prices, table_region)``.

    ``table_region`` says which region's prices were used (the partition default when the
    region itself is not in the file).  The dict is a fresh copy.
    """
    partition = partition_of(region)
    regions = _load_table(partition)["regions"]
    table_region = region if region in regions else _PARTITION_DEFAULT_REGION[partition]
    return dict(regions.get(table_region, {})), table_region


@lru_cache(maxsize=None)
def bundled_instance_type_names() -> frozenset[str]:
    """Every instance type the bundled tables price, in any region of any partition (what ``validate`` knows
    offline: a type released after the table is missing)."""
    return frozenset(name for partition in _FILES for prices in _load_table(partition)["regions"].values()
                     for name in prices)


# --- spot estimate ---------------------------------------------------------------------

#: Fraction of the on-demand price a spot instance costs, by instance category (first
#: letters of the type name).  Round figures in the range the EC2 spot advisor shows
#: (savings of 55-75 %); accelerated categories are discounted less.
_CATEGORY_SPOT_FACTOR = {
    "t": 0.32,
    "m": 0.36,
    "c": 0.34,
    "r": 0.33,
    "x": 0.30,
    "z": 0.40,
    "i": 0.30,
    "d": 0.30,
    "h": 0.32,
    "g": 0.42,
    "p": 0.45,
    "inf": 0.40,
    "trn": 0.45,
    "dl": 0.45,
    "f": 0.45,
    "vt": 0.40,
    "u": 0.50,
}
_DEFAULT_SPOT_FACTOR = 0.38
#: Per-zone variation: the factor moves by up to +/- this much, by a stable hash of (type, zone).
_ZONE_SPREAD = 0.05


def _category(instance_type: str) -> str:
    family = instance_type.split(".", 1)[0]
    letters = ""
    for ch in family:
        if ch.isalpha():
            letters += ch
        else:
            break
    return letters


@lru_cache(maxsize=65536)
def spot_discount(instance_type: str, zone: str) -> float:
    """The spot/on-demand price ratio the estimate uses for ``instance_type`` in ``zone``.

    ``factor(category) + spread`` where ``spread`` is in ``[-0.05, +0.05]``, derived from
    ``crc32("<type>|<zone>")`` so it is the same in every process and on every machine.
    """
    cat = _category(instance_type)
    factor = _CATEGORY_SPOT_FACTOR.get(cat)
    if factor is None:
        factor = _CATEGORY_SPOT_FACTOR.get(cat[:1], _DEFAULT_SPOT_FACTOR)
    h = zlib.crc32(f"{instance_type}|{zone}".encode())
    spread = ((h % 10001) / 10000.0 * 2.0 - 1.0) * _ZONE_SPREAD
    return factor + spread


def estimate_spot_price(instance_type: str, zone: str, on_demand: float) -> float:
    """Deterministic spot estimate: ``round(on_demand * spot_discount(type, zone), 6)`` (never above on-demand)."""
    return min(on_demand, round(on_demand * spot_discount(instance_type, zone), 6))


def _check_price(where: str, value) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{where}: price must be a number, got {value!r}")
    try:
        price = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: price must be a number, got {value!r}") from None
    if price != price or price < 0 or price == float("inf"):
        raise ValueError(f"{where}: price must be a finite non-negative number, got {value!r}")
    return price


class PriceBook:
    """On-demand and spot prices for one region (USD per hour; CNY in China regions).

    Build with :meth:`from_bundled`, then layer fresher data with :meth:`with_on_demand`
    (e.g. the Pricing API) and :meth:`with_spot` (spot price history).
    """

    __slots__ = ("region", "_od", "_od_source", "_spot", "estimate_spot")

    def __init__(
        self,
        region: str,
        on_demand: Mapping[str, float] | None = None,
        spot: Mapping[tuple[str, str], float] | None = None,
        *,
        on_demand_source: str = SOURCE_BUNDLED,
        estimate_spot: bool = True,
    ):
        partition_of(region)  # validates
        self.region = region
        self._od: dict[str, float] = {}
        self._od_source: dict[str, str] = {}
        for name, price in (on_demand or {}).items():
            self._od[name] = _check_price(f"on_demand[{name!r}]", price)
            self._od_source[name] = on_demand_source
        self._spot: dict[tuple[str, str], float] = {}
        for key, price in (spot or {}).items():
            self._set_spot(key, price)
        self.estimate_spot = estimate_spot

    def _set_spot(self, key, price) -> None:
        if not (isinstance(key, tuple) and len(key) == 2 and all(isinstance(k, str) for k in key)):
            raise ValueError(f"spot: keys must be (instance_type, zone) tuples, got {key!r}")
        p = _check_price(f"spot[{key!r}]", price)
        if p <= PLACEHOLDER_SPOT_PRICE:
            return  # placeholder (moto) or nonsense: unknown
        self._spot[key] = p

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_bundled(cls, region: str, *, estimate_spot: bool = True) -> "PriceBook":
        """On-demand prices from the bundled table for ``region`` (see module doc); no spot history."""
        prices, _ = bundled_on_demand_prices(region)
        return cls(region, prices, on_demand_source=SOURCE_BUNDLED, estimate_spot=estimate_spot)

    def _copy(self) -> "PriceBook":
        new = PriceBook.__new__(PriceBook)
        new.region = self.region
        new._od = dict(self._od)
        new._od_source = dict(self._od_source)
        new._spot = dict(self._spot)
        new.estimate_spot = self.estimate_spot
        return new

    def with_on_demand(self, prices: Mapping[str, float], source: str = SOURCE_PRICING_API) -> "PriceBook":
        """A new book whose on-demand prices are ``prices`` laid over this book's (types missing from ``prices`` keep theirs)."""
        if not isinstance(prices, Mapping):
            raise ValueError(f"on-demand prices: expected a mapping of instance type -> price, got {type(prices).__name__}")
        new = self._copy()
        for name, price in prices.items():
            new._od[name] = _check_price(f"on_demand[{name!r}]", price)
            new._od_source[name] = source
        return new

    def with_spot(self, prices: Mapping[tuple[str, str], float]) -> "PriceBook":
        """A new book with real spot prices keyed ``(instance_type, zone)`` laid over this one's; placeholders are ignored."""
        if not isinstance(prices, Mapping):
            raise ValueError(f"spot prices: expected a mapping of (instance type, zone) -> price, got {type(prices).__name__}")
        new = self._copy()
        for key, price in prices.items():
            new._set_spot(key, price)
        return new

    # -- queries ------------------------------------------------------------------------
    def on_demand(self, instance_type: str) -> Price | None:
        """``Price(price, source)`` or None when unknown."""
        p = self._od.get(instance_type)
        if p is None:
            return None
        return Price(p, self._od_source[instance_type])

    def on_demand_price(self, instance_type: str) -> float | None:
        return self._od.get(instance_type)

    def spot(self, instance_type: str, zone: str) -> Price | None:
        """``Price(price, source)``: the real spot price, else the estimate from on-demand (if enabled; ``.estimated``
        is then True), else None."""
        p = self._spot.get((instance_type, zone))
        if p is not None:
            return Price(p, SOURCE_SPOT_HISTORY)
        if self.estimate_spot:
            od = self._od.get(instance_type)
            if od is not None:
                return Price(estimate_spot_price(instance_type, zone, od), SOURCE_SPOT_ESTIMATE)
        return None

    def spot_price(self, instance_type: str, zone: str) -> float | None:
        hit = self.spot(instance_type, zone)
        return hit[0] if hit else None

    @property
    def on_demand_prices(self) -> dict[str, float]:
        return dict(self._od)

    @property
    def spot_prices(self) -> dict[tuple[str, str], float]:
        """The real (non-estimated) spot prices held."""
        return dict(self._spot)

    def __len__(self) -> int:
        return len(self._od)

    def __repr__(self) -> str:
        return f"PriceBook({self.region!r}, on_demand={len(self._od)}, spot={len(self._spot)})"
