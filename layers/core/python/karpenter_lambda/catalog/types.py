"""Instance types and offerings: the catalog's output, the scheduler's input. Pure data."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from ..api import labels as L
from ..api.quantity import format_resource

#: upstream's order among reserved offerings of equal price (``pkg/providers/instance/filter/filter.go``
#: ``CapacityReservationTypeFilter``): (reservation type, interruptible) -> rank; an interruptible capacity block does
#: not exist
_RESERVATION_RANK = {("default", False): 0, ("capacity-block", False): 1, ("default", True): 2}
#: the prefix of the hugepages resources (``hugepages-2Mi``, ``hugepages-1Gi``; corev1 ``ResourceHugePagesPrefix``)
HUGEPAGES_PREFIX = "hugepages-"


def efa_requested(requests: dict) -> bool:
    """Does a NodeClaim requesting ``requests`` (resource -> amount, ints or quantity strings) get EFA interfaces
    (Karpenter's launch template resolver: ``vpc.amazonaws.com/efa`` among the NodeClaim's requests)?"""
    v = (requests or {}).get(L.RESOURCE_EFA)
    return v is not None and str(v).strip() not in ("", "0")


def launched_resources(resources: dict, requests: dict) -> dict:
    """A launched node's capacity or allocatable: the instance type's, without ``vpc.amazonaws.com/efa`` when the
    NodeClaim did not request it (its launch template attached one plain interface, so the node has no EFA device;
    Karpenter keeps the type's EFA count on such a NodeClaim, and a pod could be nominated to a node that never
    offers it)."""
    if L.RESOURCE_EFA not in resources or efa_requested(requests):
        return resources
    return {k: v for k, v in resources.items() if k != L.RESOURCE_EFA}


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
    resource lists (cpu in millicores, memory bytes, pods count, ...); ``allocatable`` is
    capacity - overhead, which may be below zero (see :meth:`unfit_reason`).  ``unpriced`` holds the
    offerings EC2 makes but no price is known for (the scheduler never sees them; a NodeOverlay's
    ``price`` can give them one: :mod:`.overlay`).
    """

    name: str
    labels: dict[str, str]
    capacity: dict[str, int]
    overhead: dict[str, int] = field(default_factory=dict)
    offerings: list[Offering] = field(default_factory=list)
    #: CSI driver -> how many volumes of it a new node of this type can attach (EBS: the type's
    #: ``MaximumEbsAttachments`` minus the EC2NodeClass's block devices); a driver not listed has no known limit
    volume_limits: dict[str, int] = field(default_factory=dict)
    #: offerings with no price known (on-demand: neither the Pricing API nor the bundled table; spot: no history
    #: and no on-demand price to estimate from), each ``available`` as it would be once priced; price 0
    unpriced: tuple[Offering, ...] = ()

    @cached_property
    def allocatable(self) -> dict[str, int]:
        """Karpenter's ``computeAllocatable`` (core ``pkg/cloudprovider/types.go``): capacity - overhead per resource,
        not floored; then every ``hugepages-*`` capacity comes out of memory, floored at 0."""
        alloc = {k: v - self.overhead.get(k, 0) for k, v in self.capacity.items()}
        for k, v in self.capacity.items():
            if k.startswith(HUGEPAGES_PREFIX):
                alloc[L.RESOURCE_MEMORY] = max(0, alloc.get(L.RESOURCE_MEMORY, 0) - v)
        return alloc

    def unfit_reason(self) -> str | None:
        """Why no pod fits a node of this type, or None: an allocatable resource below zero (Karpenter's
        ``resources.Fits`` fits nothing then), e.g. ``allocatable memory below zero: overhead 1565Mi exceeds capacity
        473Mi`` (t3a.nano under Windows)."""
        neg = sorted(k for k, v in self.allocatable.items() if v < 0)
        if not neg:
            return None
        return "; ".join(f"allocatable {k} below zero: overhead {format_resource(k, self.overhead.get(k, 0))} exceeds "
                         f"capacity {format_resource(k, self.capacity[k])}" for k in neg)

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


class InstanceTypes(list):
    """A catalog as :func:`~.instancetypes.build_instance_types` returns it: the instance types a NodeClaim may use
    (a list, sorted by name) and, in ``held``, the ones Karpenter keeps but cannot choose as they are built, which a
    NodeOverlay may still make usable (:func:`~.overlay.apply_overlays_by_nodepool`): no offering with a price (their
    offerings are in ``unpriced``: an overlay's ``price`` gives them one) or an allocatable resource below zero (an
    overlay's hugepages floor memory at 0).  ``skipped``: why each type left out of the list was left out."""

    def __init__(self, types=(), held=(), skipped=None):
        super().__init__(types)
        self.held: tuple[InstanceType, ...] = tuple(held)
        self.skipped: dict[str, str] = dict(skipped or {})
