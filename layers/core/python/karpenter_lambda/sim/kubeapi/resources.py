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
    short_names: tuple[str, ...] = ()   # discovery's shortNames (kubectl get po)
    categories: tuple[str, ...] = ()    # discovery's categories (kubectl get all)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


_ALL = ("all",)
_RT = [
    ResourceType("pods", "Pod", "", "v1", True, ("po",), _ALL),
    ResourceType("nodes", "Node", "", "v1", False, ("no",)),
    ResourceType("namespaces", "Namespace", "", "v1", False, ("ns",)),
    ResourceType("events", "Event", "", "v1", True, ("ev",)),
    ResourceType("configmaps", "ConfigMap", "", "v1", True, ("cm",)),
    ResourceType("services", "Service", "", "v1", True, ("svc",), _ALL),
    ResourceType("persistentvolumeclaims", "PersistentVolumeClaim", "", "v1", True, ("pvc",)),
    ResourceType("persistentvolumes", "PersistentVolume", "", "v1", False, ("pv",)),
    ResourceType("storageclasses", "StorageClass", "storage.k8s.io", "v1", False, ("sc",)),
    ResourceType("csinodes", "CSINode", "storage.k8s.io", "v1", False),
    ResourceType("runtimeclasses", "RuntimeClass", "node.k8s.io", "v1", False),
    ResourceType("limitranges", "LimitRange", "", "v1", True, ("limits",)),
    ResourceType("priorityclasses", "PriorityClass", "scheduling.k8s.io", "v1", False, ("pc",)),
    ResourceType("daemonsets", "DaemonSet", "apps", "v1", True, ("ds",), _ALL),
    ResourceType("deployments", "Deployment", "apps", "v1", True, ("deploy",), _ALL),
    ResourceType("replicasets", "ReplicaSet", "apps", "v1", True, ("rs",), _ALL),
    ResourceType("statefulsets", "StatefulSet", "apps", "v1", True, ("sts",), _ALL),
    ResourceType("poddisruptionbudgets", "PodDisruptionBudget", "policy", "v1", True, ("pdb",)),
    ResourceType("jobs", "Job", "batch", "v1", True, (), _ALL),
    ResourceType("leases", "Lease", "coordination.k8s.io", "v1", True),
    ResourceType("horizontalpodautoscalers", "HorizontalPodAutoscaler", "autoscaling", "v2", True, ("hpa",), _ALL),
    # KEDA's CRD: stored, not acted on (shortNames as its CRD)
    ResourceType("scaledobjects", "ScaledObject", "keda.sh", "v1alpha1", True, ("so",)),
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



# ``status`` is served on every resource; discovery lists it where the real API server has it
STATUS_SUBRESOURCE = frozenset(r.plural for r in _RT) - {"events", "configmaps", "storageclasses", "csinodes", "leases",
                                                         "runtimeclasses", "limitranges", "priorityclasses"}
