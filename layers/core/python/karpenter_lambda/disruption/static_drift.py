"""Static drift (pure): Karpenter v1.14's ``StaticDrift`` method (``pkg/controllers/disruption/staticdrift.go``,
registered between emptiness and drift in ``controller.go``) for the drifted NodeClaims of static NodePools
(``spec.replicas``, :mod:`.static`).

The ordinary drift method (:class:`~.drift.Drift`) asks where a candidate's pods would go and sizes replacements for
them with the provisioning solver; the solver leaves static NodePools out (no NodePool is sized for pods there), so a
static node's pods had "no NodePool" and the node stayed drifted for good (or, with a dynamic NodePool present, its
pods were given a dynamic node and the static one was relaunched only after the old one was gone).  As Karpenter,
``Drift`` leaves static NodePools out and this method takes them:

* **no pod simulation**: each drifted NodeClaim of a static NodePool is replaced by ONE NodeClaim made from the
  NodePool's own template, as the static controller makes one (:func:`.static.static_nodeclaim_plan`: every
  instance type the requirements allow, the cheapest launched); its pods move there (or wherever the scheduler
  puts them) when the old node is drained;
* **eventual class, graceful**: ``do-not-disrupt`` on the Node always holds it; ``do-not-disrupt`` pods and
  PodDisruptionBudgets that allow no eviction hold it unless the NodeClaim has a ``terminationGracePeriod``
  (Karpenter's ``NewCandidate`` for the eventual class); the decision is reserved in the ledger within the
  NodePool's ``Drifted`` budget, like drift's;
* **per NodePool** (Karpenter's order of checks, with an explanation for each node held): the ``Drifted`` budget
  (in-flight disruptions count against it); no new one while the NodePool has more NodeClaims not being deleted
  than ``replicas`` (a scale down, or a replacement of an earlier one, in progress: Karpenter's
  ``running + pendingDisruption > replicas``); ``limits.nodes``: the replacements must fit beside every NodeClaim of
  the NodePool, the candidates included (Karpenter's ``ReserveNodeCount``; the launch claims then check it again,
  the old node still counted);
* candidates earliest drift first, as drift's.

The executor (``controllers/disruption_exec.py``) launches the replacement first (named in its
``karpenter-lambda.io/replaces``, so the static controller counts the old NodeClaim as pending disruption and
launches nothing for it), and requests the old NodeClaim's deletion once the replacement is Initialized, with no
pod question (Karpenter's queue does the same); a replacement that fails or is not Initialized within 10 minutes is
deleted (no consolidation ever removes a static NodeClaim) and the old node kept for the next sweep.
"""

from __future__ import annotations

from ..api import labels as wk
from ..api.snapshot import ClusterSnapshot
from ..scheduling.model import NodeClaimPlan
from .candidates import graceful_blockers
from .drift import mark_drifted
from .static import count_active, is_static, node_limit, pending_disruption, replicas_of, static_nodeclaim_plan
from .types import BLOCK_BUDGET, DRIFTED, GRACEFUL, Blocked, Candidate, Command, MethodBase

BLOCK_ABOVE_REPLICAS = "above replicas"   # a scale down or an earlier replacement in progress
BLOCK_NODE_LIMIT = "limits.nodes"          # no room beside the NodePool's NodeClaims for a replacement
BLOCK_NO_REPLACEMENT = "no replacement"    # no instance type offered, the EC2NodeClass not ready

__all__ = ["BLOCK_ABOVE_REPLICAS", "BLOCK_NODE_LIMIT", "BLOCK_NO_REPLACEMENT", "StaticDrift", "static_replacement"]


def static_replacement(snap: ClusterSnapshot, np, replaces: str) -> tuple[NodeClaimPlan | None, str]:
    """(the replacement a static NodePool's template makes, "") or (None, why there is none)."""
    problem = snap.nodepool_problems.get(np.name)
    if problem:
        return None, problem
    types = snap.instance_types.get(np.name)
    if types is None:
        return None, f"NodePool {np.name}: instance types not loaded"
    plan = static_nodeclaim_plan(np, types, f"{np.name}-replacement", snap.daemonsets)
    if plan is None:
        return None, f"static NodePool {np.name}: no instance type its requirements allow is offered"
    plan.reason = f"replacement for drifted NodeClaim {replaces}: {plan.reason}"
    return plan, ""


def _waiting_launch(snap: ClusterSnapshot, np, inflight: dict[str, str], own: set[str]) -> int:
    """Static drifts of ``np`` in flight whose replacement is not launched yet (proposed): each will add a
    NodeClaim, so each holds a node of ``limits.nodes`` (Karpenter's reservation)."""
    replaced = pending_disruption(snap.nodeclaims_of_nodepool(np.name))
    n = 0
    for name, pool in inflight.items():
        nc = snap.nodeclaims.get(name)
        if pool != np.name or name in own or name in replaced or nc is None or nc.metadata.get("deletionTimestamp"):
            continue
        cond = nc.condition("Drifted")
        if cond and cond.get("status") == "True":
            n += 1
    return n


def node_room(snap: ClusterSnapshot, np, inflight: dict[str, str], own: set[str] = frozenset()) -> int | None:
    """How many more NodeClaims ``limits.nodes`` lets the NodePool have (None: no node limit): the limit minus every
    NodeClaim of it (deleting ones too, as the launch claims count them) minus the static drifts in flight that are
    still to launch theirs (``own``: the ones asking, left out)."""
    limit = node_limit(np)
    if limit is None:
        return None
    total = len(snap.nodeclaims_of_nodepool(np.name))
    return max(0, limit - total - _waiting_launch(snap, np, inflight, set(own)))


def _above_replicas(snap: ClusterSnapshot, np) -> str:
    claims = snap.nodeclaims_of_nodepool(np.name)
    active, want = count_active(claims), replicas_of(np) or 0
    if active <= want:
        return ""
    return (f"static NodePool {np.name} has {active} NodeClaims not being deleted for {want} replicas: a scale down "
            f"or another replacement is in progress")


class StaticDrift(MethodBase):
    reason = DRIFTED
    kind = GRACEFUL
    eventual = True   # Karpenter's StaticDrift.Class(): EventualDisruptionClass
    static_only = True   # the executor re-validates a static NodePool's drift with this method, not Drift

    def should_disrupt(self, c: Candidate, snap: ClusterSnapshot) -> bool:
        return is_static(c.nodepool) and mark_drifted(c, snap)

    def compute_commands(self, ctx, candidates: list[Candidate], snap: ClusterSnapshot):
        commands: list[Command] = []
        blocked: list[Blocked] = []
        budgets = ctx.budgets
        inflight = dict(getattr(ctx, "inflight", {}) or {})
        by_pool: dict[str, list[Candidate]] = {}
        for c in sorted(candidates, key=lambda c: (c.drifted_since or snap.now, c.name)):
            by_pool.setdefault(c.nodepool_name, []).append(c)
        for pool in sorted(by_pool):
            np = by_pool[pool][0].nodepool
            ready = []
            for c in by_pool[pool]:
                why = graceful_blockers(c, snap, eventual=True, ctx=ctx)
                if why:
                    blocked.append(Blocked(c.name, why[0][0], why[0][1], DRIFTED))
                else:
                    ready.append(c)
            above = _above_replicas(snap, np) if ready else ""
            room = node_room(snap, np, inflight) if ready else None
            for c in ready:
                if not budgets.available(pool, DRIFTED):
                    blocked.append(Blocked(c.name, BLOCK_BUDGET, budgets.message(pool, DRIFTED), DRIFTED))
                    continue
                if above:
                    blocked.append(Blocked(c.name, BLOCK_ABOVE_REPLICAS, above, DRIFTED))
                    continue
                if room is not None and room <= 0:
                    blocked.append(Blocked(c.name, BLOCK_NODE_LIMIT,
                                           f"limits.nodes {node_limit(np)} of static NodePool {pool} leaves no room "
                                           f"for a replacement beside its {len(snap.nodeclaims_of_nodepool(pool))} "
                                           f"NodeClaims", DRIFTED))
                    continue
                plan, why = static_replacement(snap, np, c.name)
                if plan is None:
                    blocked.append(Blocked(c.name, BLOCK_NO_REPLACEMENT, why, DRIFTED))
                    continue
                budgets.take(pool, DRIFTED)
                if room is not None:
                    room -= 1
                commands.append(Command(DRIFTED, [c], replacements=[plan], detail=c.drift_reason or "",
                                        savings_per_hour=round(c.price - plan.price, 6)))
        return commands, blocked

    def validate(self, snap: ClusterSnapshot, candidates: list[Candidate], ctx, planned_price: float | None):
        """The second look (``plan.revalidate`` asked the candidate, its drift and its blockers): no pod question (as
        Karpenter), but the NodePool must not be scaling down and ``limits.nodes`` must still leave room; the
        replacement is made again from the template on this snapshot (a dearer one does not cancel a drift)."""
        inflight = dict(getattr(ctx, "inflight", {}) or {}) if ctx is not None else {}
        own = {c.name for c in candidates}
        plans = []
        for c in candidates:
            np = c.nodepool
            claims = snap.nodeclaims_of_nodepool(np.name)
            # a replacement already launched for it (a retried step: found by its name, not launched twice) needs no
            # room and is not an excess
            mine = {nc.name for nc in claims if own & set(wk.decode_replaces((nc.annotations or {})
                                                                             .get(wk.REPLACES_ANNOTATION)))}
            running = count_active(claims) - len(pending_disruption(claims))
            want = replicas_of(np) or 0
            if running - len(mine) > want:
                return None, (f"{c.name}: static NodePool {np.name} has {running} running NodeClaims for {want} "
                              f"replicas: scaling down")
            room = node_room(snap, np, inflight, own)
            if not mine and room is not None and room <= 0:
                return None, f"{c.name}: limits.nodes {node_limit(np)} of static NodePool {np.name} leaves no room"
            plan, why = static_replacement(snap, np, c.name)
            if plan is None:
                return None, f"{c.name}: {why}"
            plans.append(plan)
        price = sum(c.price for c in candidates) - sum(p.price for p in plans)
        return Command(DRIFTED, list(candidates), replacements=plans, savings_per_hour=round(price, 6),
                       detail=", ".join(c.drift_reason for c in candidates if c.drift_reason)), ""
