"""Kubernetes Events written by karpenter-lambda: reasons, types and messages, defined once.

As Karpenter: a pod gets ``Nominated`` (Normal) naming the NodeClaim or Node it should schedule on, or
``FailedScheduling`` (Warning) with the solver's reason; a disruption candidate's Node gets
``DisruptionLaunching`` when its replacements are launched and ``DisruptionTerminating`` when its deletion is
requested (``Unconsolidatable``/``DisruptionBlocked`` explain a candidate that is not disrupted).
"""

from __future__ import annotations

NORMAL = "Normal"
WARNING = "Warning"
SOURCE = "karpenter-lambda"   # the Event's source.component

# pods (the provisioner)
NOMINATED = "Nominated"
FAILED_SCHEDULING = "FailedScheduling"
# nodes (the disruption controller)
DISRUPTION_LAUNCHING = "DisruptionLaunching"
DISRUPTION_TERMINATING = "DisruptionTerminating"
UNCONSOLIDATABLE = "Unconsolidatable"
DISRUPTION_BLOCKED = "DisruptionBlocked"

MAX_POD_EVENTS_PER_ROUND = 200   # pod Events one provisioning round writes at most (one per pod and round)


def nominated_message(kind: str, name: str) -> str:
    """``kind``: ``nodeclaim`` (a NodeClaim launched or in flight) or ``node`` (existing capacity)."""
    return f"Pod should schedule on: {kind}/{name}"


def failed_scheduling_message(reason: str) -> str:
    return f"Failed to schedule pod, {reason}"


def disruption_launching_message(reason: str) -> str:
    return f"Launching NodeClaim: {reason}"


def disruption_terminating_message(reason: str) -> str:
    return f"Disrupting Node: {reason}"


__all__ = ["DISRUPTION_BLOCKED", "DISRUPTION_LAUNCHING", "DISRUPTION_TERMINATING", "FAILED_SCHEDULING",
           "MAX_POD_EVENTS_PER_ROUND", "NOMINATED", "NORMAL", "SOURCE", "UNCONSOLIDATABLE", "WARNING",
           "disruption_launching_message", "disruption_terminating_message", "failed_scheduling_message",
           "nominated_message"]

# nodes (node repair, issue 30 item 2): a repaired Node, and one whose NodePool has too many unhealthy nodes
NODE_REPAIRED = "NodeRepaired"
NODE_REPAIR_BLOCKED = "NodeRepairBlocked"


def node_repaired_message(condition: str, status: str, held: str, toleration: str) -> str:
    return f"Repairing node: condition {condition}={status} for {held} (toleration {toleration}); NodeClaim deleted"


def node_repair_blocked_message(percent: str) -> str:
    return f"more than {percent} nodes are unhealthy in the nodepool"


__all__ += ["NODE_REPAIRED", "NODE_REPAIR_BLOCKED", "node_repaired_message", "node_repair_blocked_message"]

# Balanced consolidation (disruption/balanced.py): a scored move's Node gets one of these, the message giving the score
CONSOLIDATION_APPROVED = "ConsolidationApproved"
CONSOLIDATION_REJECTED = "ConsolidationRejected"
__all__ += ["CONSOLIDATION_APPROVED", "CONSOLIDATION_REJECTED"]
