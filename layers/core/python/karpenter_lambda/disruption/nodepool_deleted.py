"""NodePool deletion (pure): the NodeClaims a deleted NodePool leaves behind go with it.

Karpenter's NodeClaims are owned by their NodePool (an ownerReference): ``kubectl delete nodepool X`` makes
Kubernetes' garbage collector delete them, and Karpenter's termination drains and terminates each node gracefully
(PodDisruptionBudgets, do-not-disrupt pods and the NodeClaim's ``terminationGracePeriod`` honoured), while its
provisioner, which counts the pods of deleting nodes as pending, launches their capacity on the other NodePools
(``controllers/leaving.py`` does that here).  Karpenter documents it among
the manual disruption methods.  Here the store has no owner references: the lifecycle sweep finds the NodeClaims
whose ``karpenter.sh/nodepool`` names a NodePool that no longer exists and requests their deletion
(``controllers/nodepool_deleted.py``), each one ``NodeClaimDisrupted`` with reason ``NodePoolDeleted``.

A NodeClaim without the label (created by hand, owned by no NodePool) is left alone, as Karpenter leaves a
NodeClaim without an owner.  Matching is by name, not uid: a NodePool deleted and created again under the same
name before the sweep runs keeps its NodeClaims (Karpenter's garbage collector, going by uid, would delete them).
"""

from __future__ import annotations

from typing import Iterable

from ..api import labels as wk
from ..api.objects import NodeClaim

NODEPOOL_DELETED = "NodePoolDeleted"   # the reason of the NodeClaimDisrupted event and of the deletion

__all__ = ["NODEPOOL_DELETED", "left_behind"]


def left_behind(nodeclaims: Iterable[NodeClaim], nodepools: Iterable[str]) -> list[NodeClaim]:
    """The NodeClaims, not deleting yet, whose NodePool (``karpenter.sh/nodepool``) is not among ``nodepools``, by
    name."""
    live = set(nodepools)
    out = []
    for nc in nodeclaims:
        pool = (nc.labels or {}).get(wk.NODEPOOL)
        if pool and pool not in live and not nc.metadata.get("deletionTimestamp"):
            out.append(nc)
    return sorted(out, key=lambda nc: nc.name)
