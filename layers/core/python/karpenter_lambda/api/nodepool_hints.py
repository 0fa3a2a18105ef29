"""Warnings for NodePools that are valid but cannot do what they say (pure): ``validate`` reports them as warnings
(Karpenter's CRD takes them).

**A requirement value no node has.** The CRD restricts the keys of the well-known domains but takes any value, so a
typo in ``kubernetes.io/arch: [amd46]``, ``karpenter.k8s.aws/instance-family: [m7]`` or
``node.kubernetes.io/instance-type: [m5.larg]`` is a NodePool that silently launches fewer instance types than it
names (none, when every value is a typo), and a ``NotIn`` typo excludes nothing.  Values are checked as in a pod's
node selector (:func:`.pod_hints.value_hint`): the closed sets of ``kubernetes.io/arch``, ``kubernetes.io/os`` and
``karpenter.sh/capacity-type``, and, with ``catalog`` ({label key: values}), the instance type, family, size and
category names the catalog knows.

**A budget with ``reasons: []``.** Karpenter reads an empty list as no reason at all (a nil list is every reason):
the budget limits nothing, which is rarely what was meant.

**An expireAfter shorter than 10 minutes.** Launch, join and initialization take a minute or more, so each node is
replaced about as soon as it is ready: a churn of launches that is usually a unit typo (``720s`` for ``720h``).
"""

from __future__ import annotations

from .durations import DurationError, parse_nillable_duration
from .errors import FieldError
from .pod_hints import value_hint

__all__ = ["nodepool_requirement_hints", "SHORT_EXPIRY"]

#: an ``expireAfter`` below this replaces every node about as soon as it is ready (launch, join and initialization
#: take a minute or more), usually a unit typo (``720s`` for ``720h``)
SHORT_EXPIRY = 600


def nodepool_requirement_hints(doc, catalog: dict | None = None) -> list[FieldError]:
    """The warnings for one NodePool document (v1), in field order."""
    spec = doc.get("spec") if isinstance(doc, dict) else None
    template = spec.get("template") if isinstance(spec, dict) else None
    tspec = template.get("spec") if isinstance(template, dict) else None
    reqs = tspec.get("requirements") if isinstance(tspec, dict) else None
    out: list[FieldError] = []
    expire = tspec.get("expireAfter") if isinstance(tspec, dict) else None
    try:
        seconds = parse_nillable_duration(expire) if isinstance(expire, str) else None
    except DurationError:
        seconds = None
    if seconds is not None and seconds < SHORT_EXPIRY:
        out.append(FieldError("spec.template.spec.expireAfter", f"expireAfter {expire} is shorter than {SHORT_EXPIRY // 60} "
                                                                "minutes: every node expires and is replaced about as "
                                                                "soon as it is ready (a unit typo? h is hours)"))
    disruption = spec.get("disruption") if isinstance(spec, dict) else None
    budgets = disruption.get("budgets") if isinstance(disruption, dict) else None
    for i, b in enumerate(budgets if isinstance(budgets, list) else ()):
        if isinstance(b, dict) and b.get("reasons") == []:
            out.append(FieldError(f"spec.disruption.budgets[{i}].reasons",
                                  "an empty reasons list applies this budget to no disruption reason (as Karpenter "
                                  "reads it): it limits nothing; leave reasons out to apply it to every reason"))
    for i, r in enumerate(reqs if isinstance(reqs, list) else ()):
        if not isinstance(r, dict) or r.get("operator") not in ("In", "NotIn") or not isinstance(r.get("values"), list):
            continue
        hint = value_hint(r.get("key"), r["values"], catalog)
        if hint:
            tail = "; NotIn of it excludes nothing" if r["operator"] == "NotIn" else ""
            out.append(FieldError(f"spec.template.spec.requirements[{i}].values", hint + tail))
    return out
