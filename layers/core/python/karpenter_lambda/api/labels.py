"""Well-known label keys, annotations, taints and their normalisation (Karpenter v1 + AWS provider)."""

from __future__ import annotations

import json

# --- core Kubernetes / Karpenter -------------------------------------------------
ARCH = "kubernetes.io/arch"
OS = "kubernetes.io/os"
HOSTNAME = "kubernetes.io/hostname"
POD_TEMPLATE_HASH = "pod-template-hash"   # the Deployment controller's label on its ReplicaSets' pods
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
WINDOWS_BUILD = "node.kubernetes.io/windows-build"

CAPACITY_TYPE = "karpenter.sh/capacity-type"
NODEPOOL = "karpenter.sh/nodepool"
NODE_INITIALIZED = "karpenter.sh/initialized"
NODE_REGISTERED = "karpenter.sh/registered"
NODE_DO_NOT_SYNC_TAINTS = "karpenter.sh/do-not-sync-taints"  # "true": registration syncs no taint to the Node
# EC2 tag (value: the cluster name) on every instance this deployment launches; IAM lets it terminate only those
OWNER_TAG = "karpenter-lambda.io/cluster"

CAPACITY_TYPE_ON_DEMAND = "on-demand"
CAPACITY_TYPE_SPOT = "spot"
CAPACITY_TYPE_RESERVED = "reserved"
CAPACITY_TYPES = (CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT, CAPACITY_TYPE_RESERVED)

ARCH_AMD64 = "amd64"
ARCH_ARM64 = "arm64"

# --- AWS provider -----------------------------------------------------------------
AWS = "karpenter.k8s.aws/"
INSTANCE_HYPERVISOR = AWS + "instance-hypervisor"
INSTANCE_ENCRYPTION_IN_TRANSIT = AWS + "instance-encryption-in-transit-supported"
INSTANCE_CATEGORY = AWS + "instance-category"
INSTANCE_FAMILY = AWS + "instance-family"
INSTANCE_GENERATION = AWS + "instance-generation"
INSTANCE_LOCAL_NVME = AWS + "instance-local-nvme"
INSTANCE_SIZE = AWS + "instance-size"
INSTANCE_CPU = AWS + "instance-cpu"
INSTANCE_CPU_MANUFACTURER = AWS + "instance-cpu-manufacturer"
INSTANCE_CPU_SUSTAINED_CLOCK = AWS + "instance-cpu-sustained-clock-speed-mhz"
INSTANCE_MEMORY = AWS + "instance-memory"
INSTANCE_EBS_BANDWIDTH = AWS + "instance-ebs-bandwidth"
INSTANCE_NETWORK_BANDWIDTH = AWS + "instance-network-bandwidth"
INSTANCE_GPU_NAME = AWS + "instance-gpu-name"
INSTANCE_GPU_MANUFACTURER = AWS + "instance-gpu-manufacturer"
INSTANCE_GPU_COUNT = AWS + "instance-gpu-count"
INSTANCE_GPU_MEMORY = AWS + "instance-gpu-memory"
INSTANCE_ACCELERATOR_NAME = AWS + "instance-accelerator-name"
INSTANCE_ACCELERATOR_MANUFACTURER = AWS + "instance-accelerator-manufacturer"
INSTANCE_ACCELERATOR_COUNT = AWS + "instance-accelerator-count"
INSTANCE_CAPABILITY_FLEX = AWS + "instance-capability-flex"
EC2NODECLASS = AWS + "ec2nodeclass"
CAPACITY_RESERVATION_ID = AWS + "capacity-reservation-id"
CAPACITY_RESERVATION_TYPE = AWS + "capacity-reservation-type"
CAPACITY_RESERVATION_INTERRUPTIBLE = AWS + "capacity-reservation-interruptible"
NITRO_SANDBOX = AWS + "nitro-sandbox"  # Nitro Enclaves supported (true/false): one exact key (the provider's HEAD)
PLACEMENT_GROUP_ID = AWS + "placement-group-id"
PLACEMENT_GROUP_PARTITION = AWS + "placement-group-partition"
# NodeClaim status fields of the termination flow (controllers/termination.py): the record, and in it the time the
# instance was terminated (Karpenter's InstanceTerminating condition)
TERMINATION_STATUS = "termination"
INSTANCE_TERMINATED_AT = "instanceTerminatedAt"
INSTANCE_TENANCY = AWS + "instance-tenancy"   # default | dedicated; karpenter-lambda launches default tenancy only
TENANCY_DEFAULT = "default"
TENANCY_VALUES = (TENANCY_DEFAULT, "dedicated")
ZONE_ID = "topology.k8s.aws/zone-id"

# Labels of the karpenter.k8s.aws domain that a NodePool may use in requirements/labels.
AWS_WELL_KNOWN = frozenset(
    {
        INSTANCE_HYPERVISOR,
        INSTANCE_ENCRYPTION_IN_TRANSIT,
        INSTANCE_CATEGORY,
        INSTANCE_FAMILY,
        INSTANCE_GENERATION,
        INSTANCE_LOCAL_NVME,
        INSTANCE_SIZE,
        INSTANCE_CPU,
        INSTANCE_CPU_MANUFACTURER,
        INSTANCE_CPU_SUSTAINED_CLOCK,
        INSTANCE_MEMORY,
        INSTANCE_EBS_BANDWIDTH,
        INSTANCE_NETWORK_BANDWIDTH,
        INSTANCE_GPU_NAME,
        INSTANCE_GPU_MANUFACTURER,
        INSTANCE_GPU_COUNT,
        INSTANCE_GPU_MEMORY,
        INSTANCE_ACCELERATOR_NAME,
        INSTANCE_ACCELERATOR_MANUFACTURER,
        INSTANCE_ACCELERATOR_COUNT,
        INSTANCE_CAPABILITY_FLEX,
        EC2NODECLASS,
        CAPACITY_RESERVATION_ID,
        CAPACITY_RESERVATION_TYPE,
        CAPACITY_RESERVATION_INTERRUPTIBLE,
        PLACEMENT_GROUP_ID,
        PLACEMENT_GROUP_PARTITION,
        NITRO_SANDBOX,
        INSTANCE_TENANCY,
    }
)
# No prefix makes a karpenter.k8s.aws key well-known: Karpenter's CRDs and Go labels list exact keys only
# (``nitro-sandbox`` is one of them, not a prefix: ``nitro-sandbox-foo`` is restricted and has no known values).

# Keys every node gets; a pod may select on them without the NodePool defining them.
CORE_WELL_KNOWN = frozenset({NODEPOOL, ZONE, REGION, INSTANCE_TYPE, ARCH, OS, CAPACITY_TYPE, WINDOWS_BUILD, HOSTNAME})
WELL_KNOWN = CORE_WELL_KNOWN | AWS_WELL_KNOWN | {ZONE_ID}

# Deprecated beta labels and what they mean now.
NORMALIZED = {
    "failure-domain.beta.kubernetes.io/zone": ZONE,
    "failure-domain.beta.kubernetes.io/region": REGION,
    "beta.kubernetes.io/arch": ARCH,
    "beta.kubernetes.io/os": OS,
    "beta.kubernetes.io/instance-type": INSTANCE_TYPE,
    # the EBS CSI driver's own zone key on the PVs it provisioned (Karpenter's AWS provider normalises it too)
    "topology.ebs.csi.aws.com/zone": ZONE,
}


def in_karpenter_domain(key: str) -> bool:
    """Whether ``key``'s domain (what precedes the first '/') is Karpenter's: ``karpenter.sh`` or
    ``karpenter.k8s.aws`` (or a subdomain of either)."""
    domain = key.split("/", 1)[0]
    return domain.endswith(("karpenter.sh", "karpenter.k8s.aws"))


def normalize_key(key: str) -> str:
    return NORMALIZED.get(key, key)


def normalize_labels(labels: dict) -> dict[str, str]:
    """A node's labels under their current keys; where a node carries both an alias and the current key (a node of
    the EBS CSI driver has ``topology.ebs.csi.aws.com/zone`` beside ``topology.kubernetes.io/zone``), the current
    key's value wins."""
    out = {NORMALIZED[k]: str(v) for k, v in labels.items() if k in NORMALIZED}
    out.update((k, str(v)) for k, v in labels.items() if k not in NORMALIZED)
    return out


# --- annotations / taints -----------------------------------------------------------
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
NODEPOOL_HASH = "karpenter.sh/nodepool-hash"
NODEPOOL_HASH_VERSION = "karpenter.sh/nodepool-hash-version"
NODECLASS_HASH = "karpenter.k8s.aws/ec2nodeclass-hash"
NODECLASS_HASH_VERSION = "karpenter.k8s.aws/ec2nodeclass-hash-version"
NODECLAIM_MIN_VALUES_RELAXED = "karpenter.sh/nodeclaim-min-values-relaxed"
DISRUPTED_TAINT_KEY = "karpenter.sh/disrupted"
UNREGISTERED_TAINT_KEY = "karpenter.sh/unregistered"
TERMINATION_FINALIZER = "karpenter.sh/termination"
NODECLAIM_TAG = "karpenter.sh/nodeclaim"                      # EC2 tag: the NodeClaim an instance belongs to
DISCOVERY_TAG = "karpenter.sh/discovery"                      # the tag Karpenter's examples select subnets by
EXCLUDE_LB_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers"
DISRUPTED_TAINT = {"key": DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}   # copy before handing it to a client


def has_disrupted_taint(node: dict | None) -> bool:
    """The Node carries ``karpenter.sh/disrupted:NoSchedule`` (a disruption or termination has begun)."""
    return any(t.get("key") == DISRUPTED_TAINT_KEY and t.get("effect") == "NoSchedule"
               for t in ((node or {}).get("spec") or {}).get("taints") or [])


# --- karpenter-lambda's own annotations, taints and API group -----------------------------
PROJECT = "karpenter-lambda.io/"
PROJECT_API_VERSION = PROJECT + "v1alpha1"                    # OffPeakSchedule, Scenario, off-peak records
PRICE_ANNOTATION = PROJECT + "price-per-hour"                 # on a NodeClaim: the offering's price at launch
NOMINATED_PODS_ANNOTATION = PROJECT + "nominated-pods"        # JSON list of "ns/name"
NOMINATED_UIDS_ANNOTATION = PROJECT + "nominated-pod-uids"    # JSON list of pod uids (launch order)
LAUNCH_TOKEN_ANNOTATION = PROJECT + "launch-token"            # CreateFleet ClientToken base of this attempt
SUBNET_ANNOTATION = PROJECT + "subnet-id"
SECURITY_GROUPS_ANNOTATION = PROJECT + "security-group-ids"   # JSON list, sorted
REPLACES_ANNOTATION = PROJECT + "replaces"                    # JSON list of the NodeClaims a replacement replaces
DELETION_REASON_ANNOTATION = PROJECT + "deletion-reason"
REBALANCE_ANNOTATION = PROJECT + "rebalance-replace"          # on a NodePool: "true" opts in
OFFPEAK_ORIGINAL_ANNOTATION = PROJECT + "offpeak-original-replicas"
OFFPEAK_HELD_BY_ANNOTATION = PROJECT + "offpeak-held-by"
PLANNED_TAINT = {"key": PROJECT + "planned-replacement", "effect": "NoSchedule"}   # consolidation's what-if nodes


def encode_replaces(names) -> str:
    """The ``replaces`` annotation's one format: a sorted JSON list of NodeClaim names."""
    return json.dumps(sorted({str(n) for n in names}))


def decode_replaces(raw: str | None) -> list[str]:
    """The NodeClaims a replacement replaces; also reads the bare name interruption wrote before the format was
    one (records launched by older versions)."""
    if not raw:
        return []
    if raw.startswith("["):
        try:
            value = json.loads(raw)
        except ValueError:
            return []
        return [str(v) for v in value] if isinstance(value, list) else []
    return [raw]

# Resource names.
RESOURCE_CPU = "cpu"
RESOURCE_MEMORY = "memory"
RESOURCE_PODS = "pods"
RESOURCE_EPHEMERAL_STORAGE = "ephemeral-storage"
RESOURCE_NVIDIA_GPU = "nvidia.com/gpu"
RESOURCE_AMD_GPU = "amd.com/gpu"
RESOURCE_NEURON = "aws.amazon.com/neuron"
RESOURCE_NEURON_CORE = "aws.amazon.com/neuroncore"
RESOURCE_HABANA_GAUDI = "habana.ai/gaudi"
RESOURCE_EFA = "vpc.amazonaws.com/efa"
RESOURCE_POD_ENI = "vpc.amazonaws.com/pod-eni"

# --- volumes (issue 28: volume topology and attach limits) -------------------------
# A pod's PVC-backed volumes of one CSI driver count as this resource (one per volume), the name Kubernetes used
# for CSI attach limits on Node allocatable; a node's room for it is its CSINode's drivers[].allocatable.count,
# a new node's its instance type's limit (``InstanceType.volume_limits``); no known limit means no limit.
VOLUME_RESOURCE_PREFIX = "attachable-volumes-csi-"
EBS_CSI_DRIVER = "ebs.csi.aws.com"
# the in-tree provisioner a StorageClass may still name; its volumes are the EBS CSI driver's (CSI migration)
EBS_IN_TREE_PROVISIONER = "kubernetes.io/aws-ebs"


VOLUME_NO_LIMIT = 1 << 60   # a node's room for a driver's volumes when nothing says how many it takes


def volume_resource(driver: str) -> str:
    """The resource name counting ``driver``'s volumes on a node (``attachable-volumes-csi-ebs.csi.aws.com``)."""
    return VOLUME_RESOURCE_PREFIX + driver


def volume_driver(resource: str) -> str | None:
    """The CSI driver a volume-count resource names, or None for any other resource."""
    return resource[len(VOLUME_RESOURCE_PREFIX):] if resource.startswith(VOLUME_RESOURCE_PREFIX) else None

# --- node repair and static NodePools (issue 30 items 2-3) ---------------------------
# Karpenter's drain deadline on a NodeClaim (RFC 3339): pods still on the node at that time are deleted, not
# evicted; node repair sets it to the deletion time (forceful)
NODECLAIM_TERMINATION_TIMESTAMP_ANNOTATION = "karpenter.sh/nodeclaim-termination-timestamp"
# Node conditions of the EKS Node Monitoring Agent that Karpenter's AWS repair policies read
CONDITION_READY = "Ready"
CONDITION_ACCELERATED_HARDWARE_READY = "AcceleratedHardwareReady"
CONDITION_STORAGE_READY = "StorageReady"
CONDITION_NETWORKING_READY = "NetworkingReady"
CONDITION_KERNEL_READY = "KernelReady"
CONDITION_CONTAINER_RUNTIME_READY = "ContainerRuntimeReady"
# NodeOverlay status (Karpenter's v1alpha1 NodeOverlay conditions; Ready mirrors it)
CONDITION_VALIDATION_SUCCEEDED = "ValidationSucceeded"
