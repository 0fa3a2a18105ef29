"""EC2 launch of one NodeClaim: launch templates per (AMI, max pods), CreateFleet, insufficient-capacity fallback.

The instance provider's ``create`` (:mod:`.instance`, behind :class:`~.aws.AWSCloudProvider`); the launcher
(:mod:`karpenter_lambda.controllers.launcher`) calls it after the NodeClaim is committed and written.  Candidates are the
plan's instance types x available offerings in the EC2NodeClass's subnet zones, filtered by the plan's
zone and capacity-type requirements, then truncated as upstream's ``filterInstanceTypes``
(``pkg/providers/instance/instance.go``): the :data:`~..adapters.aws.fleet.MAX_INSTANCE_TYPES` (60) instance types
with the cheapest candidate offering are kept, every zone of each (CreateFleet gets up to 60 x zones overrides), and
a truncation that leaves a minValues requirement unmet launches nothing.  The capacity type is Karpenter's choice
among the kept types: ``reserved`` when the plan allows it
and a capacity reservation has room, else spot when allowed and offered, else on-demand.  A reserved launch takes the
reserved offerings whose reservation labels (id, type, interruptible) the plan's requirements admit, as upstream's
``pkg/providers/instance/filter/filter.go``: of one kind only (``CapacityReservationTypeFilter``: the kind with the
cheapest offering; on a price tie a non-interruptible ODCR, then a capacity block, then an interruptible ODCR), one
offering in all for a capacity block (``CapacityBlockFilter``: CreateFleet takes one block), else one per
(instance type, zone), the one with the most room (``ReservedOfferingFilter``).  It uses one launch template per
capacity reservation (``CapacityReservationSpecification`` targeting it) and labels the NodeClaim with the
reservation's id, type and interruptible; a full reservation (``ReservationCapacityExceeded`` / insufficient
capacity) is marked unavailable as ``(reservation id, zone, "reserved")`` and the next attempt takes the next kind
or falls back to spot or on-demand.  Each insufficient-capacity answer marks the offerings unavailable (3 min, by the fleet launcher) and the next
attempt uses what remains; when nothing remains the reason is returned so the pods are reported unschedulable.
A NodeClaim annotated ``karpenter.sh/price-overlay-applied`` (a NodeOverlay priced one of its instance types:
:meth:`~karpenter_lambda.scheduling.model.NodeClaimPlan.annotations`) is launched with CreateFleet's prioritized
strategies, so EC2 follows the overlaid prices (upstream ``instance.go`` ``launchInstance`` -> ``WithOverlay``).

What the caller may roll back: :class:`NoCapacity` and :class:`LaunchFailed` mean nothing was launched
(``LaunchFailed.throttled``: EC2 throttled the call, retry later).  Any other exception leaves it open.
"""

from __future__ import annotations

import logging

from ..adapters.aws.fleet import (
    MAX_INSTANCE_TYPES,
    THROTTLE_CODES,
    FleetLauncher,
    FleetLaunchError,
    InsufficientCapacityError,
    LaunchRequest,
    LaunchThrottled,
)
from ..adapters.aws.launch_templates import LaunchTemplates
from ..adapters.aws.userdata import ClusterInfo
from ..api import labels as wk
from ..catalog.overlay import PRICE_OVERLAY_APPLIED, overlay_annotations
from ..catalog.types import efa_requested
from ..catalog.reservations import (
    TYPE_CAPACITY_BLOCK,
    TYPE_DEFAULT,
    capacity_type_unavailable,
    reservation_admitted,
    reservation_unavailable,
)
from .types import CreateRequest, Instance, LaunchFailed, NoCapacity

log = logging.getLogger(__name__)


def _allowed(requirements, key: str, value: str) -> bool:
    """Whether the plan's requirements admit ``value`` for ``key``.  Fails closed: requirements that cannot be
    evaluated admit nothing (an offering outside the plan must never be launched)."""
    try:
        if key not in requirements:
            return True
        return bool(requirements.get(key).has(value))
    except Exception as e:  # noqa: BLE001
        log.warning("requirement %s cannot be evaluated for %r (%s): offering excluded", key, value, e)
        return False


def _excluded(exclude: set, it: str, o) -> bool:
    if (it, o.zone, o.capacity_type) in exclude or capacity_type_unavailable(o.capacity_type, exclude):
        return True
    return bool(o.reservation_id) and reservation_unavailable(o.reservation_id, o.zone, exclude)


def _reservation_kind(o) -> tuple[str, bool]:
    return (o.reservation_type or TYPE_DEFAULT, bool(o.reservation_interruptible))


def _reserved_candidates(offers: list[tuple]) -> list[tuple]:
    """The reserved offerings ``[(instance type, offering)]`` (compatible, available; in the plan's type order) one
    CreateFleet may carry, as upstream's launch filters (``filter.go``): those of one kind (reservation type,
    interruptible) -- the kind with the cheapest offering, on a tie a non-interruptible ODCR, then a capacity block,
    then an interruptible ODCR (``CapacityReservationTypeFilter``); for a capacity block the single cheapest offering
    (``CapacityBlockFilter``: CreateFleet refuses several blocks; the first of equal prices); else per (instance type,
    zone) the reservation with the most room (``ReservedOfferingFilter``; then the smaller id).
    Returns ``[(instance type, zone, price, offering)]``."""
    cheapest: dict[tuple[str, bool], tuple[float, int]] = {}   # kind -> (its cheapest price, its rank)
    for _name, o in offers:
        k = _reservation_kind(o)
        cheapest[k] = min(cheapest.get(k, (float("inf"), 0)), (float(o.price), o.reservation_rank()))
    kind = min(cheapest, key=cheapest.__getitem__)
    offers = [(name, o) for name, o in offers if _reservation_kind(o) == kind]
    if kind[0] == TYPE_CAPACITY_BLOCK:
        name, o = min(offers, key=lambda x: float(x[1].price))   # min keeps the first of equal prices
        return [(name, o.zone, float(o.price), o)]
    best: dict[tuple[str, str], object] = {}
    for name, o in offers:
        cur = best.get((name, o.zone))
        if cur is None or (o.reservation_capacity, cur.reservation_id) > (cur.reservation_capacity, o.reservation_id):
            best[(name, o.zone)] = o
    return [(name, zone, float(o.price), o) for (name, zone), o in best.items()]


def candidates_for(plan, resolved, exclude: set) -> dict[str, list[tuple]]:
    """capacity type -> [(instance type, zone, price)] cheapest first; ``reserved`` entries carry the capacity
    reservation as a 4th item: the reserved offerings whose reservation labels the plan's requirements admit, of one
    kind, one per (instance type, zone) or one capacity block (:func:`_reserved_candidates`), as upstream."""
    zones = set(resolved.subnets_by_zone()) if hasattr(resolved, "subnets_by_zone") else None
    out: dict[str, list[tuple]] = {}
    reserved: list[tuple] = []
    for it in plan.instance_types:
        for o in it.offerings:
            if not o.available or _excluded(exclude, it.name, o):
                continue
            if zones is not None and o.zone not in zones:
                continue
            if not _allowed(plan.requirements, wk.ZONE, o.zone) or not _allowed(plan.requirements, wk.CAPACITY_TYPE, o.capacity_type):
                continue
            if o.capacity_type == wk.CAPACITY_TYPE_RESERVED:
                if o.reservation_id and reservation_admitted(plan.requirements, o):
                    reserved.append((it.name, o))
                continue
            out.setdefault(o.capacity_type, []).append((it.name, o.zone, float(o.price)))
    if reserved:
        out[wk.CAPACITY_TYPE_RESERVED] = _reserved_candidates(reserved)
    for ct in out:
        out[ct].sort(key=lambda c: (c[2], c[0], c[1]))
    return out


def _type_values(it, key: str, rows: list[tuple]) -> set[str]:
    """The values an instance type offers for a requirement key (upstream: its requirements' values): zone and
    capacity type from its candidate offerings, the others from its labels."""
    if key == wk.INSTANCE_TYPE:
        return {it.name}
    if key == wk.ZONE:
        return {c[1] for c in rows}
    if key == wk.CAPACITY_TYPE:
        return {c[4] for c in rows}
    value = (getattr(it, "labels", None) or {}).get(key)
    return set() if value is None else {str(value)}


def _unmet_min_values(requirements, keep: list[str], by_type: dict, types_by_name: dict) -> list[str]:
    """The minValues requirement keys the kept types do not meet (upstream ``SatisfiesMinValues``)."""
    try:
        reqs = [r for r in requirements if getattr(r, "min_values", None)]
    except TypeError:  # requirements that cannot be iterated carry no minValues
        return []
    unmet = []
    for r in reqs:
        values: set[str] = set()
        for name in keep:
            values |= _type_values(types_by_name[name], r.key, by_type[name])
        if len(values) < int(r.min_values):
            unmet.append(r.key)
    return unmet


def truncate_candidates(cands: dict[str, list[tuple]], plan, types_by_name: dict) -> dict[str, list[tuple]]:
    """``cands`` limited to the :data:`MAX_INSTANCE_TYPES` instance types whose cheapest candidate offering (of any
    capacity type) is cheapest, every offering of each kept; upstream's ``InstanceTypes.Truncate``
    (``OrderByPrice`` then the first 60).  Raises :class:`NoCapacity` when the truncation leaves a minValues
    requirement unmet, as upstream under its ``Strict`` policy; a plan whose minValues were relaxed (``BestEffort``)
    is truncated without the check."""
    by_type: dict[str, list[tuple]] = {}
    best: dict[str, float] = {}
    for ct, rows in cands.items():
        for c in rows:
            by_type.setdefault(c[0], []).append((c[0], c[1], c[2], None, ct))
            best[c[0]] = min(best.get(c[0], float("inf")), c[2])
    if len(best) <= MAX_INSTANCE_TYPES:
        return cands
    keep = sorted(best, key=lambda n: (best[n], n))[:MAX_INSTANCE_TYPES]
    if not getattr(plan, "min_values_relaxed", False):
        unmet = _unmet_min_values(plan.requirements, keep, by_type, types_by_name)
        if unmet:
            raise NoCapacity(f"truncating instance types to {MAX_INSTANCE_TYPES} based on the requirements: "
                             f"minValues requirement is not met for label(s) {', '.join(sorted(unmet))}")
    kept = set(keep)
    return {ct: [c for c in rows if c[0] in kept] for ct, rows in cands.items()}


def price_overlay(plan) -> bool:
    """Whether the NodeClaim is annotated ``karpenter.sh/price-overlay-applied`` (its plan's annotations; a plan
    without them: its instance types, the same rule): upstream's ``launchInstance`` then builds CreateFleet
    ``WithOverlay`` (prioritized strategies: EC2 follows the overlaid prices' order)."""
    try:
        ann = plan.annotations() if callable(getattr(plan, "annotations", None)) else \
            overlay_annotations(list(plan.instance_types))
    except Exception as e:  # noqa: BLE001 - the strategy only; the launch goes on with EC2's own prices
        log.warning("price-overlay annotation of the plan cannot be read (%s): lowest-price strategies", e)
        return False
    return PRICE_OVERLAY_APPLIED in ann


def _pick_capacity_type(cands: dict) -> str | None:
    """Upstream's order: reserved, then spot, then on-demand."""
    for ct in (wk.CAPACITY_TYPE_RESERVED, wk.CAPACITY_TYPE_SPOT, wk.CAPACITY_TYPE_ON_DEMAND):
        if cands.get(ct):
            return ct
    return None


def _partition(requirements) -> int | None:
    """The placement-group partition a NodeClaim's requirements pin (the lowest allowed), else None (EC2 chooses)."""
    try:
        if wk.PLACEMENT_GROUP_PARTITION not in requirements:
            return None
        req = requirements.get(wk.PLACEMENT_GROUP_PARTITION)
    except Exception:  # noqa: BLE001
        return None
    if req.complement or not req.values:
        return None
    nums = sorted(int(v) for v in req.values if str(v).isdigit())
    return nums[0] if nums else None


def _templates(lts, resolved, info, its, labels, taints, startup, ct, chosen, partition,
               terms=None, efa: bool = False) -> tuple[dict, dict, str | None]:
    """``(launch templates, reservations, reservation type)`` for a launch: per instance type for on-demand/spot;
    per (instance type, zone) for reserved, one template per capacity reservation (the candidates are of one kind
    already: :func:`_reserved_candidates`).  ``terms``: the EC2NodeClass's amiSelectorTerms; ``efa``: the NodeClaim
    requests ``vpc.amazonaws.com/efa`` (its templates attach the type's EFA interfaces)."""
    if ct != wk.CAPACITY_TYPE_RESERVED:
        return lts.ensure_for(resolved, info, its, labels, taints, startup, ct, placement_partition=partition,
                              ami_selector_terms=terms, efa=efa), {}, None
    by_name = {it.name: it for it in its}
    rtype = chosen[0][3].reservation_type or "default"
    out, reservations = {}, {}
    for name, zone, _price, o in chosen:
        if (o.reservation_type or "default") != rtype:
            continue
        made = lts.ensure_for(resolved, info, [by_name[name]], labels, taints, startup, ct,
                              reservation=(o.reservation_id, rtype), placement_partition=partition,
                              ami_selector_terms=terms, efa=efa)
        if name in made:
            out[(name, zone)] = made[name]
            reservations[(name, zone)] = o.reservation_id
    return out, reservations, rtype


def instance_labels(result, ct: str, reservation_type: str | None, resolved, partition: int | None,
                    interruptible: bool = False) -> dict[str, str]:
    """The labels a launch adds to its NodeClaim beyond the instance type's: the capacity reservation's id, type and
    interruptible (``true``/``false``; a reserved launch, as upstream's ``instanceToNodeClaim``), the placement group
    partition it was launched into."""
    out: dict[str, str] = {}
    if ct == wk.CAPACITY_TYPE_RESERVED and getattr(result, "reservation_id", None):
        out[wk.CAPACITY_RESERVATION_ID] = result.reservation_id
        out[wk.CAPACITY_RESERVATION_TYPE] = reservation_type or "default"
        out[wk.CAPACITY_RESERVATION_INTERRUPTIBLE] = "true" if interruptible else "false"
    pg = getattr(resolved, "placement_group", None)
    if pg is not None:
        out[wk.PLACEMENT_GROUP_ID] = pg.id
        if partition is not None:
            out[wk.PLACEMENT_GROUP_PARTITION] = str(partition)
    return out


def launch(provider, request: CreateRequest, on_retry=None) -> Instance:
    """CreateFleet with ICE fallback; raises :class:`NoCapacity` with the reason when nothing could be launched.
    ``provider`` gives ``ec2``, ``cluster`` (name, endpoint, CA, service CIDR), ``unavailable`` and
    ``beside_karpenter`` (:class:`~.instance.InstanceProvider`)."""
    try:  # everything before CreateFleet: a failure here launched nothing
        cluster = provider.cluster
        plan, np, nodeclass, resolved, name = request.plan, request.nodepool, request.nodeclass, request.resolved, request.name
        info = ClusterInfo(name=cluster.name, endpoint=cluster.endpoint, ca_b64=cluster.ca_b64,
                           cidr=getattr(cluster, "service_cidr", None))
        labels = dict(request.labels)
        taints = list(np.taints)
        startup = list(np.startup_taints)
        lts = provider.templates() if hasattr(provider, "templates") else LaunchTemplates(provider.ec2, cluster.name)
        fleet = FleetLauncher(provider.ec2, cluster.name, provider.unavailable,
                              beside_karpenter=bool(getattr(provider, "beside_karpenter", False)))
        types_by_name = {it.name: it for it in plan.instance_types}
        partition = _partition(plan.requirements) if getattr(resolved, "placement_group", None) is not None else None
        terms = (getattr(nodeclass, "spec", None) or {}).get("amiSelectorTerms")  # a Bottlerocket version
        overlaid = price_overlay(plan)
        efa = efa_requested(getattr(plan, "requests", None) or {})
    except Exception as e:
        raise LaunchFailed(f"launch of NodeClaim {request.name} not prepared: {e}") from e
    exclude: set = set()
    last_error = ""
    attempt = 0
    for attempt in range(6):
        try:
            cands = truncate_candidates(candidates_for(plan, resolved, exclude), plan, types_by_name)
            ct = _pick_capacity_type(cands)
            if ct is None:
                why = (f"no offering left for NodePool {np.name}" if getattr(np, "name", "") else
                       f"no offering left for NodeClaim {request.name}")   # a manual NodeClaim of no NodePool
                if last_error:
                    why += f" after insufficient capacity ({last_error})"
                raise NoCapacity(why)
            chosen = cands[ct]
            its = [types_by_name[n] for n in dict.fromkeys(c[0] for c in chosen)]
            try:
                lt_map, reservations, rtype = _templates(lts, resolved, info, its, labels, taints, startup, ct, chosen,
                                                         partition, terms, efa)
            except Exception as e:
                raise LaunchFailed(f"launch templates for EC2NodeClass {nodeclass.name}: {e}", throttled=_throttled(e)) from e
            # one reservation kind per launch: whether it is interruptible is the NodeClaim's label
            interruptible = ct == wk.CAPACITY_TYPE_RESERVED and bool(chosen[0][3].reservation_interruptible)
            chosen = [c[:3] for c in chosen if (c[0], c[1]) in lt_map or c[0] in lt_map]
            if not chosen:
                raise NoCapacity(f"EC2NodeClass {nodeclass.name}: no AMI matches the instance types of NodePool {np.name}")
            subnets = resolved.subnets_by_zone()
            req = LaunchRequest(
                nodeclaim_name=name, nodepool_name=np.name, nodeclass_name=nodeclass.name, capacity_type=ct,
                candidates=chosen, launch_templates=dict(lt_map),
                subnets={z: s["id"] for z, s in subnets.items()}, tags=dict(nodeclass.tags),
                client_token=f"{request.client_token or name}-{attempt}"[:64],
                reservations=reservations, reservation_type=rtype, context=nodeclass.spec.get("context") or None,
                price_overlay=overlaid,
            )
        except (NoCapacity, LaunchFailed):
            raise
        except Exception as e:  # before CreateFleet: nothing launched
            raise LaunchFailed(f"launch of NodeClaim {name} not prepared: {e}") from e
        try:
            result = fleet.launch(req)
        except LaunchThrottled as e:
            raise LaunchFailed(str(e), throttled=True) from e
        except InsufficientCapacityError as e:
            for off in getattr(e, "unavailable", []) or []:
                exclude.add(tuple(off))
            if not getattr(e, "unavailable", None):  # nothing to exclude: don't loop forever
                exclude.update((c[0], c[1], ct) for c in chosen)
            last_error = str(e)
            if on_retry is not None:
                on_retry(str(e), [list(x) for x in getattr(e, "unavailable", [])])
            continue
        except FleetLaunchError as e:  # EC2 answered: nothing launched
            raise LaunchFailed(str(e)) from e
        except ValueError as e:  # the request was refused before the call (FleetLauncher's own checks)
            raise LaunchFailed(str(e)) from e
        # launched: from here on nothing may fail the launch
        it = types_by_name.get(result.instance_type)
        ref = lt_map.get((result.instance_type, result.zone)) or lt_map.get(result.instance_type)
        image_id = getattr(result, "image_id", None) or (ref.image_id if ref is not None else None)
        price = getattr(result, "price", None)
        if price is None and it is not None:
            try:
                o = it.cheapest_offering(zones={result.zone}, capacity_types={result.capacity_type})
                price = o.price if o else 0.0
            except Exception:  # noqa: BLE001
                price = 0.0
        return Instance(instance_id=result.instance_id, instance_type=result.instance_type, zone=result.zone,
                        capacity_type=result.capacity_type, price=float(price or 0.0), image_id=image_id,
                        subnet_id=getattr(result, "subnet_id", None),
                        security_group_ids=sorted(getattr(resolved, "security_group_ids", None) or []),
                        labels=instance_labels(result, ct, rtype, resolved, partition, interruptible))
    raise NoCapacity(f"no capacity after {attempt + 1} attempts ({last_error})")


def _throttled(e: BaseException) -> bool:
    code = ((getattr(e, "response", None) or {}).get("Error") or {}).get("Code", "")
    return code in THROTTLE_CODES
