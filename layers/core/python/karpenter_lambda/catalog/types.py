"""Instance types and offerings: the catalog's output, the scheduler's input. Pure data."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from ..api import labels as L

#: upstream's order among reserved offerings of equal price (``pkg/providers/instance/filter/filter.go``
#: ``CapacityReservationTypeFilter``): (reservation type, interruptible) -> rank; an interruptible capacity block does
#: not exist
_RESERVATION_RANK = {("default", False): 0, ("capacity-block", False): 1, ("default", True): 2}


@dataclass(frozen=True)
class Offering:
    """Where and how an instance type can be bought: one (zone, capacity type) with its hourly price."""

    zone: str
    capacity_type: str  # on-demand | spot | reserved
    price: float  # USD per hour
    available: bool = True
    zone_id: str | None = None
    reservation_id: str | None = None
    price_source: str = ""  # e.g. "pricing-api", "bundled", "spot-history", "spot-estimate"
    #: True when ``price`` is an estimate (no real price known: ``price_source`` "spot-estimate"), not a price AWS
    #: quoted.  The launch path makes such offerings unavailable (as Karpenter does with unpriced offerings);
    #: ``plan`` and the simulator keep them, labelled (docs/catalog.md "Estimated prices").
    price_estimated: bool = False
    #: a ``reserved`` offering's capacity reservation: ``default`` or ``capacity-block`` (``reservation_id`` names it)
    reservation_type: str | None = None
    #: a ``reserved`` offering: how many instances the reservation can still take (DescribeCapacityReservations'
    #: ``AvailableInstanceCount``); 0 for other capacity types
    reservation_capacity: int = 0
    #: a ``reserved`` offering: whether its capacity reservation is interruptible (DescribeCapacityReservations'
    #: ``Interruptible``: EC2 may take the instances back for the reservation's owner)
    reservation_interruptible: bool = False

    def reservation_labels(self) -> dict[str, str]:
        """A reserved offering's capacity-reservation labels (id, type, interruptible ``true``/``false``): the
        requirements upstream's ``ReservedCapacityResolver`` gives the offering and the labels a node launched into it
        carries; ``{}`` for an offering of no reservation."""
        if not self.reservation_id:
            return {}
        return {L.CAPACITY_RESERVATION_ID: self.reservation_id,
                L.CAPACITY_RESERVATION_TYPE: self.reservation_type or "default",
                L.CAPACITY_RESERVATION_INTERRUPTIBLE: "true" if self.reservation_interruptible else "false"}

    def reservation_rank(self) -> int:
        """A reserved offering's place among those of equal price: a non-interruptible ODCR (0), a capacity block (1),
        an interruptible ODCR (2); 0 for an offering of no reservation."""
        if not self.reservation_id:
            return 0
        return _RESERVATION_RANK.get((self.reservation_type or "default", bool(self.reservation_interruptible)), 3)


@dataclass(eq=False)
class InstanceType:
    """One EC2 instance type as Karpenter sees it.

    ``labels`` holds every single-valued well-known label (arch, os, instance-type,
    karpenter.k8s.aws/instance-*; region) as strings.  Zone and capacity type are
    multi-valued and come from ``offerings``.  ``capacity`` and ``overhead`` are
    resource lists (cpu in millicores, memory bytes, pods count, ...);
    ``allocatable = capacity - overhead`` (never below zero).
    """

    name: str
    labels: dict[str, str]
    capacity: dict[str, int]
    overhead: dict[str, int] = field(default_factory=dict)
    offerings: list[Offering] = field(default_factory=list)
    #: CSI driver -> how many volumes of it a new node of this type can attach (EBS: the type's
    #: ``MaximumEbsAttachments`` minus the EC2NodeClass's block devices); a driver not listed has no known limit
    volume_limits: dict[str, int] = field(default_factory=dict)

    @cached_property
    def allocatable(self) -> dict[str, int]:
        return {k: max(0, v - self.overhead.get(k, 0)) for k, v in self.capacity.items()}

    def allocatable_for(self, resource: str) -> int:
        """What a new node of this type offers of ``resource``: its allocatable, or for a volume-count resource
        (``attachable-volumes-csi-<driver>``) its ``volume_limits`` entry (no entry: no known limit)."""
        driver = L.volume_driver(resource)
        if driver is None:
            return self.allocatable.get(resource, 0)
        return self.volume_limits.get(driver, L.VOLUME_NO_LIMIT)

    def available_offerings(self) -> list[Offering]:
        return [o for o in self.offerings if o.available]

    def cheapest_offering(self, zones=None, capacity_types=None) -> Offering | None:
        """Cheapest available offering, optionally within the given zones / capacity types (iterables or None = any)."""
        best = None
        for o in self.offerings:
            if not o.available:
                continue
            if zones is not None and o.zone not in zones:
                continue
            if capacity_types is not None and o.capacity_type not in capacity_types:
                continue
            if best is None or o.price < best.price:
                best = o
        return best

    def __repr__(self) -> str:
        return f"InstanceType({self.name!r})"
