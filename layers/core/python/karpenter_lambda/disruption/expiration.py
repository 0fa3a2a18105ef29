"""Expiration (pure): a NodeClaim older than its ``expireAfter`` is replaced, then deleted; so is one in a capacity
block that ends within 40 minutes (karpenter-provider-aws's capacity reservation expiration: :func:`capacity_block_ending`).

As Karpenter v1 (pkg/controllers/nodeclaim/expiration): forceful, so not held by disruption budgets, by
do-not-disrupt or by PDBs at decision time (the drain still honours PDBs and do-not-disrupt pods until the
NodeClaim's ``terminationGracePeriod``).  ``expireAfter`` comes from the NodeClaim (copied from the NodePool at
launch), else the NodePool; ``Never`` disables it.

**Difference from Karpenter** (issue 28 item 4, "replacement before drain, always"): Karpenter deletes an expired
NodeClaim at once and its evicted pods wait, pending, for the provisioner's new node (about a minute).  Here the
command carries the replacements its pods need -- the pods that have no place on the Initialized nodes that stay
(:func:`.replace.removal_plan` with ``initialized_only``) -- and the executor launches them and drains the node only
once they are Initialized, as drift does.  A node whose pods all have a place, or that has none, goes at once, as
before.  Pods that no node could take (no instance type fits, a limit) do not hold it: expiration stays forceful and
they go pending, as in Karpenter.  The expired nodes of one sweep are planned in age order, each as if the older
ones were already gone (their pods placed first) and without the younger ones' room; at most
``MAX_REPLACEMENT_PLANS`` non-empty ones per sweep (one scheduling simulation each), the others wait for the next.
A node whose replacement from an abandoned attempt (not Initialized within 10 minutes) is still coming up waits for
it instead of launching another.
"""

from __future__ import annotations

from ..api import labels as wk
from ..api.durations import DurationError, parse_nillable_duration, format_duration
from ..api.snapshot import ClusterSnapshot
from ..catalog.reservations import expiring_nodeclaims
from .candidates import created_at
from .replace import leaving_of, removal_plan
from .types import EXPIRED, FORCEFUL, Candidate, Command, MethodBase

# one scheduling simulation per non-empty expired node (about 0.5 s on 1,000 nodes): a sweep plans at most this many,
# the others expire in the next sweeps (consolidation's bound, plan.MAX_SWEEP_EVALUATIONS, is the same)
MAX_REPLACEMENT_PLANS = 24


def expires_at(nc, nodepool) -> float | None:
    try:
        ttl = parse_nillable_duration(nc.spec.get("expireAfter") or nodepool.expire_after)
    except DurationError:
        return None
    born = created_at(nc)
    if ttl is None or born is None:
        return None
    return born + ttl


def capacity_block_ending(nc, nodepool, snap: ClusterSnapshot) -> str | None:
    """Why a NodeClaim in a capacity block must go now: its block is ``expiring`` (40 minutes before its end, as
    karpenter-provider-aws's capacityreservation expiration controller deletes them), else None."""
    rid = (nc.labels or {}).get(wk.CAPACITY_RESERVATION_ID)
    if not rid:
        return None
    ref = (nc.spec.get("nodeClassRef") or nodepool.node_class_ref or {}).get("name", "")
    reservations = getattr(snap.resolved.get(ref), "capacity_reservations", None) or []
    if expiring_nodeclaims({nc.name: nc.labels}, reservations):
        return f"capacity block {rid} ends within 40 minutes (EC2 then reclaims its instances)"
    return None


def replacements_coming_up(snap: ClusterSnapshot) -> set[str]:
    """NodeClaims with a replacement that is launched but not Initialized yet (not deleting): an earlier attempt
    whose command was abandoned after the 10-minute rule.  Expiration waits for it rather than launching another
    (the lifecycle sweep deletes it if it never registers; then a new attempt starts)."""
    out: set[str] = set()
    for nc in snap.nodeclaims.values():
        if nc.metadata.get("deletionTimestamp") or nc.is_true("Initialized"):
            continue
        out.update(wk.decode_replaces((nc.annotations or {}).get(wk.REPLACES_ANNOTATION)))
    return out


def expiration_replacements(snap: ClusterSnapshot, c: Candidate, ctx=None, *, going=(), gone_first=()):
    """(the replacements ``c``'s pods need, the pods that have no place at all).  ``going``: NodeClaims also going
    away (not capacity); ``gone_first``: those whose pods are placed before ``c``'s."""
    if not c.reschedulable:
        return [], {}
    leaving = leaving_of(snap, ctx) | set(gone_first)
    result, _ = removal_plan(snap, [c], ctx, exclude=set(going) - leaving - {c.name}, leaving=leaving,
                             initialized_only=True)
    return list(result.new_nodeclaims), dict(result.unschedulable)


def _nowhere(unschedulable: dict) -> str:
    if not unschedulable:
        return ""
    pod, why = next(iter(sorted(unschedulable.items())))
    more = f" and {len(unschedulable) - 1} more" if len(unschedulable) > 1 else ""
    return f"; pod {pod}{more} has no place ({why}): pending after the drain"


class Expiration(MethodBase):
    reason = EXPIRED
    kind = FORCEFUL

    def should_disrupt(self, c: Candidate, snap: ClusterSnapshot) -> bool:
        at = expires_at(c.nodeclaim, c.nodepool)
        return (at is not None and snap.now >= at) or capacity_block_ending(c.nodeclaim, c.nodepool, snap) is not None

    def compute_commands(self, ctx, candidates: list[Candidate], snap: ClusterSnapshot):
        commands = []
        ordered = sorted(candidates, key=lambda c: (created_at(c.nodeclaim) or 0.0, c.name))
        going = {c.name for c in ordered}
        coming = replacements_coming_up(snap)
        earlier: set[str] = set()
        plans = 0
        for c in ordered:
            ttl = c.nodeclaim.spec.get("expireAfter") or c.nodepool.expire_after
            age = snap.now - (created_at(c.nodeclaim) or snap.now)
            detail = (capacity_block_ending(c.nodeclaim, c.nodepool, snap)
                      or f"expireAfter {ttl} elapsed (age {format_duration(int(age))})")
            replacements: list = []
            if c.reschedulable and c.name in coming:
                going.discard(c.name)   # its replacement of an earlier attempt is still coming up: wait for it
                continue
            if c.reschedulable:
                if plans >= MAX_REPLACEMENT_PLANS:
                    going.discard(c.name)   # not this sweep: its node stays capacity for the others
                    continue
                plans += 1
                replacements, nowhere = expiration_replacements(snap, c, ctx, going=going, gone_first=earlier)
                detail += _nowhere(nowhere)
                earlier.add(c.name)
            commands.append(Command(EXPIRED, [c], replacements=replacements, forceful=True, detail=detail))
        return commands, []

    def validate(self, snap: ClusterSnapshot, candidates: list[Candidate], ctx, planned_price):
        """The executor's second look (a command whose first step failed): still expired (checked by
        ``plan.revalidate``), never cancelled; its replacements as the snapshot needs them now."""
        replacements, details = [], []
        for c in candidates:
            reps, nowhere = expiration_replacements(snap, c, ctx)
            replacements += reps
            ttl = c.nodeclaim.spec.get("expireAfter") or c.nodepool.expire_after
            details.append(f"expireAfter {ttl} elapsed{_nowhere(nowhere)}")
        return Command(EXPIRED, list(candidates), replacements=replacements, forceful=True,
                       detail="; ".join(details)), ""
