"""Emptiness (pure): remove nodes that run nothing that needs them, once they have been quiet for consolidateAfter.

Karpenter's rules (pkg/controllers/disruption/emptiness.go and nodeclaim/disruption/consolidation.go):

* the NodePool's ``consolidationPolicy`` is ``WhenEmpty``, ``WhenEmptyOrUnderutilized`` or ``Balanced`` and its
  ``consolidateAfter`` is not ``Never``;
* the node is **consolidatable**: ``now - max(last pod event on it, initialized time) >= consolidateAfter``.  The
  last pod event is kept by the sweeps on the NodeClaim (``status.lastPodEventTime``: they compare the node's pods
  with the previous sweep's); a pod's own scheduled/creation time counts too;
* it is **empty**: none of its pods is reschedulable (DaemonSet and mirror pods, terminal pods and terminating
  ReplicaSet pods do not count);
* a pending pod nominated to it keeps it (the candidate filter), and graceful blockers apply (do-not-disrupt, PDB).

Empty candidates of a NodePool are removed together up to the ``Empty`` budget (one command each, so each is
recorded, revalidated and reported on its own).  Nothing is launched.  In a ``Balanced`` NodePool the delete's score
(:mod:`.balanced`) is given with the command, not applied: Karpenter's emptiness is not scored (an empty node's
disruption cost is the per-node base alone, so its delete passes but where the node is a tiny share of the price).
"""

from __future__ import annotations

from ..api.durations import DurationError, parse_nillable_duration
from ..api.snapshot import ClusterSnapshot
from ..api.validators import BALANCED, WHEN_EMPTY, WHEN_EMPTY_OR_UNDERUTILIZED
from .balanced import delete_score, totals_for
from .candidates import LAST_POD_EVENT, condition_time, epoch, graceful_blockers
from .static import is_static
from .types import EMPTY, GRACEFUL, Blocked, Candidate, Command, MethodBase

CONSOLIDATING_POLICIES = (WHEN_EMPTY, WHEN_EMPTY_OR_UNDERUTILIZED, BALANCED)


def consolidate_after(nodepool) -> int | None:
    """Seconds, or None for ``Never`` (or an unparsable value: not consolidatable)."""
    try:
        return parse_nillable_duration((nodepool.disruption or {}).get("consolidateAfter") or "0s")
    except DurationError:
        return None


def last_pod_event(c: Candidate) -> float | None:
    times = [epoch(c.nodeclaim.status.get(LAST_POD_EVENT))]
    for p in c.pods:
        conds = (p.get("status") or {}).get("conditions") or []
        scheduled = next((x.get("lastTransitionTime") for x in conds if x.get("type") == "PodScheduled"), None)
        times.append(epoch(scheduled) or epoch((p.get("metadata") or {}).get("creationTimestamp")))
    times = [t for t in times if t is not None]
    return max(times) if times else None


def consolidatable_in(c: Candidate, snap: ClusterSnapshot) -> float | None:
    """Seconds until the node is consolidatable (<= 0: it is); None when its NodePool never consolidates (a static
    NodePool, ``spec.replicas``, never does: its size is the user's, as in Karpenter)."""
    if is_static(c.nodepool):
        return None
    policy = (c.nodepool.disruption or {}).get("consolidationPolicy", WHEN_EMPTY_OR_UNDERUTILIZED)
    after = consolidate_after(c.nodepool)
    if policy not in CONSOLIDATING_POLICIES or after is None:
        return None
    since = max(t for t in (last_pod_event(c), condition_time(c.nodeclaim, "Initialized"), 0.0) if t is not None)
    return since + after - snap.now


def is_empty(c: Candidate) -> bool:
    return not c.reschedulable


class Emptiness(MethodBase):
    reason = EMPTY
    kind = GRACEFUL

    def should_disrupt(self, c: Candidate, snap: ClusterSnapshot) -> bool:
        left = consolidatable_in(c, snap)
        return left is not None and left <= 0 and is_empty(c)

    def compute_commands(self, ctx, candidates: list[Candidate], snap: ClusterSnapshot):
        commands: list[Command] = []
        blocked: list[Blocked] = []
        for c in sorted(candidates, key=lambda c: (c.nodepool_name, -c.price, c.name)):
            why = graceful_blockers(c, snap, ctx=ctx)
            if why:
                blocked.append(Blocked(c.name, why[0][0], why[0][1], EMPTY))
                continue
            if not ctx.budgets.available(c.nodepool_name, EMPTY):
                blocked.append(Blocked(c.name, "budget", ctx.budgets.message(c.nodepool_name, EMPTY), EMPTY))
                continue
            ctx.budgets.take(c.nodepool_name, EMPTY)
            score = delete_score(c, totals_for(snap, ctx))
            commands.append(Command(EMPTY, [c], savings_per_hour=round(c.price, 6), score=score,
                                    detail="empty" + (f"; balanced {score.text()}" if score is not None else "")))
        return commands, blocked
