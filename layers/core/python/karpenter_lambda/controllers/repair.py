"""Node repair, carried out from the lifecycle sweep (every minute): the pure decision is
:mod:`karpenter_lambda.disruption.repair`; here each due node's NodeClaim is deleted forcefully, as Karpenter's node
health controller does: the deletion is requested with ``karpenter.sh/nodeclaim-termination-timestamp`` set to now,
so the drain deletes the pods at once (no eviction, no PodDisruptionBudget) and the instance goes.  No budget applies
and nothing is launched here: the pods are provisioned again as any pending pod (a static NodePool launches its
missing NodeClaim, ``controllers/static.py``).

Why the lifecycle sweep: repair is Karpenter's node health controller, not one of the disruption methods (no budget,
no validation delay, no replacement first); the lifecycle sweep already lists every Node and NodeClaim each minute
and owns the deletions (liveness, garbage collection), so a repair costs no extra API call and its deletion is
finalized in the same sweep.

A due node whose NodeClaim is already deleting gets ``karpenter.sh/nodeclaim-termination-timestamp`` set to now
(unless one no later is set), as Karpenter's ``annotateTerminationGracePeriod`` does before it sees the deletion
timestamp: its drain, stuck on a PodDisruptionBudget maybe, deletes the pods at once.  That is one ``repair``
decision line, not a disruption of its own (no ``disrupted`` entry, no Event: that deletion had its own).

Each repair is one ``NodeRepaired`` Warning Event on the Node and one ``disrupted`` entry of the lifecycle report
(reason ``Unhealthy``: the simulator's ``NodeClaimDisrupted``); a NodePool with too many unhealthy nodes gets a
``NodeRepairBlocked`` Warning on each due Node, once, in the sweep where it becomes due (the decision log says it
every sweep).
"""

from __future__ import annotations

from typing import Callable

from ..api import events as ev
from ..api import labels as wk
from ..api.durations import format_duration
from ..api.objects import NodeClaim
from ..api.times import format_time, to_epoch
from ..disruption.repair import ALLOWED_UNHEALTHY_PERCENT, UNHEALTHY, plan_repairs, unhealthy_condition
from .termination import Terminator

BLOCKED_EVENT_WINDOW = 120.0   # a blocked repair's Event is written when the node became due this recently


def nodeclaim_of_node(nodes: list[dict], nodeclaims: dict[str, NodeClaim]) -> dict[str, str]:
    """Node name -> the name of its NodeClaim (by providerID, else ``status.nodeName``)."""
    by_provider = {nc.status.get("providerID"): nc.name for nc in nodeclaims.values() if nc.status.get("providerID")}
    by_name = {nc.status.get("nodeName"): nc.name for nc in nodeclaims.values() if nc.status.get("nodeName")}
    out = {}
    for n in nodes:
        name = (n.get("metadata") or {}).get("name")
        claim = by_provider.get((n.get("spec") or {}).get("providerID")) or by_name.get(name)
        if name and claim:
            out[name] = claim
    return out


class NodeRepairer:
    def __init__(self, kube, terminator: Terminator, decide: Callable[..., None]):
        self.kube = kube
        self.terminator = terminator
        self.decide = decide

    def run(self, nodes: list[dict], nodeclaims: dict[str, NodeClaim], now: float, report) -> list[str]:
        """Request the forceful deletion of every NodeClaim due for repair, and make the drain of every one already
        deleting forceful (termination timestamp now); returns their names."""
        deleting = {n for n, nc in nodeclaims.items() if nc.metadata.get("deletionTimestamp")}
        stamped = {n: at for n in deleting
                   if (at := to_epoch(nodeclaims[n].annotations.get(wk.NODECLAIM_TERMINATION_TIMESTAMP_ANNOTATION)))
                   is not None}
        plan = plan_repairs(nodes, nodeclaim_of_node(nodes, nodeclaims), deleting, now, termination_at=stamped)
        node_by_name = {(n.get("metadata") or {}).get("name"): n for n in nodes}
        done = []
        for r in plan.repairs:
            nc = nodeclaims[r.nodeclaim]
            why = f"{UNHEALTHY}: {r.unhealthy.describe(now)}"
            try:
                self.terminator.request(nc, why, forceful=True)
            except Exception as e:  # noqa: BLE001 - the next sweep tries again
                report.errors.append(f"repair NodeClaim {nc.name}: {e}")
                continue
            done.append(nc.name)
            labels = nc.labels
            report.disrupted.append({
                "nodeClaim": nc.name, "reason": UNHEALTHY, "nodePool": r.nodepool, "node": r.node,
                "instanceType": labels.get(wk.INSTANCE_TYPE), "zone": labels.get(wk.ZONE),
                "capacityType": labels.get(wk.CAPACITY_TYPE), "replacements": [], "savingsPerHour": 0.0,
                "detail": r.unhealthy.describe(now), "condition": r.unhealthy.condition, "status": r.unhealthy.status})
            self.decide("repair", f"NodeClaim {nc.name} (node {r.node}) is unhealthy: {r.unhealthy.describe(now)}; "
                                  f"deleted forcefully", nodeclaim=nc.name, node=r.node, nodepool=r.nodepool,
                        condition=r.unhealthy.condition, status=r.unhealthy.status)
            self._event(node_by_name.get(r.node), ev.NODE_REPAIRED,
                        ev.node_repaired_message(r.unhealthy.condition, r.unhealthy.status,
                                                 format_duration(int(now - r.unhealthy.since)),
                                                 format_duration(int(r.unhealthy.toleration))), now, report)
        for r in plan.force_deleting:
            # already deleting (its reason and NodeClaimDisrupted are that deletion's): the drain made forceful only
            nc = nodeclaims[r.nodeclaim]
            try:
                self.terminator.request(nc, f"{UNHEALTHY}: {r.unhealthy.describe(now)}", forceful=True)
            except Exception as e:  # noqa: BLE001 - the next sweep tries again
                report.errors.append(f"repair NodeClaim {nc.name}: {e}")
                continue
            done.append(nc.name)
            self.decide("repair", f"NodeClaim {nc.name} (node {r.node}, already deleting) is unhealthy: "
                                  f"{r.unhealthy.describe(now)}; drain made forceful", nodeclaim=nc.name, node=r.node,
                        nodepool=r.nodepool, condition=r.unhealthy.condition, status=r.unhealthy.status)
        for b in plan.blocked:
            report.repair_blocked.append({"nodeClaim": b.nodeclaim, "node": b.node, "nodePool": b.nodepool,
                                          "unhealthy": b.unhealthy_nodes, "nodes": b.nodes, "allowed": b.allowed})
            self.decide("repair-blocked", f"NodeClaim {b.nodeclaim} (node {b.node}) not repaired: {b.message}",
                        nodeclaim=b.nodeclaim, node=b.node, nodepool=b.nodepool)
        for b in plan.blocked:
            if self._newly_due(node_by_name.get(b.node), now):
                self._event(node_by_name.get(b.node), ev.NODE_REPAIR_BLOCKED,
                            ev.node_repair_blocked_message(f"{ALLOWED_UNHEALTHY_PERCENT}%"), now, report)
        return done

    @staticmethod
    def _newly_due(node: dict | None, now: float) -> bool:
        u = unhealthy_condition(node or {})
        return u is not None and 0 <= now - u.due_at < BLOCKED_EVENT_WINDOW

    def _event(self, node: dict | None, reason: str, message: str, now: float, report) -> None:
        if node is None:
            return
        try:
            self.kube.create_event({**node, "apiVersion": "v1", "kind": "Node"}, reason, message, type=ev.WARNING,
                                   source=ev.SOURCE, now=format_time(now))
        except Exception as e:  # noqa: BLE001 - an explanation only
            report.errors.append(f"event {reason} on node {(node.get('metadata') or {}).get('name')}: {e}")
