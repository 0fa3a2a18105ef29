"""One sweep's decisions (pure): the methods in Karpenter's order over one snapshot, within the budgets.

``plan_sweep(snapshot, methods, budgets) -> DisruptionPlan``:

* forceful methods (expiration) act on every NodeClaim they match, outside the budgets;
* graceful methods run in the given order (Karpenter's: emptiness, drift, then consolidation) over the candidates
  (:mod:`.candidates`); as in Karpenter the first method that produces commands ends the sweep's planning, so two
  methods never decide on the same snapshot;
* the sweep's :class:`~.context.SweepContext` (also importable here as ``SweepBudgets``, its former name) holds the
  budget left per NodePool and reason (:mod:`.budgets`: nodes NotReady, deleting or recorded in flight by a sweep
  count against it, and each command takes one), the evaluation counter and the caches.

``revalidate(snapshot, method, names, ...)`` is Karpenter's second look (its 15 s ``validation``): the same
candidates, a fresh snapshot; the command stands only if every candidate is still a candidate, still matches the
method, has no new blocker, and its pods still fit at no higher replacement price.
"""

from __future__ import annotations

from ..api.snapshot import ClusterSnapshot
from .candidates import build_candidates, graceful_blockers, make_candidate
from .consolidation import evaluations_left
from .context import MAX_SWEEP_EVALUATIONS, Method, SweepContext
from .replace import removal_plan
from .types import BLOCK_PODS_WOULD_NOT_FIT, FORCEFUL, UNDERUTILIZED, Blocked, Command, DisruptionPlan

__all__ = ["MAX_SWEEP_EVALUATIONS", "SweepBudgets", "SweepContext", "plan_sweep", "revalidate"]

SweepBudgets = SweepContext   # the former name: SweepBudgets(snapshot, inflight) is a sweep's context


def plan_sweep(snap: ClusterSnapshot, methods: list[Method], ctx: SweepContext) -> DisruptionPlan:
    """The sweep's commands and blocks on ``snap`` (``ctx``: its context, built on ``snap``)."""
    plan = DisruptionPlan()
    taken: set[str] = set(ctx.exclude)
    for m in (m for m in methods if m.kind == FORCEFUL):
        cands, _ = build_candidates(snap, forceful=True, exclude=taken)
        cmds, blocked = m.compute_commands(ctx, [c for c in cands if m.should_disrupt(c, snap)], snap)
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
        cmds, blocked = m.compute_commands(ctx, eligible, snap)
        plan.blocked.extend(blocked)
        if cmds:
            plan.commands.extend(cmds)
            chained = [x for x in graceful if x.chains]
            if m.chains and all(c.option is not None for c in cmds):
                _chain(ctx, chained, cmds, eligible, plan)
            break
    plan.blocked = _settled(plan.blocked)
    return plan


def _settled(blocked: list[Blocked]) -> list[Blocked]:
    """``blocked`` without the provisional findings about a NodeClaim that a later method explained for itself
    (multi-node left it out of its groups for the budget its earlier candidates hold; single-node then tried it and
    says why it stays), so the first finding per NodeClaim, the one events and ``disruption plan`` show, is that."""
    firm = {b.nodeclaim for b in blocked if not b.provisional}
    return [b for b in blocked if not (b.provisional and b.nodeclaim in firm)]


def _chain(ctx: SweepContext, methods: list[Method], first: list[Command], cands: list, plan: DisruptionPlan) -> None:
    """Beyond Karpenter (one command per sweep): more consolidation commands in the same sweep.

    After a command is chosen, the context is derived as if it were carried out (``SweepContext.derive``: its
    candidates gone, its pods where the validity test put them, its replacement a node that receives nothing more),
    and the consolidation methods run again, in their order, on that context, until the budget, the sweep's
    evaluations (``ctx.counters``) or the moves run out.  Each command is still one delete or replace-by-one-cheaper
    that passed the same validity test; the controller re-validates them in the same order, each on the snapshot
    with the earlier ones carried out."""
    cur = ctx
    by_name = {c.name: c for c in cands}
    last = list(first)
    in_plan = {n for cmd in first for n in cmd.names}
    gave_up: set[int] = set()   # methods that found nothing on a derived snapshot are not asked again
    while last:
        for cmd in last:
            cur = cur.derive(cmd.option)
            for n in cmd.names:
                by_name.pop(n, None)
            touched = set(cmd.option.placements.values())
            for name, c in list(by_name.items()):
                if c.node_name in touched:
                    node = cur.snapshot.node_of_nodeclaim(name)
                    by_name[name] = make_candidate(cur.snapshot, c.nodeclaim, node, c.nodepool)
        if evaluations_left(cur) <= 0:
            break
        pools = {c.nodepool_name for c in by_name.values()}
        if not any(cur.budgets.left(p, UNDERUTILIZED) > 0 for p in pools):
            break
        eligible = [c for c in by_name.values() if methods and methods[0].should_disrupt(c, cur.snapshot)]
        last = []
        for i, m in enumerate(methods):
            if i in gave_up:
                continue
            cmds, _blocked = m.compute_commands(cur, eligible, cur.snapshot)   # blocked: explained by the first pass
            if cmds and all(c.option is not None for c in cmds):
                last = cmds
                break
            gave_up.add(i)
        for cmd in last:
            plan.commands.append(cmd)
            in_plan.update(cmd.names)
    plan.sequential = sum(1 for c in plan.commands if not c.forceful) > 1
    plan.blocked = [b for b in plan.blocked if b.nodeclaim not in in_plan]


def revalidate(snap: ClusterSnapshot, method: Method, names: list[str], ctx: SweepContext | None = None, *,
               planned_price: float | None = None) -> tuple[Command | None, str]:
    """(the command as it stands now, "") or (None, why it was cancelled).  ``ctx``: a context on ``snap`` (its
    ``exclude`` and caches; the candidates' own in-flight entries are not excluded)."""
    mine = set(names)
    exclude = (set(ctx.exclude) if ctx is not None else set()) - mine
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
            why = graceful_blockers(c, snap, eventual=method.eventual, ctx=ctx)
            if why:
                return None, f"{n}: {why[0][1]}"
        chosen.append(c)
    cmd = Command(method.reason, chosen, forceful=method.kind == FORCEFUL,
                  savings_per_hour=round(sum(c.price for c in chosen), 6) if method.kind != FORCEFUL else 0.0,
                  detail=", ".join(c.drift_reason for c in chosen if c.drift_reason) or "")
    own = method.validate(snap, chosen, ctx, planned_price)   # its own second look (consolidation)
    if own is not None:
        return own
    if method.kind != FORCEFUL and any(c.reschedulable for c in chosen):
        result, _ = removal_plan(snap, chosen, ctx)
        if not result.all_rescheduled:
            pod, why = next(iter(result.unschedulable.items()))
            return None, f"{BLOCK_PODS_WOULD_NOT_FIT}: pod {pod}: {why}"
        # drift replaces whatever the replacement now costs, as Karpenter does: only consolidation (``validate``
        # above) must stay cheaper, so a dearer replacement than planned is not a reason to cancel a drift
        cmd.replacements = list(result.new_nodeclaims)
        cmd.savings_per_hour = round(cmd.savings_per_hour - result.price, 6)
    return cmd, ""
