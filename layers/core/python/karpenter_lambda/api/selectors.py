"""metav1.LabelSelector, one definition: the solver's topology groups, PDBs, off-peak workload targets and the
simulator's API server and kube-scheduler all match labels through :class:`Selector`; the namespaces a pod
(anti-)affinity term's ``namespaceSelector`` selects through :class:`NamespaceLabels`.

Two conventions exist in Kubernetes for a missing selector, and callers say which one they mean:
``Selector(None)`` matches nothing (a PDB or an affinity term without a selector), ``Selector({})`` everything;
:func:`selector_matches` takes ``none_matches_all`` for the places where no selector means "all" (a workload target).
"""

from __future__ import annotations

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


class Selector:
    """A metav1.LabelSelector (matchLabels + matchExpressions). ``None`` matches nothing, ``{}`` everything.

    ``extra`` adds matchLabels (the solver's matchLabelKeys).  An unknown operator raises ``ValueError``."""

    __slots__ = ("labels", "exprs", "none", "sig")

    def __init__(self, sel: dict | None, extra: dict | None = None):
        self.none = sel is None
        sel = sel or {}
        self.labels = dict(sel.get("matchLabels") or {})
        if extra:
            self.labels.update(extra)
        exprs = []
        for e in sel.get("matchExpressions") or []:
            op = e.get("operator")
            if op not in OPERATORS:
                raise ValueError(f"labelSelector.matchExpressions: unknown operator {op!r}")
            exprs.append((e.get("key"), op, frozenset(str(v) for v in e.get("values") or ())))
        self.exprs = tuple(sorted(exprs, key=lambda x: (x[0], x[1], sorted(x[2]))))
        self.sig = (self.none, tuple(sorted(self.labels.items())), tuple((k, o, tuple(sorted(v))) for k, o, v in self.exprs))

    def matches(self, labels: dict | None) -> bool:
        if self.none:
            return False
        labels = labels or {}
        for k, v in self.labels.items():
            if labels.get(k) != v:
                return False
        for k, op, vals in self.exprs:
            if op == "In":
                if labels.get(k) not in vals:
                    return False
            elif op == "NotIn":
                if k in labels and labels[k] in vals:
                    return False
            elif op == "Exists":
                if k not in labels:
                    return False
            elif k in labels:
                return False
        return True

    def __str__(self) -> str:
        parts = [f"{k}={v}" for k, v in sorted(self.labels.items())]
        parts += [f"{k} {op} [{' '.join(sorted(v))}]" if v else f"{k} {op}" for k, op, v in self.exprs]
        return ",".join(parts) or ("<none>" if self.none else "<all>")


def selector_matches(selector: dict | None, labels: dict | None, *, none_matches_all: bool = False) -> bool:
    """Does a metav1.LabelSelector dict select ``labels``?  ``{}`` selects everything; ``None`` nothing, or
    everything with ``none_matches_all``.  An unknown operator selects nothing (the API server refuses it)."""
    if selector is None:
        return none_matches_all
    try:
        return Selector(selector).matches(labels)
    except ValueError:
        return False


# the label the API server sets on every namespace (its name)
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


class NamespaceLabels(dict):
    """The cluster's namespaces, ``{name: labels}`` (each also carries ``kubernetes.io/metadata.name``, as the API
    server sets it), with the namespaces each distinct ``namespaceSelector`` selects kept once (do not mutate it
    after the first :meth:`selected`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._selected: dict = {}

    def selected(self, sel: dict) -> frozenset:
        key = repr(sel)
        hit = self._selected.get(key)
        if hit is None:
            hit = self._selected[key] = frozenset(
                n for n, labels in self.items() if selector_matches(sel, {**(labels or {}), NAMESPACE_NAME_LABEL: n}))
        return hit


def namespace_labels(namespaces) -> NamespaceLabels | None:
    """``namespaces`` ({name: labels}) as a :class:`NamespaceLabels` (itself when it is one); None stays None
    (the namespaces' labels are not known)."""
    if namespaces is None or isinstance(namespaces, NamespaceLabels):
        return namespaces
    return NamespaceLabels(namespaces)
