"""NodeOverlays applied to the instance types: prices changed, extended resources added.  Pure: no I/O.

Karpenter's semantics (kubernetes-sigs/karpenter ``pkg/controllers/nodeoverlay/controller.go`` and ``store.go``,
``cloudprovider.AdjustedPrice``), per NodePool because an overlay may select on ``karpenter.sh/nodepool`` and on the
NodePool's template labels:

* An overlay selects an instance type when its requirements are compatible with the type's labels, its offerings'
  zones / zone IDs / capacity types / reservations (id, type, interruptible), the NodePool's name and template
  labels (a key none of them defines matches only NotIn / DoesNotExist); then it changes the offerings its zone,
  zone-ID, capacity-type and reservation requirements allow (an offering of no capacity reservation has the
  reservation keys as DoesNotExist, as the AWS provider's base offerings).  Requirement keys are normalized first
  (``beta.kubernetes.io/arch`` -> ``kubernetes.io/arch``, ...; Karpenter's ``NormalizedLabels``).
* A NodeClaim whose instance types carry an overlaid price is annotated :data:`PRICE_OVERLAY_APPLIED` (and one with
  overlaid capacity :data:`CAPACITY_OVERLAY_APPLIED`): :func:`overlay_annotations`.
* Overlays apply in weight order, highest first (unset = 0), equal weights in reverse name order.  For each offering
  the first overlay with a price change sets it: ``price`` replaces the price, ``priceAdjustment`` adds an amount
  or a percentage (never below 0).  ``capacity`` resources merge, the first overlay naming a resource wins.
* An overlay that would change an offering's price, or a resource, that an overlay of the SAME weight already
  changes is in conflict: it is applied nowhere (Karpenter sets its ValidationSucceeded condition False, reason
  Conflict), whatever NodePool the clash is in.
* An offering no price is known for (``InstanceType.unpriced``; a type with nothing else is held out of its catalog's
  list) takes the ``price`` of an overlay whose only requirement is ``node.kubernetes.io/instance-type In [...]`` and
  that is not in conflict (the AWS provider's ``GetOverlayPrice`` fallback: :func:`overlay_prices`), then the overlays
  apply to it as to any offering.  A held type comes into its NodePool's list when it then has an offering and no
  allocatable resource below zero (hugepages capacity comes out of memory, floored at 0: ``InstanceType.allocatable``).

Nothing given is mutated: changed instance types and offerings are new objects (:class:`OverlaidInstanceType`,
:class:`OverlaidOffering`) that say which overlay changed them; unchanged ones are returned as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Iterable, Mapping, Sequence

from ..api import labels as L
from ..api.objects import NodeOverlay, NodePool
from ..api.overlay import adjusted_price
from ..api.quantity import QuantityError, resource_value
from .pricing import SOURCE_NODE_OVERLAY
from .types import InstanceType, InstanceTypes, Offering

__all__ = ["OverlaidOffering", "OverlaidInstanceType", "OverlayResult", "apply_overlays", "apply_overlays_by_nodepool",
           "order_overlays", "overlay_prices", "offering_overlay", "price_overlay_applied", "capacity_overlay_applied",
           "overlay_annotations", "PRICE_OVERLAY_APPLIED", "CAPACITY_OVERLAY_APPLIED"]

#: the capacity-reservation keys: a reserved offering's id, type and interruptible; ``DoesNotExist`` on every other
#: offering (aws ``pkg/providers/instancetype/offering/base_resolver.go``)
RESERVATION_KEYS = (L.CAPACITY_RESERVATION_ID, L.CAPACITY_RESERVATION_TYPE, L.CAPACITY_RESERVATION_INTERRUPTIBLE)
#: requirement keys an offering answers by itself (Karpenter's offering requirements)
OFFERING_KEYS = (L.ZONE, L.ZONE_ID, L.CAPACITY_TYPE) + RESERVATION_KEYS
#: the NodeClaim annotations Karpenter sets when one of its instance types carries an overlaid price / overlaid
#: capacity (core ``nodeclaimtemplate.go`` ``ToNodeClaim``; ``pkg/apis/v1alpha1/labels.go``); the AWS provider
#: launches a NodeClaim with the first one by priority (CreateFleet ``prioritized`` /
#: ``capacity-optimized-prioritized``, aws ``pkg/providers/instance/instance.go``)
PRICE_OVERLAY_APPLIED = "karpenter.sh/price-overlay-applied"
CAPACITY_OVERLAY_APPLIED = "karpenter.sh/capacity-overlay-applied"


@dataclass(frozen=True)
class OverlaidOffering(Offering):
    """An offering whose price a NodeOverlay changed: ``price`` is the new price, ``base_price`` the catalog's."""

    overlay: str = ""          # the NodeOverlay that set the price
    base_price: float = 0.0    # the price before the overlay
    price_change: str = ""     # the overlay's price or priceAdjustment, e.g. "-10%"


@dataclass(eq=False)
class OverlaidInstanceType(InstanceType):
    """An instance type a NodeOverlay changed: ``capacity_overlays`` names the overlay of each added resource."""

    capacity_overlays: dict[str, str] = field(default_factory=dict)


def offering_overlay(offering: Offering) -> str | None:
    """The NodeOverlay that set this offering's price, or None (displays: plan, simulate)."""
    return offering.overlay if isinstance(offering, OverlaidOffering) and offering.overlay else None


def price_overlay_applied(instance_types: Iterable[InstanceType]) -> bool:
    """Whether a NodeOverlay set the price of any offering of these instance types (Karpenter's
    ``IsPricingOverlayApplied`` over a NodeClaim's instance types, any offering counted)."""
    return any(offering_overlay(o) for it in instance_types for o in it.offerings)


def capacity_overlay_applied(instance_types: Iterable[InstanceType]) -> bool:
    """Whether a NodeOverlay added a resource to any of these instance types (``IsCapacityOverlayApplied``)."""
    return any(getattr(it, "capacity_overlays", None) for it in instance_types)


def overlay_annotations(instance_types: Sequence[InstanceType]) -> dict[str, str]:
    """The NodeClaim annotations of a NodeClaim launched from these instance types (its up to 60 launch types):
    :data:`PRICE_OVERLAY_APPLIED` and :data:`CAPACITY_OVERLAY_APPLIED`, each ``"true"`` when it applies, else absent."""
    out = {}
    if price_overlay_applied(instance_types):
        out[PRICE_OVERLAY_APPLIED] = "true"
    if capacity_overlay_applied(instance_types):
        out[CAPACITY_OVERLAY_APPLIED] = "true"
    return out


@dataclass
class OverlayResult:
    instance_types: dict[str, list[InstanceType]]      # NodePool name -> instance types with overlays applied
    conflicts: dict[str, str] = field(default_factory=dict)   # overlay name -> why it was not applied
    applied: dict[str, int] = field(default_factory=dict)     # overlay name -> instance types it changed (distinct
    #                                                           types; per NodePool when an overlay reads NodePool keys)


def order_overlays(overlays: Iterable[NodeOverlay]) -> list[NodeOverlay]:
    """Karpenter's ``OrderByWeight``: weight descending, then name descending."""
    return sorted(overlays, key=lambda o: (o.weight, o.name), reverse=True)


# ----------------------------------------------------------------------------- requirement matching
def _satisfies(values: set[str] | None, req: dict) -> bool:
    """Whether a key whose possible values are ``values`` (None: the key is not defined) can meet ``req``."""
    op, wanted = req.get("operator"), [str(v) for v in req.get("values") or []]
    if values is None:
        return op in ("NotIn", "DoesNotExist")
    if op == "In":
        return bool(values & set(wanted))
    if op == "NotIn":
        return bool(values - set(wanted))
    if op == "Exists":
        return bool(values)
    if op == "DoesNotExist":
        return False
    if op in ("Gt", "Lt", "Gte", "Lte") and len(wanted) == 1:
        bound = int(wanted[0])
        for v in values:
            try:
                n = int(v)
            except ValueError:
                continue
            if (op == "Gt" and n > bound) or (op == "Lt" and n < bound) or (op == "Gte" and n >= bound) or (op == "Lte" and n <= bound):
                return True
    return False


def _offering_values(o: Offering) -> dict[str, str | None]:
    rl = o.reservation_labels()   # a reserved offering's id, type and interruptible (upstream's offering requirements)
    return {L.ZONE: o.zone, L.ZONE_ID: o.zone_id, L.CAPACITY_TYPE: o.capacity_type,
            L.CAPACITY_RESERVATION_ID: o.reservation_id, L.CAPACITY_RESERVATION_TYPE: rl.get(L.CAPACITY_RESERVATION_TYPE),
            L.CAPACITY_RESERVATION_INTERRUPTIBLE: rl.get(L.CAPACITY_RESERVATION_INTERRUPTIBLE)}


def _type_values(it: InstanceType, key: str) -> set[str] | None:
    """Every value ``key`` can take on a node of ``it`` (Karpenter's instance-type requirements); None: undefined."""
    if key in OFFERING_KEYS:
        values = {v for o in it.offerings for v in (_offering_values(o)[key],) if v}
        return values or None
    v = it.labels.get(key)
    return {str(v)} if v is not None else None


@dataclass(frozen=True)
class _Pool:
    """What a NodePool adds to its instance types' requirements: its name and its template labels."""

    name: str
    labels: dict[str, str]

    @classmethod
    def of(cls, nodepool: NodePool | None) -> "_Pool | None":
        # label keys under their current names, as Karpenter's NewLabelRequirements
        return None if nodepool is None else cls(nodepool.name, L.normalize_labels(nodepool.template_labels))

    def values(self, key: str) -> set[str] | None:
        if key == L.NODEPOOL:
            return {self.name}
        return {self.labels[key]} if key in self.labels else None


def _pool_keys(overlay: NodeOverlay, pools: Iterable[_Pool | None]) -> bool:
    """Whether the overlay's requirements read a NodePool's name or template labels (else its selection of a type
    is the same in every NodePool)."""
    keys = {L.normalize_key(r.get("key")) for r in overlay.requirements}
    return L.NODEPOOL in keys or any(p is not None and keys & set(p.labels) for p in pools)


def _offering_admits(value: str | None, key: str, req: dict) -> bool:
    """Whether an offering whose ``key`` is ``value`` meets ``req`` (Karpenter's ``Offerings.Compatible``).  An offering
    of no capacity reservation has the reservation keys as ``DoesNotExist`` (only NotIn / DoesNotExist pass); a zone ID
    it does not know is undefined, a well-known label, so anything passes (``AllowUndefinedWellKnownLabels``)."""
    if value is None:
        return key not in RESERVATION_KEYS or _satisfies(None, req)
    return _satisfies({value}, req)


def _selected_offerings(it: InstanceType, reqs: list[dict], pool: _Pool | None = None) -> list[int]:
    """Indexes of the offerings of ``it`` that requirements ``reqs`` (an overlay's) select ([]: not the type).
    Requirement keys are read under their current names (``beta.kubernetes.io/arch`` is ``kubernetes.io/arch``, ...:
    Karpenter's ``NormalizedLabels``, :func:`~karpenter_lambda.api.labels.normalize_key`)."""
    keyed = [(L.normalize_key(r.get("key")), r) for r in reqs]
    for k, r in keyed:
        values = pool.values(k) if pool is not None else None
        if not _satisfies(values if values is not None else _type_values(it, k), r):
            return []
    offering_reqs = [(k, r) for k, r in keyed if k in OFFERING_KEYS]
    out = []
    for i, o in enumerate(it.offerings):
        vals = _offering_values(o) if offering_reqs else {}
        if all(_offering_admits(vals[k], k, r) for k, r in offering_reqs):
            out.append(i)
    return out


# ----------------------------------------------------------------------------- the updates (Karpenter's store)
@dataclass
class _Price:
    change: str
    overlay: str
    lowest_weight: int
    lowest_overlay: str


@dataclass
class _Capacity:
    resources: dict[str, tuple[int, str]] = field(default_factory=dict)   # resource -> (value, overlay)
    lowest_weight: int = 0
    lowest_resources: tuple[str, ...] = ()
    lowest_overlay: str = ""


def _capacity_of(overlay: NodeOverlay) -> dict[str, int]:
    out = {}
    for name, q in overlay.capacity.items():
        try:
            out[name] = resource_value(name, q)
        except (QuantityError, ValueError):
            continue   # validation refuses it; a stored object that slipped through changes nothing
    return out


def overlay_prices(overlays: Iterable[NodeOverlay]) -> dict[str, tuple[float, str]]:
    """Instance type -> (price, overlay): the price an offering no price is known for takes (Karpenter's
    ``GetOverlayPrice``, aws ``pkg/providers/instancetype/offering/offering.go``, which its ``BaseResolver`` falls back
    to): the ``price`` of an overlay whose only requirement is ``node.kubernetes.io/instance-type In [...]``.  Among
    ``overlays`` (in :func:`order_overlays` order; the caller leaves out those in conflict) the first naming a type
    wins."""
    out: dict[str, tuple[float, str]] = {}
    for ov in overlays:
        reqs = ov.requirements
        if ov.price is None or len(reqs) != 1 or reqs[0].get("key") != L.INSTANCE_TYPE or reqs[0].get("operator") != "In":
            continue
        try:
            price = float(ov.price)
        except ValueError:
            continue
        for name in reqs[0].get("values") or ():
            out.setdefault(str(name), (price, ov.name))
    return out


def apply_overlays_by_nodepool(instance_types: Mapping[str, Sequence[InstanceType]], nodepools: Mapping[str, NodePool],
                               overlays: Iterable[NodeOverlay]) -> OverlayResult:
    """Every NodePool's instance types with the overlays applied (Karpenter's conflict rule across all NodePools).

    ``instance_types``: NodePool name -> its instance types; ``nodepools``: NodePool name -> NodePool (a name
    missing here is matched without NodePool name and labels).  Inputs are not mutated.

    A catalog's held types (:class:`~.types.InstanceTypes` ``held``: Karpenter keeps them, but cannot choose them as
    they are) are judged with the others: the offerings no price is known for take the :func:`overlay_prices` price
    of an overlay not in conflict, and a held type joins its NodePool's list (in name order) when it then has an
    offering and no allocatable below zero (:meth:`~.types.InstanceType.unfit_reason`)."""
    ordered = order_overlays(overlays)
    if not ordered:
        return OverlayResult(instance_types={name: _kept(its) for name, its in instance_types.items()})
    refused: dict[str, str] = {}   # price-giving overlays found in conflict: no fallback price from them
    while True:
        full, used = _with_held(instance_types, overlay_prices(ov for ov in ordered if ov.name not in refused))
        result = _judge(full, nodepools, ordered)
        late = {name: why for name, why in result.conflicts.items() if name in used}
        if not late:
            break
        refused.update(late)
    for name, why in refused.items():   # in conflict whatever the later pass saw (Karpenter's status)
        result.conflicts.setdefault(name, why)
        result.applied.pop(name, None)
    result.instance_types = {name: _usable(result.instance_types[name], its) for name, its in instance_types.items()}
    return result


def _kept(its: Sequence[InstanceType]) -> InstanceTypes:
    """A NodePool's types as a list of their own, its catalog's held ones and reasons kept (for explanations)."""
    return InstanceTypes(its, held=getattr(its, "held", ()), skipped=getattr(its, "skipped", None))


def _with_held(instance_types: Mapping[str, Sequence[InstanceType]],
               fallback: dict[str, tuple[float, str]]) -> tuple[dict[str, list[InstanceType]], set[str]]:
    """Each NodePool's types followed by its catalog's held ones, the unpriced offerings of the types ``fallback``
    prices moved to their offerings at that price; and the overlays whose price was used."""
    made: dict[int, InstanceType] = {}   # one copy per type, whatever NodePools share it
    used: set[str] = set()

    def priced(it: InstanceType) -> InstanceType:
        if not it.unpriced or it.name not in fallback:
            return it
        if id(it) not in made:
            price, overlay = fallback[it.name]
            used.add(overlay)
            made[id(it)] = replace(it, offerings=[*it.offerings, *(replace(o, price=price, price_source=SOURCE_NODE_OVERLAY)
                                                                    for o in it.unpriced)], unpriced=())
        return made[id(it)]

    full = {name: [priced(it) for it in (*its, *getattr(its, "held", ()))] for name, its in instance_types.items()}
    return full, used


def _usable(its: list[InstanceType], base: Sequence[InstanceType]) -> InstanceTypes:
    """The first ``len(base)`` types (the catalog's list: usable as built, and an overlay cannot make them unusable)
    and the held ones the overlays made usable, in name order; the others stay held (with the catalog's reasons)."""
    kept = len(base)
    joined, held = [], []
    for it in its[kept:]:
        (joined if it.offerings and it.unfit_reason() is None else held).append(it)
    out = sorted(its[:kept] + joined, key=lambda it: it.name) if joined else its[:kept]
    return InstanceTypes(out, held=held, skipped=getattr(base, "skipped", None))


def _judge(instance_types: Mapping[str, Sequence[InstanceType]], nodepools: Mapping[str, NodePool],
           ordered: list[NodeOverlay]) -> OverlayResult:
    pools = {name: _Pool.of(nodepools.get(name)) for name in instance_types}
    if len(instance_types) > 1 and not any(_pool_keys(ov, pools.values()) for ov in ordered):
        # no overlay reads a NodePool's name or labels: judge each distinct instance type once, whatever NodePools
        # share it (the same answer, a third of the work for three NodePools on one catalog)
        distinct: dict[int, InstanceType] = {}
        for its in instance_types.values():
            for it in its:
                distinct.setdefault(id(it), it)
        shared = _apply({"": list(distinct.values())}, {"": None}, ordered)
        by_id = {k: new for k, new in zip(distinct, shared.instance_types[""])}
        shared.instance_types = {name: [by_id[id(it)] for it in its] for name, its in instance_types.items()}
        return shared
    return _apply(instance_types, pools, ordered)


def _apply(instance_types: Mapping[str, Sequence[InstanceType]], pools: dict[str, "_Pool | None"],
           ordered: list[NodeOverlay]) -> OverlayResult:
    result = OverlayResult(instance_types={name: list(its) for name, its in instance_types.items()})
    prices: dict[tuple[str, int, int], _Price] = {}
    capacity: dict[tuple[str, int], _Capacity] = {}
    changed: dict[str, set[tuple[str, int]]] = {}
    for ov in ordered:
        change, cap = ov.price_change, _capacity_of(ov)
        if change is None and not cap:
            continue
        per_pool, reqs = _pool_keys(ov, pools.values()), ov.requirements
        memo: dict[int, list[int]] = {}
        selected: dict[tuple[str, int], list[int]] = {}
        for np_name, its in instance_types.items():
            for i, it in enumerate(its):
                if per_pool:
                    offers = _selected_offerings(it, reqs, pools[np_name])
                else:
                    offers = memo.get(id(it))
                    if offers is None:
                        offers = memo[id(it)] = _selected_offerings(it, reqs)
                if offers:
                    selected[(np_name, i)] = offers
        clash = _conflict(ov, change, cap, selected, prices, capacity, instance_types)
        if clash:
            result.conflicts[ov.name] = clash
            continue
        ov_name, weight = ov.name, ov.weight
        for (np_name, i), offers in selected.items():
            if change is not None:
                for j in offers:
                    p = prices.get((np_name, i, j))
                    if p is None:
                        prices[(np_name, i, j)] = _Price(change, ov_name, weight, ov_name)
                    else:
                        p.lowest_weight, p.lowest_overlay = weight, ov_name
            if cap:
                c = capacity.setdefault((np_name, i), _Capacity())
                for name, value in cap.items():
                    c.resources.setdefault(name, (value, ov_name))
                c.lowest_weight, c.lowest_resources, c.lowest_overlay = weight, tuple(cap), ov_name
        changed[ov_name] = set(selected)
    made: dict[tuple, InstanceType] = {}   # the same type with the same changes in two NodePools: one object
    for np_name, its in instance_types.items():
        result.instance_types[np_name] = [_overlaid(np_name, i, it, prices, capacity, made) for i, it in enumerate(its)]
    # what each overlay really set (a lower-weight overlay whose every price and resource was already set counts 0)
    winners: dict[str, set[tuple[str, int]]] = {}
    for (np_name, i, _j), p in prices.items():
        winners.setdefault(p.overlay, set()).add((np_name, i))
    for key, c in capacity.items():
        for _value, name in c.resources.values():
            winners.setdefault(name, set()).add(key)
    result.applied = {name: len(winners.get(name, ())) for name in changed}
    return result


def _in_pool(np_name: str) -> str:
    return f" (NodePool {np_name})" if np_name else ""


def _conflict(ov: NodeOverlay, change, cap: dict[str, int], selected, prices, capacity, instance_types) -> str | None:
    for (np_name, i), offers in selected.items():
        it_name = instance_types[np_name][i].name
        if change is not None:
            for j in offers:
                p = prices.get((np_name, i, j))
                if p is not None and p.lowest_weight == ov.weight:
                    o = instance_types[np_name][i].offerings[j]
                    return (f"conflict with NodeOverlay {p.lowest_overlay} (same weight {ov.weight}): both set the price of "
                            f"{it_name} {o.capacity_type} in {o.zone}{_in_pool(np_name)}")
        c = capacity.get((np_name, i))
        if cap and c is not None and c.lowest_weight == ov.weight:
            same = sorted(set(cap) & set(c.lowest_resources))
            if same:
                return (f"conflict with NodeOverlay {c.lowest_overlay} (same weight {ov.weight}): both set {', '.join(same)} "
                        f"on {it_name}{_in_pool(np_name)}")
    return None


_OFFERING_FIELDS = tuple(f.name for f in fields(Offering))
_TYPE_FIELDS = tuple(f.name for f in fields(InstanceType))


def _overlaid(np_name: str, i: int, it: InstanceType, prices, capacity, made: dict) -> InstanceType:
    changes = tuple((j, prices[(np_name, i, j)].change, prices[(np_name, i, j)].overlay)
                    for j in range(len(it.offerings)) if (np_name, i, j) in prices)
    c = capacity.get((np_name, i))
    added = tuple(sorted(c.resources.items())) if c is not None else ()
    if not changes and not added:
        return it
    key = (id(it), changes, added)
    hit = made.get(key)
    if hit is not None:
        return hit
    offerings = list(it.offerings)
    for j, change, overlay in changes:
        o = it.offerings[j]
        base = {name: getattr(o, name) for name in _OFFERING_FIELDS}
        base["price"] = adjusted_price(o.price, change)
        # a price the user gave is no estimate; an adjustment of an estimate still is
        base["price_estimated"] = bool(o.price_estimated) and change.startswith(("+", "-"))
        offerings[j] = OverlaidOffering(**base, overlay=overlay, base_price=o.price, price_change=change)
    values = {name: getattr(it, name) for name in _TYPE_FIELDS}
    values["offerings"] = offerings
    if added:
        values["capacity"] = {**it.capacity, **{name: value for name, (value, _ov) in added}}
    owners = {name: ov for name, (_v, ov) in added}
    out = made[key] = OverlaidInstanceType(**values, capacity_overlays={**getattr(it, "capacity_overlays", {}), **owners})
    return out


def apply_overlays(instance_types: Sequence[InstanceType], overlays: Iterable[NodeOverlay],
                   nodepool: NodePool | None = None) -> list[InstanceType]:
    """One NodePool's instance types with the overlays applied (conflicts judged within this NodePool only; the
    loader and ``plan`` use :func:`apply_overlays_by_nodepool`, which judges them across all NodePools)."""
    name = nodepool.name if nodepool is not None else ""
    pools = {name: nodepool} if nodepool is not None else {}
    return apply_overlays_by_nodepool({name: instance_types}, pools, overlays).instance_types[name]
