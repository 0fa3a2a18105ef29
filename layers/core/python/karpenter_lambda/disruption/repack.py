"""Beyond Karpenter: move a fragmented cluster toward its cheapest packing, in valid steps (pure).

Karpenter's greedy moves (multi-node on a prefix of the disruption-cost order, single-node one at a time) stall on
a fragmented cluster: no prefix can go, no single node can go, yet the pods would fit on far fewer nodes.
:class:`Repack` runs after them in the consolidation sweep, only when they found nothing:

1. **Target**: the scheduler places every reschedulable pod of the consolidatable nodes as if those nodes were
   gone and nothing replaced them (one ``solve`` over those pods, the other nodes kept as they are).  Its cost plus
   the kept nodes' is the *target*; when today's cost is within ``REPACK_THRESHOLD`` (10%) of it, nothing is done.
2. **Steps**: each node of the target packing draws its pods from some current nodes; those nodes, taken
   together (the groups with the largest saving first, at most ``MAX_GROUPS`` tried), are a multi-node
   candidate set handed to the SAME validity test as every consolidation
   (:func:`.consolidation.consolidation_option`: every pod placed on the remaining nodes plus at most one new
   node, strictly cheaper, spot rules, consolidateAfter windows, blockers and budgets).  The first valid group is
   the sweep's command.

**Bound**: every step is a valid delete or replace-by-one-cheaper, so cost strictly falls and the process stops;
it stops at the latest when the cluster is within 10% of the target, and the target is the scheduler's own packing
of the same pods (bench/scheduling.py measures how far that packing is from the LP lower bound).  A group that is
not valid as a whole is skipped (the next sweep, on a changed cluster, tries again).
"""

from __future__ import annotations

from ..api.kube import pod_key
from ..api.snapshot import ClusterSnapshot
from ..scheduling.inputs import existing_nodes, held_reservations, nodepool_inputs
from ..scheduling.reschedule import is_reschedulable
from ..scheduling.solver import SchedulingError, SchedulingInput, solve
from .consolidation import consolidatable, consolidation_option, evaluations_left, window_nodes
from .types import Blocked, Candidate
from .underutilized import _command, _Underutilized

REPACK_THRESHOLD = 0.10
MAX_GROUPS = 20


def target_packing(snap: ClusterSnapshot, candidates: list[Candidate]):
    """(cost of the target for the candidates' pods, [groups of candidates: one per target node])."""
    gone = {c.node_name for c in candidates} | {c.name for c in candidates}
    pods = [p for c in candidates for p in c.pods if is_reschedulable(p)]
    if not pods:
        return 0.0, []
    inputs, _ = nodepool_inputs(snap)
    keep = existing_nodes(snap, held_reservations(snap), exclude=gone)
    copies = []
    for p in pods:
        q = dict(p)
        q["spec"] = {k: v for k, v in (p.get("spec") or {}).items() if k != "nodeName"}
        copies.append(q)
    try:
        res = solve(SchedulingInput(pods=copies, nodepools=inputs, existing_nodes=keep, daemonsets=list(snap.daemonsets),
                                    nodepool_usage={}), min_values_policy=snap.min_values_policy)
    except SchedulingError:
        return float("inf"), []
    if res.unschedulable:
        return float("inf"), []
    source = {pod_key(p): c for c in candidates for p in c.pods}
    groups = []
    for plan in res.nodeclaims:
        members = {source[k].name: source[k] for k in plan.pods if k in source}
        groups.append((sum(c.price for c in members.values()) - plan.price, list(members.values())))
    groups.sort(key=lambda g: -g[0])
    return res.cost_per_hour, [g for s, g in groups if s > 0 and len(g) >= 2]


class Repack(_Underutilized):
    def compute_commands(self, ctx, candidates: list[Candidate], snap: ClusterSnapshot):
        budgets = ctx.budgets
        ok, _why = consolidatable(snap, candidates, ctx)
        ok = [c for c in ok if budgets.available(c.nodepool_name, self.reason)]
        if len(ok) < 2 or evaluations_left(ctx) <= 0:
            return [], []
        today = sum(c.price for c in ok)
        target, groups = target_packing(snap, ok)
        if today <= target * (1 + REPACK_THRESHOLD):
            return [], []
        window = window_nodes(snap, ctx)
        blocked: list[Blocked] = []
        for group in groups[:MAX_GROUPS]:
            if evaluations_left(ctx) <= 0:
                break
            per_pool: dict[str, int] = {}
            for c in group:
                per_pool[c.nodepool_name] = per_pool.get(c.nodepool_name, 0) + 1
            if any(n > budgets.left(p, self.reason) for p, n in per_pool.items()):
                continue
            opt = consolidation_option(snap, group, ctx, window=window)
            if opt.valid:
                for c in group:
                    budgets.take(c.nodepool_name, self.reason)
                cmd = _command(opt)
                cmd.detail = f"repack toward ${target:.4f}/h (today ${today:.4f}/h): " + cmd.detail
                return [cmd], blocked
        return [], blocked
