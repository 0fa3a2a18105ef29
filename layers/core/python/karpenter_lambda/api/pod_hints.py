"""Warnings for pod specs that are valid Kubernetes but cannot do what they say (pure): ``validate`` reports them as
warnings, not errors (the API server takes them).

**Labels no node has.** The API server takes any label key and value in a pod's ``nodeSelector``, node affinity and
topology keys, so a typo there is a valid pod that never schedules (``kubernetes.io/arch: amd46``) or whose spread or
anti-affinity counts nothing (``topologyKey: kubernetes.io/hostnme``: nodes without the key).  A key one typo away from
a well-known one may still be a label of the user's own (a NodePool's ``labels``), hence a warning:

* a key one typo from a well-known node label (``api.labels.WELL_KNOWN``, the deprecated aliases of
  ``api.labels.NORMALIZED``), in a node selector, a node affinity expression or a ``topologyKey``;
* a value of a label whose values are a closed set on AWS nodes (``kubernetes.io/arch``: amd64, arm64;
  ``kubernetes.io/os``: linux, windows; ``karpenter.sh/capacity-type``) that is not one of them, where the pod
  requires it (``nodeSelector``, ``In``);
* a value of an instance type, family, size or category label that no instance type of the catalog has
  (``node.kubernetes.io/instance-type: m5.larg``), when the caller passes the catalog's values (``validate`` passes
  the bundled table's: a type newer than it is warned about too, hence "in karpenter-lambda's catalog").

**Requirements that exclude each other** (``api/exclusive.py``). A node selector and a required node-affinity term
are ANDed: when on one key they (or two expressions of one term) leave no value (``nodeSelector:
{topology.kubernetes.io/zone: us-east-1a}`` with a term asking ``us-east-1b``), no node satisfies that term; the pod
never schedules unless another ORed term can be met.

**Terms that select no pods.** A topology spread constraint or a pod (anti-)affinity term without ``labelSelector``
(and without ``matchLabelKeys``) selects no pod at all (the scheduler reads a missing selector as "nothing"): the
spread spreads nothing, the anti-affinity keeps nothing apart, and a required pod affinity can never be met (not even
by the pod itself), so the pod never schedules.

**A spread that does not count its own pods.** A topology spread constraint whose ``labelSelector`` does not select
the pod's own labels (``app: wev`` for pods labelled ``app: web``) counts only other pods: the workload's own replicas
are not spread at all (the scheduler and the provisioner place them as if the constraint were about someone else).
Legal, and meant when spreading around another workload, so a warning naming the labels.
"""

from __future__ import annotations

from . import labels as L
from .errors import FieldError
from .exclusive import describe, exclusive
from .selectors import Selector, selector_matches
from .text import did_you_mean, near

__all__ = ["pod_spec_hints", "value_hint", "KNOWN_KEYS", "CLOSED_VALUES"]

#: the node label keys a typo is measured against
KNOWN_KEYS = frozenset(L.WELL_KNOWN) | frozenset(L.NORMALIZED)
#: labels whose values on an AWS node are one of these
CLOSED_VALUES = {L.ARCH: (L.ARCH_AMD64, L.ARCH_ARM64), L.OS: ("linux", "windows"), L.CAPACITY_TYPE: L.CAPACITY_TYPES}


def _key_hint(key) -> str | None:
    if not isinstance(key, str) or key in KNOWN_KEYS:
        return None
    close = near(key, KNOWN_KEYS)
    return f"no node karpenter-lambda launches has the label {key}{did_you_mean(close)}" if close else None


def value_hint(key, values, catalog: dict | None = None) -> str | None:
    nkey = L.normalize_key(key) if isinstance(key, str) else None
    allowed = CLOSED_VALUES.get(nkey) if nkey else None
    if allowed is None:
        known = (catalog or {}).get(nkey) if nkey else None
        bad = [v for v in values if isinstance(v, str) and v not in known] if known else []
        if not bad:
            return None
        # one typo away, those extending the value first (m7 -> m7a, m7g, m7i rather than m5), else extensions of it
        close = sorted({a for v in bad for a in near(v, known)})
        close = [a for a in close if any(v and a.startswith(v) for v in bad)] or close or \
            sorted({a for v in bad for a in known if v and a.startswith(v)})
        return f"no instance type in karpenter-lambda's catalog has {key}={', '.join(bad)}{did_you_mean(close, 5)}"
    bad = [v for v in values if isinstance(v, str) and v not in allowed]
    if not bad:
        return None
    close = sorted({a for v in bad for a in near(v, allowed)})
    return f"no node has {key}={', '.join(bad)}: its values on AWS nodes are {', '.join(allowed)}{did_you_mean(close)}"


def _expressions(term, path: str, out: list[FieldError], catalog: dict | None = None) -> None:
    if not isinstance(term, dict):
        return
    for j, e in enumerate(term.get("matchExpressions") or ()):
        if not isinstance(e, dict):
            continue
        where = f"{path}.matchExpressions[{j}]"
        hint = _key_hint(e.get("key"))
        if hint:
            out.append(FieldError(f"{where}.key", hint))
        values = e.get("values") if isinstance(e.get("values"), list) else []
        hint = value_hint(e.get("key"), values, catalog) if e.get("operator") == "In" else None
        if hint:
            out.append(FieldError(f"{where}.values", hint))


def _topology_key(term, path: str, out: list[FieldError], empty: str = "") -> None:
    """A spread constraint's or pod affinity term's ``topologyKey``; ``empty``: what a term selecting no pods means."""
    if not isinstance(term, dict):
        return
    hint = _key_hint(term.get("topologyKey"))
    if hint:
        out.append(FieldError(f"{path}.topologyKey", hint))
    if empty and term.get("labelSelector") is None and not term.get("matchLabelKeys"):
        out.append(FieldError(f"{path}.labelSelector", f"no labelSelector: the scheduler reads it as selecting no pods, "
                                                       f"so {empty}"))


_NOTHING = {"podAffinity": ("the pod can never be placed (not even beside itself)", "this preference has no effect"),
            "podAntiAffinity": ("it keeps nothing apart", "it keeps nothing apart")}


def pod_spec_hints(spec, path: str, labels: dict | None = None, catalog: dict | None = None) -> list[FieldError]:
    """The warnings for one pod spec (``path``: where it sits, e.g. ``spec.template.spec``), in field order;
    ``labels``: the pod's (its template's) labels, when known; ``catalog``: {label key: the values the instance
    catalog gives it} (``catalog.instancetypes.bundled_label_values``), for instance type, family, size and
    category values no instance type has."""
    out: list[FieldError] = []
    if not isinstance(spec, dict):
        return out
    selector = spec.get("nodeSelector")
    for key, value in (selector.items() if isinstance(selector, dict) else ()):
        hint = _key_hint(key) or value_hint(key, [value], catalog)
        if hint:
            out.append(FieldError(f"{path}.nodeSelector[{key}]", hint))
    affinity = spec.get("affinity") if isinstance(spec.get("affinity"), dict) else {}
    node = affinity.get("nodeAffinity") if isinstance(affinity.get("nodeAffinity"), dict) else {}
    where = f"{path}.affinity.nodeAffinity"
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    for i, term in enumerate(terms if isinstance(terms, list) else ()):
        _expressions(term, f"{where}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]", out,
                     catalog)
    ored = terms if isinstance(terms, list) and terms else [None]
    for i, term in enumerate(ored):
        for key, asks in exclusive(selector, term):
            at = f"{where}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]" if term is not None \
                else f"{path}.nodeSelector"
            never = "the pod never schedules" if len(ored) == 1 else "this term can never be met"
            out.append(FieldError(at, f"requirements that exclude each other ({describe(key, asks, True)}): no node "
                                      f"satisfies them, {never}"))
    for i, pref in enumerate(node.get("preferredDuringSchedulingIgnoredDuringExecution") or ()):
        if isinstance(pref, dict):
            _expressions(pref.get("preference"),
                         f"{where}.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference", out, catalog)
    for kind in ("podAffinity", "podAntiAffinity"):
        pod = affinity.get(kind) if isinstance(affinity.get(kind), dict) else {}
        where = f"{path}.affinity.{kind}"
        required, preferred = _NOTHING[kind]
        for i, term in enumerate(pod.get("requiredDuringSchedulingIgnoredDuringExecution") or ()):
            _topology_key(term, f"{where}.requiredDuringSchedulingIgnoredDuringExecution[{i}]", out, required)
        for i, w in enumerate(pod.get("preferredDuringSchedulingIgnoredDuringExecution") or ()):
            if isinstance(w, dict):
                _topology_key(w.get("podAffinityTerm"),
                              f"{where}.preferredDuringSchedulingIgnoredDuringExecution[{i}].podAffinityTerm", out,
                              preferred)
    for i, c in enumerate(spec.get("topologySpreadConstraints") or ()):
        _topology_key(c, f"{path}.topologySpreadConstraints[{i}]", out, "it spreads nothing")
        if isinstance(labels, dict) and isinstance(c, dict) and isinstance(c.get("labelSelector"), dict) \
                and not selector_matches(c["labelSelector"], labels):
            own = ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "none"
            try:
                sel = str(Selector(c["labelSelector"]))
            except ValueError:
                sel = "?"
            out.append(FieldError(f"{path}.topologySpreadConstraints[{i}].labelSelector",
                                  f"topologySpreadConstraints[{i}].labelSelector {sel} selects none of this "
                                  f"workload's own pods (labels {own}): only other pods are counted, its own "
                                  f"replicas are not spread (a typo?)"))
    claims = spec.get("resourceClaims")
    if isinstance(claims, list) and claims:
        out.append(FieldError(f"{path}.resourceClaims",
                              "dynamic resource allocation claims are not read when sizing nodes (as Karpenter's "
                              "default --ignore-dra-requests=true): the node is chosen for the pod's CPU, memory and "
                              "extended resources only, and a device the claim needs may not be on it"))
    return out
