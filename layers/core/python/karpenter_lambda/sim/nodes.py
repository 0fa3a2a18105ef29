"""KWOK-like node helpers for the simulated cluster.

``make_node`` builds the Node a kubelet would register for an EC2 instance;
``set_node_ready`` / ``remove_startup_taints`` do what the kubelet and the
node's daemons do later.  Functions that change a node take the simulator's
``KubeAPIServer`` or its ``ObjectStore`` (in-process, no HTTP).

Resource values may be Kubernetes quantities (``"2"``, ``"8Gi"``) or ints in
the project's resource-list units (cpu in millicores, the rest base units).
"""

from __future__ import annotations

from typing import Any, Iterable

from karpenter_lambda.api.conditions import make_condition, set_condition
from karpenter_lambda.api.kube import node_ready
from karpenter_lambda.api.labels import UNREGISTERED_TAINT_KEY
from karpenter_lambda.api.quantity import format_resource, parse_quantity
from karpenter_lambda.api.times import to_epoch

__all__ = [
    "NOT_READY_TAINT",
    "UNREGISTERED_TAINT",
    "UNREACHABLE_TAINT",
    "make_node",
    "join_node",
    "set_node_ready",
    "remove_startup_taints",
    "node_is_ready",
]

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
            "nodeInfo": {"architecture": arch, "operatingSystem": os, "kubeletVersion": "v1.31.0"},
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


def join_node(target: Any, node: dict) -> dict:
    """Register ``node`` with the cluster (create it); returns the stored Node."""
    store = _store(target)
    node.setdefault("status", {})
    now = _now(store)
    for c in node["status"].get("conditions") or []:
        if c.get("lastTransitionTime", "1970-01-01T00:00:00Z").startswith("1970"):
            c["lastTransitionTime"] = c["lastHeartbeatTime"] = now
    return store.create("nodes", node)


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
