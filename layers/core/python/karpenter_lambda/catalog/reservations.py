"""EC2 capacity reservations (ODCRs and capacity blocks) as the catalog and the disruption rules see them. Pure.

An EC2NodeClass's ``capacityReservationSelectorTerms`` resolve (``adapters/aws/reservations.py``, through
DescribeCapacityReservations, active ones) to :class:`CapacityReservation` records; the catalog then gives every
instance type one ``reserved`` :class:`~karpenter_lambda.catalog.types.Offering` per reservation of that type
(:func:`reserved_offerings`), as karpenter-provider-aws's ``ReservedCapacityResolver`` does:

* price: the type's on-demand price divided by :data:`RESERVED_PRICE_DIVISOR` (10,000,000): the instances are
  paid for already, so a reserved offering is the cheapest there is and wins every choice, while reserved
  offerings of different types keep their relative order for consolidation (0 when no on-demand price is known);
* available while the reservation has room (``AvailableInstanceCount`` > 0), its zone is one of the EC2NodeClass's,
  it is not ``expiring`` and it was not marked unavailable (a launch found it full, or an interruption: the
  unavailable-offerings key is ``(reservation id, zone, "reserved")``, or ``(reservation id, "any", "reserved")``);
* ``reservation_capacity``: the available count (the plan may put at most that many NodeClaims into it);
* ``reservation_type`` and ``reservation_interruptible``: with the id, the offering's labels
  (``capacity-reservation-id``, ``-type``, ``-interruptible``: :meth:`Offering.reservation_labels`), which a NodePool
  or pod may constrain (:func:`reservation_admitted`).  Of reserved offerings of equal price the launch takes a
  non-interruptible ODCR first, then a capacity block, then an interruptible ODCR (:meth:`Offering.reservation_rank`,
  upstream's ``CapacityReservationTypeFilter``).

A capacity block is ``expiring`` :data:`CAPACITY_BLOCK_EXPIRY_WINDOW` (40 minutes) before its end: upstream deletes
its NodeClaims then (10 minutes before EC2 starts reclaiming the instances): :func:`expiring_nodeclaims`.
A NodeClaim launched into a reservation that no longer resolves is drifted: :func:`reservation_drift`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from ..api import labels as L
from ..api.times import format_time, to_epoch
from .types import Offering

__all__ = ["CapacityReservation", "RESERVED_PRICE_DIVISOR", "CAPACITY_BLOCK_EXPIRY_WINDOW", "TYPE_DEFAULT",
           "TYPE_CAPACITY_BLOCK", "STATE_ACTIVE", "STATE_EXPIRING", "UNAVAILABLE_ANY_ZONE", "from_ec2",
           "parse_reservations", "reserved_price", "reserved_offerings", "reservation_unavailable",
           "capacity_type_unavailable", "capacity_type_key", "reservation_admitted",
           "reservation_drift", "expiring_nodeclaims", "REASON_RESERVATION_DRIFT", "allot_reservations"]

#: a reserved offering's price is the on-demand price divided by this (karpenter-provider-aws's constant)
RESERVED_PRICE_DIVISOR = 10_000_000.0
#: a capacity block is expiring (no launch; its NodeClaims deleted) this long before its end
CAPACITY_BLOCK_EXPIRY_WINDOW = 40 * 60.0
TYPE_DEFAULT = "default"
TYPE_CAPACITY_BLOCK = "capacity-block"
STATE_ACTIVE = "active"
STATE_EXPIRING = "expiring"
#: the zone of an unavailable-offerings entry that makes a reservation unavailable in every zone
UNAVAILABLE_ANY_ZONE = "any"
_MATCH_CRITERIA = ("open", "targeted")
#: the drift reason for a NodeClaim whose capacity reservation no longer resolves
REASON_RESERVATION_DRIFT = "CapacityReservationDrift"


@dataclass(frozen=True)
class CapacityReservation:
    """One resolved capacity reservation (the EC2NodeClass status entry of karpenter-provider-aws, plus the count)."""

    id: str
    instance_type: str
    zone: str
    owner_id: str = ""
    instance_match_criteria: str = "targeted"
    reservation_type: str = TYPE_DEFAULT
    available: int = 0          # AvailableInstanceCount
    total: int = 0              # TotalInstanceCount
    end_time: float | None = None  # epoch seconds; None: no end
    interruptible: bool = False
    state: str = STATE_ACTIVE

    def to_status(self) -> dict:
        """The ``EC2NodeClass.status.capacityReservations`` entry (karpenter-provider-aws's field names)."""
        out = {"id": self.id, "instanceType": self.instance_type, "availabilityZone": self.zone,
               "ownerID": self.owner_id, "instanceMatchCriteria": self.instance_match_criteria,
               "reservationType": self.reservation_type, "interruptible": self.interruptible, "state": self.state}
        if self.end_time is not None:
            out["endTime"] = format_time(self.end_time)
        return out


def from_ec2(desc: Mapping, now: float) -> tuple[CapacityReservation | None, str | None]:
    """A DescribeCapacityReservations entry -> ``(reservation, None)``, or ``(None, why)`` for one karpenter-provider-aws
    refuses too (an instance match criteria or reservation type it does not know).  ``EndDate`` may be a datetime
    (boto3) or an ISO string (a JSON file)."""
    rid = str(desc.get("CapacityReservationId") or "")
    if not rid or not desc.get("InstanceType") or not desc.get("AvailabilityZone"):
        return None, f"capacity reservation {rid or '?'}: CapacityReservationId, InstanceType and AvailabilityZone are required"
    criteria = str(desc.get("InstanceMatchCriteria") or "open")
    if criteria not in _MATCH_CRITERIA:
        return None, f"capacity reservation {rid}: unsupported instance match criteria {criteria!r}"
    rtype = str(desc.get("ReservationType") or TYPE_DEFAULT)
    if rtype not in (TYPE_DEFAULT, TYPE_CAPACITY_BLOCK):
        return None, f"capacity reservation {rid}: unsupported reservation type {rtype!r}"
    end = to_epoch(desc.get("EndDate")) if desc.get("EndDate") is not None else None
    expiring = rtype == TYPE_CAPACITY_BLOCK and end is not None and now >= end - CAPACITY_BLOCK_EXPIRY_WINDOW
    return CapacityReservation(
        id=rid, instance_type=str(desc["InstanceType"]), zone=str(desc["AvailabilityZone"]),
        owner_id=str(desc.get("OwnerId") or ""), instance_match_criteria=criteria, reservation_type=rtype,
        available=max(0, int(desc.get("AvailableInstanceCount") or 0)), total=int(desc.get("TotalInstanceCount") or 0),
        end_time=end, interruptible=bool(desc.get("Interruptible") or False),
        state=STATE_EXPIRING if expiring else STATE_ACTIVE), None


def parse_reservations(descs: Iterable[Mapping], now: float) -> tuple[list[CapacityReservation], list[str]]:
    """Active, unexpired reservations from DescribeCapacityReservations entries, deduplicated by id and sorted by id
    (upstream's order), with the problems of the ones left out.  An entry whose ``State`` is given and not
    ``active``, or whose end has passed, is left out silently (upstream filters both)."""
    out: dict[str, CapacityReservation] = {}
    problems: list[str] = []
    for d in descs:
        if d.get("State") not in (None, "active"):
            continue
        r, why = from_ec2(d, now)
        if r is None:
            problems.append(str(why))
            continue
        if r.end_time is not None and r.end_time <= now:
            continue
        out.setdefault(r.id, r)
    return [out[k] for k in sorted(out)], problems


def reserved_price(on_demand: float | None) -> float:
    """A reserved offering's price: near zero, keeping the on-demand order (0 when no on-demand price is known)."""
    return 0.0 if on_demand is None else on_demand / RESERVED_PRICE_DIVISOR


def reservation_unavailable(reservation_id: str, zone: str, unavailable) -> bool:
    """Whether the unavailable-offerings set holds the reservation (in its zone, or in any zone)."""
    return ((reservation_id, zone, L.CAPACITY_TYPE_RESERVED) in unavailable
            or (reservation_id, UNAVAILABLE_ANY_ZONE, L.CAPACITY_TYPE_RESERVED) in unavailable)


def capacity_type_key(capacity_type: str) -> tuple[str, str, str]:
    """The unavailable-offerings key that makes every offering of a capacity type unavailable: ``("any", "any",
    capacity type)``.  A spot launch refused with ``AuthFailure.ServiceLinkedRoleCreationNotPermitted`` marks spot so
    (upstream ``MarkCapacityTypeUnavailable``), and launches fall back to on-demand for the cache's TTL."""
    return (UNAVAILABLE_ANY_ZONE, UNAVAILABLE_ANY_ZONE, capacity_type)


def capacity_type_unavailable(capacity_type: str, unavailable) -> bool:
    """Whether the unavailable-offerings set holds a whole capacity type (:func:`capacity_type_key`)."""
    return (UNAVAILABLE_ANY_ZONE, UNAVAILABLE_ANY_ZONE, capacity_type) in unavailable


def reservation_admitted(requirements, offering: Offering) -> bool:
    """Whether ``requirements`` (a NodeClaim's or NodePool's, ``scheduling.requirements.Requirements``-like) admit the
    offering's reservation labels (id, type, interruptible); an offering of no reservation has none to refuse.  Fails
    closed: requirements that cannot be evaluated admit nothing."""
    return all(_admits(requirements, k, v) for k, v in offering.reservation_labels().items())


def reserved_offerings(instance_type: str, reservations: Iterable[CapacityReservation], on_demand: float | None, *,
                       zones: set[str] | None = None, unavailable=frozenset(),
                       zone_ids: Mapping[str, str] | None = None) -> list[Offering]:
    """One ``reserved`` offering per reservation of ``instance_type`` whose zone is allowed (``zones`` None: any)."""
    out: list[Offering] = []
    for r in reservations:
        if r.instance_type != instance_type or (zones is not None and r.zone not in zones):
            continue
        available = r.available > 0 and r.state != STATE_EXPIRING and not reservation_unavailable(r.id, r.zone, unavailable)
        out.append(Offering(zone=r.zone, capacity_type=L.CAPACITY_TYPE_RESERVED, price=reserved_price(on_demand),
                            available=available, zone_id=(zone_ids or {}).get(r.zone), reservation_id=r.id,
                            price_source="capacity-reservation", reservation_type=r.reservation_type,
                            reservation_capacity=r.available, reservation_interruptible=r.interruptible))
    return out


def reservation_drift(labels: Mapping[str, str], reservations: Iterable) -> str | None:
    """The drift reason of a NodeClaim (its labels) launched into a capacity reservation that is no longer among the
    EC2NodeClass's resolved ``reservations`` (deselected, expired, cancelled), else None.  ``reservations``:
    :class:`CapacityReservation` records or the EC2NodeClass's ``status.capacityReservations`` entries (dicts)."""
    if labels.get(L.CAPACITY_TYPE) != L.CAPACITY_TYPE_RESERVED:
        return None
    rid = labels.get(L.CAPACITY_RESERVATION_ID)
    if not rid:
        return None
    if any((r.get("id") if isinstance(r, Mapping) else r.id) == rid for r in reservations):
        return None
    return REASON_RESERVATION_DRIFT


def expiring_nodeclaims(labels_by_name: Mapping[str, Mapping[str, str]],
                        reservations: Iterable[CapacityReservation]) -> list[str]:
    """NodeClaims (name -> labels) in a capacity block that is ``expiring``: upstream deletes them 40 minutes before
    the block ends (``capacityreservation/expiration``), sorted by name."""
    expiring = {r.id for r in reservations if r.state == STATE_EXPIRING}
    return sorted(n for n, lb in labels_by_name.items() if lb.get(L.CAPACITY_RESERVATION_ID) in expiring)


def _admits(requirements, key: str, value: str) -> bool:
    try:
        return key not in requirements or bool(requirements.get(key).has(value))
    except Exception:  # noqa: BLE001 - requirements that cannot be evaluated admit nothing
        return False


_LAUNCH_ORDER = {L.CAPACITY_TYPE_RESERVED: 0, L.CAPACITY_TYPE_SPOT: 1, L.CAPACITY_TYPE_ON_DEMAND: 2}


def allot_reservations(claims: list) -> dict[str, str]:
    """Hold planned NodeClaims to their reservations' room, in plan order: ``{claim name: reservation id}``.

    The scheduler prices a reserved offering near zero and may give one reservation more NodeClaims than it has room
    for; the launch path then finds it full and falls back.  This does the same in advance, for ``plan`` (duck-typed
    NodeClaim plans: ``name``, ``instance_types``, ``requirements``, ``instance_type``, ``zone``, ``capacity_type``,
    ``price``, ``reason``, changed in place): each reserved claim takes one unit of a reservation its requirements
    admit (id, type, interruptible), with room left: of its own type and zone first, then the cheapest, then
    upstream's order of reservation kinds (:meth:`Offering.reservation_rank`), then the most room; a claim that finds
    none launches as the launch path would: the first capacity type in Karpenter's order (reserved elsewhere, spot,
    on-demand) its requirements allow and an offering of its instance types has, at that type's cheapest offering."""
    room: dict[str, int] = {}
    for c in claims:
        for it in c.instance_types:
            for o in it.offerings:
                if o.capacity_type == L.CAPACITY_TYPE_RESERVED and o.reservation_id and o.available:
                    room.setdefault(o.reservation_id, o.reservation_capacity)
    out: dict[str, str] = {}
    for c in claims:
        if c.capacity_type != L.CAPACITY_TYPE_RESERVED:
            continue
        best = None
        for it in c.instance_types:
            for o in it.offerings:
                if (o.capacity_type != L.CAPACITY_TYPE_RESERVED or not o.available or room.get(o.reservation_id or "", 0) <= 0
                        or not _admits(c.requirements, L.ZONE, o.zone) or not reservation_admitted(c.requirements, o)):
                    continue
                same = it.name == c.instance_type and o.zone == c.zone
                key = (not same, o.price, o.reservation_rank(), -room[o.reservation_id], o.reservation_id, it.name)
                if best is None or key < best[0]:
                    best = (key, it, o)
        if best is None:
            best = _fallback(c)
            if best is None:
                continue
            _, it, o = best
            c.reason = (f"{c.reason}; reservation full: launches as {it.name} {o.capacity_type} in {o.zone} at "
                        f"${o.price:.4f}/h")
        _, it, o = best
        c.instance_type, c.zone, c.capacity_type, c.price = it.name, o.zone, o.capacity_type, o.price
        if o.capacity_type == L.CAPACITY_TYPE_RESERVED:
            room[o.reservation_id] -= 1
            out[c.name] = o.reservation_id
    return out


def _fallback(c):
    best = None
    for it in c.instance_types:
        for o in it.offerings:
            if (not o.available or o.capacity_type == L.CAPACITY_TYPE_RESERVED or not _admits(c.requirements, L.ZONE, o.zone)
                    or not _admits(c.requirements, L.CAPACITY_TYPE, o.capacity_type)):
                continue
            key = (_LAUNCH_ORDER.get(o.capacity_type, 9), o.price, it.name, o.zone)
            if best is None or key < best[0]:
                best = (key, it, o)
    return best
