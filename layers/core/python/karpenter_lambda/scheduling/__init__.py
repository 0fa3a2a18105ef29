"""Scheduling: requirement algebra, pod requests, taints, topology and the provisioning simulation (pure).

    from karpenter_lambda.scheduling import solve, SchedulingInput, NodePoolInput, ExistingNode
    res = solve(SchedulingInput(pods=[...], nodepools=[NodePoolInput(nodepool, instance_types)]))
    res.nodeclaims / res.existing / res.unschedulable / res.cost_per_hour

See docs/scheduling.md.
"""

from .requirements import Requirement, RequirementError, Requirements
from .resources import pod_requests
from .solver import (
    ExistingNode,
    NodeClaimPlan,
    NodePoolInput,
    SchedulingError,
    SchedulingInput,
    SchedulingResult,
    Unschedulable,
    solve,
)
from .taints import tolerates, untolerated

__all__ = [
    "solve",
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
