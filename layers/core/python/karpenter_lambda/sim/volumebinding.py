"""The simulated kube-scheduler's volume plugins (VolumeBinding, VolumeZone, NodeVolumeLimits), for one pass.

:class:`VolumeRules` is loaded once per pass when a pending pod uses a PersistentVolumeClaim
(``volumes[].persistentVolumeClaim`` or a generic ephemeral volume, whose claim is ``<pod>-<volume>``):

* **pre-filter** (:meth:`VolumeRules.prefilter`, the pod stays Pending on every node with the message as
  Kubernetes words it): a missing claim (``persistentvolumeclaim "data-db-0" not found``; an ephemeral volume's
  claim not created yet, or created for another pod), a claim being deleted, a missing StorageClass
  (``storageclass.storage.k8s.io "gp3" not found``), an unbound claim whose class binds ``Immediate``ly (``pod has
  unbound immediate PersistentVolumeClaims``: the PV controller has not bound it);
* **filter** (:meth:`VolumeRules.filter`, per node): a bound claim's volume must fit the node (``spec.nodeAffinity``
  -> ``node(s) had volume node affinity conflict``; a volume that does not exist -> ``node(s) unavailable due to one
  or more pvc(s) bound to non-existent pv(s)``); an unbound ``WaitForFirstConsumer`` claim needs an Available volume
  that fits the node or a class that provisions there (``allowedTopologies``) -> ``node(s) didn't find available
  persistent volumes to bind``; the node's CSINode ``drivers[].allocatable.count`` must hold the distinct claims of
  its pods plus the pod's, per CSI driver (the bound volume's driver, else the class's provisioner) -> ``node(s)
  exceed max volume count`` (a node without a CSINode, or a driver without a count, has no limit);
* **bind** (:meth:`VolumeRules.bind`, before the pod is bound): each unbound claim is bound to the volume that
  fitted, or a volume is provisioned for it in the node's zone (:func:`.storage.provision`).

Over HTTP (the kube-scheduler given a :class:`~karpenter_lambda.adapters.kube.client.KubeClient`) the objects are
read and written through :class:`ClientStorage`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import storage as S
from .kubeapi import StoreError

__all__ = ["VolumeRules", "PodClaims", "ClientStorage", "uses_claims"]

AFFINITY_CONFLICT = "node(s) had volume node affinity conflict"
NO_PV = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
MAX_VOLUMES = "node(s) exceed max volume count"


def uses_claims(pod: dict) -> bool:
    return bool(S.pod_claims(pod))


@dataclass
class PodClaims:
    """A pending pod's claims: bound ones with their volume, unbound ``WaitForFirstConsumer`` ones with their class."""

    keys: list[tuple[str, str]] = field(default_factory=list)          # (namespace, claim), distinct
    bound: list[tuple[dict, dict | None]] = field(default_factory=list)  # (claim, volume or None: missing)
    delayed: list[tuple[dict, dict]] = field(default_factory=list)       # (claim, StorageClass)


class VolumeRules:
    """One pass's claims, volumes, classes and CSINode limits, and the claims each node's pods hold."""

    def __init__(self, store, pvcs, pvs, classes, csinodes, placed):
        self.store = store
        self.pvcs = {(S.namespace_of(c), c["metadata"]["name"]): c for c in pvcs}
        self.pvs = {v["metadata"]["name"]: v for v in pvs}
        self.classes = {c["metadata"]["name"]: c for c in classes}
        self.limits: dict[str, dict[str, int]] = {}     # node -> driver -> count
        for cn in csinodes:
            for d in (cn.get("spec") or {}).get("drivers") or ():
                count = (d.get("allocatable") or {}).get("count")
                if isinstance(count, int) and not isinstance(count, bool):
                    self.limits.setdefault(cn["metadata"]["name"], {})[d.get("name")] = count
        self.on_node: dict[str, set[tuple[str, str]]] = {}
        for pod, node in placed:
            self.on_node.setdefault(node, set()).update((S.namespace_of(pod), c) for c, _t in S.pod_claims(pod))

    @classmethod
    def load(cls, store, placed) -> "VolumeRules":
        """``store``: list/create/patch (an ObjectStore or :class:`ClientStorage`); ``placed``: (pod, node) of the
        non-terminal pods bound to nodes."""
        return cls(store, store.list("persistentvolumeclaims"), store.list("persistentvolumes"),
                   store.list("storageclasses"), store.list("csinodes"), placed)

    # -- pre-filter ------------------------------------------------------------------------
    def prefilter(self, pod: dict) -> PodClaims | str:
        """The pod's claims, or why no node can take it."""
        ns, out = S.namespace_of(pod), PodClaims()
        uid = (pod.get("metadata") or {}).get("uid")
        for claim, template in S.pod_claims(pod):
            pvc = self.pvcs.get((ns, claim))
            if pvc is None:
                if template is not None:
                    return f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{claim}"'
                return f'persistentvolumeclaim "{claim}" not found'
            if template is not None and not any(r.get("uid") == uid for r in pvc["metadata"].get("ownerReferences") or []):
                return f"PVC {ns}/{claim} was not created for pod {ns}/{pod['metadata'].get('name')} (pod is not owner)"
            if pvc["metadata"].get("deletionTimestamp"):
                return f'persistentvolumeclaim "{claim}" is being deleted'
            if (ns, claim) in out.keys:
                continue
            out.keys.append((ns, claim))
            spec = pvc.get("spec") or {}
            if spec.get("volumeName"):
                out.bound.append((pvc, self.pvs.get(spec["volumeName"])))
                continue
            sc_name = spec.get("storageClassName") or ""
            sc = self.classes.get(sc_name)
            if sc_name and sc is None:
                return f'storageclass.storage.k8s.io "{sc_name}" not found'
            if not S.delay_binding(sc):
                return "pod has unbound immediate PersistentVolumeClaims"
            out.delayed.append((pvc, sc))
        return out

    # -- filter ----------------------------------------------------------------------------
    def filter(self, pc: PodClaims, node: dict) -> str | None:
        """Why ``node`` cannot take the pod's volumes, or None."""
        meta = node.get("metadata") or {}
        labels, name = meta.get("labels") or {}, meta.get("name")
        if self._over_limit(pc, name):
            return MAX_VOLUMES
        for _pvc, pv in pc.bound:
            if pv is None:
                return NO_PV
            if not S.volume_fits_node(pv, labels, name):
                return AFFINITY_CONFLICT
        if pc.delayed and self._choose(pc, node) is None:
            return BIND_CONFLICT
        return None

    def _over_limit(self, pc: PodClaims, node: str) -> bool:
        limits = self.limits.get(node)
        if not limits:
            return False
        per_driver: dict[str, set] = {}
        for key in self.on_node.get(node, set()) | set(pc.keys):
            pvc = self.pvcs.get(key)
            driver = S.claim_driver(pvc, self.pvs, self.classes) if pvc is not None else None
            if driver is not None:
                per_driver.setdefault(driver, set()).add(key)
        return any(driver in limits and len(keys) > limits[driver] for driver, keys in per_driver.items())

    def _choose(self, pc: PodClaims, node: dict) -> list[dict | None] | None:
        """Per delayed claim, the Available volume it would bind to on ``node`` (None: provision one); None when
        some claim can have neither."""
        labels = (node.get("metadata") or {}).get("labels") or {}
        taken: list[str] = []
        out: list[dict | None] = []
        for pvc, sc in pc.delayed:
            pv = S.matching_volume(pvc, self.pvs.values(), node, taken)
            if pv is not None:
                taken.append(pv["metadata"]["name"])
            elif not (S.csi_driver(sc.get("provisioner")) and S.topology_allows(sc, labels)):
                return None
            out.append(pv)
        return out

    # -- bind ------------------------------------------------------------------------------
    def bind(self, pc: PodClaims, node: dict) -> None:
        """Bind (or provision) the pod's unbound claims for ``node``; then count its claims on the node."""
        meta = node.get("metadata") or {}
        name, zone = meta.get("name"), (meta.get("labels") or {}).get(S.ZONE)
        for (pvc, sc), pv in zip(pc.delayed, self._choose(pc, node) or []):
            if pv is not None:
                pvc, pv = S.bind_volume(self.store, pvc, pv, name)
            else:
                pvc, pv = S.provision(self.store, pvc, sc, zone, name)
            self.pvcs[(S.namespace_of(pvc), pvc["metadata"]["name"])] = pvc
            self.pvs[pv["metadata"]["name"]] = pv
        self.on_node.setdefault(name, set()).update(pc.keys)


class ClientStorage:
    """The storage objects over HTTP through a ``KubeClient``, with the ObjectStore calls :mod:`.storage` uses."""

    def __init__(self, client):
        self.client = client

    def list(self, plural: str) -> list[dict]:
        c = self.client
        return {"persistentvolumeclaims": c.list_pvcs, "persistentvolumes": c.list_pvs,
                "storageclasses": c.list_storageclasses, "csinodes": c.list_csinodes}[plural]()

    def create(self, plural: str, obj: dict, namespace: str | None = None) -> dict:
        if plural == "persistentvolumes":
            return self.client.create_pv(obj)
        if plural == "persistentvolumeclaims":
            return self.client.create_pvc(namespace or "default", obj)
        raise StoreError(405, "MethodNotAllowed", f"create {plural}: not used by the kube-scheduler")

    def patch(self, plural: str, name: str, patch: dict, namespace: str | None = None, patch_type: str = "merge",
              subresource: str | None = None) -> dict:
        if plural == "persistentvolumes":
            return self.client.patch_pv(name, patch, subresource)
        return self.client.patch_pvc(namespace or "default", name, patch, subresource)
