"""Node repair (pure): which unhealthy nodes to replace now, as Karpenter's node health controller
(``pkg/controllers/node/health``, feature gate ``NodeRepair``) with the AWS provider's repair policies.

A policy names a Node condition type, the status that makes the node unhealthy and how long it is tolerated
(:data:`AWS_POLICIES`, from ``karpenter-provider-aws`` ``CloudProvider.RepairPolicies``):

=========================  =================  ==========
condition                  status             toleration
=========================  =================  ==========
Ready                      False, Unknown     30 min
AcceleratedHardwareReady   False              10 min
StorageReady               False              30 min
NetworkingReady            False              30 min
KernelReady                False              30 min
ContainerRuntimeReady      False              30 min
=========================  =================  ==========

* A node is **unhealthy** when one of its conditions has a policy's type and status, however long it has held.
* It is **due** when such a condition has held past its toleration, counted from the condition's
  ``lastTransitionTime`` (never earlier than the Node's creation; a condition without one counts from the creation).
  With several matching conditions the one due first is the reason.
* A NodePool's nodes are repaired only while at most 20% of them are unhealthy, rounded up (Karpenter's
  ``intstr.GetScaledValueFromIntOrPercent("20%", nodes, roundUp=true)``: 1 of 3, 1 of 5, 2 of 6, 2 of 10); the nodes
  counted are the Nodes labelled with the NodePool, deleting or not.  More unhealthy than that: nothing in the
  NodePool is repaired (a :class:`RepairBlocked` per due node), as a zone or AMI problem would otherwise replace
  the whole NodePool.
* A due node whose NodeClaim is already being deleted (a drift, a consolidation, a user's deletion...) is not
  disrupted again, but its drain is made forceful: ``karpenter.sh/nodeclaim-termination-timestamp`` set to now,
  unless one no later than now is already set (:attr:`RepairPlan.force_deleting`).  As Karpenter's ``Reconcile``,
  whose ``annotateTerminationGracePeriod`` runs before ``deleteNodeClaim`` returns on a deletion timestamp: an
  unhealthy node's deletion stuck on a PodDisruptionBudget is not left waiting.  The 20% rule applies to it as to
  any due node (blocked: a :class:`RepairBlocked`, as Karpenter publishes ``NodeRepairBlocked`` for it too).

:func:`plan_repairs` takes the Nodes and which NodeClaim each belongs to and returns a :class:`RepairPlan`; the
lifecycle sweep (``controllers/repair.py``) deletes each repaired NodeClaim forcefully (no PDB, drain deadline now)
and stamps the termination timestamp on each ``force_deleting`` one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

from ..api import labels as wk
from ..api.durations import format_duration
from ..api.times import to_epoch

UNHEALTHY = "Unhealthy"             # the reason of a repair's NodeClaimDisrupted event (Karpenter's metric reason)
ALLOWED_UNHEALTHY_PERCENT = 20      # of a NodePool's nodes, rounded up


@dataclass(frozen=True)
class RepairPolicy:
    condition: str          # Node condition type
    status: str             # "False" | "Unknown" | "True"
    toleration: float       # seconds


AWS_POLICIES: tuple[RepairPolicy, ...] = (
    RepairPolicy(wk.CONDITION_READY, "False", 30 * 60),
    RepairPolicy(wk.CONDITION_READY, "Unknown", 30 * 60),
    RepairPolicy(wk.CONDITION_ACCELERATED_HARDWARE_READY, "False", 10 * 60),
    RepairPolicy(wk.CONDITION_STORAGE_READY, "False", 30 * 60),
    RepairPolicy(wk.CONDITION_NETWORKING_READY, "False", 30 * 60),
    RepairPolicy(wk.CONDITION_KERNEL_READY, "False", 30 * 60),
    RepairPolicy(wk.CONDITION_CONTAINER_RUNTIME_READY, "False", 30 * 60),
)


@dataclass(frozen=True)
class Unhealthy:
    """The condition that makes a node unhealthy (the one due first when several match)."""

    condition: str
    status: str
    since: float            # epoch seconds: lastTransitionTime, not before the Node's creation
    toleration: float

    @property
    def due_at(self) -> float:
        return self.since + self.toleration

    def describe(self, now: float) -> str:
        return (f"{self.condition}={self.status} for {format_duration(int(max(0.0, now - self.since)))} "
                f"(toleration {format_duration(int(self.toleration))})")


@dataclass(frozen=True)
class Repair:
    nodeclaim: str
    node: str
    nodepool: str
    unhealthy: Unhealthy


@dataclass(frozen=True)
class RepairBlocked:
    nodeclaim: str
    node: str
    nodepool: str
    unhealthy_nodes: int
    nodes: int
    allowed: int

    @property
    def message(self) -> str:
        return (f"more than {ALLOWED_UNHEALTHY_PERCENT}% nodes are unhealthy in the nodepool "
                f"({self.unhealthy_nodes} of {self.nodes}, at most {self.allowed})")


@dataclass
class RepairPlan:
    repairs: list[Repair] = field(default_factory=list)
    blocked: list[RepairBlocked] = field(default_factory=list)
    # due nodes whose NodeClaim is already deleting, its termination timestamp unset or later than now: the timestamp
    # is set to now (the drain turns forceful); not a disruption of its own
    force_deleting: list[Repair] = field(default_factory=list)
    waiting: dict[str, float] = field(default_factory=dict)   # node -> when it becomes due (unhealthy, not yet due)


def unhealthy_condition(node: dict, policies: tuple[RepairPolicy, ...] = AWS_POLICIES) -> Unhealthy | None:
    """The condition of ``node`` a policy matches that is due first, or None when the node is healthy."""
    meta = node.get("metadata") or {}
    created = to_epoch(meta.get("creationTimestamp"))
    best: Unhealthy | None = None
    for c in (node.get("status") or {}).get("conditions") or []:
        for p in policies:
            if c.get("type") != p.condition or c.get("status") != p.status:
                continue
            since = to_epoch(c.get("lastTransitionTime"))
            if since is None or (created is not None and since < created):
                since = created
            if since is None:
                continue
            u = Unhealthy(p.condition, p.status, since, p.toleration)
            if best is None or (u.due_at, u.condition) < (best.due_at, best.condition):
                best = u
    return best


def allowed_unhealthy(nodes: int) -> int:
    """How many of ``nodes`` may be unhealthy with repair still on: 20%, rounded up."""
    return math.ceil(nodes * ALLOWED_UNHEALTHY_PERCENT / 100)


def plan_repairs(nodes: list[dict], nodeclaim_of: Mapping[str, str], deleting: set[str] | frozenset, now: float,
                 policies: tuple[RepairPolicy, ...] = AWS_POLICIES,
                 termination_at: Mapping[str, float] | None = None) -> RepairPlan:
    """The repairs due at ``now``.

    ``nodes``: every Node (dicts); ``nodeclaim_of``: Node name -> its NodeClaim's name (Nodes without one are not
    Karpenter's and never repaired, but are counted in their NodePool when labelled with it); ``deleting``: names of
    NodeClaims already being deleted; ``termination_at``: NodeClaim name -> its
    ``karpenter.sh/nodeclaim-termination-timestamp`` (epoch seconds), for those that have one: a deleting one stamped
    no later than ``now`` needs nothing more."""
    termination_at = termination_at or {}
    plan = RepairPlan()
    by_pool: dict[str, list[tuple[dict, Unhealthy | None]]] = {}
    for n in nodes:
        pool = ((n.get("metadata") or {}).get("labels") or {}).get(wk.NODEPOOL)
        if pool:
            by_pool.setdefault(pool, []).append((n, unhealthy_condition(n, policies)))
    for pool in sorted(by_pool):
        members = by_pool[pool]
        sick = sum(1 for _n, u in members if u is not None)
        allowed = allowed_unhealthy(len(members))
        for n, u in sorted(members, key=lambda x: (x[0].get("metadata") or {}).get("name") or ""):
            name = (n.get("metadata") or {}).get("name") or ""
            claim = nodeclaim_of.get(name)
            if u is None or claim is None:
                continue
            if u.due_at > now:
                plan.waiting[name] = u.due_at
            elif sick > allowed:
                plan.blocked.append(RepairBlocked(claim, name, pool, sick, len(members), allowed))
            elif claim in deleting:
                stamped = termination_at.get(claim)
                if stamped is None or stamped > now:    # else its drain is forceful already
                    plan.force_deleting.append(Repair(claim, name, pool, u))
            else:
                plan.repairs.append(Repair(claim, name, pool, u))
    return plan


__all__ = ["ALLOWED_UNHEALTHY_PERCENT", "AWS_POLICIES", "Repair", "RepairBlocked", "RepairPlan", "RepairPolicy",
           "UNHEALTHY", "Unhealthy", "allowed_unhealthy", "plan_repairs", "unhealthy_condition"]
