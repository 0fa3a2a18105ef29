"""The resource types the local API server serves, and its error (a Kubernetes ``Status``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ResourceType:
    plural: str
    kind: str
    group: str  # "" for core
    version: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


_RT = [
    ResourceType("pods", "Pod", "", "v1", True),
    ResourceType("nodes", "Node", "", "v1", False),
    ResourceType("namespaces", "Namespace", "", "v1", False),
    ResourceType("events", "Event", "", "v1", True),
    ResourceType("configmaps", "ConfigMap", "", "v1", True),
    ResourceType("services", "Service", "", "v1", True),
    ResourceType("persistentvolumeclaims", "PersistentVolumeClaim", "", "v1", True),
    ResourceType("persistentvolumes", "PersistentVolume", "", "v1", False),
    ResourceType("storageclasses", "StorageClass", "storage.k8s.io", "v1", False),
    ResourceType("csinodes", "CSINode", "storage.k8s.io", "v1", False),
    ResourceType("daemonsets", "DaemonSet", "apps", "v1", True),
    ResourceType("deployments", "Deployment", "apps", "v1", True),
    ResourceType("replicasets", "ReplicaSet", "apps", "v1", True),
    ResourceType("statefulsets", "StatefulSet", "apps", "v1", True),
    ResourceType("poddisruptionbudgets", "PodDisruptionBudget", "policy", "v1", True),
    ResourceType("jobs", "Job", "batch", "v1", True),
    ResourceType("leases", "Lease", "coordination.k8s.io", "v1", True),
    ResourceType("horizontalpodautoscalers", "HorizontalPodAutoscaler", "autoscaling", "v2", True),
    ResourceType("scaledobjects", "ScaledObject", "keda.sh", "v1alpha1", True),   # KEDA's CRD: stored, not acted on
]
RESOURCES: dict[str, ResourceType] = {r.plural: r for r in _RT}
_BY_GV: dict[tuple[str, str], dict[str, ResourceType]] = {}
for _r in _RT:
    _BY_GV.setdefault((_r.group, _r.version), {})[_r.plural] = _r
_KIND_TO_PLURAL = {r.kind: r.plural for r in _RT}
SCALABLE = ("deployments", "statefulsets", "replicasets")   # serve the autoscaling/v1 ``scale`` subresource
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class StoreError(Exception):
    """An API error: HTTP ``code``, Kubernetes ``reason`` and a message."""

    def __init__(self, code: int, reason: str, message: str, retry_after: int | None = None,
                 causes: list[dict] | None = None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        self.causes = causes

    def status(self) -> dict:
        out = status_doc(self.code, self.reason, self.message)
        if self.causes or self.retry_after is not None:
            out["details"] = {**({"causes": self.causes} if self.causes else {}),
                              **({"retryAfterSeconds": self.retry_after} if self.retry_after is not None else {})}
        return out


def status_doc(code: int, reason: str, message: str, success: bool = False) -> dict:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if success else "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }

