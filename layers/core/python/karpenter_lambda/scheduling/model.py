"""The scheduler's data model: its input (NodePools with their instance types, existing and in-flight nodes), its
result (NodeClaim plans, placements on existing nodes, unschedulable pods), the solver's node (:class:`SimNode`: an
existing or in-flight node, or a NodeClaim planned in this round) and the constants the solver's modules share.
Plain data and arithmetic; no scheduling decision here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..api import labels as L
from ..api.objects import NodePool
from ..api.quantity import format_resource
from ..api.selectors import namespace_labels
from ..catalog.overlay import overlay_annotations
from ..catalog.types import InstanceType
from .requirements import Requirement, Requirements

if TYPE_CHECKING:  # the instance-type options live with the NodeClaim templates (nodeclaim.py imports this module)
    from .nodeclaim import InstanceTypeOption

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
    "SimNode",
    "fit_count",
    "MIN_VALUES_STRICT",
    "MIN_VALUES_BEST_EFFORT",
    "MIN_VALUES_POLICIES",
]

INF = 1 << 60
EXOTIC_RESOURCES = (L.RESOURCE_NVIDIA_GPU, L.RESOURCE_AMD_GPU, L.RESOURCE_NEURON, L.RESOURCE_NEURON_CORE,
                    L.RESOURCE_HABANA_GAUDI)
EXOTIC_KEYS = (L.INSTANCE_GPU_NAME, L.INSTANCE_GPU_COUNT, L.INSTANCE_GPU_MANUFACTURER, L.INSTANCE_GPU_MEMORY,
               L.INSTANCE_ACCELERATOR_NAME, L.INSTANCE_ACCELERATOR_COUNT, L.INSTANCE_ACCELERATOR_MANUFACTURER)
# instance-type label keys that are "DoesNotExist" on a type without the label (a Windows build on Linux types too)
TYPE_KEYS = tuple(k for k in L.AWS_WELL_KNOWN if k.startswith(L.AWS + "instance-")) + (L.WINDOWS_BUILD, L.NITRO_SANDBOX)
# the labels of a capacity reservation: only its (reserved) offerings carry them (Karpenter: DoesNotExist on a type
# without a reservation, the reservations' values on a type with one)
RESERVATION_KEYS = (L.CAPACITY_RESERVATION_ID, L.CAPACITY_RESERVATION_TYPE, L.CAPACITY_RESERVATION_INTERRUPTIBLE)


def imply_reserved(reqs: Requirements) -> None:
    """A requirement that a reservation label exist (In, or Exists) is one for reserved capacity: only reserved
    offerings carry those labels, so the capacity type is narrowed to ``reserved`` (and an offering of another
    capacity type of the same instance type is never chosen for it)."""
    for k in RESERVATION_KEYS:
        if k in reqs:
            r = reqs.get(k)
            if (not r.complement and r.values) or (r.complement and not r.values and r.gt is None and r.lt is None):
                reqs.add(Requirement(L.CAPACITY_TYPE, False, (L.CAPACITY_TYPE_RESERVED,)))
                return
# the kind of the topology group that counts the pods whose required anti-affinity selects a pod (the inverse)
INV = "inverse-anti-affinity"
# Karpenter's --min-values-policy: Strict (a NodeClaim whose types no longer meet a requirement's minValues is not
# made) or BestEffort (it is made, that minValues lowered to what its types offer, and the plan says so)
MIN_VALUES_STRICT = "Strict"
MIN_VALUES_BEST_EFFORT = "BestEffort"
MIN_VALUES_POLICIES = (MIN_VALUES_STRICT, MIN_VALUES_BEST_EFFORT)


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
    # pod key -> why it cannot be scheduled before any node is looked at (a missing PVC, PV or StorageClass)
    pod_problems: dict = field(default_factory=dict)
    # pod key -> the constraints its volumes add, appended to its reason when it stays unschedulable
    pod_notes: dict = field(default_factory=dict)
    # the cluster's namespaces, {name: labels} (a pod (anti-)affinity term's namespaceSelector selects among them;
    # kept as an api.selectors.NamespaceLabels); None: not known (a non-empty namespaceSelector is then ignored)
    namespaces: dict | None = None

    def __post_init__(self):
        self.namespaces = namespace_labels(self.namespaces)


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
    # BestEffort minValues policy: a requirement's minValues was lowered to what the plan's types offer
    min_values_relaxed: bool = False

    def annotations(self) -> dict[str, str]:
        """What the launch writes on the NodeClaim: the minValues annotation (Karpenter sets it on every NodeClaim),
        and ``karpenter.sh/price-overlay-applied`` / ``capacity-overlay-applied`` when a NodeOverlay changed a price or
        the capacity of one of its instance types (``nodeclaimtemplate.go`` ``ToNodeClaim``; the launch then lets
        CreateFleet follow the overlaid prices: ``cloudprovider/launch.py``)."""
        return {L.NODECLAIM_MIN_VALUES_RELAXED: "true" if self.min_values_relaxed else "false",
                **overlay_annotations(self.instance_types)}

    def to_dict(self) -> dict:
        out = self._base_dict()
        if self.min_values_relaxed:
            out["minValuesRelaxed"] = True
        return out

    def _base_dict(self) -> dict:
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


class SimNode:
    """An existing / in-flight node (fixed) or a NodeClaim planned in this round."""

    __slots__ = ("id", "fixed", "pool", "reqs", "labels", "taints", "cap", "used", "pods", "target", "ports",
                 "limit_snapshot", "charge", "existing", "order", "keys", "dcache", "launch", "block", "fit")

    def __init__(self, id_, fixed, pool, reqs, labels, taints, cap, used):
        self.id = id_
        self.fixed = fixed
        self.pool = pool
        self.reqs = reqs
        self.labels = labels
        self.taints = taints
        self.cap = cap
        self.used = used
        self.pods: list[str] = []
        self.keys: list[str] = []
        self.target: InstanceTypeOption | None = None  # a planned node: the type it is sized on
        self.ports: set = set()
        self.limit_snapshot: dict = {}
        # a planned node of a NodePool with limits and minValues: what it was charged against the limits (per limited
        # resource, ``nodes`` 1), the largest of the types its minValues need; None: its sizing type's capacity
        self.charge: dict | None = None
        self.existing = None
        self.order = 0
        self.dcache = None
        self.launch = None
        self.block = None
        # placement's last requirement check that passed: (class requirements, the node's requirements after it,
        # its target after it, the ``over`` type) -- the same class requirements asked again of the node as it was
        # left pass again, unchanged (``Placement.try_node``)
        self.fit = None

    def domains(self, key: str):
        """Possible domains of this node for ``key`` (a tuple), () when the node has no such label."""
        if key == L.HOSTNAME:
            return (self.id,) if not self.fixed else ((self.labels.get(L.HOSTNAME, self.id)),)
        if self.fixed:
            v = self.labels.get(key)
            return (v,) if v is not None else ()
        r = self.reqs.get(key)
        if key in (L.ZONE, L.CAPACITY_TYPE):
            t = self.target
            dc = self.dcache
            if dc is not None and dc[0] is self.reqs and dc[1] is t and dc[2] == key:
                return dc[3]
            attr = "zone" if key == L.ZONE else "capacity_type"
            z = self.reqs.get(L.ZONE)
            ct = self.reqs.get(L.CAPACITY_TYPE)
            vals = {getattr(o, attr) for o in t.offers if z.has(o.zone) and ct.has(o.capacity_type)}
            out = tuple(sorted(vals))
            self.dcache = (self.reqs, t, key, out)
            return out
        if not r.complement:
            return tuple(sorted(r.values))
        if key in self.labels:
            return (self.labels[key],)
        return ()


def fit_count(vec, cap, used) -> int:
    """How many of a request vector ``vec`` fit in ``cap`` minus ``used`` (INF when it asks nothing)."""
    n = INF
    for v, a, u in zip(vec, cap, used):
        if v:
            k = (a - u) // v
            if k < n:
                n = k
                if n <= 0:
                    return 0
    return n
