"""KWOK-like node helpers for the simulated cluster.

``make_node`` builds the Node a kubelet would register for an EC2 instance;
``set_node_ready`` / ``remove_startup_taints`` do what the kubelet and the
node's daemons do later.  Functions that change a node take the simulator's
``KubeAPIServer`` or its ``ObjectStore`` (in-process, no HTTP).

Resource values may be Kubernetes quantities (``"2"``, ``"8Gi"``) or ints in
the project's resource-list units (cpu in millicores, the rest base units).

Storage: ``join_node(..., csi={driver: count})`` also does what the node's CSI
driver registration does: the Node gets the driver's zone label
(``topology.ebs.csi.aws.com/zone`` for the EBS CSI driver) and its CSINode is
created (owned by the Node, so the API server deletes it with the Node) with
``drivers[].allocatable.count`` = the volumes the node may attach (omitted
when unknown).  :func:`ebs_attach_limit` is that count for an instance type,
from the catalog the simulator launches from and the node's EC2NodeClass.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Iterable

from karpenter_lambda.api.conditions import make_condition, set_condition
from karpenter_lambda.api.kube import node_ready
from karpenter_lambda.api.labels import EBS_CSI_DRIVER, UNREGISTERED_TAINT_KEY
from karpenter_lambda.api.quantity import format_resource, parse_quantity
from karpenter_lambda.api.times import to_epoch

__all__ = [
    "NOT_READY_TAINT",
    "UNREGISTERED_TAINT",
    "UNREACHABLE_TAINT",
    "make_node",
    "join_node",
    "set_node_ready",
    "set_node_condition",
    "remove_startup_taints",
    "node_is_ready",
    "make_csinode",
    "ebs_attach_limit",
    "csi_drivers",
    "instance_type_info",
    "EBS_ZONE_KEY",
]

EBS_ZONE_KEY = "topology.ebs.csi.aws.com/zone"     # the EBS CSI node plugin's topology key (a Node label)
_DRIVER_ZONE_KEYS = {EBS_CSI_DRIVER: EBS_ZONE_KEY}

NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
UNREACHABLE_TAINT = {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}
UNREGISTERED_TAINT = {"key": UNREGISTERED_TAINT_KEY, "effect": "NoExecute"}   # a kubelet registers with it (userData)


def _store(target: Any):
    return getattr(target, "store", target)


def _quantities(resources: dict | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in (resources or {}).items():
        if isinstance(v, bool):
            raise ValueError(f"resource {k}: {v!r} is not a quantity")
        if isinstance(v, int):
            out[k] = format_resource(k, v)
        else:
            parse_quantity(v)  # raises QuantityError naming the value
            out[k] = str(v)
    return out


def _now(store) -> str:
    return store.now_str() if hasattr(store, "now_str") else "1970-01-01T00:00:00Z"


def make_node(
    name: str,
    provider_id: str,
    instance_type: str,
    zone: str,
    capacity: dict,
    allocatable: dict | None = None,
    labels: dict | None = None,
    taints: Iterable[dict] | None = None,
    ready: bool = False,
    *,
    arch: str = "amd64",
    os: str = "linux",
    annotations: dict | None = None,
    now: str = "1970-01-01T00:00:00Z",
) -> dict:
    """A Node dict as a freshly registered kubelet reports it.

    Well-known labels (hostname, instance type, zone, region, arch, os) are
    set, then ``labels`` on top.  A node that is not ``ready`` carries the
    ``node.kubernetes.io/not-ready:NoSchedule`` taint (as the node lifecycle
    controller adds it) and ``Ready=False``.
    """
    if not name:
        raise ValueError("make_node: name is required")
    if not zone:
        raise ValueError("make_node: zone is required")
    region = zone[:-1] if zone[-1].isalpha() else zone
    lbls = {
        "kubernetes.io/hostname": name,
        "node.kubernetes.io/instance-type": instance_type,
        "topology.kubernetes.io/zone": zone,
        "topology.kubernetes.io/region": region,
        "kubernetes.io/arch": arch,
        "kubernetes.io/os": os,
    }
    lbls.update(labels or {})
    ts = [dict(t) for t in (taints or [])]
    for t in ts:
        if not t.get("key") or t.get("effect") not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise ValueError(f"make_node: bad taint {t!r}: needs key and effect NoSchedule|PreferNoSchedule|NoExecute")
    if not ready and not any(t["key"] == NOT_READY_TAINT["key"] for t in ts):
        ts.append(dict(NOT_READY_TAINT))
    cap = _quantities(capacity)
    cap.setdefault("pods", "110")  # the kubelet's default maxPods
    node: dict = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": lbls},
        "spec": {"providerID": provider_id},
        "status": {
            "capacity": cap,
            "allocatable": {"pods": cap["pods"], **_quantities(allocatable)} if allocatable is not None else dict(cap),
            "conditions": [_ready_condition(ready, now)],
            "nodeInfo": _node_info(provider_id, arch, os),
            "addresses": _addresses(name),
            "phase": "Running",
        },
    }
    if annotations:
        node["metadata"]["annotations"] = dict(annotations)
    if ts:
        node["spec"]["taints"] = ts
    return node


def _ready_condition(ready: bool, now: str) -> dict:
    return make_condition("Ready", ready, "KubeletReady" if ready else "KubeletNotReady",
                          "kubelet is posting ready status" if ready else "container runtime network not ready",
                          to_epoch(now), lastHeartbeatTime=now)


def join_node(target: Any, node: dict, csi: dict[str, int | None] | None = None) -> dict:
    """Register ``node`` with the cluster (create it); returns the stored Node.

    ``csi``: the CSI drivers running on the node, driver -> how many volumes it may attach (None: unknown); the
    Node gets each driver's topology label and a CSINode is created for it."""
    store = _store(target)
    node.setdefault("status", {})
    now = _now(store)
    for c in node["status"].get("conditions") or []:
        if c.get("lastTransitionTime", "1970-01-01T00:00:00Z").startswith("1970"):
            c["lastTransitionTime"] = c["lastHeartbeatTime"] = now
    labels = node.setdefault("metadata", {}).setdefault("labels", {})
    zone = labels.get("topology.kubernetes.io/zone")
    for driver in csi or {}:
        if driver in _DRIVER_ZONE_KEYS and zone:
            labels.setdefault(_DRIVER_ZONE_KEYS[driver], zone)
    created = store.create("nodes", node)
    if csi is not None:
        store.create("csinodes", make_csinode(created, csi))
    return created


def make_csinode(node: dict, drivers: dict[str, int | None]) -> dict:
    """The CSINode the kubelet registers for ``node`` (a stored Node: its uid makes it the owner): one entry per
    driver, with ``allocatable.count`` when the count is known, the node's instance id as ``nodeID`` and the
    driver's topology keys."""
    meta = node["metadata"]
    iid = ((node.get("spec") or {}).get("providerID") or "").rsplit("/", 1)[-1] or meta["name"]
    entries = []
    for driver, count in sorted(drivers.items()):
        entry: dict = {"name": driver, "nodeID": iid,
                       "topologyKeys": [k for k in (_DRIVER_ZONE_KEYS.get(driver),) if k]}
        if count is not None:
            entry["allocatable"] = {"count": int(count)}
        entries.append(entry)
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
            "metadata": {"name": meta["name"], "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": meta["name"], "uid": meta.get("uid", "")}]},
            "spec": {"drivers": entries}}


def csi_drivers(region: str, instance_type: str, nodeclass: Any = None) -> dict[str, int | None]:
    """The CSI drivers of a simulated node (``join_node``'s ``csi``): the EBS CSI driver, with the type's limit."""
    return {EBS_CSI_DRIVER: ebs_attach_limit(region, instance_type, nodeclass)}


_TYPE_INFO: dict[str, dict[str, dict]] = {}   # region -> instance type -> DescribeInstanceTypes entry


def instance_type_info(region: str, instance_type: str) -> dict | None:
    """The ``DescribeInstanceTypes`` entry of ``instance_type`` in the catalog the simulator launches from (moto's
    data); None when the type is unknown there."""
    from karpenter_lambda.adapters.aws.ec2_catalog import bundled_ec2_data

    infos = _TYPE_INFO.get(region)
    if infos is None:
        try:
            types = bundled_ec2_data(region)[0]
        except KeyError:      # a region moto does not serve: no type is known there
            types = []
        infos = _TYPE_INFO[region] = {t["InstanceType"]: t for t in types}
    return infos.get(instance_type)


def ebs_attach_limit(region: str, instance_type: str, nodeclass: Any = None) -> int | None:
    """How many EBS CSI volumes a node of ``instance_type`` attaches (``catalog.allocatable.volume_limits``: the
    type's ``MaximumEbsAttachments`` minus the ``nodeclass``'s block devices), from the catalog the simulator
    launches from (moto's data); None when the type is unknown there."""
    from karpenter_lambda.catalog.allocatable import NodeSettings, volume_limits

    info = instance_type_info(region, instance_type)
    if info is None:
        return None
    try:
        settings = NodeSettings.from_nodeclass(nodeclass)
    except ValueError:
        settings = NodeSettings()
    return volume_limits(info, settings).get(EBS_CSI_DRIVER)


node_is_ready = node_ready   # the one definition (api.kube), under the name this module has always offered


def set_node_ready(target: Any, name: str, ready: bool = True) -> dict:
    """Flip the node's Ready condition; removes (or adds) the not-ready taint."""
    store = _store(target)
    node = store.must_get("nodes", name)
    now = _now(store)
    conds = set_condition({"conditions": (node.get("status") or {}).get("conditions")}, _ready_condition(ready, now))["conditions"]
    taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") != NOT_READY_TAINT["key"]]
    if not ready:
        taints.append(dict(NOT_READY_TAINT))
    return store.patch("nodes", name, {"spec": {"taints": taints or None}, "status": {"conditions": conds}}, patch_type="merge")


def remove_startup_taints(target: Any, name: str, taints: Iterable[dict | str]) -> dict:
    """Remove the given taints (dicts matched on key+effect, or bare keys) from the node."""
    store = _store(target)
    node = store.must_get("nodes", name)
    drop_keys = set()
    drop_pairs = set()
    for t in taints:
        if isinstance(t, str):
            drop_keys.add(t)
        else:
            drop_pairs.add((t.get("key"), t.get("effect")))
    keep = [
        t
        for t in (node.get("spec") or {}).get("taints") or []
        if t.get("key") not in drop_keys and (t.get("key"), t.get("effect")) not in drop_pairs
    ]
    return store.patch("nodes", name, {"spec": {"taints": keep or None}}, patch_type="merge")


def set_node_condition(target: Any, name: str, type_: str, status: str, reason: str = "", message: str = "") -> dict:
    """Set one Node condition as its agent would (the kubelet, the node controller, the Node Monitoring Agent): the
    ``lastTransitionTime`` moves only when the status changes.  ``Ready`` not ``"True"`` also gets the node
    controller's taints (``not-ready`` for False, ``unreachable`` for Unknown; ``NoSchedule`` and ``NoExecute``),
    removed when Ready again."""
    store = _store(target)
    node = store.must_get("nodes", name)
    now = _now(store)
    old = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == type_), None)
    cond = make_condition(type_, status, reason or type_, message, to_epoch(now), lastHeartbeatTime=now)
    if old is not None and old.get("status") == status and old.get("lastTransitionTime"):
        cond["lastTransitionTime"] = old["lastTransitionTime"]
    conds = set_condition({"conditions": (node.get("status") or {}).get("conditions")}, cond)["conditions"]
    patch: dict = {"status": {"conditions": conds}}
    if type_ == "Ready":
        keys = {NOT_READY_TAINT["key"], UNREACHABLE_TAINT["key"]}
        taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") not in keys]
        if status != "True":
            base = NOT_READY_TAINT if status == "False" else UNREACHABLE_TAINT
            # TaintNodesByCondition's NoSchedule, and the NoExecute taint-based eviction acts on (sim/taint_eviction)
            taints += [dict(base), {**base, "effect": "NoExecute", "timeAdded": now}]
        patch["spec"] = {"taints": taints or None}
    return store.patch("nodes", name, patch, patch_type="merge")


def _node_info(provider_id: str, arch: str, os: str) -> dict:
    """Every field of a real kubelet's ``status.nodeInfo`` (the official client's model requires them all)."""
    ident = hashlib.sha256(provider_id.encode()).hexdigest()
    windows = os == "windows"
    return {"architecture": arch, "operatingSystem": os, "kubeletVersion": "v1.31.0", "kubeProxyVersion": "v1.31.0",
            "machineID": ident[:32], "systemUUID": ident[32:64], "bootID": ident[:32][::-1],
            "kernelVersion": "10.0.20348.2582" if windows else "6.1.119-129.201.amzn2023." + ("aarch64" if arch == "arm64" else "x86_64"),
            "osImage": "Windows Server 2022 Datacenter" if windows else "Amazon Linux 2023.6.20241212",
            "containerRuntimeVersion": "containerd://1.7.23"}


def _addresses(name: str) -> list[dict]:
    """InternalIP (from an EC2 private DNS name ``ip-10-0-0-8...``), Hostname and InternalDNS, as the kubelet reports."""
    out = []
    m = re.match(r"^ip-(\d+)-(\d+)-(\d+)-(\d+)\b", name)
    if m:
        out.append({"type": "InternalIP", "address": ".".join(m.groups())})
    return out + [{"type": "Hostname", "address": name}, {"type": "InternalDNS", "address": name}]
