"""Consolidation (pure): what removing some underused nodes would take, and whether it is worth it.

Shared by multi-node and single-node consolidation (Karpenter's pkg/controllers/disruption/consolidation.go):

* a candidate is **consolidatable**: its NodePool's ``consolidationPolicy`` is ``WhenEmptyOrUnderutilized`` and
  ``consolidateAfter`` has elapsed since the last pod event (:func:`.emptiness.consolidatable_in`); graceful
  blockers apply;
* :func:`consolidation_option` asks the scheduling question (:func:`.replace.removal_plan`) for a set of
  candidates.  The move is valid only when every reschedulable pod lands on the remaining initialized nodes plus
  **at most one** new NodeClaim (never one node into several).  No new NodeClaim: a **delete**.  One: a
  **replace**, only with instance types strictly cheaper than the candidates together; spot -> spot needs at least
  15 cheaper spot types and offers the 15 cheapest (Karpenter's rule; single-node only); on-demand -> spot where the
  NodePool allows spot; a requirement's ``minValues`` must still hold after the price filter;
* nodes still inside their own ``consolidateAfter`` window are not destinations (a synthetic NoSchedule taint in
  the simulation keeps their pods counted for topology), nor are uninitialized ones (``simulate_removal``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..api import labels as wk
from ..api.snapshot import ClusterSnapshot
from .candidates import graceful_blockers
from .emptiness import consolidatable_in
from .replace import removal_plan
from .types import Candidate

SPOT_TO_SPOT_MIN_TYPES = 15
WINDOW_TAINT = {"key": "karpenter-lambda.io/consolidate-after-window", "effect": "NoSchedule"}


@dataclass
class Option:
    candidates: list[Candidate]
    replacement: object | None = None     # NodeClaimPlan with the price-filtered instance types
    savings: float = 0.0
    reason: str = ""                      # why not (empty when valid)
    cheapest_possible: float | None = None

    @property
    def valid(self) -> bool:
        return not self.reason

    @property
    def action(self) -> str:
        return "replace" if self.replacement is not None else "delete"


def consolidation_enabled(c: Candidate) -> bool:
    return (c.nodepool.disruption or {}).get("consolidationPolicy", "WhenEmptyOrUnderutilized") == "WhenEmptyOrUnderutilized"


def fmt_seconds(s: float) -> str:
    s = int(max(0, s))
    m, sec = divmod(s, 60)
    h, m = divmod(m, 60)
    return (f"{h}h" if h else "") + (f"{m}m" if m or h else "") + f"{sec}s"


def window_nodes(snap: ClusterSnapshot) -> set[str]:
    """Node names still inside their NodePool's consolidateAfter window (not destinations for moved pods)."""
    from .candidates import make_candidate

    out = set()
    for nc in snap.nodeclaims.values():
        np = snap.nodepools.get(nc.labels.get(wk.NODEPOOL, ""))
        node = snap.node_of_nodeclaim(nc.name)
        if np is None or node is None or not nc.is_true("Initialized"):
            continue
        left = consolidatable_in(make_candidate(snap, nc, node, np), snap)
        if left is not None and left > 0:
            out.add((node.get("metadata") or {}).get("name"))
    return out


def _offering_price(it, reqs) -> float | None:
    zones, cts = reqs.get(wk.ZONE), reqs.get(wk.CAPACITY_TYPE)
    prices = [o.price for o in it.offerings if o.available and zones.has(o.zone) and cts.has(o.capacity_type)]
    return min(prices) if prices else None


def _cheaper_plan(plan, limit: float, candidates: list[Candidate]):
    """(the plan restricted to strictly cheaper instance types, its price, why not).

    With several candidates, when one of them runs an instance type the replacement could use, the replacement must
    also be cheaper than that node (Karpenter's multi-node ``filterOutSameType``): otherwise keeping that node and
    deleting the others is the same saving with fewer pods moved, which single-node consolidation finds."""
    priced = [(p, it) for it in plan.instance_types for p in [_offering_price(it, plan.requirements)] if p is not None]
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
    all_spot = all(c.capacity_type == wk.CAPACITY_TYPE_SPOT for c in candidates)
    reqs = plan.requirements
    replacement_spot = reqs.get(wk.CAPACITY_TYPE).has(wk.CAPACITY_TYPE_SPOT) and \
        not reqs.get(wk.CAPACITY_TYPE).has(wk.CAPACITY_TYPE_ON_DEMAND)
    if all_spot and (replacement_spot or plan.capacity_type == wk.CAPACITY_TYPE_SPOT):
        if len(candidates) > 1:
            return None, cheapest, "spot to spot consolidation is single-node only (as Karpenter)"
        if len(cheaper) < SPOT_TO_SPOT_MIN_TYPES:
            return None, cheapest, (f"spot to spot needs {SPOT_TO_SPOT_MIN_TYPES} cheaper spot instance types, "
                                    f"{len(cheaper)} possible")
        cheaper = cheaper[:SPOT_TO_SPOT_MIN_TYPES]
    req = reqs.get(wk.INSTANCE_TYPE) if reqs.has(wk.INSTANCE_TYPE) else None
    min_values = getattr(req, "min_values", None) if req is not None else None
    if min_values and len(cheaper) < min_values:
        return None, cheapest, f"minValues {min_values} of instance types not met by the {len(cheaper)} cheaper ones"
    import copy

    new = copy.copy(plan)
    new.instance_types = [it for _, it in cheaper]
    new.price = cheaper[0][0]
    new.instance_type = cheaper[0][1].name
    return new, cheapest, ""


def consolidation_option(snap: ClusterSnapshot, candidates: list[Candidate], budgets=None, *,
                         window: set[str] | None = None) -> Option:
    opt = Option(list(candidates))
    total = sum(c.price for c in candidates)
    result, _ = removal_plan(snap, candidates, budgets, extra_taints={n: [WINDOW_TAINT] for n in (window or ())})
    if not result.all_rescheduled:
        pod, why = next(iter(result.unschedulable.items()))
        opt.reason = f"pods would not fit (pod {pod}: {why})"
        return opt
    if not result.new_nodeclaims:
        opt.savings = round(total, 6)
        return opt
    if len(result.new_nodeclaims) > 1:
        opt.reason = f"would need {len(result.new_nodeclaims)} new nodes (consolidation never turns nodes into more)"
        return opt
    plan, cheapest, why = _cheaper_plan(result.new_nodeclaims[0], total, candidates)
    opt.cheapest_possible = cheapest
    if plan is None:
        opt.reason = why
        return opt
    opt.replacement = plan
    opt.savings = round(total - plan.price, 6)
    return opt


def consolidatable(snap: ClusterSnapshot, candidates: list[Candidate]) -> tuple[list[Candidate], list[tuple[Candidate, str, str]]]:
    """(candidates a consolidation may take, [(candidate, cause, message)] for those it may not, once eligible)."""
    ok, blocked = [], []
    for c in candidates:
        if not consolidation_enabled(c):
            continue
        left = consolidatable_in(c, snap)
        if left is None:
            continue
        if left > 0:
            blocked.append((c, "consolidateAfter", f"consolidateAfter {fmt_seconds(left)} left"))
            continue
        why = graceful_blockers(c, snap)
        if why:
            blocked.append((c, why[0][0], why[0][1]))
            continue
        ok.append(c)
    return ok, blocked


def ordered(candidates: list[Candidate]) -> list[Candidate]:
    """Karpenter's order: cheapest to disrupt first (disruption cost), then the most expensive node."""
    return sorted(candidates, key=lambda c: (c.disruption_cost, -c.price, c.name))
