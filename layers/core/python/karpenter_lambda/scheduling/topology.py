"""Topology spread and pod (anti-)affinity as topology groups with per-domain counts.

A *group* is (kind, topology key, namespaces, label selector[, maxSkew, minDomains]); it counts, per domain
(a value of the topology key; for ``kubernetes.io/hostname`` the node name), the pods that match its
selector.  A pod *owns* constraints (the groups its spec declares) and is a *member* of the groups whose
selector matches it.  Karpenter's rules:

* spread: ``count(domain) + 1 - min(eligible domains) <= maxSkew``; when fewer than ``minDomains`` eligible
  domains exist the minimum is 0; for hostname the minimum is always 0 (a new node is always possible);
  the domain with the lowest count is chosen.
* affinity: a domain already holding a matching pod; when no pod matches anywhere and the pod matches its
  own selector, any domain (the first pod seeds it).
* anti-affinity: a domain holding no matching pod; and, inversely, a pod may not join a domain holding a
  pod whose required anti-affinity selects it.

A spread group also has a *node filter* (Karpenter's ``TopologyNodeFilter``, :class:`NodeFilter`): only pods on nodes
that pass it count -- with ``nodeAffinityPolicy: Honor`` (the default) the nodes matching the owning pod's
nodeSelector and required node affinity (its terms ORed), with ``nodeTaintsPolicy: Honor`` the nodes whose taints it
tolerates.  The filter is part of the group's key: owners with different filters have different groups.
"""

from __future__ import annotations

from ..api import labels as L
from ..api.selectors import Selector
from .predicates import labels_match, term_namespaces
from .taints import untolerated

__all__ = ["Selector", "Group", "Constraint", "NodeFilter", "node_filter", "pod_constraints", "SPREAD", "AFFINITY",
           "ANTI"]

SPREAD, AFFINITY, ANTI = "spread", "affinity", "anti-affinity"


class Group:
    """Counts of matching pods per domain for one (kind, key, namespaces, selector)."""

    __slots__ = ("kind", "key", "namespaces", "selector", "counts", "gid", "total", "filter")

    def __init__(self, kind: str, key: str, namespaces: frozenset | None, selector: Selector,
                 node_filter: "NodeFilter | None" = None):
        self.kind = kind
        self.key = key
        self.namespaces = namespaces  # None = all namespaces
        self.selector = selector
        self.counts: dict[str, int] = {}
        self.total = 0
        self.filter = node_filter  # a spread group's node filter; None = every node counts
        self.gid = (kind, key, namespaces, selector.sig, node_filter.sig if node_filter is not None else None)

    def matches(self, namespace: str, labels: dict) -> bool:
        return (self.namespaces is None or namespace in self.namespaces) and self.selector.matches(labels)

    def record(self, domain: str, n: int = 1) -> None:
        self.counts[domain] = self.counts.get(domain, 0) + n
        self.total += n


class Constraint:
    """One constraint a pod owns, pointing at its shared group."""

    __slots__ = ("kind", "key", "group_key", "max_skew", "min_domains", "required", "weight", "text",
                 "node_taints_honor", "node_affinity_honor")

    def __init__(self, kind, key, group_key, max_skew=1, min_domains=None, required=True, weight=0, text="",
                 node_taints_honor=False, node_affinity_honor=True):
        self.kind = kind
        self.key = key
        # (kind, key, namespaces, selector) used to find/create the Group; a spread constraint whose owner has a node
        # filter gets it appended (see ``keyed`` and the tracker), so owners with different filters get different groups
        self.group_key = group_key
        self.max_skew = max_skew
        self.min_domains = min_domains
        self.required = required
        self.weight = weight
        self.text = text
        self.node_taints_honor = node_taints_honor      # nodeTaintsPolicy: Honor (default Ignore)
        self.node_affinity_honor = node_affinity_honor  # nodeAffinityPolicy: Honor (the default) / Ignore

    def keyed(self, group_key: tuple) -> "Constraint":
        """This constraint pointing at another group (the same constraint of an owner with another node filter)."""
        return Constraint(self.kind, self.key, group_key, self.max_skew, self.min_domains, self.required, self.weight,
                          self.text, self.node_taints_honor, self.node_affinity_honor)


class NodeFilter:
    """Which nodes a spread group counts the pods of (Karpenter's ``TopologyNodeFilter``; the kube-scheduler's
    nodeAffinityPolicy / nodeTaintsPolicy): ``terms`` (the owner's required node-affinity terms, each with its
    nodeSelector, ORed; None: not checked) and ``tolerations`` (the owner's; None: taints not checked)."""

    __slots__ = ("terms", "tolerations", "sig")

    def __init__(self, terms, tolerations):
        self.terms = terms
        self.tolerations = tolerations
        self.sig = (None if terms is None else tuple(t.signature() for t in terms),
                    None if tolerations is None else repr(tolerations))

    def passes_labels(self, labels: dict, taints) -> bool:
        """Does an existing node (its labels and taints) count?"""
        if self.terms is not None and not any(labels_match(t, labels) is None for t in self.terms):
            return False
        return self.tolerations is None or untolerated(self.tolerations, taints) is None

    def passes_reqs(self, reqs, taints) -> bool:
        """Does a planned node (its requirements and taints) count?  Its requirements must be compatible with one of
        the terms (Karpenter's ``nodeFilter.Matches`` on a NodeClaim's requirements)."""
        if self.terms is not None and not any(reqs.compatible(t) is None for t in self.terms):
            return False
        return self.tolerations is None or untolerated(self.tolerations, taints) is None


def node_filter(con: Constraint, terms, tolerations) -> NodeFilter | None:
    """The node filter of spread constraint ``con`` owned by pods with required node-affinity terms ``terms`` (each
    with the nodeSelector; [] when neither) and ``tolerations``; None when every node passes (nodeAffinityPolicy
    Ignore or no node selector / affinity, and nodeTaintsPolicy Ignore)."""
    fterms = None
    if con.node_affinity_honor and terms and all(len(t) for t in terms):
        fterms = tuple(terms)
    ftols = list(tolerations or ()) if con.node_taints_honor else None
    if fterms is None and ftols is None:
        return None
    return NodeFilter(fterms, ftols)


def pod_constraints(pod: dict, namespaces: dict | None = None) -> list[tuple]:
    """``[(Constraint, Selector, namespaces)]`` a pod declares: spread constraints, required and preferred
    pod affinity / anti-affinity (preferred ones carry their weight and ``required=False``).  ``namespaces``: the
    cluster's namespaces and their labels (``predicates.NamespaceLabels``), for the terms' namespaceSelectors
    (None: not known, ``predicates.term_namespaces``)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    ns = meta.get("namespace") or "default"
    plabels = meta.get("labels") or {}
    out = []
    for i, tsc in enumerate(spec.get("topologySpreadConstraints") or []):
        key = L.normalize_key(tsc.get("topologyKey") or "")
        if not key:
            raise ValueError(f"spec.topologySpreadConstraints[{i}].topologyKey: required")
        skew = int(tsc.get("maxSkew", 1))
        if skew < 1:
            raise ValueError(f"spec.topologySpreadConstraints[{i}].maxSkew: must be >= 1")
        extra = {k: plabels[k] for k in tsc.get("matchLabelKeys") or [] if k in plabels}
        sel = Selector(tsc.get("labelSelector"), extra)
        nsset = frozenset([ns])
        required = (tsc.get("whenUnsatisfiable") or "DoNotSchedule") == "DoNotSchedule"
        md = tsc.get("minDomains")
        text = f"topology spread {key} maxSkew {skew}" + (f" minDomains {md}" if md else "") + f" selector {sel}"
        c = Constraint(SPREAD, key, (SPREAD, key, nsset, sel.sig), skew, int(md) if md else None, required, 0, text,
                       tsc.get("nodeTaintsPolicy") == "Honor", tsc.get("nodeAffinityPolicy") != "Ignore")
        out.append((c, sel, nsset))
    aff = spec.get("affinity") or {}
    for kind, field in ((AFFINITY, "podAffinity"), (ANTI, "podAntiAffinity")):
        block = aff.get(field) or {}
        for term in block.get("requiredDuringSchedulingIgnoredDuringExecution") or []:
            out.append(_term_constraint(kind, term, ns, plabels, True, 0, namespaces))
        for wt in block.get("preferredDuringSchedulingIgnoredDuringExecution") or []:
            out.append(_term_constraint(kind, wt.get("podAffinityTerm") or {}, ns, plabels, False, int(wt.get("weight", 1)),
                                        namespaces))
    return out


def _term_constraint(kind, term, ns, plabels, required, weight, namespaces=None):
    key = L.normalize_key(term.get("topologyKey") or "")
    if not key:
        raise ValueError(f"spec.affinity: pod {kind} term needs a topologyKey")
    extra = {k: plabels[k] for k in term.get("matchLabelKeys") or [] if k in plabels}
    sel = Selector(term.get("labelSelector"), extra)
    nss = term_namespaces(term, ns, namespaces=namespaces)
    text = f"{'' if required else 'preferred '}pod {kind} {key} selector {sel}"
    return Constraint(kind, key, (kind, key, nss, sel.sig), 1, None, required, weight, text), sel, nss
