"""Server-side printing: the ``meta.k8s.io/v1`` ``Table`` that ``kubectl get`` asks for.

kubectl sends ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io,...``; the answer has every column (kubectl
hides the ``priority: 1`` ones unless ``-o wide``) and, per row, the object as ``PartialObjectMetadata`` (or the
whole object with ``includeObject=Object``, none with ``includeObject=None``).

Columns, as the real API server's printers: pods ``NAME READY STATUS RESTARTS AGE`` (+ wide ``IP NODE NOMINATED NODE
READINESS GATES``), nodes ``NAME STATUS ROLES AGE VERSION`` (+ wide ``INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION
CONTAINER-RUNTIME``), namespaces ``NAME STATUS AGE``, every other resource ``NAME AGE``.  Ages are on the server's
clock (the simulator's virtual clock when simulating).  One stand-in: the simulated kubelet writes no
``containerStatuses``, so a pod with none counts its containers ready when its ``Ready`` condition is True.
"""

from __future__ import annotations

from typing import Callable

from ...api.times import to_epoch
from .resources import ResourceType

Row = list[str | int]


def table_version(accept: str | None) -> str | None:
    """``v1`` or ``v1beta1`` when the Accept header asks for a meta.k8s.io Table (first one asked), else None."""
    for part in (accept or "").split(","):
        params = {}
        for kv in part.split(";")[1:]:
            k, _, v = kv.strip().partition("=")
            params[k] = v
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io" and params.get("v") in ("v1", "v1beta1"):
            return params["v"]
    return None


def human_duration(seconds: float) -> str:
    """A duration as kubectl's AGE column writes it (``5m``, ``3h10m``, ``2d4h``, ...)."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def _age(obj: dict, now: float) -> str:
    created = to_epoch((obj.get("metadata") or {}).get("creationTimestamp"))
    return "<unknown>" if created is None else human_duration(now - created)


def _col(name: str, description: str, priority: int = 0, fmt: str = "", type_: str = "string") -> dict:
    return {"name": name, "type": type_, "format": fmt, "description": description, "priority": priority}


_NAME = _col("Name", "Name must be unique within a namespace. More info: "
                     "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names", fmt="name")
_AGE = _col("Age", "CreationTimestamp is a timestamp representing the server time when this object was created.")


def _pod_row(pod: dict, now: float) -> Row:
    spec, status, meta = pod.get("spec") or {}, pod.get("status") or {}, pod.get("metadata") or {}
    containers = spec.get("containers") or []
    statuses = status.get("containerStatuses") or []
    reason = status.get("reason") or status.get("phase") or ""
    restarts = 0
    ready = 0
    has_running = False
    for cs in reversed(statuses):
        restarts += int(cs.get("restartCount") or 0)
        state = cs.get("state") or {}
        waiting, terminated = state.get("waiting"), state.get("terminated")
        if waiting and waiting.get("reason"):
            reason = waiting["reason"]
        elif terminated and terminated.get("reason"):
            reason = terminated["reason"]
        elif terminated:
            reason = f"Signal:{terminated['signal']}" if terminated.get("signal") else f"ExitCode:{terminated.get('exitCode', 0)}"
        elif cs.get("ready") and state.get("running") is not None:
            has_running = True
            ready += 1
    pod_ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    if not statuses and pod_ready:   # the simulated kubelet's stand-in (module docstring)
        ready = len(containers)
    if reason == "Completed" and has_running:
        reason = "Running" if pod_ready else "NotReady"
    if meta.get("deletionTimestamp"):
        reason = "Unknown" if status.get("reason") == "NodeLost" else (
            reason if status.get("phase") in ("Succeeded", "Failed") else "Terminating")
    ips = status.get("podIPs") or []
    ip = (ips[0] or {}).get("ip") if ips else status.get("podIP")
    gates = spec.get("readinessGates") or []
    conds = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    gates_cell = f"{sum(1 for g in gates if conds.get(g.get('conditionType')) == 'True')}/{len(gates)}" if gates else "<none>"
    return [meta.get("name", ""), f"{ready}/{len(containers)}", reason, str(restarts), _age(pod, now),
            ip or "<none>", spec.get("nodeName") or "<none>", status.get("nominatedNodeName") or "<none>", gates_cell]


_POD_COLUMNS = [
    _NAME,
    _col("Ready", "The aggregate readiness state of this pod for accepting traffic."),
    _col("Status", "The aggregate status of the containers in this pod."),
    _col("Restarts", "The number of times the containers in this pod have been restarted and when the last container "
                     "in this pod has restarted."),
    _AGE,
    _col("IP", "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.", 1),
    _col("Node", "NodeName is a request to schedule this pod onto a specific node.", 1),
    _col("Nominated Node", "nominatedNodeName is set only when this pod preempts other pods on the node.", 1),
    _col("Readiness Gates", "If specified, all readiness gates will be evaluated for pod readiness.", 1),
]


def _node_row(node: dict, now: float) -> Row:
    spec, status, meta = node.get("spec") or {}, node.get("status") or {}, node.get("metadata") or {}
    states = [("Ready" if c.get("status") == "True" else "NotReady")
              for c in status.get("conditions") or [] if c.get("type") == "Ready"][:1] or ["Unknown"]
    if spec.get("unschedulable"):
        states.append("SchedulingDisabled")
    roles: set[str] = set()
    for k, v in (meta.get("labels") or {}).items():
        if k.startswith("node-role.kubernetes.io/") and k.split("/", 1)[1]:
            roles.add(k.split("/", 1)[1])
        elif k == "kubernetes.io/role" and v:
            roles.add(v)
    info = status.get("nodeInfo") or {}
    addresses = status.get("addresses") or []

    def address(kind: str) -> str:
        return next((a.get("address") for a in addresses if a.get("type") == kind and a.get("address")), None) or "<none>"

    return [meta.get("name", ""), ",".join(states), ",".join(sorted(roles)) or "<none>", _age(node, now),
            info.get("kubeletVersion", ""), address("InternalIP"), address("ExternalIP"),
            info.get("osImage") or "<unknown>", info.get("kernelVersion") or "<unknown>",
            info.get("containerRuntimeVersion") or "<unknown>"]


_NODE_COLUMNS = [
    _NAME,
    _col("Status", "The status of the node"),
    _col("Roles", "The roles of the node"),
    _AGE,
    _col("Version", "Kubelet Version reported by the node."),
    _col("Internal-IP", "List of addresses reachable to the node. Queried from cloud provider, if available.", 1),
    _col("External-IP", "List of addresses reachable to the node. Queried from cloud provider, if available.", 1),
    _col("OS-Image", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).", 1),
    _col("Kernel-Version", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).", 1),
    _col("Container-Runtime", "ContainerRuntime Version reported by the node through runtime remote API "
                              "(e.g. containerd://1.4.2).", 1),
]

_NAMESPACE_COLUMNS = [_NAME, _col("Status", "The status of the namespace"), _AGE]


def _namespace_row(ns: dict, now: float) -> Row:
    return [ns["metadata"].get("name", ""), (ns.get("status") or {}).get("phase", ""), _age(ns, now)]


def _default_row(obj: dict, now: float) -> Row:
    return [obj["metadata"].get("name", ""), _age(obj, now)]


_PRINTERS: dict[str, tuple[list[dict], Callable[[dict, float], Row]]] = {
    "pods": (_POD_COLUMNS, _pod_row),
    "nodes": (_NODE_COLUMNS, _node_row),
    "namespaces": (_NAMESPACE_COLUMNS, _namespace_row),
}


def _row_object(rt: ResourceType, obj: dict, include: str) -> dict | None:
    if include == "None":
        return None
    if include == "Object":
        return {"kind": rt.kind, "apiVersion": rt.api_version, **{k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}}
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata") or {}}


def table(rt: ResourceType, objects: list[dict], now: float, version: str = "v1", include: str = "Metadata",
          metadata: dict | None = None, columns: bool = True) -> dict:
    """A ``meta.k8s.io/{version}`` Table of ``objects`` (``columns=False``: without columnDefinitions, as the
    watch events after the first)."""
    cols, printer = _PRINTERS.get(rt.plural, ([_NAME, _AGE], _default_row))
    rows = []
    for obj in objects:
        row: dict = {"cells": printer(obj, now)}
        ro = _row_object(rt, obj, include)
        if ro is not None:
            row["object"] = ro
        rows.append(row)
    return {"kind": "Table", "apiVersion": f"meta.k8s.io/{version}", "metadata": metadata or {},
            "columnDefinitions": [dict(c) for c in cols] if columns else [], "rows": rows}
