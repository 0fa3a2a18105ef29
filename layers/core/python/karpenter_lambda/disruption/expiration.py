"""Expiration (pure): a NodeClaim older than its ``expireAfter`` is deleted.

As Karpenter v1 (pkg/controllers/nodeclaim/expiration): forceful, so not held by disruption budgets, by
do-not-disrupt or by PDBs at decision time (the drain still honours PDBs and do-not-disrupt pods until the
NodeClaim's ``terminationGracePeriod``); nothing is launched ahead: the evicted pods go pending and the provisioner
places them.  ``expireAfter`` comes from the NodeClaim (copied from the NodePool at launch), else the NodePool;
``Never`` disables it.
"""

from __future__ import annotations

from ..api.durations import DurationError, parse_nillable_duration, format_duration
from ..api.snapshot import ClusterSnapshot
from .candidates import created_at
from .types import EXPIRED, FORCEFUL, Candidate, Command, MethodBase


def expires_at(nc, nodepool) -> float | None:
    try:
        ttl = parse_nillable_duration(nc.spec.get("expireAfter") or nodepool.expire_after)
    except DurationError:
        return None
    born = created_at(nc)
    if ttl is None or born is None:
        return None
    return born + ttl


class Expiration(MethodBase):
    reason = EXPIRED
    kind = FORCEFUL

    def should_disrupt(self, c: Candidate, snap: ClusterSnapshot) -> bool:
        at = expires_at(c.nodeclaim, c.nodepool)
        return at is not None and snap.now >= at

    def compute_commands(self, ctx, candidates: list[Candidate], snap: ClusterSnapshot):
        commands = []
        for c in sorted(candidates, key=lambda c: (created_at(c.nodeclaim) or 0.0, c.name)):
            ttl = c.nodeclaim.spec.get("expireAfter") or c.nodepool.expire_after
            age = snap.now - (created_at(c.nodeclaim) or snap.now)
            commands.append(Command(EXPIRED, [c], forceful=True,
                                    detail=f"expireAfter {ttl} elapsed (age {format_duration(int(age))})"))
        return commands, []
