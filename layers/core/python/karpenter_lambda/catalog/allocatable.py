"""Capacity and overhead of an instance type, by Karpenter's AWS rules. Pure.

Follows ``A:pkg/providers/instancetype/types.go`` (aws/karpenter-provider-aws, v1.x head):

* **memory capacity** = ``SizeInMiB`` (minus 64 MiB CMA reservation when the first architecture is
  ``arm64``) minus the VM overhead ``ceil(MiB * 0.075)`` MiB;
* **cpu capacity** = default vCPUs; **pods** = ``kubelet.maxPods``, else ENI-limited
  ``ENIs * (IPv4 per ENI - 1) + 2`` (AL2/AL2023/Bottlerocket/Custom; ``ENIs`` minus reserved ENIs; both from the
  default network card of ``NetworkInfo``, the bundled VPC limits table as the fallback),
  else 110 (Windows); capped at ``podsPerCore * vCPUs`` when podsPerCore > 0 (not on Bottlerocket);
* **ephemeral-storage** = RAID0 instance store total (``instanceStorePolicy: RAID0``), else the
  root volume of ``blockDeviceMappings``, else the AMI family's default (20Gi; Windows 50Gi);
* **kube-reserved** cpu 6 % of core 1 + 1 % of core 2 + 0.5 % of cores 3-4 + 0.25 % above;
  memory ``11 * pods + 255`` MiB where pods is ENI-limited on AL2/AL2023/Custom (even when maxPods
  is set) and the computed max pods on Bottlerocket/Windows; ephemeral-storage 1Gi;
  ``kubelet.kubeReserved`` replaces any of these per resource;
* **system-reserved** = ``kubelet.systemReserved`` (nothing by default);
* **eviction threshold** memory 100Mi and ephemeral-storage 10 % (rounded up), each replaced by
  ``kubelet.evictionHard`` ``memory.available`` / ``nodefs.available`` (a quantity or a percentage
  of capacity; ``100%`` means disabled -> 0).  evictionSoft does not change allocatable.

Resource lists are ``dict[str, int]``: cpu in millicores, bytes for memory and storage, counts
otherwise.  Extended resources (GPUs, Neuron, pod ENIs, ``vpc.amazonaws.com/efa`` = ``EfaInfo.MaximumEfaInterfaces``
as Karpenter's ``efas``) appear only when non-zero.  A node has EFA devices only when its NodeClaim requests EFA (its
launch template then attaches the interfaces): :func:`~.types.launched_resources` drops the resource otherwise.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from ..api import labels as L
from ..api.quantity import QuantityError, resource_value

__all__ = [
    "NodeSettings",
    "FamilyTraits",
    "family_traits",
    "vpc_limits",
    "memory_capacity",
    "eni_limited_pods",
    "max_pods",
    "kube_reserved_cpu",
    "kube_reserved",
    "system_reserved",
    "eviction_threshold",
    "ephemeral_storage",
    "compute_capacity",
    "compute_overhead",
    "DEFAULT_VM_MEMORY_OVERHEAD_PERCENT",
    "RESOURCE_PRIVATE_IPV4",
]

DEFAULT_VM_MEMORY_OVERHEAD_PERCENT = 0.075
MIB = 1 << 20
GIB = 1 << 30
RESOURCE_PRIVATE_IPV4 = "vpc.amazonaws.com/PrivateIPv4Address"
_DATA_DIR = Path(__file__).resolve().parent.parent / "data"

_WINDOWS_BUILDS = {"Windows2019": "10.0.17763", "Windows2022": "10.0.20348", "Windows2025": "10.0.26100"}


@dataclass(frozen=True)
class FamilyTraits:
    """What an AMI family changes in the arithmetic (Karpenter's amifamily FeatureFlags + default volumes)."""

    name: str
    eni_limited_memory_overhead: bool  # kube-reserved memory from ENI-limited pods
    pods_per_core_enabled: bool
    eni_limited_pod_density: bool  # default max pods from ENIs (else 110)
    ephemeral_device: str | None  # device whose size is the node's ephemeral storage
    default_ephemeral_bytes: int
    windows: bool = False
    windows_build: str | None = None


@lru_cache(maxsize=64)
def family_traits(ami_family: str | None) -> FamilyTraits:
    """Traits of an EC2NodeClass ``amiFamily`` (None = AL2023, the v1 default alias family)."""
    fam = ami_family or "AL2023"
    if fam == "Bottlerocket":
        return FamilyTraits(fam, False, False, True, "/dev/xvdb", 20 * GIB)
    if fam in _WINDOWS_BUILDS:
        return FamilyTraits(fam, False, True, False, "/dev/sda1", 50 * GIB, windows=True, windows_build=_WINDOWS_BUILDS[fam])
    if fam == "Custom":
        return FamilyTraits(fam, True, True, True, None, 20 * GIB)
    if fam in ("AL2", "AL2023"):
        return FamilyTraits(fam, True, True, True, "/dev/xvda", 20 * GIB)
    raise ValueError(f"spec.amiFamily: unsupported AMI family {fam!r} (AL2, AL2023, Bottlerocket, Custom, Windows2019, Windows2022, Windows2025)")


@lru_cache(maxsize=1)
def _vpc_limits_table() -> dict[str, dict]:
    return json.loads((_DATA_DIR / "ec2-vpc-limits.json").read_text(encoding="utf-8"))["types"]


def vpc_limits(instance_type: str) -> dict | None:
    """The bundled VPC limits entry (ENIs, IPv4 per ENI, trunking, branch ENIs) or None."""
    return _vpc_limits_table().get(instance_type)


def _q(where: str, resource: str, value: Any) -> int:
    try:
        return resource_value(resource, value)
    except QuantityError as e:
        raise ValueError(f"{where}: {e}") from None


@dataclass(frozen=True)
class NodeSettings:
    """Everything from an EC2NodeClass that changes capacity or overhead."""

    ami_family: str | None = None
    max_pods: int | None = None
    pods_per_core: int | None = None
    system_reserved: Mapping[str, Any] = field(default_factory=dict)
    kube_reserved: Mapping[str, Any] = field(default_factory=dict)
    eviction_hard: Mapping[str, Any] = field(default_factory=dict)
    block_device_mappings: tuple = ()
    instance_store_policy: str | None = None
    reserved_enis: int = 0
    vm_memory_overhead_percent: float = DEFAULT_VM_MEMORY_OVERHEAD_PERCENT

    @property
    def traits(self) -> FamilyTraits:
        return family_traits(self.ami_family)

    @classmethod
    def from_nodeclass(cls, nodeclass: Any = None, **overrides: Any) -> "NodeSettings":
        """From an ``EC2NodeClass`` (or its manifest dict, or None for the defaults)."""
        if nodeclass is None:
            return cls(**overrides)
        if isinstance(nodeclass, Mapping):
            from ..api.objects import EC2NodeClass

            nodeclass = EC2NodeClass(dict(nodeclass))
        spec = nodeclass.spec
        kubelet = spec.get("kubelet") or {}
        if not isinstance(kubelet, Mapping):
            raise ValueError("spec.kubelet: must be an object")
        for key in ("maxPods", "podsPerCore"):
            v = kubelet.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise ValueError(f"spec.kubelet.{key}: must be a non-negative integer, got {v!r}")
        for key in ("systemReserved", "kubeReserved", "evictionHard"):
            v = kubelet.get(key)
            if v is not None and not isinstance(v, Mapping):
                raise ValueError(f"spec.kubelet.{key}: must be a map")
        bdms = spec.get("blockDeviceMappings") or []
        if not isinstance(bdms, list):
            raise ValueError("spec.blockDeviceMappings: must be a list")
        values = dict(
            ami_family=nodeclass.ami_family,
            max_pods=kubelet.get("maxPods"),
            pods_per_core=kubelet.get("podsPerCore"),
            system_reserved=dict(kubelet.get("systemReserved") or {}),
            kube_reserved=dict(kubelet.get("kubeReserved") or {}),
            eviction_hard=dict(kubelet.get("evictionHard") or {}),
            block_device_mappings=tuple(bdms),
            instance_store_policy=spec.get("instanceStorePolicy"),
        )
        values.update(overrides)
        settings = cls(**values)
        settings.traits  # validates the family
        return settings


# --- capacity ------------------------------------------------------------------------


def _vcpus(info: Mapping) -> int:
    try:
        return int(info["VCpuInfo"]["DefaultVCpus"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{info.get('InstanceType', '?')}: VCpuInfo.DefaultVCpus missing") from None


def _arches(info: Mapping) -> list[str]:
    return list((info.get("ProcessorInfo") or {}).get("SupportedArchitectures") or [])


def memory_capacity(info: Mapping, vm_memory_overhead_percent: float = DEFAULT_VM_MEMORY_OVERHEAD_PERCENT) -> int:
    """Memory capacity in bytes: MiB (-64 on arm64) minus ceil(MiB * overhead%) MiB."""
    try:
        mib = int(info["MemoryInfo"]["SizeInMiB"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{info.get('InstanceType', '?')}: MemoryInfo.SizeInMiB missing") from None
    arches = _arches(info)
    if arches and arches[0] == "arm64":
        mib -= 64  # Graviton CMA reservation
    # Same float arithmetic as Karpenter: bytes * pct / 1024 / 1024, rounded up, in MiB.
    overhead_mib = math.ceil(float(mib * MIB) * vm_memory_overhead_percent / 1024 / 1024)
    return (mib - overhead_mib) * MIB


def _network_info_limits(info: Mapping) -> tuple[int, int] | None:
    """(ENIs, IPv4 per ENI) of the default network card from ``DescribeInstanceTypes`` NetworkInfo, as Karpenter's
    ``ENILimitedPods``: ``NetworkCards[DefaultNetworkCardIndex].MaximumNetworkInterfaces`` (the card at that position
    of the list) and ``Ipv4AddressesPerInterface``.  A description without network cards (not one EC2 returns) is
    read from the top-level ``MaximumNetworkInterfaces``; None when the description lacks the figures."""
    ni = info.get("NetworkInfo")
    if not isinstance(ni, Mapping) or ni.get("Ipv4AddressesPerInterface") is None:
        return None
    cards = ni.get("NetworkCards") or []
    idx = ni.get("DefaultNetworkCardIndex", 0)
    if not cards:
        enis = ni.get("MaximumNetworkInterfaces")
    elif isinstance(idx, int) and not isinstance(idx, bool) and 0 <= idx < len(cards) and isinstance(cards[idx], Mapping):
        enis = cards[idx].get("MaximumNetworkInterfaces")
    else:
        enis = None
    if enis is None:
        return None
    return int(enis), int(ni["Ipv4AddressesPerInterface"])


def _table_limits(name: str) -> tuple[int, int] | None:
    """(ENIs, IPv4 per ENI) of the default network card from the bundled VPC limits table, or None."""
    lim = vpc_limits(name)
    if lim is None:
        return None
    idx = lim.get("default_network_card_index", 0)
    cards = [c for c in lim.get("network_cards") or [] if c.get("network_card_index") == idx]
    enis = cards[0]["maximum_network_interfaces"] if cards else lim.get("interfaces")
    ips = lim.get("ipv4_per_interface")
    if enis is None or ips is None:
        return None
    return int(enis), int(ips)


def eni_limited_pods(info: Mapping, reserved_enis: int = 0) -> int | None:
    """``ENIs * (IPv4 per ENI - 1) + 2`` on the default network card, or None when unknown.

    ENIs and IPv4/ENI come from the ``DescribeInstanceTypes`` NetworkInfo, what Karpenter reads for every type
    (``NetworkCards[DefaultNetworkCardIndex].MaximumNetworkInterfaces``, ``Ipv4AddressesPerInterface``); the
    bundled VPC limits table is the fallback for a description without them.
    """
    limits = _network_info_limits(info) or _table_limits(info.get("InstanceType", ""))
    if limits is None:
        return None
    enis, ips = limits
    usable = max(enis - int(reserved_enis), 0)
    if usable == 0:
        return 0
    return usable * (ips - 1) + 2


def max_pods(info: Mapping, settings: NodeSettings) -> int:
    """The node's pod capacity (see module doc)."""
    traits = settings.traits
    if settings.max_pods is not None:
        count = int(settings.max_pods)
    elif traits.eni_limited_pod_density:
        eni = eni_limited_pods(info, settings.reserved_enis)
        count = 110 if eni is None else eni
    else:
        count = 110
    if settings.pods_per_core and settings.pods_per_core > 0 and traits.pods_per_core_enabled:
        count = min(count, int(settings.pods_per_core) * _vcpus(info))
    return count


def ephemeral_storage(info: Mapping, settings: NodeSettings) -> int:
    """Ephemeral storage capacity in bytes (see module doc)."""
    traits = settings.traits
    if settings.instance_store_policy == "RAID0":
        total_gb = (info.get("InstanceStorageInfo") or {}).get("TotalSizeInGB")
        if total_gb is not None:
            return int(total_gb) * 10**9
    bdms = settings.block_device_mappings
    if bdms:
        for i, bdm in enumerate(bdms):
            if bdm.get("rootVolume"):
                size = (bdm.get("ebs") or {}).get("volumeSize")
                if size is not None:
                    return _q(f"spec.blockDeviceMappings[{i}].ebs.volumeSize", "ephemeral-storage", size)
                break
        if traits.name == "Custom":
            size = (bdms[-1].get("ebs") or {}).get("volumeSize")
            if size is not None:
                return _q(f"spec.blockDeviceMappings[{len(bdms) - 1}].ebs.volumeSize", "ephemeral-storage", size)
            return traits.default_ephemeral_bytes
        for i, bdm in enumerate(bdms):
            if bdm.get("deviceName") == traits.ephemeral_device:
                size = (bdm.get("ebs") or {}).get("volumeSize")
                if size is not None:
                    return _q(f"spec.blockDeviceMappings[{i}].ebs.volumeSize", "ephemeral-storage", size)
                break
    return traits.default_ephemeral_bytes


def volume_limits(info: Mapping, settings: NodeSettings) -> dict[str, int]:
    """How many EBS CSI volumes a new node of this type can attach (issue 28; beyond Karpenter, which leaves it to
    the CSINode once the node exists: kubernetes-sigs/karpenter#1748).

    ``EbsInfo.MaximumEbsAttachments`` is what EC2 publishes for the type: on Nitro types with a shared limit it
    already leaves out the primary network interface and the NVMe instance-store volumes (m5d.xlarge: 28 - 1 - 1 =
    26); a dedicated limit counts EBS volumes only.  The node's own block devices (the EC2NodeClass's
    ``blockDeviceMappings``; by default the root volume, two for Bottlerocket) take their share first.  Network
    interfaces the VPC CNI attaches later also count against a shared limit: the EBS CSI driver reports the smaller
    figure in the CSINode, which replaces this estimate once the node exists.
    """
    limit = (info.get("EbsInfo") or {}).get("MaximumEbsAttachments")
    if not isinstance(limit, int) or isinstance(limit, bool):
        return {}
    devices = len(settings.block_device_mappings) or (2 if settings.traits.name == "Bottlerocket" else 1)
    return {L.EBS_CSI_DRIVER: max(0, limit - devices)}


def _efa_count(info: Mapping) -> int:
    """EFA interfaces the type takes (Karpenter's ``efas`` without EC2NodeClass ``networkInterfaces``)."""
    efa = ((info.get("NetworkInfo") or {}).get("EfaInfo") or {}).get("MaximumEfaInterfaces")
    return int(efa or 0)


def _gpu_count(info: Mapping, manufacturer: str) -> int:
    gpus = (info.get("GpuInfo") or {}).get("Gpus") or []
    return sum(int(g.get("Count") or 0) for g in gpus if g.get("Manufacturer") == manufacturer)


def compute_capacity(info: Mapping, settings: NodeSettings) -> dict[str, int]:
    """Capacity resource list of one raw ``DescribeInstanceTypes`` entry."""
    name = info.get("InstanceType", "")
    cap = {
        L.RESOURCE_CPU: _vcpus(info) * 1000,
        L.RESOURCE_MEMORY: memory_capacity(info, settings.vm_memory_overhead_percent),
        L.RESOURCE_EPHEMERAL_STORAGE: ephemeral_storage(info, settings),
        L.RESOURCE_PODS: max_pods(info, settings),
    }
    lim = vpc_limits(name)
    extra = {
        L.RESOURCE_POD_ENI: int(lim.get("branch_interfaces") or 0) if lim and lim.get("is_trunking_compatible") else 0,
        L.RESOURCE_NVIDIA_GPU: _gpu_count(info, "NVIDIA"),
        L.RESOURCE_AMD_GPU: _gpu_count(info, "AMD"),
        L.RESOURCE_HABANA_GAUDI: _gpu_count(info, "Habana"),
        L.RESOURCE_EFA: _efa_count(info),
    }
    devices = (info.get("NeuronInfo") or {}).get("NeuronDevices") or []
    if devices:
        extra[L.RESOURCE_NEURON] = sum(int(d.get("Count") or 0) for d in devices)
        extra[L.RESOURCE_NEURON_CORE] = int(devices[0].get("Count") or 0) * int((devices[0].get("CoreInfo") or {}).get("Count") or 0)
    if settings.traits.windows:
        extra[RESOURCE_PRIVATE_IPV4] = int(lim["ipv4_per_interface"]) - 1 if lim else 0
    cap.update({k: v for k, v in extra.items() if v > 0})
    return cap


# --- overhead ------------------------------------------------------------------------

_CPU_TIERS = ((0, 1000, 0.06), (1000, 2000, 0.01), (2000, 4000, 0.005), (4000, 1 << 31, 0.0025))


def kube_reserved_cpu(cpu_millis: int) -> int:
    """Kube-reserved CPU in millicores: 6 % / 1 % / 0.5 % / 0.25 % tiers, each truncated like Karpenter."""
    total = 0
    for start, end, pct in _CPU_TIERS:
        if cpu_millis >= start:
            r = float(end - start) if cpu_millis >= end else float(cpu_millis - start)
            total += int(r * pct)
    return total


def kube_reserved(cpu_millis: int, pods: int, overrides: Mapping[str, Any] | None = None) -> dict[str, int]:
    """Default kube-reserved (cpu tiers, memory 11*pods+255 MiB, 1Gi ephemeral) with ``overrides`` replacing per resource."""
    res = {
        L.RESOURCE_CPU: kube_reserved_cpu(cpu_millis),
        L.RESOURCE_MEMORY: (11 * int(pods) + 255) * MIB,
        L.RESOURCE_EPHEMERAL_STORAGE: GIB,
    }
    for k, v in (overrides or {}).items():
        if k == "pid":
            continue
        res[k] = _q(f"spec.kubelet.kubeReserved.{k}", k, v)
    return res


def system_reserved(values: Mapping[str, Any] | None) -> dict[str, int]:
    return {k: _q(f"spec.kubelet.systemReserved.{k}", k, v) for k, v in (values or {}).items() if k != "pid"}


def _eviction_signal(where: str, capacity: int, value: Any, resource: str) -> int:
    if isinstance(value, str) and value.strip().endswith("%"):
        try:
            p = float(value.strip()[:-1])
        except ValueError:
            raise ValueError(f"{where}: invalid percentage {value!r}") from None
        if p == 100:
            p = 0.0  # 100% disables the threshold
        return math.ceil(float(capacity) / 100 * p)
    return _q(where, resource, value)


def eviction_threshold(memory: int, storage: int, eviction_hard: Mapping[str, Any] | None = None) -> dict[str, int]:
    """Hard eviction thresholds: memory 100Mi, ephemeral 10 % (rounded up), or ``evictionHard``."""
    res = {
        L.RESOURCE_MEMORY: 100 * MIB,
        L.RESOURCE_EPHEMERAL_STORAGE: math.ceil(float(storage) / 100 * 10),
    }
    hard = eviction_hard or {}
    if "memory.available" in hard:
        res[L.RESOURCE_MEMORY] = _eviction_signal("spec.kubelet.evictionHard.memory.available", memory, hard["memory.available"], "memory")
    if "nodefs.available" in hard:
        res[L.RESOURCE_EPHEMERAL_STORAGE] = _eviction_signal(
            "spec.kubelet.evictionHard.nodefs.available", storage, hard["nodefs.available"], "ephemeral-storage"
        )
    return res


def compute_overhead(info: Mapping, capacity: Mapping[str, int], settings: NodeSettings) -> dict[str, int]:
    """kube-reserved + system-reserved + eviction threshold, per resource."""
    traits = settings.traits
    pods = capacity[L.RESOURCE_PODS]
    if traits.eni_limited_memory_overhead:
        eni = eni_limited_pods(info, 0)
        if eni is not None:
            pods = eni
    parts = (
        kube_reserved(capacity[L.RESOURCE_CPU], pods, settings.kube_reserved),
        system_reserved(settings.system_reserved),
        eviction_threshold(capacity[L.RESOURCE_MEMORY], capacity[L.RESOURCE_EPHEMERAL_STORAGE], settings.eviction_hard),
    )
    total: dict[str, int] = {}
    for part in parts:
        for k, v in part.items():
            total[k] = total.get(k, 0) + v
    return total
