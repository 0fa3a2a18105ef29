"""Consolidation (pure): what removing some underused nodes would take, and whether it is worth it.

Shared by multi-node and single-node consolidation (Karpenter's pkg/controllers/disruption/consolidation.go):

* a candidate is **consolidatable**: its NodePool's ``consolidationPolicy`` is ``WhenEmptyOrUnderutilized`` or
  ``Balanced`` and ``consolidateAfter`` has elapsed since the last pod event (:func:`.emptiness.consolidatable_in`); graceful
  blockers apply;
* :func:`consolidation_option` asks the scheduling question (:func:`.replace.removal_plan`) for a set of
  candidates.  The move is valid only when every reschedulable pod lands on the remaining initialized nodes plus
  **at most one** new NodeClaim (never one node into several).  No new NodeClaim: a **delete**.  One: a
  **replace**, only with instance types strictly cheaper than the candidates together; spot -> spot needs at least
  15 cheaper spot types and offers the 15 cheapest when one spot node is replaced (Karpenter's rule; several spot
  nodes merged into one need neither, as Karpenter's multi-node), and only with ``snap.spot_to_spot_consolidation``
  (Karpenter's SpotToSpotConsolidation gate); on-demand -> spot where the NodePool allows spot; a replacement that
  may be spot is spot only (no on-demand fallback at a price the saving did not count); a requirement's
  ``minValues`` must still hold after the price filter;
* ``Balanced`` NodePools: a valid option is also scored (:func:`.balanced.judge`); under the threshold it is not
  valid, its reason gives the score;
* nodes still inside their own ``consolidateAfter`` window are not destinations (a synthetic NoSchedule taint in
  the simulation keeps their pods counted for topology), nor are uninitialized ones (``simulate_removal``).
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass

from ..api import labels as wk
from ..api.kube import pod_key
from ..api.objects import NodeClaim
from ..api.snapshot import ClusterSnapshot
from ..api.validators import BALANCED, WHEN_EMPTY_OR_UNDERUTILIZED
from ..scheduling.inputs import POD_FACTS_CACHE, nodepool_inputs
from ..scheduling.model import ExistingNode
from ..scheduling.nodeclaim import NodeClaimTemplate
from ..scheduling.requirements import Requirement, Requirements
from ..scheduling.resources import pod_requests
from .balanced import judge, node_disruption
from .candidates import graceful_blockers, make_candidate
from .emptiness import consolidatable_in
from .replace import new_capacity_sketch, removal_plan
from .types import Candidate, Option

SPOT_TO_SPOT_MIN_TYPES = 15
WINDOW_TAINT = {"key": "karpenter-lambda.io/consolidate-after-window", "effect": "NoSchedule"}


UNDERUTILIZED_POLICIES = (WHEN_EMPTY_OR_UNDERUTILIZED, BALANCED)   # the policies that consolidate non-empty nodes


def consolidation_enabled(c: Candidate) -> bool:
    return (c.nodepool.disruption or {}).get("consolidationPolicy", WHEN_EMPTY_OR_UNDERUTILIZED) in UNDERUTILIZED_POLICIES


def fmt_seconds(s: float) -> str:
    s = int(max(0, s))
    m, sec = divmod(s, 60)
    h, m = divmod(m, 60)
    return (f"{h}h" if h else "") + (f"{m}m" if m or h else "") + f"{sec}s"


def window_nodes(snap: ClusterSnapshot, ctx=None) -> set[str]:
    """Node names still inside their NodePool's consolidateAfter window (not destinations for moved pods).

    With the sweep's :class:`~.context.SweepContext` the answer per node is kept in its caches (every method of a
    sweep asks; a context derived by ``SweepContext.derive`` keeps the answers of the nodes whose pods did not
    change)."""
    cache = ctx.caches_for(snap).window if ctx is not None else {}
    out = set()
    for nc in snap.nodeclaims.values():
        np = snap.nodepools.get(nc.labels.get(wk.NODEPOOL, ""))
        node = snap.node_of_nodeclaim(nc.name)
        if np is None or node is None or not nc.is_true("Initialized"):
            continue
        name = (node.get("metadata") or {}).get("name")
        inside = cache.get(name)
        if inside is None:
            left = consolidatable_in(make_candidate(snap, nc, node, np), snap)
            inside = cache[name] = left is not None and left > 0
        if inside:
            out.add(name)
    return out


def _cheapest_offering(it, reqs):
    zones, cts = reqs.get(wk.ZONE), reqs.get(wk.CAPACITY_TYPE)
    return min((o for o in it.offerings if o.available and zones.has(o.zone) and cts.has(o.capacity_type)),
               key=lambda o: o.price, default=None)


def _type_values(priced: list, key: str) -> set | None:
    """The values of ``key`` the types of ``priced`` ([(price, type)]) offer: a zone or capacity type from their
    available offerings, anything else from their labels; None when no type has the key at all (not a property of
    instance types: the solver that made the plan judged it)."""
    if key in (wk.ZONE, wk.CAPACITY_TYPE):
        attr = "zone" if key == wk.ZONE else "capacity_type"
        return {getattr(o, attr) for _, it in priced for o in it.offerings if o.available}
    values = {it.labels.get(key) for _, it in priced} - {None}
    return values or (set() if any(key in it.labels for _, it in priced) else None)


def _prefix_meeting_min_values(priced: list, reqs) -> int:
    """How many of ``priced`` ([(price, type)], cheapest first) it takes to meet every minValues of ``reqs`` (all of
    them when they never do: the check after says why)."""
    wanted = [(r.key, r.min_values) for r in reqs if r.min_values]
    if not wanted:
        return 0
    wanted = [(k, n) for k, n in wanted if _type_values(priced, k) is not None]
    seen: dict[str, set] = {k: set() for k, _ in wanted}
    for i, x in enumerate(priced, 1):
        for k, _ in wanted:
            seen[k] |= _type_values([x], k) or set()
        if all(len(seen[k]) >= n for k, n in wanted):
            return i
    return len(priced)


def _cheaper_plan(plan, limit: float, candidates: list[Candidate], spot_to_spot: bool = True):
    """(the plan restricted to strictly cheaper instance types, its price, why not).

    With several candidates, when one of them runs an instance type the replacement could use, the replacement must
    also be cheaper than that node (Karpenter's multi-node ``filterOutSameType``): otherwise keeping that node and
    deleting the others is the same saving with fewer pods moved, which single-node consolidation finds.

    A replacement that may be spot is made spot only (Karpenter's ``computeConsolidation`` /
    ``computeSpotToSpotConsolidation``): it is priced at spot prices, so an on-demand fallback when spot capacity runs
    out would cost as much or more than the node it replaces, and be replaced again and again; with ``capacity-type
    In [spot]`` the launch fails instead and the node is kept.  Spot candidates replaced by spot:
    ``spot_to_spot`` (Karpenter's ``SpotToSpotConsolidation`` feature gate) must be on."""
    reqs = plan.requirements
    ct = reqs.get(wk.CAPACITY_TYPE)
    all_spot = all(c.capacity_type == wk.CAPACITY_TYPE_SPOT for c in candidates)
    # (a plan into reserved capacity is that capacity's: Karpenter's scheduler has narrowed it to reserved already)
    may_spot = ct.has(wk.CAPACITY_TYPE_SPOT) and plan.capacity_type != wk.CAPACITY_TYPE_RESERVED
    to_spot = all_spot and may_spot
    if to_spot and not spot_to_spot:
        return None, None, "SpotToSpotConsolidation is disabled: a spot node is not replaced by a spot node"
    if may_spot and (to_spot or ct.has(wk.CAPACITY_TYPE_ON_DEMAND)) and len(ct) > 1:
        reqs = reqs.copy()
        reqs.add(Requirement(wk.CAPACITY_TYPE, False, (wk.CAPACITY_TYPE_SPOT,)))
    offers = [(o, it) for it in plan.instance_types for o in [_cheapest_offering(it, reqs)] if o is not None]
    priced = [(o.price, it) for o, it in offers]
    if len(candidates) > 1:
        options = {it.name for _, it in priced}
        same = [c.price for c in candidates if c.instance_type in options and c.price > 0]
        if same:
            limit = min(limit, min(same))
    cheapest = min((p for p, _ in priced), default=None)
    cheaper = sorted(((p, it) for p, it in priced if p < limit - 1e-12), key=lambda x: (x[0], x[1].name))
    if not cheaper:
        return None, cheapest, (f"no cheaper replacement (cheapest possible ${cheapest:.4f}/h vs ${limit:.4f}/h)"
                                if cheapest is not None else "no replacement offering")
    if to_spot and len(candidates) == 1:
        # single-node spot -> spot (Karpenter's computeSpotToSpotConsolidation): 15 cheaper types at least, and only
        # the 15 cheapest offered (or as many of the cheapest as the minValues need, the larger), so the launched
        # type is always among them and the node is not replaced again at once.  Several spot candidates merged
        # into one spot node need neither (Karpenter returns the multi-node command before that check)
        if len(cheaper) < SPOT_TO_SPOT_MIN_TYPES:
            return None, cheapest, (f"spot to spot needs {SPOT_TO_SPOT_MIN_TYPES} cheaper spot instance types, "
                                    f"{len(cheaper)} possible")
        cheaper = cheaper[:max(SPOT_TO_SPOT_MIN_TYPES, _prefix_meeting_min_values(cheaper, reqs))]
    req = reqs.get(wk.INSTANCE_TYPE) if reqs.has(wk.INSTANCE_TYPE) else None
    min_values = req.min_values if req is not None else None
    if min_values and len(cheaper) < min_values:
        return None, cheapest, f"minValues {min_values} of instance types not met by the {len(cheaper)} cheaper ones"
    # every other minValues too (Karpenter's RemoveInstanceTypeOptionsByPriceAndMinValues): the cheaper types must
    # still offer that many values of the key (instance families, categories, ...)
    for r in reqs:
        if r.min_values and r.key != wk.INSTANCE_TYPE:
            values = _type_values(cheaper, r.key)
            if values is not None and len(values) < r.min_values:
                return None, cheapest, (f"minValues {r.min_values} for {r.key} not met by the {len(cheaper)} cheaper "
                                        f"instance types ({len(values)} values)")
    new = copy.copy(plan)
    new.instance_types = [it for _, it in cheaper]
    first = _cheapest_offering(cheaper[0][1], reqs)
    new.price, new.instance_type = first.price, cheaper[0][1].name
    new.zone, new.capacity_type = first.zone, first.capacity_type
    if reqs is not plan.requirements:   # narrowed to spot
        new.requirements = reqs
        if isinstance(getattr(plan, "labels", None), dict):
            new.labels = {**plan.labels, wk.CAPACITY_TYPE: wk.CAPACITY_TYPE_SPOT}
    return new, cheapest, ""


def evaluations_left(ctx) -> int:
    """How many more validity tests the sweep of ``ctx`` (a :class:`~.context.SweepContext`) may run; unlimited
    without one."""
    return 1 << 30 if ctx is None else ctx.counters.left()


def consolidation_option(snap: ClusterSnapshot, candidates: list[Candidate], ctx=None, *,
                         window: set[str] | None = None, one_node: str | None = None) -> Option:
    """The validity test of deleting ``candidates`` or replacing them by one strictly cheaper node, and in a
    ``Balanced`` NodePool the move's score (:func:`.balanced.judge`; under the threshold the option is not valid)."""
    return judge(_option(snap, candidates, ctx, window=window, one_node=one_node), snap, ctx)


def _option(snap: ClusterSnapshot, candidates: list[Candidate], ctx=None, *,
            window: set[str] | None = None, one_node: str | None = None) -> Option:
    """The validity test of deleting ``candidates`` or replacing them by one strictly cheaper node.

    ``one_node`` (a zone; packed groups, whose pods were chosen to fill one node there): the replacement is sized
    first, from the pods' needs on new capacity alone (:func:`.replace.new_capacity_sketch`, no simulation of the
    cluster), and the full simulation runs once, with that node added -- one validity test instead of two (the
    solver's own packing, then the one-node retry).  The test is the same: every pod must land on the remaining
    nodes or that node."""
    opt = Option(list(candidates))
    total = sum(c.price for c in candidates)
    if one_node is not None and len(candidates) > 1:
        sketch = new_capacity_sketch(snap, candidates, ctx)
        if sketch.all_rescheduled and sketch.new_nodeclaims:
            moved = [pod_key(q) for c in candidates for q in c.reschedulable]
            merged = _one_replacement(snap, candidates, ctx, window, sketch, total, stray=opt.stray, zone=one_node,
                                      load_keys=moved)
            if merged is None:
                opt.reason = "would need more than one new node (consolidation never turns nodes into more)"
                return opt
            return _priced(opt, merged, total, candidates, snap)
    if ctx is not None:
        ctx.count_evaluation()
    result, _ = removal_plan(snap, candidates, ctx, extra_taints={n: [WINDOW_TAINT] for n in (window or ())})
    opt.placements, opt.usage = dict(result.placements), result.usage
    if not result.all_rescheduled:
        pod, why = next(iter(result.unschedulable.items()))
        opt.reason = f"pods would not fit (pod {pod}: {why})"
        return opt
    if not result.new_nodeclaims:
        opt.savings = round(total, 6)
        return opt
    if len(result.new_nodeclaims) > 1:
        merged = _one_replacement(snap, candidates, ctx, window, result, total, stray=opt.stray)
        if merged is None:
            opt.reason = f"would need {len(result.new_nodeclaims)} new nodes (consolidation never turns nodes into more)"
            return opt
        return _priced(opt, merged, total, candidates, snap)
    return _priced(opt, result, total, candidates, snap)


def _priced(opt: Option, result, total: float, candidates: list[Candidate], snap: ClusterSnapshot) -> Option:
    """The option from a simulation that placed every pod on the remaining nodes and at most one new node."""
    opt.placements, opt.usage = dict(result.placements), result.usage
    if not result.new_nodeclaims:
        opt.savings = round(total, 6)
        return opt
    plan, cheapest, why = _cheaper_plan(result.new_nodeclaims[0], total, candidates, snap.spot_to_spot_consolidation)
    opt.cheapest_possible = cheapest
    if plan is None:
        opt.reason = why
        return opt
    opt.replacement = plan
    opt.savings = round(total - plan.price, 6)
    return opt


def _consolidatable_one(snap: ClusterSnapshot, c: Candidate, ctx=None):
    """None (not eligible), () (consolidatable) or (cause, message)."""
    if not consolidation_enabled(c):
        return None
    left = consolidatable_in(c, snap)
    if left is None:
        return None
    if left > 0:
        return ("consolidateAfter", f"consolidateAfter {fmt_seconds(left)} left")
    why = graceful_blockers(c, snap, ctx=ctx)
    return (why[0][0], why[0][1]) if why else ()


REPLACEMENT_NODE = "consolidation-replacement"


def _pod_sum(keys, by_key) -> dict:
    out: dict = {"pods": 0}
    for k in keys:
        p = by_key.get(k)
        if p is None:
            continue
        for r, v in pod_requests(p).items():
            out[r] = out.get(r, 0) + v
        out["pods"] += 1
    return out


def _one_replacement(snap: ClusterSnapshot, candidates: list[Candidate], ctx, window, result, total: float,
                     stray: list | None = None, zone: str | None = None, load_keys: list | None = None):
    """The provisioning solver packs the moved pods at the least cost, which may be several small new nodes where
    one larger node would hold them all (Karpenter's scheduler fills one NodeClaim before opening the next).  When
    the simulation asks for several new nodes of one NodePool, try ONE: the cheapest instance type, strictly
    cheaper than the candidates together, that satisfies every one of those nodes' requirements (same zone) and
    holds their pods plus one daemonset overhead; then the SAME simulation again with that node added as
    capacity.  Only when every pod lands (on the remaining nodes or that node) is it the answer: a
    RescheduleResult whose single new NodeClaim is that node with the pods the simulation put there and every
    instance type that would hold them."""
    plans = result.new_nodeclaims
    if len({p.nodepool for p in plans}) != 1:
        return None
    reqs = Requirements()   # (minValues requirements kept: the one node's cheaper types must meet them, _cheaper_plan)
    # the zone: where most of the pods were put (the solver picks zones freely at equal prices; a pod that needs
    # another zone does not land on the node and the simulation below refuses the move)
    # another zone does not land on the node and the simulation below refuses the move); pods the solver could
    # only put in that zone (a zone requirement: spread, affinity) weigh more than those it put there freely
    by_zone: dict[str, int] = {}
    for p in plans:
        pinned = p.requirements.has(wk.ZONE)
        by_zone[p.zone] = by_zone.get(p.zone, 0) + len(p.pods) * (100_000 if pinned else 1)
    if zone is None:   # else the caller's (a packed group's zone)
        zone = max(sorted(by_zone), key=lambda z: by_zone[z])
    # the new nodes' requirements together; where they disagree on a key (the solver chose arm64 for one and amd64
    # for another, or two instance categories) the key is left to the NodePool here and pinned below to the value
    # of the one node chosen: the simulation with that node then says whether every pod accepts it
    conflict: set[str] = set()
    for p in plans:
        for r in p.requirements:
            if r.key in (wk.INSTANCE_TYPE, wk.ZONE) or r.key in conflict:
                continue
            cur = reqs.get(r.key) if reqs.has(r.key) else None
            if cur is not None and cur.intersection(r).is_empty():
                conflict.add(r.key)
                continue
            reqs.add(r)
    by_key = {pod_key(q): q for c in candidates for q in c.pods}
    first = _pod_sum(plans[0].pods, by_key)
    overhead = {k: max(0, v - first.get(k, 0)) for k, v in (plans[0].requests or {}).items()}
    # what the one node must hold: the pods of the new nodes (or every moved pod, given by a caller whose ``result``
    # scheduled one pod of each kind: new_capacity_sketch)
    load = _pod_sum(load_keys if load_keys is not None else [k for p in plans for k in p.pods], by_key)
    inputs, _ = nodepool_inputs(snap)
    npi = next((x for x in inputs if x.nodepool.name == plans[0].nodepool), None)
    if npi is None:
        return None
    np_reqs = Requirements.from_list(npi.nodepool.requirements)
    reqs = reqs.without(*conflict)
    for k in conflict:
        if np_reqs.has(k):
            reqs.add(np_reqs.get(k))
    reqs.add(Requirement.new(wk.ZONE, "In", [zone]))
    # the template's value of a disputed key is one new node's, not a type's: the type's own labels supply it
    base_labels = {k: v for k, v in (plans[0].labels or {}).items() if k not in conflict}
    # the NodeClaim template sizes the node: it adds the NodePool's DaemonSet overhead to the requests it is given,
    # so it gets ``need`` (the load plus ``overhead``, as measured on the solver's first new node) minus that
    # overhead -- the same demand, also where the two differ: ``_pod_sum`` counts a pod twice in "pods" (its
    # requests carry pods=1 and it adds one), and ``overhead`` is clamped at 0.  A resource the template's overhead
    # already covers (a request <= 0 there) is checked here.
    template = NodeClaimTemplate.for_nodepool(npi, daemonsets=snap.daemonsets, usage=None)
    daemon = template.daemon

    def holding(need: dict, within: Requirements, below: float | None = None) -> list:
        asked = {k: v - daemon.get(k, 0) for k, v in need.items()}
        covered = [(k, v) for k, v in need.items() if 0 < v <= daemon.get(k, 0)]
        return [x for x in template.offers_holding(asked, within, labels=base_labels, below=below)
                if all(x.instance_type.allocatable.get(k, 0) >= v for k, v in covered)]

    need = {k: load.get(k, 0) + overhead.get(k, 0) for k in set(load) | set(overhead)}
    offers = holding(need, reqs, below=total - 1e-12)
    if not offers:
        return None
    best = offers[0]
    o, it, labels = best.offering, best.instance_type, best.labels
    # the DaemonSets of that type (scheduling/nodeclaim.py charges each type its own), never less than measured
    alloc = {k: max(0, v - max(overhead.get(k, 0), best.daemon.get(k, 0))) for k, v in it.allocatable.items()}
    node = ExistingNode(name=REPLACEMENT_NODE, labels={**labels, wk.HOSTNAME: REPLACEMENT_NODE},
                        taints=list(plans[0].taints or []), allocatable=alloc, pods=[], nodepool=npi.nodepool.name,
                        instance_type=it.name, zone=o.zone, capacity_type=o.capacity_type, price=o.price)
    if ctx is not None:
        ctx.count_evaluation()
    again, _ = removal_plan(snap, candidates, ctx, extra_taints={n: [WINDOW_TAINT] for n in (window or ())},
                            extra_nodes=[node])
    if not again.all_rescheduled or again.new_nodeclaims:
        if stray is not None:   # the pods that one node did not take (another zone, anti-affinity, ...)
            stray.extend(k for p in again.new_nodeclaims for k in p.pods)
            stray.extend(again.unschedulable)
        return None
    mine = [k for k, n in again.placements.items() if n == REPLACEMENT_NODE]
    again.placements = {k: n for k, n in again.placements.items() if n != REPLACEMENT_NODE}
    if not mine:
        return again   # everything fits on the remaining nodes: a delete
    demand = _pod_sum(mine, by_key)
    demand = {k: demand.get(k, 0) + overhead.get(k, 0) for k in set(demand) | set(overhead)}
    final = reqs.copy()
    final.add(Requirement.new(wk.ZONE, "In", [o.zone]))
    final.add(Requirement.new(wk.CAPACITY_TYPE, "In", [o.capacity_type]))
    for k in sorted(conflict):   # pinned to the node the pods were simulated on
        if k in labels:
            final.add(Requirement.new(k, "In", [labels[k]]))
    names = {x.instance_type.name for x in holding(demand, final)
             if x.offering.zone == o.zone and x.offering.capacity_type == o.capacity_type}
    types = [t for t in npi.instance_types if t.name in names]
    final.add(Requirement.new(wk.INSTANCE_TYPE, "In", sorted(t.name for t in types)))
    plan = copy.copy(plans[0])
    plan.requirements, plan.instance_types, plan.instance_type = final, types, it.name
    plan.zone, plan.capacity_type, plan.price, plan.pods, plan.requests = o.zone, o.capacity_type, o.price, mine, demand
    plan.reason = f"one node for the pods the cheapest packing spread over {len(plans)} new nodes: {plan.reason}"
    again.new_nodeclaims, again.price = [plan], o.price
    return again


def consolidatable(snap: ClusterSnapshot, candidates: list[Candidate], ctx=None
                   ) -> tuple[list[Candidate], list[tuple[Candidate, str, str]]]:
    """(candidates a consolidation may take, [(candidate, cause, message)] for those it may not, once eligible).

    With the sweep's :class:`~.context.SweepContext` the answer per candidate is kept in its caches (the methods of
    one sweep ask it again; a derived context keeps the answers of the nodes whose pods did not change)."""
    cache = ctx.caches_for(snap).consolidatable if ctx is not None else {}
    ok, blocked = [], []
    for c in candidates:
        if c.name not in cache:
            cache[c.name] = _consolidatable_one(snap, c, ctx)
        hit = cache[c.name]
        if hit is None:
            continue
        if hit:
            blocked.append((c, hit[0], hit[1]))
            continue
        ok.append(c)
    return ok, blocked


PLANNED_TAINT = wk.PLANNED_TAINT   # consolidation's what-if nodes (api.labels: the one definition)
PLANNED_PREFIX = "planned-"


@dataclass
class Applied:
    """:func:`carry_out`'s answer: the snapshot with the option carried out, and what changed."""

    snapshot: ClusterSnapshot
    gone_nodes: set[str]      # the candidates' nodes
    gone_claims: set[str]     # the candidates' NodeClaims
    touched: set[str]         # the nodes that received pods (the replacement's included)
    moved: dict = dataclasses.field(default_factory=dict)   # moved pod key -> the node it went to


def carry_out(snap: ClusterSnapshot, opt: Option) -> Applied:
    """The snapshot as if ``opt`` were carried out (pure; ``snap`` is not modified): its candidates gone, each moved
    pod on the node the validity test put it on, the replacement (if any) a registered but not yet initialized node
    holding its pods, tainted so that no later simulation moves anything onto it (its pods still count for
    topology).  A later command of the same sweep is planned, and re-validated, on this snapshot
    (``SweepContext.derive`` also carries the caches that still hold)."""
    gone_nodes = {c.node_name for c in opt.candidates if c.node_name}
    gone_claims = {c.name for c in opt.candidates}
    moved: dict[str, str] = {}
    for c in opt.candidates:
        for p in c.pods:
            key = pod_key(p)
            if key in opt.placements:
                moved[key] = opt.placements[key]
    rep = opt.replacement
    rep_node = None
    nodeclaims = {k: v for k, v in snap.nodeclaims.items() if k not in gone_claims}
    nodes = [n for n in snap.nodes if (n.get("metadata") or {}).get("name") not in gone_nodes]
    usage = {k: dict(v) for k, v in (opt.usage or snap.usage or {}).items()}
    if rep is not None:
        rep_node = PLANNED_PREFIX + "-".join(sorted(gone_claims))[:40] + f"-{len(snap.nodeclaims)}"
        for key in rep.pods:
            moved[key] = rep_node
        it = rep.instance_types[0]
        labels = {**dict(it.labels or {}), **dict(rep.labels or {}), wk.ZONE: rep.zone,
                  wk.CAPACITY_TYPE: rep.capacity_type, wk.NODEPOOL: rep.nodepool, wk.HOSTNAME: rep_node,
                  wk.INSTANCE_TYPE: it.name}
        alloc = it.allocatable
        nodes.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": rep_node, "labels": labels},
                      "spec": {"taints": [dict(PLANNED_TAINT)], "providerID": f"planned:///{rep_node}"},
                      "status": {"allocatable": {"cpu": f"{alloc.get('cpu', 0)}m", "memory": str(alloc.get("memory", 0)),
                                                 "pods": str(alloc.get("pods", 110))},
                                 "conditions": [{"type": "Ready", "status": "True"}]}})
        nodeclaims[rep_node] = NodeClaim({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": rep_node, "labels": labels,
                         "annotations": {wk.PRICE_ANNOTATION: repr(rep.price)}},
            "spec": {}, "status": {"nodeName": rep_node, "providerID": f"planned:///{rep_node}", "conditions": []}})
        pool = usage.setdefault(rep.nodepool, {})
        for k, v in dict(it.capacity or {}).items():
            if isinstance(v, int):
                pool[k] = pool.get(k, 0) + v
        pool["nodes"] = pool.get("nodes", 0) + 1
    pods = []
    for p in snap.pods:
        on = (p.get("spec") or {}).get("nodeName")
        key = pod_key(p)
        if on in gone_nodes:
            if key not in moved:
                continue   # not reschedulable (DaemonSet, mirror, terminal): goes with its node
            q = dict(p)
            q["spec"] = {**(p.get("spec") or {}), "nodeName": moved[key]}
            pods.append(q)
        else:
            pods.append(p)
    new = dataclasses.replace(snap, nodeclaims=nodeclaims, nodes=nodes, pods=pods, usage=usage)
    if POD_FACTS_CACHE in snap.__dict__:
        # scheduling's per-snapshot pod facts (scheduling.inputs keeps them on the snapshot; its entries are checked
        # against the pods' identities): shared, as before; the disruption caches travel in the SweepContext
        new.__dict__[POD_FACTS_CACHE] = snap.__dict__[POD_FACTS_CACHE]
    # every pod the option placed (also those of nodes already leaving that it counted on a candidate, which
    # replace.removal_plan moves with the candidate's own): where it went, for the caches carried to ``new``
    placed = {**opt.placements, **{k: rep_node for k in (rep.pods if rep is not None else ())}, **moved}
    return Applied(new, gone_nodes, gone_claims, set(moved.values()), placed)


def apply_option(snap: ClusterSnapshot, opt: Option) -> ClusterSnapshot:
    """:func:`carry_out`'s snapshot."""
    return carry_out(snap, opt).snapshot


def savings_ratio(c: Candidate) -> float:
    """Karpenter v1.14's ``SavingsRatio``: the node's price per unit of disruption, the disruption being 1 (the node's
    own drain) plus the positive eviction costs of the pods it reschedules (:func:`.balanced.node_disruption`)."""
    return c.price / node_disruption(c.pods)


def ordered(candidates: list[Candidate]) -> list[Candidate]:
    """Karpenter v1.14's consolidation order (``consolidation.sortCandidates``): the highest savings ratio first, so a
    budget-limited sweep takes the moves worth most per pod disturbed (then by name, for a stable order)."""
    return sorted(candidates, key=lambda c: (-savings_ratio(c), c.name))


def interleaved(candidates: list[Candidate]) -> list[Candidate]:
    """Single-node consolidation's order (Karpenter's ``SortCandidates``): :func:`ordered`, then the NodePools taken in
    turn (each NodePool's best, then each one's second...), so one large NodePool does not use up the evaluations;
    the NodePools in the order of their best candidate."""
    by_pool: dict[str, list[Candidate]] = {}
    for c in ordered(candidates):
        by_pool.setdefault(c.nodepool_name, []).append(c)
    out: list[Candidate] = []
    for i in range(max((len(v) for v in by_pool.values()), default=0)):
        out.extend(v[i] for v in by_pool.values() if i < len(v))
    return out
