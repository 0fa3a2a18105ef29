"""The scheduling predicates, one definition each: what a pod asks of a node and whether a node gives it.

Two views of the same rules:

* the solver's, on requirements: a pod's required node-affinity terms (:func:`node_terms`, ORed, each intersected
  with its nodeSelector) and whether a node with exactly these labels satisfies them (:func:`labels_match`);
  host ports (:func:`host_ports`, :func:`ports_conflict`);
* the kube-scheduler's, on one concrete node (its labels and name), as the simulator's kube-scheduler filters:
  :func:`node_selector_matches`, :func:`node_affinity_matches` (``matchFields`` on ``metadata.name`` included,
  an empty term matches nothing), :func:`untolerated_hard` (NoSchedule / NoExecute taints),
  :func:`affinity_term_matches` (inter-pod (anti-)affinity terms) and :func:`label_selector_matches`.

Taints and tolerations themselves live in :mod:`.taints`, label selectors in :mod:`karpenter_lambda.api.selectors`.
"""

from __future__ import annotations

from ..api.kube import pod_key
from ..api.selectors import NAMESPACE_NAME_LABEL, NamespaceLabels, Selector, namespace_labels, selector_matches
from .requirements import Requirements, node_selector_term
from .taints import HARD_EFFECTS, tolerates_taint, untolerated, untolerated_hard
from .volumes import VolumeExpression

__all__ = [
    "node_terms",
    "host_ports",
    "ports_conflict",
    "labels_match",
    "expression_matches",
    "node_selector_matches",
    "node_affinity_matches",
    "pod_namespace",
    "term_namespaces",
    "has_namespace_selector",
    "NamespaceLabels",
    "namespace_labels",
    "NAMESPACE_NAME_LABEL",
    "affinity_term_matches",
    "label_selector_matches",
    "untolerated",
    "untolerated_hard",
    "tolerates_taint",
    "HARD_EFFECTS",
    "pod_key",
]

ANY_IP = ("0.0.0.0", "::", "")


# ----------------------------------------------------------------------------------------------------------- solver
def node_terms(pod: dict, own: bool = False) -> list[Requirements]:
    """Required node-affinity terms (ORed), each intersected with the nodeSelector; [] when none.  ``own``: without
    the expressions the pod's volumes added (``volumes.VolumeExpression``): the pod's spec as the user wrote it."""
    spec = pod.get("spec") or {}
    base = Requirements.from_labels(spec.get("nodeSelector"))
    na = ((spec.get("affinity") or {}).get("nodeAffinity") or {})
    req = (na.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    if own:
        req = [{**t, "matchExpressions": [e for e in t.get("matchExpressions") or () if type(e) is not VolumeExpression]}
               if isinstance(t, dict) and any(type(e) is VolumeExpression for e in t.get("matchExpressions") or ()) else t
               for t in req]
        req = [t for t in req if not isinstance(t, dict) or t.get("matchExpressions") or t.get("matchFields")]
    if not req:
        return [base] if len(base) else []
    return [base.intersection(node_selector_term(t)) for t in req]


def host_ports(spec: dict) -> frozenset:
    """(hostIP, protocol, hostPort) of every container and init container port with a hostPort."""
    ports = set()
    for ctr in list(spec.get("containers") or []) + list(spec.get("initContainers") or []):
        for p in ctr.get("ports") or []:
            if p.get("hostPort"):
                try:
                    port = int(p["hostPort"])
                except (TypeError, ValueError):
                    raise ValueError(f"spec.containers[].ports[].hostPort: not an integer: {p['hostPort']!r}") from None
                ports.add((p.get("hostIP") or "0.0.0.0", p.get("protocol") or "TCP", port))
    return frozenset(ports)


def ports_conflict(a, b):
    """The first port of ``b`` that clashes with one of ``a`` (same port and protocol, and the same host IP or
    either one unspecified, as the kube-scheduler's NodePorts filter), else None."""
    if not a or not b:
        return None
    for ip, proto, port in b:
        for ip2, proto2, port2 in a:
            if port == port2 and proto == proto2 and (ip == ip2 or ip in ANY_IP or ip2 in ANY_IP):
                return (ip, proto, port)
    return None


def labels_match(reqs: Requirements, labels: dict) -> str | None:
    """Does a node with exactly these labels satisfy ``reqs``?  None if so, else why not."""
    for r in reqs:
        v = labels.get(r.key)
        if v is None:
            if r.operator in ("NotIn", "DoesNotExist") and not r.conflict:
                continue
            return f"node has no label {r.key}"
        if not r.has(v):
            return f"{r.key}={v} does not satisfy {r}"
    return None


# --------------------------------------------------------------------------------------------------- kube-scheduler
def expression_matches(expr: dict, value: str | None) -> bool:
    """One NodeSelectorRequirement against a node's value for its key (None: the node has no such label)."""
    op = expr.get("operator")
    vals = expr.get("values") or []
    if op == "In":
        return value is not None and value in vals
    if op == "NotIn":
        return value is None or value not in vals
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        try:
            v, bound = int(value), int(vals[0])  # type: ignore[arg-type]
        except (TypeError, ValueError, IndexError):
            return False
        return v > bound if op == "Gt" else v < bound
    return False


def node_selector_matches(spec: dict, labels: dict) -> bool:
    """The pod spec's ``nodeSelector`` against a node's labels."""
    return all(labels.get(k) == v for k, v in (spec.get("nodeSelector") or {}).items())


def node_affinity_matches(pod: dict, labels: dict, name: str | None = None) -> bool:
    """The pod's required node affinity against one node (terms ORed; an empty term matches nothing;
    ``matchFields`` on ``metadata.name`` against ``name``)."""
    aff = (((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if not aff:
        return True
    for term in aff.get("nodeSelectorTerms") or []:
        exprs = term.get("matchExpressions") or []
        fields_ = term.get("matchFields") or []
        if not exprs and not fields_:
            continue  # an empty term matches nothing
        if all(expression_matches(e, labels.get(e.get("key"))) for e in exprs) and all(
            expression_matches(f, name if f.get("key") == "metadata.name" else None) for f in fields_
        ):
            return True
    return False


def pod_namespace(pod: dict) -> str:
    return (pod.get("metadata") or {}).get("namespace") or "default"


def term_namespaces(term: dict, owner_ns: str, any_selector_is_all: bool = False,
                    namespaces: dict | None = None) -> frozenset | None:
    """The namespaces a pod (anti-)affinity term of a pod in ``owner_ns`` selects; None = every namespace.

    As Karpenter's ``buildNamespaceList``: no ``namespaceSelector``: the ``namespaces`` listed, else the owner's
    namespace; a ``namespaceSelector``: the namespaces whose labels it selects (``namespaces``: {name: labels},
    best a :class:`NamespaceLabels`) and those listed; an empty one ({}) selects every namespace.  When the
    namespaces' labels are not known (``namespaces`` None), a non-empty selector is ignored (the listed namespaces,
    else the owner's) or, with ``any_selector_is_all``, taken as every namespace."""
    ns = term.get("namespaces") or []
    nss = term.get("namespaceSelector")
    if nss is not None:
        if not (nss.get("matchLabels") or nss.get("matchExpressions")):
            return None
        if namespaces is not None:
            return namespace_labels(namespaces).selected(nss).union(ns)
        if any_selector_is_all:
            return None
    return frozenset(ns) if ns else frozenset([owner_ns])


def has_namespace_selector(pod: dict) -> bool:
    """Does a pod (anti-)affinity term of ``pod`` (required or preferred) carry a non-empty namespaceSelector (one
    only the namespaces' labels answer)?"""
    aff = (pod.get("spec") or {}).get("affinity") or {}
    for field in ("podAffinity", "podAntiAffinity"):
        block = aff.get(field) or {}
        terms = list(block.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
        terms += [(w or {}).get("podAffinityTerm") or {} for w in block.get("preferredDuringSchedulingIgnoredDuringExecution") or []]
        for t in terms:
            nss = (t or {}).get("namespaceSelector")
            if nss and (nss.get("matchLabels") or nss.get("matchExpressions")):
                return True
    return False


def label_selector_matches(sel: dict | None, labels: dict | None, extra: dict | None = None) -> bool:
    """A metav1.LabelSelector (``None`` matches nothing, ``{}`` everything), ``extra`` added to its matchLabels
    (matchLabelKeys); an unknown operator matches nothing (the API server would have refused it)."""
    if extra is None:
        return selector_matches(sel, labels)
    try:
        return Selector(sel, extra).matches(labels)
    except ValueError:
        return False


def affinity_term_matches(term: dict, owner_ns: str, pod: dict, namespaces: dict | None = None) -> bool:
    """Does ``pod`` match a pod (anti-)affinity term declared by a pod of namespace ``owner_ns``?  ``namespaces``
    ({name: labels}, best a :class:`NamespaceLabels`): the namespaces a namespaceSelector selects from; None (not
    known): a non-empty namespaceSelector selects every namespace."""
    nss = term_namespaces(term, owner_ns, any_selector_is_all=True, namespaces=namespaces)
    if nss is not None and pod_namespace(pod) not in nss:
        return False
    return label_selector_matches(term.get("labelSelector"), (pod.get("metadata") or {}).get("labels") or {})
