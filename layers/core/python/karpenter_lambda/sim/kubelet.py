"""The simulated kubelet: what an EC2 instance registers as a Node, from the instance itself.

A real kubelet knows nothing of NodeClaims.  It reads the machine and its userData and registers:

* **capacity** from the instance type (cpu, memory, ephemeral-storage, extended resources) and ``--max-pods`` from
  the userData (Karpenter writes the ENI-limited count there), computed with the catalog's own rules
  (``catalog.allocatable.compute_capacity``) -- so an instance that joins before any NodeClaim names it (an unknown
  launch outcome, a lost record, adoption still to come) registers with its real cpu and memory;
* the **VM memory overhead** (and reserved ENIs, should the userData give no ``--max-pods``) are the deployment's
  (``controllers/runtime.catalog_settings``, what the functions' catalog uses): the simulation takes the setting to
  be what the instances really lose, so a node registers the memory its NodeClaim was planned with;
* **allocatable** = capacity minus kube-reserved, system-reserved and the hard eviction threshold, as nodeadm /
  bootstrap.sh / Bottlerocket configure them from the userData's settings and the EC2NodeClass's AMI family and
  block devices (``catalog.allocatable.compute_overhead``);
* **labels**: hostname, instance type, zone, region, arch and os (the kubelet's and the cloud provider's), plus the
  userData's ``--node-labels`` (the NodeClaim template labels a kubelet may set on itself).  The rest of Karpenter's
  labels (``karpenter.k8s.aws/instance-*``, ``karpenter.sh/registered``, ...) come later from the lifecycle sweep's
  registration, as Karpenter's registration controller syncs them;
* **taints**: the userData's ``--register-with-taints`` (the NodePool's taints, startup taints and
  ``karpenter.sh/unregistered``).

The userData is the launch template's, read with DescribeInstanceAttribute (the real node reads it from IMDS).  An
instance launched without Karpenter's userData (a test's RunInstances) falls back to its NodeClaim, when one names it.
The startup taints an agent removes later (``Boot.startup_taints``) come from the NodeClaim, else its NodePool.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..adapters.aws.userdata import UNREGISTERED_TAINT, kubelet_labels
from ..api.kube import provider_id
from ..api.labels import ARCH, EC2NODECLASS, NODECLAIM_TAG, NODEPOOL
from ..api.objects import EC2NodeClass, NodeClaim
from ..catalog.allocatable import NodeSettings, compute_capacity, compute_overhead
from ..catalog.instancetypes import KUBE_ARCH
from ..catalog.types import InstanceType, launched_resources
from ..controllers.runtime import catalog_settings
from . import nodes as simnodes
from .kubelet_flags import KubeletFlags, decode_user_data, read_user_data

__all__ = ["Boot", "boot", "register", "node_name"]

# an instance type the catalog does not know (moto launches any name) and no NodeClaim to read: a small node
UNKNOWN_TYPE_CAPACITY = {"cpu": "2", "memory": "4Gi", "pods": "29"}


@dataclass
class Boot:
    """What the kubelet of one instance registers (resource lists: cpu millicores, bytes, counts)."""

    name: str
    provider_id: str
    instance_type: str
    zone: str
    arch: str
    os: str
    labels: dict[str, str]
    taints: list[dict]
    startup_taints: list[dict]
    capacity: dict
    allocatable: dict | None
    nodeclass: EC2NodeClass | None = None
    nodeclaim: NodeClaim | None = None
    flags: KubeletFlags = field(default_factory=KubeletFlags)


def node_name(instance: dict, region: str) -> str:
    return instance.get("PrivateDnsName") or f"ip-{instance['InstanceId']}.{region}.compute.internal"


def _tags(instance: dict) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in instance.get("Tags") or []}


def _user_data(ec2, instance_id: str) -> str:
    try:
        resp = ec2.describe_instance_attribute(InstanceId=instance_id, Attribute="userData")
    except Exception:  # noqa: BLE001 - no attribute to read: the kubelet starts with its defaults
        return ""
    return decode_user_data((resp.get("UserData") or {}).get("Value"))


def boot(ec2, store, region: str, instance: dict) -> Boot:
    """What ``instance`` (a DescribeInstances entry) registers; ``store`` holds NodeClaims, NodePools and
    EC2NodeClasses, ``ec2`` reads the userData."""
    iid, itype = instance["InstanceId"], instance["InstanceType"]
    zone = instance["Placement"]["AvailabilityZone"]
    tags = _tags(instance)
    nc = store.get("NodeClaim", tags[NODECLAIM_TAG]) if tags.get(NODECLAIM_TAG) else None
    nodeclass_name = tags.get(EC2NODECLASS) or ((nc.spec.get("nodeClassRef") or {}).get("name") if nc else None)
    nodeclass = store.get("EC2NodeClass", nodeclass_name) if nodeclass_name else None
    flags = read_user_data(_user_data(ec2, iid))

    if flags.source:
        labels, taints = dict(flags.labels), [dict(t) for t in flags.taints]
    else:   # no Karpenter userData: what its NodeClaim's launch template would have said
        labels = kubelet_labels(nc.labels) if nc else {}
        taints = (list(nc.spec.get("taints") or []) + list(nc.spec.get("startupTaints") or []) if nc else []) \
            + [dict(UNREGISTERED_TAINT)]
    if nc is not None:
        startup = list(nc.spec.get("startupTaints") or [])
    else:
        np = store.get("NodePool", tags[NODEPOOL]) if tags.get(NODEPOOL) else None
        startup = list(np.startup_taints) if np is not None else []

    info = simnodes.instance_type_info(region, itype)
    given = {**catalog_settings(), **flags.settings()}
    try:
        settings = NodeSettings.from_nodeclass(nodeclass, **given)
    except ValueError:
        settings = NodeSettings(**given)
    arch = labels.get(ARCH, "amd64")
    allocatable: dict | None
    if info is not None:
        capacity = compute_capacity(info, settings)
        # the kubelet floors what it reports at 0 (the catalog's allocatable may be below: a type nothing fits)
        allocatable = {k: max(0, v) for k, v in
                       InstanceType(itype, {}, capacity, compute_overhead(info, capacity, settings)).allocatable.items()}
        # the EFA device plugin advertises the EFA interfaces attached: the launch template has them only when the
        # NodeClaim requests vpc.amazonaws.com/efa (moto launches the primary interface whatever the template says)
        requests = ((nc.spec.get("resources") or {}).get("requests") or {}) if nc is not None else {}
        capacity, allocatable = launched_resources(capacity, requests), launched_resources(allocatable, requests)
        arch = next((KUBE_ARCH[a] for a in (info.get("ProcessorInfo") or {}).get("SupportedArchitectures") or []
                     if a in KUBE_ARCH), arch)
    elif nc is not None and nc.status.get("capacity"):
        capacity = dict(nc.status["capacity"])
        allocatable = dict(nc.status.get("allocatable") or {}) or None
    else:
        capacity, allocatable = dict(UNKNOWN_TYPE_CAPACITY), None
    return Boot(name=node_name(instance, region), provider_id=provider_id(zone, iid), instance_type=itype, zone=zone,
                arch=arch, os="windows" if settings.traits.windows else "linux", labels=labels, taints=taints,
                startup_taints=startup, capacity=capacity, allocatable=allocatable, nodeclass=nodeclass, nodeclaim=nc,
                flags=flags)


def register(server, store, region: str, instance: dict, ec2, *, now: str) -> tuple[dict, Boot]:
    """The kubelet of ``instance`` registers its Node (not Ready yet) and CSINode; returns (the stored Node, Boot)."""
    b = boot(ec2, store, region, instance)
    node = simnodes.make_node(b.name, b.provider_id, b.instance_type, b.zone, b.capacity, b.allocatable, b.labels,
                              b.taints, ready=False, arch=b.arch, os=b.os, now=now)
    created = simnodes.join_node(server, node, csi=simnodes.csi_drivers(region, b.instance_type, b.nodeclass))
    return created, b
