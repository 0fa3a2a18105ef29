"""The scheduler's data model: its input (NodePools with their instance types, existing and in-flight nodes), its
result (NodeClaim plans, placements on existing nodes, unschedulable pods) and the constants the solver's modules
share.  Plain data; no scheduling logic (Karpenter: the types of ``scheduler.go`` / ``nodeclaim.go``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..api import labels as L
from ..api.objects import NodePool
from ..api.quantity import format_resource
from ..catalog.types import InstanceType
from .requirements import Requirements

__all__ = [
    "SchedulingInput",
    "NodePoolInput",
    "ExistingNode",
    "SchedulingResult",
    "NodeClaimPlan",
    "Unschedulable",
    "SchedulingError",
    "INF",
    "EXOTIC_RESOURCES",
    "EXOTIC_KEYS",
    "TYPE_KEYS",
    "INV",
]

INF = 1 << 60
EXOTIC_RESOURCES = (L.RESOURCE_NVIDIA_GPU, L.RESOURCE_AMD_GPU, L.RESOURCE_NEURON, L.RESOURCE_NEURON_CORE,
                    L.RESOURCE_HABANA_GAUDI)
EXOTIC_KEYS = (L.INSTANCE_GPU_NAME, L.INSTANCE_GPU_COUNT, L.INSTANCE_GPU_MANUFACTURER, L.INSTANCE_GPU_MEMORY,
               L.INSTANCE_ACCELERATOR_NAME, L.INSTANCE_ACCELERATOR_COUNT, L.INSTANCE_ACCELERATOR_MANUFACTURER)
# instance-type label keys that are "DoesNotExist" on a type without the label
TYPE_KEYS = tuple(k for k in L.AWS_WELL_KNOWN if k.startswith(L.AWS + "instance-"))
# the kind of the topology group that counts the pods whose required anti-affinity selects a pod (the inverse)
INV = "inverse-anti-affinity"


class SchedulingError(ValueError):
    """Bad scheduling input (names the object and field)."""


@dataclass
class NodePoolInput:
    nodepool: NodePool
    instance_types: list[InstanceType]


@dataclass
class ExistingNode:
    name: str
    labels: dict = field(default_factory=dict)
    taints: list = field(default_factory=list)
    allocatable: dict = field(default_factory=dict)
    pods: list = field(default_factory=list)
    nodepool: str | None = None
    in_flight: bool = False
    instance_type: str | None = None
    price: float | None = None
    zone: str | None = None
    capacity_type: str | None = None
    initialized: bool = True  # False: registered/launched but not Initialized (disruption won't rely on it)
    # what the pods on it add up to (existing_pods.PodsOnNode), when the caller keeps it; used only if made from
    # exactly ``pods``, else summed again
    pod_facts: object = field(default=None, repr=False, compare=False)


@dataclass
class SchedulingInput:
    pods: list
    nodepools: list = field(default_factory=list)
    existing_nodes: list = field(default_factory=list)
    daemonsets: list = field(default_factory=list)
    nodepool_usage: dict = field(default_factory=dict)
    max_instance_types: int = 60


@dataclass
class NodeClaimPlan:
    name: str
    nodepool: str
    requirements: Requirements
    instance_types: list
    instance_type: str
    zone: str
    capacity_type: str
    price: float
    pods: list
    requests: dict
    reason: str
    labels: dict = field(default_factory=dict)
    taints: list = field(default_factory=list)
    startup_taints: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "nodePool": self.nodepool,
            "instanceTypes": [it.name for it in self.instance_types],
            "instanceType": self.instance_type,
            "zone": self.zone,
            "capacityType": self.capacity_type,
            "pricePerHour": round(self.price, 6),
            "pods": list(self.pods),
            "requests": {k: format_resource(k, v) for k, v in sorted(self.requests.items())},
            "requirements": self.requirements.to_list(),
            "reason": self.reason,
        }


@dataclass
class Unschedulable:
    pod: str
    reason: str


@dataclass
class SchedulingResult:
    nodeclaims: list = field(default_factory=list)
    existing: dict = field(default_factory=dict)
    unschedulable: list = field(default_factory=list)
    cost_per_hour: float = 0.0

    def to_dict(self) -> dict:
        return {
            "nodeClaims": [n.to_dict() for n in self.nodeclaims],
            "existing": {k: list(v) for k, v in self.existing.items()},
            "unschedulable": [{"pod": u.pod, "reason": u.reason} for u in self.unschedulable],
            "costPerHour": round(self.cost_per_hour, 6),
        }

