"""NodePool deletion, carried out by the lifecycle sweep: the NodeClaims of a NodePool that no longer exists are
deleted gracefully (the decision and Karpenter's semantics: :mod:`karpenter_lambda.disruption.nodepool_deleted`).

A NodePool missing from the sweep's list is looked up once more by name before anything is deleted: a list that
came back short must never drain a NodePool's nodes.  Each deletion is one ``disrupted`` entry of the lifecycle
report (``reason: NodePoolDeleted``: a ``NodeClaimDisrupted`` event in ``simulate``), a decision log line and a
``DisruptionTerminating`` Event on the Node.
"""

from __future__ import annotations

from typing import Callable

from ..api import events as ev
from ..api import labels as wk
from ..api.objects import NodeClaim, NodePool
from ..api.times import format_time
from ..disruption.nodepool_deleted import NODEPOOL_DELETED, left_behind
from .termination import Terminator


class NodePoolDeletion:
    def __init__(self, store, kube, terminator: Terminator, decide: Callable[..., None]):
        self.store = store
        self.kube = kube
        self.terminator = terminator
        self.decide = decide

    def run(self, nodeclaims: dict[str, NodeClaim], nodepools: dict[str, NodePool], nodes: list[dict], now: float,
            report) -> bool:
        """Request the deletion of every NodeClaim left behind by a deleted NodePool; True when one was requested."""
        gone: dict[str, bool] = {}
        by_provider = {(n.get("spec") or {}).get("providerID"): n for n in nodes if (n.get("spec") or {}).get("providerID")}
        changed = False
        for nc in left_behind(nodeclaims.values(), nodepools):
            pool = nc.labels.get(wk.NODEPOOL)
            if pool not in gone:
                gone[pool] = self.store.get("NodePool", pool) is None   # confirmed, not just missing from a list
            if not gone[pool]:
                continue
            why = f"{NODEPOOL_DELETED}: NodePool {pool} was deleted"
            try:
                self.terminator.request(nc, why)
            except Exception as e:  # noqa: BLE001 - the next sweep tries again
                report.errors.append(f"NodeClaim {nc.name} of deleted NodePool {pool}: {e}")
                continue
            changed = True
            node = by_provider.get(nc.status.get("providerID"))
            node_name = ((node or {}).get("metadata") or {}).get("name")
            report.disrupted.append({
                "nodeClaim": nc.name, "reason": NODEPOOL_DELETED, "nodePool": pool, "node": node_name,
                "instanceType": nc.labels.get(wk.INSTANCE_TYPE), "zone": nc.labels.get(wk.ZONE),
                "capacityType": nc.labels.get(wk.CAPACITY_TYPE), "replacements": [], "savingsPerHour": 0.0,
                "detail": f"NodePool {pool} was deleted"})
            self.decide("nodepool-deleted", f"NodeClaim {nc.name}: NodePool {pool} was deleted; deletion requested "
                                            f"(drained gracefully)", nodeclaim=nc.name, nodepool=pool)
            if node is not None:
                try:
                    self.kube.create_event({**node, "apiVersion": "v1", "kind": "Node"}, ev.DISRUPTION_TERMINATING,
                                           ev.disruption_terminating_message(NODEPOOL_DELETED), source=ev.SOURCE,
                                           now=format_time(now))
                except Exception as e:  # noqa: BLE001 - an explanation only
                    report.errors.append(f"event {ev.DISRUPTION_TERMINATING} on node {node_name}: {e}")
        return changed
