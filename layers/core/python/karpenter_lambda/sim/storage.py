"""The simulated cluster's storage controllers: what kube-controller-manager and the CSI provisioner do with claims.

:func:`sync` runs before each kube-scheduler pass (the workload controller calls it, :mod:`.workloads`):

* the **ephemeral volume controller**: a pod's generic ephemeral volume (``volumes[].ephemeral``) gets its
  PersistentVolumeClaim ``<pod>-<volume>`` from the ``volumeClaimTemplate``, owned by the pod; a claim whose owner
  pod is gone is deleted (the garbage collector);
* the **PersistentVolume controller**: a claim with no class name gets the default StorageClass (retroactive
  assignment); a claim naming its volume (``spec.volumeName``) and a volume reserved for a claim (``spec.claimRef``)
  are bound to each other (``status.phase: Bound`` on both); an unbound claim of an ``Immediate`` StorageClass (the
  default mode) is bound to a matching Available volume or, when the class provisions, to a volume provisioned in
  the class's first allowed zone (``allowedTopologies``; else the region's first zone); a Bound volume whose claim
  is gone is deleted (reclaim policy ``Delete``) or Released; a new volume becomes Available;
* the **provisioner** (:func:`provision`, also called by the kube-scheduler when it binds the pod of a
  ``WaitForFirstConsumer`` claim, :mod:`.volumebinding`): a PersistentVolume ``pvc-<claim uid>`` of the claim's
  size, access modes and class, ``spec.csi.driver`` the class's provisioner (``kubernetes.io/aws-ebs`` as
  ``ebs.csi.aws.com``, CSI migration), zonal (``nodeAffinity``: ``topology.kubernetes.io/zone In [zone]``, as EBS
  volumes are; a regional driver such as EFS gets none), reclaim policy from the class (default ``Delete``), bound
  to the claim.

A StatefulSet's claims (``volumeClaimTemplates``) are created by the workload controller (:mod:`.workloads`).
``store`` is the API server's :class:`~.kubeapi.ObjectStore` (or anything with its ``list``/``create``/``patch``/
``delete``, as :class:`.volumebinding.ClientStorage` over HTTP).  Not modelled: volume expansion, snapshots,
``dataSource``, claim ``selector``s, attach/detach, ReadWriteOnce across nodes.
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable

from ..api import labels as L
from ..api.quantity import QuantityError, parse_quantity
from ..catalog.zones import default_zones
from ..scheduling import predicates as P
from .kubeapi import StoreError
from .kubeapi.store import default_storage_class

__all__ = ["sync", "provision", "namespace_of", "bound_claims", "bind_volume", "pod_claims", "claim_driver", "csi_driver", "delay_binding",
           "matching_volume", "volume_fits_node", "topology_allows", "ZONE", "NO_PROVISIONER"]

ZONE = L.ZONE                                   # topology.kubernetes.io/zone
NO_PROVISIONER = "kubernetes.io/no-provisioner"   # a class of pre-created volumes only
REGIONAL_DRIVERS = frozenset({"efs.csi.aws.com"})   # volumes reachable from every zone: no node affinity
EBS_ZONE_KEYS = (ZONE, "topology.ebs.csi.aws.com/zone", "failure-domain.beta.kubernetes.io/zone")
WAIT = "WaitForFirstConsumer"


# ----------------------------------------------------------------------------------------------- facts
def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def _spec(obj: dict) -> dict:
    return obj.get("spec") or {}


def namespace_of(obj: dict) -> str:
    return _meta(obj).get("namespace") or "default"


def pod_claims(pod: dict) -> list[tuple[str, dict | None]]:
    """(claim name, the ephemeral volume's claim template or None) per claim-backed volume of ``pod``."""
    out = []
    for v in _spec(pod).get("volumes") or ():
        if not isinstance(v, dict):
            continue
        pvc = v.get("persistentVolumeClaim")
        if isinstance(pvc, dict) and pvc.get("claimName"):
            out.append((str(pvc["claimName"]), None))
        eph = v.get("ephemeral")
        if isinstance(eph, dict):
            out.append((f"{_meta(pod).get('name')}-{v.get('name')}", eph.get("volumeClaimTemplate") or {}))
    return out


def csi_driver(provisioner: str | None) -> str | None:
    """The CSI driver behind a StorageClass provisioner (the in-tree EBS plugin is migrated to the EBS CSI driver)."""
    if not provisioner or provisioner == NO_PROVISIONER:
        return None
    return L.EBS_CSI_DRIVER if provisioner == L.EBS_IN_TREE_PROVISIONER else provisioner


def claim_driver(pvc: dict, pvs: dict[str, dict], classes: dict[str, dict]) -> str | None:
    """The CSI driver a claim's volume counts against: its bound volume's, else its class's provisioner's."""
    name = _spec(pvc).get("volumeName")
    if name:
        spec = _spec(pvs.get(name) or {})
        if isinstance(spec.get("csi"), dict) and spec["csi"].get("driver"):
            return str(spec["csi"]["driver"])
        return L.EBS_CSI_DRIVER if spec.get("awsElasticBlockStore") else None
    sc = classes.get(_spec(pvc).get("storageClassName") or "")
    return csi_driver(sc.get("provisioner")) if sc else None


def delay_binding(sc: dict | None) -> bool:
    """Is a claim of this class bound when its first pod is scheduled (``WaitForFirstConsumer``)?"""
    return bool(sc) and sc.get("volumeBindingMode") == WAIT


def _quantity(value: Any) -> int:
    try:
        return parse_quantity(str(value)) if value is not None else 0
    except QuantityError:
        return 0


def volume_fits_node(pv: dict, labels: dict, name: str | None) -> bool:
    """The volume's ``spec.nodeAffinity.required`` (terms ORed) against one node; no affinity fits every node."""
    required = (_spec(pv).get("nodeAffinity") or {}).get("required")
    if not required:
        return True
    pod = {"spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}}}
    return P.node_affinity_matches(pod, labels, name)


def topology_allows(sc: dict, labels: dict) -> bool:
    """The class's ``allowedTopologies`` (terms ORed, each term's expressions ANDed) against a node's labels."""
    terms = sc.get("allowedTopologies") or []
    if not terms:
        return True
    return any(all(labels.get(e.get("key")) in (e.get("values") or []) for e in t.get("matchLabelExpressions") or [])
               for t in terms if isinstance(t, dict))


def matching_volume(pvc: dict, pvs: Iterable[dict], node: dict | None = None, taken: Iterable[str] = ()) -> dict | None:
    """The volume the PV controller (or, with ``node``, the kube-scheduler) would bind ``pvc`` to: one reserved for
    it (``claimRef``) first, else the smallest Available one of its class, size, access modes and volume mode (on
    ``node``'s topology when given)."""
    spec, meta = _spec(pvc), _meta(pvc)
    want = _quantity(((spec.get("resources") or {}).get("requests") or {}).get("storage"))
    modes = set(spec.get("accessModes") or ())
    cls = spec.get("storageClassName") or ""
    taken = set(taken)
    best = None
    for pv in pvs:
        ps, pm = _spec(pv), _meta(pv)
        if pm.get("name") in taken or pm.get("deletionTimestamp") or (pv.get("status") or {}).get("phase") in (
                "Bound", "Released", "Failed"):
            continue
        ref = ps.get("claimRef")
        reserved = False
        if ref:
            if (ref.get("namespace") or "default", ref.get("name")) != (namespace_of(pvc), meta.get("name")):
                continue
            if ref.get("uid") and ref["uid"] != meta.get("uid"):
                continue
            reserved = True
        if (ps.get("storageClassName") or "") != cls or (ps.get("volumeMode") or "Filesystem") != (spec.get("volumeMode") or "Filesystem"):
            continue
        size = _quantity((ps.get("capacity") or {}).get("storage"))
        if size < want or not modes <= set(ps.get("accessModes") or ()):
            continue
        if node is not None and not volume_fits_node(pv, _meta(node).get("labels") or {}, _meta(node).get("name")):
            continue
        rank = (not reserved, size, pm.get("name") or "")
        if best is None or rank < best[0]:
            best = (rank, pv)
    return best[1] if best else None


def first_zone(sc: dict, region: str) -> str:
    """Where an ``Immediate`` claim of ``sc`` is provisioned: the first zone its ``allowedTopologies`` allow, else the
    region's first zone."""
    for term in sc.get("allowedTopologies") or []:
        for e in (term or {}).get("matchLabelExpressions") or []:
            if e.get("key") in EBS_ZONE_KEYS and e.get("values"):
                return str(e["values"][0])
    return default_zones(region)[0]


def bound_claims(store) -> dict[tuple[str, str], tuple[str, str | None, str | None]]:
    """(namespace, claim) -> (volume, its zone or None, the driver that provisioned it or None: a volume that was
    there) for every Bound claim (the simulator's ``VolumeBound`` events)."""
    claims = [c for c in store.list("persistentvolumeclaims") if (c.get("status") or {}).get("phase") == "Bound"]
    if not claims:
        return {}
    pvs = {_meta(v)["name"]: v for v in store.list("persistentvolumes")}
    out = {}
    for c in claims:
        name = _spec(c).get("volumeName")
        pv = pvs.get(name) or {}
        zone = next((e["values"][0] for t in (((_spec(pv).get("nodeAffinity") or {}).get("required") or {})
                                             .get("nodeSelectorTerms") or [])
                     for e in (t or {}).get("matchExpressions") or []
                     if e.get("key") in EBS_ZONE_KEYS and e.get("operator") == "In" and e.get("values")), None)
        out[(namespace_of(c), _meta(c)["name"])] = (name, zone, (_meta(pv).get("annotations") or {}).get(
            "pv.kubernetes.io/provisioned-by"))
    return out


# ----------------------------------------------------------------------------------------------- binding
def _claim_ref(pvc: dict) -> dict:
    meta = _meta(pvc)
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": namespace_of(pvc), "name": meta.get("name"),
            "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")}


def bind_volume(store, pvc: dict, pv: dict, node: str | None = None, provisioner: str | None = None) -> tuple[dict, dict]:
    """Bind ``pvc`` and ``pv`` to each other (both ``Bound``); returns the stored (claim, volume)."""
    name, ns, pv_name = _meta(pvc)["name"], namespace_of(pvc), _meta(pv)["name"]
    if not _spec(pv).get("claimRef") or not _spec(pv)["claimRef"].get("uid"):
        pv = store.patch("persistentvolumes", pv_name, {"spec": {"claimRef": _claim_ref(pvc)}}, patch_type="merge")
    pv = store.patch("persistentvolumes", pv_name, {"status": {"phase": "Bound"}}, patch_type="merge", subresource="status")
    annotations = {"pv.kubernetes.io/bind-completed": "yes"}
    if _spec(pvc).get("volumeName") != pv_name:
        annotations["pv.kubernetes.io/bound-by-controller"] = "yes"
    if node:
        annotations["volume.kubernetes.io/selected-node"] = node
    if provisioner:
        annotations["volume.kubernetes.io/storage-provisioner"] = provisioner
    pvc = store.patch("persistentvolumeclaims", name, {"metadata": {"annotations": annotations},
                                                       "spec": {"volumeName": pv_name}}, ns, patch_type="merge")
    pvc = store.patch("persistentvolumeclaims", name, {"status": {
        "phase": "Bound", "accessModes": _spec(pv).get("accessModes") or _spec(pvc).get("accessModes") or [],
        "capacity": dict(_spec(pv).get("capacity") or {})}}, ns, patch_type="merge", subresource="status")
    return pvc, pv


def provision(store, pvc: dict, sc: dict, zone: str | None, node: str | None = None) -> tuple[dict, dict]:
    """The CSI provisioner: a new volume for ``pvc`` of class ``sc`` in ``zone``, bound to it; returns the stored
    (claim, volume)."""
    meta, spec = _meta(pvc), _spec(pvc)
    driver = csi_driver(sc.get("provisioner")) or str(sc.get("provisioner"))
    handle = "vol-" + hashlib.sha256(str(meta.get("uid")).encode()).hexdigest()[:17]
    params = sc.get("parameters") or {}
    pv_spec: dict = {
        "capacity": {"storage": str(((spec.get("resources") or {}).get("requests") or {}).get("storage") or "1Gi")},
        "accessModes": list(spec.get("accessModes") or ["ReadWriteOnce"]),
        "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy") or "Delete",
        "storageClassName": _meta(sc).get("name"),
        "volumeMode": spec.get("volumeMode") or "Filesystem",
        "csi": {"driver": driver, "volumeHandle": handle,
                "fsType": params.get("csi.storage.k8s.io/fstype") or params.get("fsType") or "ext4"},
        "claimRef": _claim_ref(pvc),
    }
    if sc.get("mountOptions"):
        pv_spec["mountOptions"] = list(sc["mountOptions"])
    if zone and driver not in REGIONAL_DRIVERS:
        pv_spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}]}}
    pv = store.create("persistentvolumes", {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": f"pvc-{meta.get('uid')}", "annotations": {"pv.kubernetes.io/provisioned-by": driver}},
        "spec": pv_spec})
    return bind_volume(store, pvc, pv, node, driver)


# ----------------------------------------------------------------------------------------------- the controllers
def _ephemeral_claims(store, pods: list[dict], pvcs: dict) -> int:
    """The ephemeral volume controller and the garbage collector of its claims."""
    changed = 0
    live = {_meta(p).get("uid") for p in pods}
    for key, pvc in list(pvcs.items()):
        refs = [r for r in _meta(pvc).get("ownerReferences") or [] if isinstance(r, dict) and r.get("kind") == "Pod"]
        if refs and not any(r.get("uid") in live for r in refs) and not _meta(pvc).get("deletionTimestamp"):
            _delete(store, "persistentvolumeclaims", key[1], key[0])
            pvcs.pop(key)
            changed += 1
    for pod in pods:
        if _meta(pod).get("deletionTimestamp"):
            continue
        for claim, template in pod_claims(pod):
            if template is None or (namespace_of(pod), claim) in pvcs:
                continue
            tmeta = template.get("metadata") or {}
            body = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                    "metadata": {"name": claim, "namespace": namespace_of(pod),
                                 **{k: dict(tmeta[k]) for k in ("labels", "annotations") if tmeta.get(k)},
                                 "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": _meta(pod).get("name"),
                                                      "uid": _meta(pod).get("uid"), "controller": True,
                                                      "blockOwnerDeletion": True}]},
                    "spec": dict(template.get("spec") or {})}
            try:
                pvcs[(namespace_of(pod), claim)] = store.create("persistentvolumeclaims", body, namespace_of(pod))
                changed += 1
            except StoreError:   # created meanwhile: the next sync sees it
                pass
    return changed


def _delete(store, plural: str, name: str, namespace: str | None = None) -> None:
    try:
        store.delete(plural, name, namespace)
    except StoreError:
        pass


def sync(store, region: str = "us-east-1", pods: list[dict] | None = None) -> int:
    """One round of the storage controllers (module docstring); returns how many objects it changed.  ``pods``: the
    cluster's pods when the caller has just listed them (else they are listed here)."""
    pvcs = {(namespace_of(c), _meta(c)["name"]): c for c in store.list("persistentvolumeclaims")}
    pods = [p for p in (store.list("pods") if pods is None else pods) if pod_claims(p)]
    changed = _ephemeral_claims(store, pods, pvcs)
    pvs = {_meta(v)["name"]: v for v in store.list("persistentvolumes")}
    if not pvcs and not pvs:
        return changed
    class_list = store.list("storageclasses")
    classes = {_meta(c)["name"]: c for c in class_list}
    default = default_storage_class(class_list)
    for key, pvc in sorted(pvcs.items()):
        meta, spec = _meta(pvc), _spec(pvc)
        if meta.get("deletionTimestamp") or (pvc.get("status") or {}).get("phase") == "Bound":
            continue
        if "storageClassName" not in spec and default and not spec.get("volumeName"):
            pvc = store.patch("persistentvolumeclaims", key[1], {"spec": {"storageClassName": default}}, key[0],
                              patch_type="merge")
            spec = _spec(pvc)
            changed += 1
        pv = pvs.get(spec["volumeName"]) if spec.get("volumeName") else None
        if spec.get("volumeName"):
            ref = _spec(pv).get("claimRef") if pv else None
            if pv is None or (ref and (ref.get("namespace") or "default", ref.get("name")) != key):
                continue      # waits for its volume (or the volume is another claim's)
        else:
            sc = classes.get(spec.get("storageClassName") or "")
            pv = matching_volume(pvc, [v for v in pvs.values() if _spec(v).get("claimRef")])   # reserved for it
            if pv is None and (spec.get("storageClassName") or "") and sc is None:
                continue      # its class does not exist (yet)
            if pv is None and not delay_binding(sc):
                pv = matching_volume(pvc, pvs.values())
                if pv is None and sc is not None and csi_driver(sc.get("provisioner")):
                    pvc, pv = provision(store, pvc, sc, first_zone(sc, region))
                    pvcs[key], pvs[_meta(pv)["name"]] = pvc, pv
                    changed += 1
                    continue
            if pv is None:
                continue
        pvc, pv = bind_volume(store, pvc, pv)
        pvcs[key], pvs[_meta(pv)["name"]] = pvc, pv
        changed += 1
    for name, pv in sorted(pvs.items()):
        ref, phase = _spec(pv).get("claimRef"), (pv.get("status") or {}).get("phase")
        if phase == "Bound" and ref:
            claim = pvcs.get((ref.get("namespace") or "default", ref.get("name")))
            if claim is None or (ref.get("uid") and ref["uid"] != _meta(claim).get("uid")):
                if (_spec(pv).get("persistentVolumeReclaimPolicy") or "Retain") == "Delete":
                    _delete(store, "persistentvolumes", name)
                else:
                    store.patch("persistentvolumes", name, {"status": {"phase": "Released"}}, patch_type="merge",
                                subresource="status")
                changed += 1
        elif phase in (None, "Pending"):
            store.patch("persistentvolumes", name, {"status": {"phase": "Available"}}, patch_type="merge",
                        subresource="status")
            changed += 1
    return changed
