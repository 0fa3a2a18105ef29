"""Pure helpers over Kubernetes objects as plain camelCase dicts (pods, nodes, provider ids).

Shared by the scheduler's input builder, the controllers and the disruption methods; no I/O here.
"""

from __future__ import annotations

from .quantity import QuantityError, parse_resource_list

PROVIDER_PREFIX = "aws:///"
CRITICAL_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})


def by_name(docs, kind: str) -> dict[str, dict]:
    """{name: manifest} of the documents of ``kind`` among ``docs`` (dicts; a cluster-scoped kind, so names are unique;
    the last of a name wins)."""
    out: dict[str, dict] = {}
    for d in docs:
        if isinstance(d, dict) and d.get("kind") == kind:
            name = (d.get("metadata") or {}).get("name")
            if isinstance(name, str) and name:
                out[name] = d
    return out


def pod_key(pod: dict) -> str:
    m = pod.get("metadata") or {}
    return f"{m.get('namespace') or 'default'}/{m.get('name')}"


def pod_uid(pod: dict) -> str:
    return (pod.get("metadata") or {}).get("uid") or pod_key(pod)


SCHEDULING_GATED = "SchedulingGated"   # the kube-scheduler's PodScheduled reason for a pod with scheduling gates
SCHEDULING_GATED_MESSAGE = "Scheduling is blocked due to non-empty scheduling gates"


def scheduling_gates(pod: dict) -> list[str]:
    """The names of the pod's ``spec.schedulingGates``: while it has any, the kube-scheduler does not schedule it
    (``PodScheduled=False``, reason ``SchedulingGated``) and Karpenter does not provision for it (not provisionable:
    it never failed to schedule)."""
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return [str(g.get("name")) if isinstance(g, dict) else str(g) for g in gates]


def is_terminal(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def is_terminating(obj: dict) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def owner_kinds(pod: dict) -> set[str]:
    return {ref.get("kind") for ref in (pod.get("metadata") or {}).get("ownerReferences") or []}


# Karpenter's IsOwnedByDaemonSet / IsOwnedByNode: the owner's kind AND apiVersion (a DaemonSet of another API group,
# e.g. apps.kruise.io, is an ordinary owner: its pods are provisioned for).  An ownerReference without apiVersion
# (which a real API server refuses) is read as the kind's own group.
_NODE_BOUND_OWNERS = {"DaemonSet": "apps/v1", "Node": "v1"}


def daemon_owner(pod: dict) -> str | None:
    """``"DaemonSet"`` (an apps/v1 DaemonSet) or ``"Node"`` (a static pod's v1 Node) owning ``pod``, else None."""
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, dict):
            kind = ref.get("kind")
            group = _NODE_BOUND_OWNERS.get(kind)
            if group is not None and ref.get("apiVersion", group) == group:
                return kind
    return None


def is_daemon_pod(pod: dict) -> bool:
    """Owned by an apps/v1 DaemonSet, or a mirror/static pod (owned by its v1 Node)."""
    return daemon_owner(pod) is not None


def is_mirror_pod(pod: dict) -> bool:
    meta = pod.get("metadata") or {}
    return "kubernetes.io/config.mirror" in (meta.get("annotations") or {}) or "Node" in owner_kinds(pod)


def is_critical(pod: dict) -> bool:
    return (pod.get("spec") or {}).get("priorityClassName") in CRITICAL_PRIORITY_CLASSES


def node_name_of(pod: dict) -> str | None:
    return (pod.get("spec") or {}).get("nodeName") or None


def node_ready(node: dict) -> bool:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


def node_allocatable(node: dict) -> dict[str, int]:
    status = node.get("status") or {}
    try:
        return parse_resource_list(status.get("allocatable") or status.get("capacity") or {})
    except QuantityError:
        return {}


def provider_id(zone: str, instance_id: str) -> str:
    return f"{PROVIDER_PREFIX}{zone}/{instance_id}"


def instance_id_of(provider: str | None) -> str | None:
    """``aws:///us-east-1a/i-0abc`` -> ``i-0abc``."""
    if not provider or not provider.startswith("aws://"):
        return None
    return provider.rsplit("/", 1)[-1] or None
