"""NodePool deletion, carried out by the lifecycle sweep: the NodeClaims of a NodePool that no longer exists are
deleted gracefully (the decision and Karpenter's semantics: :mod:`karpenter_lambda.disruption.nodepool_deleted`).

A NodePool missing from the sweep's list is looked up once more by name before anything is deleted: a list that
came back short must never drain a NodePool's nodes.  Before the deletions are requested, capacity for the pods of
the NodeClaims going is launched on the NodePools that remain (:func:`~.leaving.launch_for_leaving`, one scheduling
simulation for all of them; Karpenter's provisioner counts a deleting node's pods as pending), so a drain that
PodDisruptionBudgets pace does not send the pods to the provisioner a few at a time.  A failed launch is reported
and the deletions go on (the provisioner places what is evicted).  Each deletion is one ``disrupted`` entry of the
lifecycle report (``reason: NodePoolDeleted``, ``replacements``: the NodeClaims launched for the pods: a
``NodeClaimDisrupted`` event in ``simulate``), a decision log line and a ``DisruptionTerminating`` Event on the Node.
"""

from __future__ import annotations

from typing import Callable

from ..api import events as ev
from ..api import labels as wk
from ..api.objects import NodeClaim, NodePool
from ..api.times import format_time
from ..disruption.nodepool_deleted import NODEPOOL_DELETED, left_behind
from .interrupt import is_transient
from .leaving import launch_ahead
from .termination import Terminator


class NodePoolDeletion:
    def __init__(self, store, kube, terminator: Terminator, decide: Callable[..., None], *, claims=None, cloud=None,
                 clock: Callable[[], float] | None = None, logger=None):
        self.store = store
        self.kube = kube
        self.terminator = terminator
        self.decide = decide
        self.claims = claims
        self.cloud = cloud   # None: no capacity launched ahead (the evicted pods go through the provisioner)
        self.clock = clock
        self.loader_options: dict = {}   # the replacement solve's snapshot settings (Lifecycle.set_loader_options)
        self.logger = logger

    def run(self, nodeclaims: dict[str, NodeClaim], nodepools: dict[str, NodePool], nodes: list[dict], now: float,
            report) -> bool:
        """Request the deletion of every NodeClaim left behind by a deleted NodePool; True when one was requested."""
        gone: dict[str, bool] = {}
        by_provider = {(n.get("spec") or {}).get("providerID"): n for n in nodes if (n.get("spec") or {}).get("providerID")}
        changed = False
        going = []
        for nc in left_behind(nodeclaims.values(), nodepools):
            pool = nc.labels.get(wk.NODEPOOL)
            if pool not in gone:
                gone[pool] = self.store.get("NodePool", pool) is None   # confirmed, not just missing from a list
            if gone[pool]:
                going.append(nc)
        replacements = self._launch_ahead(going, now, report) if going else {}
        for nc in going:
            pool = nc.labels.get(wk.NODEPOOL)
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
                "capacityType": nc.labels.get(wk.CAPACITY_TYPE), "replacements": replacements.get(nc.name, []),
                "savingsPerHour": 0.0,
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

    def _launch_ahead(self, going: list[NodeClaim], now: float, report) -> dict[str, list[str]]:
        """Capacity for the pods of ``going`` on the remaining NodePools, launched before their drain; per NodeClaim
        of ``going``, the NodeClaims launched for its pods (also those an earlier sweep launched: deterministic
        names)."""
        if self.cloud is None:
            return {}
        try:
            salt = "nodepool-deleted/" + ",".join(sorted({nc.labels.get(wk.NODEPOOL) or "" for nc in going}))
            out = launch_ahead(self.store, self.kube, self.claims, self.cloud, self.clock or (lambda: now), self.logger,
                               going, now, salt, self.decide, is_transient, self.loader_options)
        except Exception as e:  # noqa: BLE001 - the deletions go on; the provisioner places what is evicted
            report.errors.append(f"capacity ahead of the NodeClaims of deleted NodePools: {e}")
            return {}
        report.errors.extend(out.failures)
        return out.by_leaving
