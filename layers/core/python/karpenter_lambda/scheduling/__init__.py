"""Scheduling: requirement algebra, pod requests, taints, topology and the provisioning simulation (pure).

    from karpenter_lambda.scheduling import solve, SchedulingInput, NodePoolInput, ExistingNode
    res = solve(SchedulingInput(pods=[...], nodepools=[NodePoolInput(nodepool, instance_types)]))
    res.nodeclaims / res.existing / res.unschedulable / res.cost_per_hour

    # the disruption question: where would the pods of these nodes go, and what would be launched?
    r = simulate_removal([candidate_node], others=[...], nodepools=[...], usage={...}, pending=[...])
    r.new_nodeclaims / r.placements / r.unschedulable / r.all_rescheduled / r.price

See docs/scheduling.md.
"""

from .requirements import Requirement, RequirementError, Requirements
from .reschedule import RescheduleResult, is_reschedulable, simulate_removal
from .resources import pod_requests
from .model import (
    MIN_VALUES_BEST_EFFORT,
    MIN_VALUES_POLICIES,
    MIN_VALUES_STRICT,
    ExistingNode,
    NodeClaimPlan,
    NodePoolInput,
    SchedulingError,
    SchedulingInput,
    SchedulingResult,
    Unschedulable,
)
from .solver import solve
from .taints import tolerates, untolerated

__all__ = [
    "solve",
    "MIN_VALUES_STRICT",
    "MIN_VALUES_BEST_EFFORT",
    "MIN_VALUES_POLICIES",
    "simulate_removal",
    "RescheduleResult",
    "is_reschedulable",
    "SchedulingInput",
    "NodePoolInput",
    "ExistingNode",
    "SchedulingResult",
    "NodeClaimPlan",
    "Unschedulable",
    "SchedulingError",
    "Requirement",
    "Requirements",
    "RequirementError",
    "pod_requests",
    "tolerates",
    "untolerated",
]
