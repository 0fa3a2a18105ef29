"""Volume topology and volume counts: what a pod's persistent volumes ask of its node (pure).

Karpenter's ``volumetopology.go`` (pkg/controllers/provisioning/scheduling) and ``volumeusage.go``
(pkg/scheduling), for every pod volume backed by a PersistentVolumeClaim (``persistentVolumeClaim.claimName``, or
a generic ephemeral volume, whose claim is ``<pod>-<volume>``):

* **bound claim** (``spec.volumeName``): the PersistentVolume's ``spec.nodeAffinity.required.nodeSelectorTerms[0]``
  match expressions become node requirements of the pod (Karpenter takes the first term; a ``local`` or
  ``hostPath`` volume's hostname requirement is dropped, the node it named is the one going away);
* **unbound claim**: its StorageClass's ``allowedTopologies[0].matchLabelExpressions`` (``In``) do; a claim
  without a class name gets the cluster's default StorageClass, as the API server's admission would have given it
  (an unbound generic ephemeral volume whose claim does not exist yet reads its template's class);
* a claim, volume or StorageClass that does not exist is the pod's problem ("PVC data-db-0 not found"): the pod is
  not scheduled (Karpenter: ``ValidatePersistentVolumeClaims``), and the reason says which object is missing.

The requirements are added to every required node-selector term of a copy of the pod (``inject``), so the solver,
consolidation's simulations, ``plan`` and ``simulate`` all see them without knowing about volumes.

**Volume counts** (issue 28 item 2): each claim counts one against its CSI driver (the PV's ``spec.csi.driver``,
``awsElasticBlockStore`` as the EBS CSI driver, or the StorageClass's provisioner) as the resource
``attachable-volumes-csi-<driver>`` (``api.labels.volume_resource``), carried in the pod copy's ``spec.overhead``
so every resource check counts it.  A node's room for it: its CSINode's ``drivers[].allocatable.count`` (an
existing node, Karpenter's volume usage), or its instance type's ``volume_limits`` (a new node: beyond Karpenter).
A claim two pods share counts once per pod (conservative: the kubelet counts it once per node).
"""

from __future__ import annotations

from typing import NamedTuple

from ..api import labels as L
from ..api.kube import pod_key, pod_uid
from ..api.snapshot import ClusterSnapshot
from ..api.storage import class_requirements, volume_requirements
from .collector import paused

__all__ = ["VolumeIndex", "PodVolumes", "apply_volumes", "inject", "has_claims", "node_volume_room"]

DEFAULT_CLASS_ANNOTATIONS = ("storageclass.kubernetes.io/is-default-class",
                             "storageclass.beta.kubernetes.io/is-default-class")
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_APPLIED = "_volumes_applied"   # snapshot attribute: apply_volumes ran on it


class PodVolumes(NamedTuple):
    """What a pod's claims ask of its node: requirements (NodeSelectorRequirement dicts), volumes per CSI driver,
    one line per constrained claim (for explanations), or the problem that keeps the pod from being scheduled."""

    requirements: tuple = ()
    counts: tuple = ()           # ((driver, n), ...) sorted
    notes: tuple = ()
    problem: str | None = None


def _claims(pod: dict):
    """(claim name, ephemeral claim template spec or None) per PVC-backed volume of ``pod``."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    for v in spec.get("volumes") or ():
        if not isinstance(v, dict):
            continue
        pvc = v.get("persistentVolumeClaim")
        if isinstance(pvc, dict) and pvc.get("claimName"):
            yield str(pvc["claimName"]), None
        eph = v.get("ephemeral")
        if isinstance(eph, dict):
            tpl = (eph.get("volumeClaimTemplate") or {}).get("spec") or {}
            yield f"{meta.get('name')}-{v.get('name')}", tpl


def has_claims(pod: dict) -> bool:
    """Does ``pod`` use any PersistentVolumeClaim (directly or through a generic ephemeral volume)?"""
    return any(True for _ in _claims(pod))


def _driver(pv: dict | None, storage_class: dict | None) -> str | None:
    spec = (pv or {}).get("spec") or {}
    if isinstance(spec.get("csi"), dict) and spec["csi"].get("driver"):
        return str(spec["csi"]["driver"])
    if spec.get("awsElasticBlockStore"):
        return L.EBS_CSI_DRIVER
    if pv is None and storage_class is not None:
        p = storage_class.get("provisioner")
        return L.EBS_CSI_DRIVER if p == L.EBS_IN_TREE_PROVISIONER else (str(p) if p else None)
    return None


def _fmt(reqs: list[dict]) -> str:
    return ", ".join(f"{r.get('key')} {r.get('operator')} [{', '.join(map(str, r.get('values') or []))}]"
                     if r.get("values") else f"{r.get('key')} {r.get('operator')}" for r in reqs)


class VolumeIndex:
    """The cluster's claims, volumes, classes and CSINodes by name, and the per-pod answer."""

    def __init__(self, pvcs=(), pvs=(), storageclasses=(), csinodes=()):
        self.pvcs = {((p.get("metadata") or {}).get("namespace") or "default", (p.get("metadata") or {}).get("name")): p
                     for p in pvcs}
        self.pvs = {(p.get("metadata") or {}).get("name"): p for p in pvs}
        self.classes = {(c.get("metadata") or {}).get("name"): c for c in storageclasses}
        defaults = sorted((c for c in storageclasses
                           if any(((c.get("metadata") or {}).get("annotations") or {}).get(a) == "true"
                                  for a in DEFAULT_CLASS_ANNOTATIONS)),
                          key=lambda c: ((c.get("metadata") or {}).get("creationTimestamp") or "",
                                         (c.get("metadata") or {}).get("name") or ""))
        # several defaults: the newest wins, as the API server's DefaultStorageClass admission picks it
        self.default_class = (defaults[-1].get("metadata") or {}).get("name") if defaults else None
        self.csinodes = {(c.get("metadata") or {}).get("name"): c for c in csinodes}
        # PV name / StorageClass name -> (requirements, their text, CSI driver): StatefulSet replicas share a
        # class, and a PV may back several pods' claims
        self._by_pv: dict = {}
        self._by_class: dict = {}
        # requirements by their text -> (them, as a note says them): volumes asking the same (the PVs of one zone)
        # share one list, so ``inject`` gives their pods one affinity object
        self._same: dict = {}
        self._shapes: dict = {}   # id of a PV's / class's entry -> (it, requirements tuple, counts of one claim)

    @classmethod
    def of(cls, snap: ClusterSnapshot) -> "VolumeIndex":
        return cls(snap.pvcs, snap.pvs, snap.storageclasses, snap.csinodes)

    def pod_volumes(self, pod: dict, claims: list | None = None) -> PodVolumes:
        """What ``pod``'s claims ask of its node; ``claims``: its ``_claims`` when the caller has them."""
        ns = (pod.get("metadata") or {}).get("namespace") or "default"
        if claims is not None and len(claims) == 1:
            return self._one_claim(ns, *claims[0])
        reqs: list[dict] = []
        counts: dict[str, int] = {}
        notes: list[str] = []
        for claim, template in (_claims(pod) if claims is None else claims):
            known = self._claim(ns, claim, template)
            if isinstance(known, str):
                return PodVolumes(problem=known)
            r, what, d = known
            if r:
                reqs.extend(r)
                notes.append(f"PVC {claim} {what}")
            if d:
                counts[d] = counts.get(d, 0) + 1
        return PodVolumes(tuple(reqs), tuple(sorted(counts.items())), tuple(notes))

    def _one_claim(self, ns: str, claim: str, template: dict | None) -> PodVolumes:
        """``pod_volumes`` of a pod with one claim (a StatefulSet's usual pod): the same answer, its requirements and
        counts shared by every pod of the same volume or class."""
        known = self._claim(ns, claim, template)
        if isinstance(known, str):
            return PodVolumes(problem=known)
        shape = self._shapes.get(id(known))
        if shape is None:   # (the entry holds ``known``: its id stays its own)
            r, _, d = known
            shape = self._shapes[id(known)] = (known, tuple(r), ((d, 1),) if d else ())
        return PodVolumes(shape[1], shape[2], (f"PVC {claim} {known[1]}",) if shape[1] else ())

    def _claim(self, ns: str, claim: str, template: dict | None):
        """The ``_bound`` / ``_unbound`` entry of one claim of a pod in ``ns``, or the pod's problem."""
        pvc = self.pvcs.get((ns, claim))
        if pvc is None and template is None:
            return f"PVC {claim} not found (namespace {ns})"
        pvc_spec = (pvc or {}).get("spec") or template or {}
        pv_name = pvc_spec.get("volumeName")
        known = self._bound(pv_name) if pv_name else self._unbound(pvc_spec.get("storageClassName"))
        return f"{known} of PVC {claim} not found" if isinstance(known, str) else known

    def _bound(self, pv_name: str):
        """(requirements, the note's text after the claim's name, CSI driver) of a bound claim's PV, or the
        missing object's name."""
        known = self._by_pv.get(pv_name)
        if known is None:
            pv = self.pvs.get(pv_name)
            if pv is None:
                return f"PV {pv_name}"
            r, text = self._shared(volume_requirements(pv))
            known = self._by_pv[pv_name] = (r, f"(PV {pv_name}) requires {text}" if r else "", _driver(pv, None))
        return known

    def _unbound(self, sc_name: str | None):
        """The same for an unbound claim of StorageClass ``sc_name`` (None: the default class)."""
        if sc_name is None:
            sc_name = self.default_class
        known = self._by_class.get(sc_name)
        if known is None:
            sc = None
            if sc_name:
                sc = self.classes.get(sc_name)
                if sc is None:
                    return f"StorageClass {sc_name}"
            r, text = self._shared(class_requirements(sc)) if sc is not None else ([], "")
            known = self._by_class[sc_name] = (
                r, f"(StorageClass {sc_name}, not bound yet) requires {text}" if r else "", _driver(None, sc))
        return known

    def _shared(self, reqs: list[dict]) -> tuple[list[dict], str]:
        """(a copy of ``reqs``, their text), one per distinct ``reqs``."""
        key = repr(reqs)
        hit = self._same.get(key)
        if hit is None:
            r = [dict(x) for x in reqs]
            hit = self._same[key] = (r, _fmt(r))
        return hit

    def node_room(self, node_name: str) -> dict[str, int]:
        """The node's CSINode limits as volume-count resources (``{attachable-volumes-csi-<driver>: count}``)."""
        doc = self.csinodes.get(node_name)
        out: dict[str, int] = {}
        for d in ((doc or {}).get("spec") or {}).get("drivers") or ():
            count = ((d or {}).get("allocatable") or {}).get("count")
            if isinstance(count, int) and not isinstance(count, bool) and d.get("name"):
                out[L.volume_resource(d["name"])] = count
        return out


class VolumeExpression(dict):
    """A matchExpression a pod's volumes added to its required node affinity (:func:`inject`): read as any other
    (same keys, same text), and told apart where only the pod's own affinity counts -- a topology spread's node filter
    (kube-scheduler's nodeAffinityPolicy and Karpenter's StrictRequirements read the spec, which carries no volume
    zone: ``predicates.node_terms(own=True)``)."""

    __slots__ = ()


def inject(pod: dict, vols: PodVolumes, shared: dict | None = None) -> dict:
    """A copy of ``pod`` carrying ``vols``: the requirements added to every required node-selector term (one new term
    when it has none, as Karpenter does) and the volume counts in ``spec.overhead``.  Nested objects not changed
    are shared, not copied, and so are the requirement dicts (one per volume or class, read-only like the rest of a
    snapshot's pods); ``pod`` itself is not modified.  ``shared``: a dict the caller keeps while ``vols`` and the
    pods it passes are alive (``apply_volumes``), through which pods with the same affinity and the same volume
    requirements get one new affinity object, and likewise for the overhead (StatefulSet replicas, the claims of one
    StorageClass): less to build, and the solver, which groups pods by their spec's text, reads it once."""
    if not vols.requirements and not vols.counts:
        return pod
    spec = dict(pod.get("spec") or {})
    if vols.requirements:
        key = ("affinity", id(spec.get("affinity")), tuple(map(id, vols.requirements)))
        affinity = shared.get(key) if shared is not None else None
        if affinity is None:
            affinity = dict(spec.get("affinity") or {})
            na = dict(affinity.get("nodeAffinity") or {})
            required = dict(na.get(REQUIRED) or {})
            terms = [dict(t) for t in required.get("nodeSelectorTerms") or () if isinstance(t, dict)] or [{}]
            added = [VolumeExpression(r) for r in vols.requirements]
            for t in terms:
                t["matchExpressions"] = list(t.get("matchExpressions") or ()) + added
            required["nodeSelectorTerms"] = terms
            na[REQUIRED] = required
            affinity["nodeAffinity"] = na
            if shared is not None:
                shared[key] = affinity
        spec["affinity"] = affinity
    if vols.counts:
        key = ("overhead", id(spec.get("overhead")), vols.counts)
        overhead = shared.get(key) if shared is not None else None
        if overhead is None:
            overhead = dict(spec.get("overhead") or {})
            for driver, n in vols.counts:
                overhead[L.volume_resource(driver)] = n
            if shared is not None:
                shared[key] = overhead
        spec["overhead"] = overhead
    out = dict(pod)
    out["spec"] = spec
    return out


def apply_volumes(snap: ClusterSnapshot) -> None:
    """Give every pod of the snapshot what its volumes ask (``inject``) and record the pods that cannot be scheduled
    (``snap.pod_problems``) and the constraints their volumes add (``snap.pod_notes``), by pod uid.  Once per
    snapshot; a snapshot with no claim-backed pod is left as it is."""
    if snap.__dict__.get(_APPLIED):
        return
    snap.__dict__[_APPLIED] = True
    with paused():   # new pod copies, nothing to collect (scheduling/collector.py)
        _apply(snap)


def _apply(snap: ClusterSnapshot) -> None:
    index = None
    shared: dict = {}
    pods = []
    problems, notes = snap.pod_problems, snap.pod_notes
    for p in snap.pods:
        if (p.get("spec") or {}).get("volumes"):
            cl = list(_claims(p))
            if cl:
                if index is None:
                    index = VolumeIndex.of(snap)
                vols = index.pod_volumes(p, cl)
                if vols.problem:
                    problems[pod_uid(p)] = vols.problem
                elif vols.notes:
                    notes[pod_uid(p)] = vols.notes[0] if len(vols.notes) == 1 else "; ".join(vols.notes)
                p = inject(p, vols, shared)
        pods.append(p)
    if index is None:
        return   # no claim-backed pod: the snapshot is left as it is
    snap.pods = pods
    for attr in ("pods_by_uid", "pods_by_node"):
        snap.__dict__.pop(attr, None)


def node_volume_room(snap: ClusterSnapshot, node_name: str) -> dict[str, int]:
    """The node's CSINode volume limits as resources (empty when it has none: no known limit)."""
    if not snap.csinodes:
        return {}
    index = snap.__dict__.get("_volume_index")
    if index is None:
        index = snap.__dict__["_volume_index"] = VolumeIndex.of(snap)
    return index.node_room(node_name)


def pod_key_map(snap: ClusterSnapshot, by_uid: dict[str, str]) -> dict[str, str]:
    """``{pod uid: text}`` as ``{pod key: text}`` for the pods of the snapshot."""
    pods = snap.pods_by_uid
    return {pod_key(pods[u]): t for u, t in by_uid.items() if u in pods}
