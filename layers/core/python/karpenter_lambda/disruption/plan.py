"""One sweep's decisions (pure): the methods in Karpenter's order over one snapshot, within the budgets.

``plan_sweep(snapshot, methods, budgets) -> DisruptionPlan``:

* forceful methods (expiration) act on every NodeClaim they match, outside the budgets;
* graceful methods run in the given order (Karpenter's: emptiness, drift, then consolidation) over the candidates
  (:mod:`.candidates`); as in Karpenter the first method that produces commands ends the sweep's planning, so two
  methods never decide on the same snapshot;
* :class:`SweepBudgets` counts, per NodePool, the budget left for each reason (:mod:`.budgets`): nodes NotReady,
  deleting or recorded in flight by a sweep (``inflight``) count against it, and each command takes one.

``revalidate(snapshot, method, names, ...)`` is Karpenter's second look (its 15 s ``validation``): the same
candidates, a fresh snapshot; the command stands only if every candidate is still a candidate, still matches the
method, has no new blocker, and its pods still fit at no higher replacement price.
"""

from __future__ import annotations

from ..api.snapshot import ClusterSnapshot
from .budgets import nodepool_allowance
from .candidates import build_candidates, graceful_blockers, make_candidate
from .replace import removal_plan
from .types import BLOCK_PODS_WOULD_NOT_FIT, FORCEFUL, UNDERUTILIZED, Blocked, Command, DisruptionPlan

# Every consolidation validity test is one scheduling simulation over the whole cluster (about 0.5 s on 1,000
# nodes / 20,000 pods, one core): a sweep runs at most this many, whatever the methods (Karpenter bounds its
# single-node method by a 3-minute timeout; a count keeps the plan pure and reproducible).
MAX_SWEEP_EVALUATIONS = 24


class SweepBudgets:
    """Budget left per (NodePool, reason) for this sweep, and what is already being disrupted."""

    def __init__(self, snap: ClusterSnapshot, inflight: dict[str, str] | None = None):
        self.snap = snap
        self.inflight = dict(inflight or {})          # NodeClaim -> NodePool, recorded by the sweeps
        self.exclude: set[str] = set(self.inflight)
        self.busy_nodepools: set[str] = set()         # NodePools with a non-empty replacement in flight
        self.taken: dict[str, int] = {}
        self._cache: dict[tuple[str, str], object] = {}
        # consolidation's validity tests (one scheduling simulation each) this sweep may run, and has run
        self.max_evaluations: int | None = MAX_SWEEP_EVALUATIONS
        self.evaluations = 0
        self.single_node_invalid: set[str] = set()

    def recorded(self, nodepool: str) -> int:
        return sum(1 for np in self.inflight.values() if np == nodepool)

    def allowance(self, nodepool: str, reason: str):
        key = (nodepool, reason)
        if key not in self._cache:
            recorded = {n for n, p in self.inflight.items() if p == nodepool}
            self._cache[key] = nodepool_allowance(self.snap, nodepool, reason, recorded)
        return self._cache[key][0]

    def limit(self, nodepool: str, reason: str) -> int | None:
        return self.allowance(nodepool, reason).limit

    def left(self, nodepool: str, reason: str) -> int:
        return max(0, self.allowance(nodepool, reason).allowed - self.taken.get(nodepool, 0))

    def available(self, nodepool: str, reason: str) -> bool:
        return self.left(nodepool, reason) > 0

    def take(self, nodepool: str, reason: str) -> None:
        self.taken[nodepool] = self.taken.get(nodepool, 0) + 1

    def message(self, nodepool: str, reason: str, ahead: int = 0) -> str:
        """Why a candidate is held by the budget.  ``ahead``: candidates of the same NodePool this method already put
        before it in this sweep (they hold what is left, though the budget has not been taken yet)."""
        a = self.allowance(nodepool, reason)
        limit = "unlimited" if a.limit is None else str(a.limit)
        src = f" ({a.budget})" if a.budget else ""
        left = self.left(nodepool, reason)
        if ahead and left:
            return (f"budget {reason} {left} of {limit} left{src}, held by the {ahead} candidate(s) of NodePool "
                    f"{nodepool} considered before this one in this sweep")
        return f"budget {reason} {left} of {limit} left{src}"


def plan_sweep(snap: ClusterSnapshot, methods: list, budgets: SweepBudgets) -> DisruptionPlan:
    plan = DisruptionPlan()
    taken: set[str] = set(budgets.exclude)
    for m in (m for m in methods if m.kind == FORCEFUL):
        cands, _ = build_candidates(snap, forceful=True, exclude=taken)
        cmds, blocked = m.compute_commands(budgets, [c for c in cands if m.should_disrupt(c, snap)], snap)
        plan.commands.extend(cmds)
        plan.blocked.extend(blocked)
        taken.update(n for cmd in cmds for n in cmd.names)
    cands, skipped = build_candidates(snap, exclude=taken)
    graceful = [m for m in methods if m.kind != FORCEFUL]
    for name, cause, message in skipped:   # nominated nodes a method would otherwise take
        nc = snap.nodeclaims[name]
        c = make_candidate(snap, nc, snap.node_of_nodeclaim(name), snap.nodepools[nc.labels.get("karpenter.sh/nodepool")])
        hit = next((m for m in graceful if m.should_disrupt(c, snap)), None)
        if hit is not None:
            plan.blocked.append(Blocked(name, cause, message, hit.reason))
    for m in graceful:
        eligible = [c for c in cands if m.should_disrupt(c, snap)]
        if not eligible:
            continue
        cmds, blocked = m.compute_commands(budgets, eligible, snap)
        plan.blocked.extend(blocked)
        if cmds:
            plan.commands.extend(cmds)
            chained = [x for x in graceful if getattr(x, "chains", False)]
            if getattr(m, "chains", False) and all(c.option is not None for c in cmds):
                _chain(snap, chained, budgets, cmds, eligible, plan)
            break
    return plan


def _chain(snap: ClusterSnapshot, methods: list, budgets: SweepBudgets, first: list[Command], cands: list, plan) -> None:
    """Beyond Karpenter (one command per sweep): more consolidation commands in the same sweep.

    After a command is chosen, the snapshot is derived as if it were carried out (its candidates gone, its pods where
    the validity test put them, its replacement a node that receives nothing more: ``apply_option``), and the
    consolidation methods run again, in their order, on that snapshot, until the budget, the sweep's evaluations
    (``budgets.max_evaluations``) or the moves run out.  Each command is still one delete or replace-by-one-cheaper
    that passed the same validity test; the controller re-validates them in the same order, each on the snapshot
    with the earlier ones carried out."""
    from .candidates import make_candidate
    from .consolidation import apply_option, evaluations_left

    state = snap
    by_name = {c.name: c for c in cands}
    last = list(first)
    in_plan = {n for cmd in first for n in cmd.names}
    gave_up: set[int] = set()   # methods that found nothing on a derived snapshot are not asked again
    while last:
        for cmd in last:
            state = apply_option(state, cmd.option)
            for n in cmd.names:
                by_name.pop(n, None)
            touched = set(cmd.option.placements.values())
            for name, c in list(by_name.items()):
                if c.node_name in touched:
                    node = state.node_of_nodeclaim(name)
                    by_name[name] = make_candidate(state, c.nodeclaim, node, c.nodepool)
        if evaluations_left(budgets) <= 0:
            break
        pools = {c.nodepool_name for c in by_name.values()}
        if not any(budgets.left(p, UNDERUTILIZED) > 0 for p in pools):
            break
        eligible = [c for c in by_name.values() if methods and methods[0].should_disrupt(c, state)]
        last = []
        for i, m in enumerate(methods):
            if i in gave_up:
                continue
            cmds, _blocked = m.compute_commands(budgets, eligible, state)   # blocked: explained by the first pass
            if cmds and all(c.option is not None for c in cmds):
                last = cmds
                break
            gave_up.add(i)
        for cmd in last:
            plan.commands.append(cmd)
            in_plan.update(cmd.names)
    plan.sequential = sum(1 for c in plan.commands if not c.forceful) > 1
    plan.blocked = [b for b in plan.blocked if b.nodeclaim not in in_plan]


def revalidate(snap: ClusterSnapshot, method, names: list[str], budgets: SweepBudgets | None = None, *,
               planned_price: float | None = None) -> tuple[Command | None, str]:
    """(the command as it stands now, "") or (None, why it was cancelled)."""
    mine = set(names)
    exclude = (set(budgets.exclude) if budgets is not None else set()) - mine
    cands, skipped = build_candidates(snap, forceful=method.kind == FORCEFUL, exclude=exclude)
    by_name = {c.name: c for c in cands}
    chosen = []
    for n in names:
        c = by_name.get(n)
        if c is None:
            why = next((m for s, _cause, m in skipped if s == n), "no longer a candidate (deleted, deleting or not initialized)")
            return None, f"{n}: {why}"
        if not method.should_disrupt(c, snap):
            return None, f"{n}: no longer {method.reason.lower()}"
        if method.kind != FORCEFUL:
            why = graceful_blockers(c, snap, eventual=getattr(method, "eventual", False))
            if why:
                return None, f"{n}: {why[0][1]}"
        chosen.append(c)
    cmd = Command(method.reason, chosen, forceful=method.kind == FORCEFUL,
                  savings_per_hour=round(sum(c.price for c in chosen), 6) if method.kind != FORCEFUL else 0.0,
                  detail=", ".join(c.drift_reason for c in chosen if c.drift_reason) or "")
    if hasattr(method, "validate"):   # the method's own second look (consolidation: still valid and cheaper)
        return method.validate(snap, chosen, budgets, planned_price)
    if method.kind != FORCEFUL and any(c.reschedulable for c in chosen):
        result, _ = removal_plan(snap, chosen, budgets)
        if not result.all_rescheduled:
            pod, why = next(iter(result.unschedulable.items()))
            return None, f"{BLOCK_PODS_WOULD_NOT_FIT}: pod {pod}: {why}"
        # drift replaces whatever the replacement now costs, as Karpenter does: only consolidation (``validate``
        # above) must stay cheaper, so a dearer replacement than planned is not a reason to cancel a drift
        cmd.replacements = list(result.new_nodeclaims)
        cmd.savings_per_hour = round(cmd.savings_per_hour - result.price, 6)
    return cmd, ""
