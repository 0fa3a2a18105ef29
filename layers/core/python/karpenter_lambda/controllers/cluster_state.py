"""A snapshot of the cluster for one decision: Kubernetes objects as plain camelCase dicts.

The kube client may hand back the official client's model objects or dicts; :func:`as_dict`
normalises both.  Helpers here read pods and nodes the way the controllers need them.
"""

from __future__ import annotations

from ..api.quantity import QuantityError, parse_resource_list

PROVIDER_PREFIX = "aws:///"


def as_dict(obj) -> dict:
    if obj is None or isinstance(obj, dict):
        return obj
    from kubernetes.client import ApiClient

    return ApiClient().sanitize_for_serialization(obj)


def pod_key(pod: dict) -> str:
    m = pod.get("metadata") or {}
    return f"{m.get('namespace') or 'default'}/{m.get('name')}"


def pod_uid(pod: dict) -> str:
    return (pod.get("metadata") or {}).get("uid") or pod_key(pod)


def is_terminal(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def is_daemon_pod(pod: dict) -> bool:
    return any(ref.get("kind") in ("DaemonSet", "Node") for ref in (pod.get("metadata") or {}).get("ownerReferences") or [])


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
