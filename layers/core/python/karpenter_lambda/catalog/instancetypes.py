"""Instance types from raw EC2 descriptions: labels, capacity, overhead, offerings. Pure.

Input is what boto3 returns: ``describe_instance_types()["InstanceTypes"]`` entries and
``describe_instance_type_offerings(LocationType="availability-zone")["InstanceTypeOfferings"]``
entries, plus a :class:`~karpenter_lambda.catalog.pricing.PriceBook`.

Skipped types (as Karpenter, which asks EC2 only for ``hvm`` types with ``x86_64``/``arm64``):
no ``hvm`` virtualisation; no x86_64/arm64 architecture (i386-only, ``*_mac``); arm64 under a
Windows AMI family (Karpenter gives them an empty OS requirement, so nothing can use them).
We also drop a type that ends up with **no offering at all** (not offered in any allowed zone):
Karpenter keeps it with unavailable offerings, which the scheduler never picks, so the result is the
same and the list is shorter.  Bare-metal types are kept (the scheduler treats them as exotic).  A type
incompatible with the EC2NodeClass (Karpenter's ``compatibility.IsCompatibleWithNodeClass``, see
:func:`incompatibility`) is dropped too: Karpenter marks its offerings unavailable.

Two kinds of type are left out of the list but **held** (``InstanceTypes.held``), because a NodeOverlay may
still make them usable (``catalog/overlay.py``): one with no price for any of its offerings (an overlay's
``price`` gives them one, Karpenter's ``GetOverlayPrice``), and one with an allocatable resource below zero
(Karpenter keeps it, but its ``resources.Fits`` fits nothing on it; an overlay's hugepages floor memory at 0):
Windows t2/t3/t3a nano and micro and t1.micro; Bottlerocket with ``maxPods: 110`` those and t4g nano and micro.
Pass ``skipped={}`` (or read ``InstanceTypes.skipped``) to learn why each type was left out.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from ..api import labels as L
from .allocatable import NodeSettings, compute_capacity, compute_overhead, volume_limits
from .pricing import PriceBook
from .reservations import CapacityReservation, capacity_type_unavailable, reserved_offerings
from .types import InstanceType, InstanceTypes, Offering

__all__ = ["build_instance_types", "compute_labels", "zones_by_type", "KUBE_ARCH", "label_values_of_names", "incompatibility"]

_SCHEME = re.compile(r"(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.")
KUBE_ARCH = {"x86_64": L.ARCH_AMD64, "arm64": L.ARCH_ARM64}
_CAPACITY_TYPES = (L.CAPACITY_TYPE_ON_DEMAND, L.CAPACITY_TYPE_SPOT)


def _kabob(s: str) -> str:
    return s.replace(" ", "-").lower()


def _arch(info: Mapping) -> str | None:
    for a in (info.get("ProcessorInfo") or {}).get("SupportedArchitectures") or []:
        if a in KUBE_ARCH:
            return KUBE_ARCH[a]
    return None


def _network_bandwidth_mbps(info: Mapping) -> int | None:
    cards = (info.get("NetworkInfo") or {}).get("NetworkCards") or []
    vals = [c.get("BaselineBandwidthInGbps") for c in cards if c.get("BaselineBandwidthInGbps") is not None]
    if not vals:
        return None
    return int(round(sum(float(v) for v in vals) * 1000))


def label_values_of_names(names: Iterable[str]) -> dict[str, frozenset[str]]:
    """The values of the labels an instance type's name gives (type, family, size, category), over ``names``:
    what ``validate`` checks a pod's node selector against (``api.pod_hints``)."""
    out: dict[str, set] = {L.INSTANCE_TYPE: set(), L.INSTANCE_FAMILY: set(), L.INSTANCE_SIZE: set(),
                           L.INSTANCE_CATEGORY: set()}
    for name in names:
        out[L.INSTANCE_TYPE].add(name)
        parts = name.split(".")
        if len(parts) == 2:
            out[L.INSTANCE_FAMILY].add(parts[0])
            out[L.INSTANCE_SIZE].add(parts[1])
        m = _SCHEME.match(name)
        if m:
            out[L.INSTANCE_CATEGORY].add(m.group(1))
    return {k: frozenset(v) for k, v in out.items()}


def compute_labels(info: Mapping, region: str, arch: str, os_name: str = "linux", windows_build: str | None = None) -> dict[str, str]:
    """Every single-valued well-known label of one instance type (zone / capacity type come from offerings)."""
    name = info["InstanceType"]
    labels: dict[str, str] = {
        L.INSTANCE_TYPE: name,
        L.ARCH: arch,
        L.OS: os_name,
        L.REGION: region,
        L.INSTANCE_CPU: str(int((info.get("VCpuInfo") or {}).get("DefaultVCpus") or 0)),
        L.INSTANCE_MEMORY: str(int((info.get("MemoryInfo") or {}).get("SizeInMiB") or 0)),
        L.INSTANCE_HYPERVISOR: str(info.get("Hypervisor") or ""),
        L.INSTANCE_ENCRYPTION_IN_TRANSIT: "true" if (info.get("NetworkInfo") or {}).get("EncryptionInTransitSupported") else "false",
    }
    m = _SCHEME.match(name)
    if m:
        labels[L.INSTANCE_CATEGORY] = m.group(1)
        labels[L.INSTANCE_GENERATION] = m.group(3)
    parts = name.split(".")
    if len(parts) == 2:
        labels[L.INSTANCE_FAMILY] = parts[0]
        labels[L.INSTANCE_SIZE] = parts[1]
    labels[L.INSTANCE_CAPABILITY_FLEX] = "true" if "-flex" in parts[0] else "false"
    # Karpenter offers default and dedicated tenancy; karpenter-lambda launches default tenancy only
    labels[L.INSTANCE_TENANCY] = L.TENANCY_DEFAULT
    if info.get("NitroEnclavesSupport") is not None:   # Karpenter's nitro-sandbox label (Nitro Enclaves support)
        labels[L.NITRO_SANDBOX] = "true" if info["NitroEnclavesSupport"] == "supported" else "false"
    storage = info.get("InstanceStorageInfo")
    if storage and storage.get("NvmeSupport") != "unsupported" and storage.get("TotalSizeInGB") is not None:
        labels[L.INSTANCE_LOCAL_NVME] = str(int(storage["TotalSizeInGB"]))
    bw = _network_bandwidth_mbps(info)
    if bw is not None:
        labels[L.INSTANCE_NETWORK_BANDWIDTH] = str(bw)
    gpus = (info.get("GpuInfo") or {}).get("Gpus") or []
    if len(gpus) == 1:
        g = gpus[0]
        labels[L.INSTANCE_GPU_NAME] = _kabob(str(g.get("Name") or ""))
        labels[L.INSTANCE_GPU_MANUFACTURER] = _kabob(str(g.get("Manufacturer") or ""))
        labels[L.INSTANCE_GPU_COUNT] = str(int(g.get("Count") or 0))
        labels[L.INSTANCE_GPU_MEMORY] = str(int((g.get("MemoryInfo") or {}).get("SizeInMiB") or 0))
    neuron = (info.get("NeuronInfo") or {}).get("NeuronDevices") or []
    accels = (info.get("InferenceAcceleratorInfo") or {}).get("Accelerators") or []
    if not info.get("NeuronInfo") and len(accels) == 1:
        a = accels[0]
        labels[L.INSTANCE_ACCELERATOR_NAME] = _kabob(str(a.get("Name") or ""))
        labels[L.INSTANCE_ACCELERATOR_MANUFACTURER] = _kabob(str(a.get("Manufacturer") or ""))
        labels[L.INSTANCE_ACCELERATOR_COUNT] = str(int(a.get("Count") or 0))
    if len(neuron) == 1:
        d = neuron[0]
        labels[L.INSTANCE_ACCELERATOR_NAME] = _kabob(str(d.get("Name") or ""))
        labels[L.INSTANCE_ACCELERATOR_MANUFACTURER] = "aws"
        labels[L.INSTANCE_ACCELERATOR_COUNT] = str(int(d.get("Count") or 0))
    proc = info.get("ProcessorInfo")
    if proc is not None:
        if proc.get("Manufacturer"):
            labels[L.INSTANCE_CPU_MANUFACTURER] = _kabob(str(proc["Manufacturer"]))
        # as Karpenter: "0" when the description gives no sustained clock speed (c1, m1, m2, t1.micro)
        labels[L.INSTANCE_CPU_SUSTAINED_CLOCK] = str(int(round(float(proc.get("SustainedClockSpeedInGhz") or 0) * 1000)))
    ebs = info.get("EbsInfo") or {}
    if ebs.get("EbsOptimizedSupport") == "default" and (ebs.get("EbsOptimizedInfo") or {}).get("MaximumBandwidthInMbps") is not None:
        labels[L.INSTANCE_EBS_BANDWIDTH] = str(int(ebs["EbsOptimizedInfo"]["MaximumBandwidthInMbps"]))
    if windows_build:
        labels[L.WINDOWS_BUILD] = windows_build
    return labels


def incompatibility(info: Mapping, ami_family: str, placement_group_strategy: str | None = None) -> str | None:
    """Why a type cannot serve an EC2NodeClass, or None: Karpenter's ``compatibility.IsCompatibleWithNodeClass``
    (``pkg/providers/instancetype/compatibility/compatibility.go``, v1.14.1 and head).

    * ``amiFamilyCheck``: ``a1.*`` types are not supported by AL2023
      (https://docs.aws.amazon.com/linux/al2023/ug/system-requirements.html);
    * ``placementGroupCheck``: with a placement group, the group's strategy (cluster, partition, spread) must be in
      the type's ``PlacementGroupInfo.SupportedStrategies`` (t3/t3a, ``*-flex`` and older types lack ``cluster``);
      a description without ``PlacementGroupInfo`` supports none.

    Karpenter's other checks (``networkInterfaces``, ``cpuOptions.nestedVirtualization``, ``connectionTracking``)
    pass for every type when those fields are unset, and ``validate`` refuses them here.
    """
    name = str(info.get("InstanceType") or "")
    if ami_family == "AL2023" and name.startswith("a1."):
        return "incompatible with the EC2NodeClass: a1 types are not supported by AL2023"
    if placement_group_strategy:
        strategies = (info.get("PlacementGroupInfo") or {}).get("SupportedStrategies") or ()
        if placement_group_strategy not in strategies:
            return (f"incompatible with the EC2NodeClass: placement group strategy {placement_group_strategy!r} "
                    f"not supported (supported: {', '.join(strategies) or 'none'})")
    return None


def zones_by_type(offerings: Iterable[Mapping]) -> dict[str, set[str]]:
    """``{instance_type: {zone, ...}}`` from DescribeInstanceTypeOfferings (availability-zone) entries."""
    out: dict[str, set[str]] = {}
    for i, o in enumerate(offerings):
        if not isinstance(o, Mapping):
            raise ValueError(f"offerings[{i}]: expected an InstanceTypeOfferings entry (dict), got {type(o).__name__}")
        name, zone = o.get("InstanceType"), o.get("Location")
        if not name or not zone:
            raise ValueError(f"offerings[{i}]: InstanceType and Location are required, got {dict(o)!r}")
        lt = o.get("LocationType")
        if lt is not None and lt != "availability-zone":
            raise ValueError(f"offerings[{i}].LocationType: expected 'availability-zone', got {lt!r}")
        out.setdefault(name, set()).add(zone)
    return out


def build_instance_types(
    raw_types: list[dict],
    offerings: list[dict],
    prices: PriceBook,
    region: str,
    nodeclass: Any = None,
    zones: list[str] | None = None,
    unavailable: set[tuple[str, str, str]] | frozenset = frozenset(),
    *,
    zone_ids: Mapping[str, str] | None = None,
    settings: NodeSettings | None = None,
    skipped: dict[str, str] | None = None,
    estimated_available: bool = True,
    reservations: Iterable[CapacityReservation] = (),
    placement_group_id: str | None = None,
    placement_group_strategy: str | None = None,
) -> InstanceTypes:
    """Build the catalog, sorted by name (an :class:`~.types.InstanceTypes`: a list, plus the types held back and
    why each type was left out).

    ``nodeclass`` (an ``EC2NodeClass``, its manifest dict, or None for the defaults: AL2023, 20Gi
    root volume, no kubelet overrides) changes capacity and overhead; ``settings`` overrides it.
    ``zones`` restricts offerings to those zones (e.g. the EC2NodeClass's subnet zones).
    ``unavailable`` holds ``(instance_type, zone, capacity_type)`` marked unavailable: those
    offerings are kept with ``available=False``.  ``zone_ids`` maps zone name -> zone id for
    ``Offering.zone_id``.  An offering whose price is an estimate (no real spot price known) has
    ``price_estimated=True``; ``estimated_available=False`` (the launch path, as Karpenter: no price, no
    launch) also keeps it with ``available=False``, while ``plan`` and the simulator leave it available.
    ``reservations`` (the EC2NodeClass's resolved capacity reservations) add one ``reserved`` offering per
    reservation of the type in one of its zones (:func:`~.reservations.reserved_offerings`: near-zero price,
    available while the reservation has room).  ``placement_group_id`` (the resolved ``placementGroupSelector``)
    becomes every type's ``karpenter.k8s.aws/placement-group-id`` label; ``placement_group_strategy`` (that group's
    strategy) drops the types whose ``PlacementGroupInfo`` does not support it (:func:`incompatibility`, with the
    AMI family's a1 rule).
    """
    if not isinstance(prices, PriceBook):
        raise ValueError(f"prices: expected a PriceBook, got {type(prices).__name__}")
    if not isinstance(region, str) or not region:
        raise ValueError(f"region: must be a non-empty string, got {region!r}")
    if not isinstance(raw_types, (list, tuple)):
        raise ValueError(f"raw_types: expected a list of DescribeInstanceTypes entries, got {type(raw_types).__name__}")
    if settings is None:
        settings = NodeSettings.from_nodeclass(nodeclass)
    traits = settings.traits
    allowed = None if zones is None else set(zones)
    by_type = zones_by_type(offerings)
    unavailable = frozenset(unavailable or ())
    # a whole capacity type marked unavailable (spot without its service-linked role: ``capacity_type_key``)
    gone_types = {ct for ct in (L.CAPACITY_TYPE_SPOT, L.CAPACITY_TYPE_ON_DEMAND) if capacity_type_unavailable(ct, unavailable)}
    zone_ids = zone_ids or {}
    os_name = "windows" if traits.windows else "linux"
    reservations = list(reservations or ())
    reserved_types = {r.instance_type for r in reservations}
    result: list[InstanceType] = []
    held: list[InstanceType] = []
    reasons: dict[str, str] = {}
    seen: set[str] = set()

    def skip(name: str, why: str) -> None:
        reasons[name] = why
        if skipped is not None:
            skipped[name] = why

    for i, info in enumerate(raw_types):
        if not isinstance(info, Mapping) or not info.get("InstanceType"):
            raise ValueError(f"raw_types[{i}]: InstanceType is required")
        name = info["InstanceType"]
        if name in seen:
            continue
        seen.add(name)
        virt = info.get("SupportedVirtualizationTypes")
        if virt is not None and "hvm" not in virt:
            skip(name, "no hvm virtualization")
            continue
        arch = _arch(info)
        if arch is None:
            skip(name, f"unsupported architecture {(info.get('ProcessorInfo') or {}).get('SupportedArchitectures')}")
            continue
        if traits.windows and arch != L.ARCH_AMD64:
            skip(name, f"{traits.name} needs amd64")
            continue
        why = incompatibility(info, traits.name, placement_group_strategy)
        if why is not None:
            skip(name, why)
            continue
        usage = set(info.get("SupportedUsageClasses") or ())
        type_zones = by_type.get(name, set())
        if allowed is not None:
            type_zones = type_zones & allowed
        offs: list[Offering] = []
        unpriced: list[Offering] = []
        for zone in sorted(type_zones):
            for ct in _CAPACITY_TYPES:
                if ct not in usage:
                    continue
                available = (name, zone, ct) not in unavailable and ct not in gone_types
                hit = prices.on_demand(name) if ct == L.CAPACITY_TYPE_ON_DEMAND else prices.spot(name, zone)
                if hit is None:   # Karpenter: unavailable for want of a price, unless a NodeOverlay prices it
                    unpriced.append(Offering(zone=zone, capacity_type=ct, price=0.0, available=available,
                                             zone_id=zone_ids.get(zone)))
                    continue
                offs.append(
                    Offering(
                        zone=zone,
                        capacity_type=ct,
                        price=hit[0],
                        available=available and (estimated_available or not hit.estimated),
                        zone_id=zone_ids.get(zone),
                        price_source=hit.source,
                        price_estimated=hit.estimated,
                    )
                )
        if name in reserved_types:
            od = prices.on_demand(name)
            offs.extend(reserved_offerings(name, reservations, od.price if od is not None else None, zones=type_zones,
                                           unavailable=unavailable, zone_ids=zone_ids))
        if not offs and not unpriced:
            if type_zones:
                skip(name, "no offering: no price known")
            else:
                skip(name, "no offering: not offered in any zone" if allowed is None else "no offering: not offered in the allowed zones")
            continue
        try:
            capacity = compute_capacity(info, settings)
            overhead = compute_overhead(info, capacity, settings)
        except (KeyError, TypeError) as e:
            raise ValueError(f"raw_types[{i}] ({name}): malformed description: missing {e}") from None
        labels = compute_labels(info, region, arch, os_name, traits.windows_build)
        if placement_group_id:
            labels[L.PLACEMENT_GROUP_ID] = placement_group_id
        it = InstanceType(name=name, labels=labels, capacity=capacity, overhead=overhead, offerings=offs,
                          volume_limits=volume_limits(info, settings), unpriced=tuple(unpriced))
        why = "no offering: no price known" if not offs else it.unfit_reason()
        if why is not None:   # Karpenter keeps it and never chooses it; a NodeOverlay may still change that
            skip(name, why)
            held.append(it)
            continue
        result.append(it)
    result.sort(key=lambda it: it.name)
    return InstanceTypes(result, held=held, skipped=reasons)
