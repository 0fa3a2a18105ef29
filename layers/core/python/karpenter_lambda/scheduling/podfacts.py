"""Pod classes: the pending pods grouped by what the scheduler needs of them (Karpenter's per-pod data of
``scheduler.go`` / ``queue.go``, computed once per class).

Pods with the same namespace, labels and spec have identical requests and constraints: they form one
:class:`PodClass`, placed in bulk.  A class carries its requests (``req``; ``vec`` over the solver's resources),
its required node-affinity terms (ORed) and preferred node affinity (by weight), its tolerations, host ports and
topology constraints, the requirement set in force (``reqs``, ``sig``) and its progress (``placed``, ``limit``,
``relaxed``).  Classes come in Karpenter's queue order: cpu desc, memory desc, creation time, uid.
"""

from __future__ import annotations

from ..api import labels as L
from ..api.exclusive import describe, exclusive
from ..api.kube import is_daemon_pod, pod_key
from . import topology as T
from .model import EXOTIC_KEYS, EXOTIC_RESOURCES, SchedulingError, Unschedulable, imply_reserved
from .predicates import host_ports, node_terms
from .requirements import Requirement, RequirementError, Requirements, node_selector_term
from .resources import PodSpecError, pod_requests

__all__ = ["PodClass", "build_classes"]


class PodClass:
    """The pods of one equivalence class and what the scheduler knows and decided about them."""

    __slots__ = ("pods", "keys", "ns", "labels", "req", "vec", "terms", "term_idx", "preferred", "pref_drop",
                 "tolerations", "tolerate_pns", "cons", "dropped", "ports", "reqs", "sig", "member", "placed",
                 "sort_key", "simple", "relaxed", "spread_eligible", "errors", "inv", "zmap", "limit")

    def effective_reqs(self, preferred: bool = True) -> Requirements:
        """The requirements in force: the required node-affinity term in force (with the node selector) and, with
        ``preferred``, the heaviest preferred term not yet dropped."""
        r = Requirements()
        if self.terms:
            r.add_all(self.terms[self.term_idx])
        if preferred and self.pref_drop < len(self.preferred):
            r.add_all(self.preferred[self.pref_drop][1])
        imply_reserved(r)
        if L.ZONE_ID in r:
            # topology.k8s.aws/zone-id names one zone: also constrain the zone, so offerings, domains and the
            # plan's zone follow it (the map comes from the offerings' zone ids)
            m = self.zmap()
            if m:
                zr = r.get(L.ZONE_ID)
                r.add(Requirement(L.ZONE, False, {z for zid, z in m.items() if zr.has(zid)}))
        return r

    def strict_reqs(self) -> tuple[Requirements, tuple]:
        """(requirements, signature) without the preferred node affinity nor what the pod's volumes added: what a
        topology spread counts its domains by (Karpenter's StrictRequirements; kube-scheduler's nodeAffinityPolicy
        Honor reads the pod's own required terms).  A preferred zone or a volume's zone must not shrink the domains
        the skew is measured over.  Cached per required term."""
        hit = self.errors.get("strict")
        if hit is not None and hit[0] == self.term_idx:
            return hit[1], hit[2]
        # the pod's own terms: what its volumes added (scheduling/volumes.inject) is not the pod's node affinity
        own = node_terms(self.pods[0], own=True) if self.terms else []
        r = Requirements()
        if own:
            r.add_all(own[min(self.term_idx, len(own) - 1)])
        if L.ZONE_ID in r:
            m = self.zmap()
            if m:
                zr = r.get(L.ZONE_ID)
                r.add(Requirement(L.ZONE, False, {z for zid, z in m.items() if zr.has(zid)}))
        sig = r.signature()
        self.errors["strict"] = (self.term_idx, r, sig)
        return r, sig

    def hostname_blocks(self) -> bool:
        """A pod requiring kubernetes.io/hostname In [...] (or DoesNotExist) can only go to existing nodes: a new
        node's hostname is not known in advance (Karpenter gives each new NodeClaim a placeholder hostname)."""
        r = self.reqs.get(L.HOSTNAME) if L.HOSTNAME in self.reqs else None
        return r is not None and not r.complement

    def active_constraints(self):
        """The class's topology constraints not dropped by relaxation."""
        for i, (con, sel, nss) in enumerate(self.cons):
            if i in self.dropped:
                continue
            yield con

    def self_conflicts(self) -> list[str]:
        """The pod's own node selector and required affinity term (the one in force) where they exclude each other,
        per key (``api/exclusive.py``: two volumes in different zones, ``In [a]`` and ``NotIn [a]``): no node can
        satisfy them, whatever its NodePool.  Each as ``"<requirement> and <requirement>"``; for explanations (the
        pod is unschedulable), so read from the pod's spec here rather than kept while solving."""
        if not self.terms or not any(r.is_empty() for r in self.terms[self.term_idx]):
            return []
        spec = self.pods[0].get("spec") or {}
        na = (spec.get("affinity") or {}).get("nodeAffinity") or {}
        terms = (na.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
        term = terms[self.term_idx] if self.term_idx < len(terms) else None
        return [describe(key, asks) for key, asks in exclusive(spec.get("nodeSelector"), term)]

    def wants_exotic(self) -> bool:
        """Does the class ask for an accelerator (GPU, Neuron, Gaudi) or a metal type?  (Cached per requirement set.)"""
        hit = self.errors.get("exotic")
        if hit is not None and hit[0] is self.sig:
            return hit[1]
        v = self._wants_exotic_uncached()
        self.errors["exotic"] = (self.sig, v)
        return v

    def _wants_exotic_uncached(self) -> bool:
        if any(self.req.get(r, 0) for r in EXOTIC_RESOURCES):
            return True
        for k in EXOTIC_KEYS:
            if k in self.reqs:
                r = self.reqs.get(k)
                if not r.is_empty() and r.operator not in ("NotIn", "DoesNotExist"):
                    return True
        return False


def build_classes(pods: list, zone_map, unschedulable: list, namespaces: dict | None = None) -> list[PodClass]:
    """The pending pods grouped into classes (same namespace, labels and spec), in Karpenter's queue order; a pod
    whose spec does not parse goes to ``unschedulable``.  ``zone_map``: () -> {zone id: zone} (for zone-id
    requirements); ``namespaces``: the namespaces' labels for namespaceSelectors (``topology.pod_constraints``)."""
    by_key: dict = {}
    shapes: dict = {}
    constraints: dict = {}
    classes = []
    # a spec's parts by identity -> (the part, its text): pods made from one template share them (the volume step
    # gives the pods of a volume or class one affinity object); each part is held, so its id stays its own
    texts: dict = {}

    def text(obj) -> str:
        hit = texts.get(id(obj))
        if hit is None:
            hit = texts[id(obj)] = (obj, repr(obj))
        return hit[1]
    for i, pod in enumerate(pods):
        if not isinstance(pod, dict):
            raise SchedulingError(f"pods[{i}]: must be a Pod object (dict)")
        if is_daemon_pod(pod):
            continue
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        labels = meta.get("labels") or {}
        ns = meta.get("namespace") or "default"
        # volumes do not enter the class: what they ask of a node is in the spec's affinity and overhead already
        # (scheduling/volumes.inject), so a StatefulSet's pods differing only in their claims stay one shape
        # (the spec's text part by part: equal exactly when the whole spec's text is)
        key = (ns, repr(sorted(labels.items())), tuple((k, text(v)) for k, v in spec.items() if k != "volumes"))
        c = by_key.get(key)
        if c is None:
            c = PodClass()
            # classes share what they ask of a node when their node selector and node affinity are the same (pods
            # differing only in labels or requests: StatefulSet replicas, pods pinned to a zone by their volumes),
            # and their topology constraints when their labels, pod (anti-)affinity and spread constraints are:
            # each parsed once
            aff = spec.get("affinity") or {}
            na = aff.get("nodeAffinity") or {}
            nkey = (text(spec.get("nodeSelector")), text(na))
            ckey = None
            if spec.get("topologySpreadConstraints") or aff.get("podAffinity") or aff.get("podAntiAffinity"):
                ckey = (key[0], key[1], text(aff), text(spec.get("topologySpreadConstraints")))
            try:
                c.req = pod_requests(pod)
                shape = shapes.get(nkey)
                if shape is None:
                    terms = node_terms(pod)
                    prefs = []
                    for j, p in enumerate(na.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
                        prefs.append((int(p.get("weight", 1)), node_selector_term(p.get("preference"))))
                    prefs.sort(key=lambda x: -x[0])
                    shape = shapes[nkey] = (terms, prefs, [])
                c.terms, c.preferred, eff = shape
                if ckey is None:
                    cons = []
                else:
                    cons = constraints.get(ckey)
                    if cons is None:
                        cons = constraints[ckey] = T.pod_constraints(pod, namespaces)
                c.ports = host_ports(spec)
            except (PodSpecError, RequirementError, ValueError) as e:
                unschedulable.append(Unschedulable(pod_key(pod), f"invalid pod: {e}"))
                continue
            c.pods, c.keys = [], []
            c.ns, c.labels = ns, labels
            c.term_idx = 0
            c.pref_drop = 0
            c.tolerations = spec.get("tolerations") or []
            c.tolerate_pns = False
            c.cons = cons
            c.dropped = set()
            c.placed = 0
            c.relaxed = []
            c.errors = {}
            c.zmap = zone_map
            c.sort_key = (-c.req.get("cpu", 0), -c.req.get("memory", 0), meta.get("creationTimestamp") or "",
                          meta.get("uid") or pod_key(pod))
            if not eff:
                r = c.effective_reqs()
                eff.extend((r, r.signature()))
            c.reqs, c.sig = eff
            by_key[key] = c
            classes.append(c)
        c.pods.append(pod)
        c.keys.append(pod_key(pod))
    for c in classes:
        c.limit = len(c.pods)  # how many of its pods may be placed now (lowered while a zone's share is placed)
    classes.sort(key=lambda c: c.sort_key)
    return classes
