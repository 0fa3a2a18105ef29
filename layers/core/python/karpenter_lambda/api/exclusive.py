"""Node requirements of a pod that exclude each other (pure): one reading for ``validate``'s warning
(``api/pod_hints.py``) and for the scheduler's explanation of an unschedulable pod (``scheduling/podfacts.py``).

A pod's ``nodeSelector`` and one required node-affinity term are ANDed, as are the term's expressions.  On one key
(aliases such as ``topology.ebs.csi.aws.com/zone`` read as the label they stand for) they exclude each other when no
label value satisfies them all: ``In`` sets with no value in common, ``In`` values that a ``NotIn`` removes or that
fall outside ``Gt`` / ``Lt`` bounds, or ``Gt`` / ``Lt`` bounds with no integer between them.  A key the pod asks
``DoesNotExist`` of is left alone (asked on its own it is satisfiable, by a node without the label).
"""

from __future__ import annotations

from typing import NamedTuple

from . import labels as L

__all__ = ["Ask", "exclusive", "describe"]


class Ask(NamedTuple):
    """One requirement on a key: ``In`` / ``NotIn`` with its values, or ``Gt`` / ``Lt`` with its bound."""

    operator: str
    values: frozenset        # In / NotIn: the values; Gt / Lt: empty
    bound: int | None        # Gt / Lt: the bound
    from_selector: bool      # from the nodeSelector (else from the term)


def _as_int(value) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def _asks(selector, term) -> dict[str, list[Ask]]:
    asks: dict[str, list[Ask]] = {}
    for key, value in (selector.items() if isinstance(selector, dict) else ()):
        if isinstance(key, str):
            asks.setdefault(L.normalize_key(key), []).append(Ask("In", frozenset((str(value),)), None, True))
    for e in (term.get("matchExpressions") or () if isinstance(term, dict) else ()):
        if not isinstance(e, dict) or not isinstance(e.get("key"), str):
            continue
        op, values = e.get("operator"), e.get("values") if isinstance(e.get("values"), list) else []
        key = L.normalize_key(e["key"])
        if op in ("In", "NotIn"):
            asks.setdefault(key, []).append(Ask(op, frozenset(str(v) for v in values), None, False))
        elif op in ("Gt", "Lt") and len(values) == 1 and _as_int(values[0]) is not None:
            asks.setdefault(key, []).append(Ask(op, frozenset(), _as_int(values[0]), False))
        elif op in ("Exists", "DoesNotExist"):
            asks.setdefault(key, []).append(Ask(op, frozenset(), None, False))
    return asks


def _empty(asks: list[Ask]) -> bool:
    """No label value satisfies every ask (an ``Exists`` adds nothing: a value is a label's)."""
    notin = frozenset().union(*(a.values for a in asks if a.operator == "NotIn"))
    gt = max((a.bound for a in asks if a.operator == "Gt"), default=None)
    lt = min((a.bound for a in asks if a.operator == "Lt"), default=None)
    ins = [a.values for a in asks if a.operator == "In"]
    if not ins:
        return gt is not None and lt is not None and gt + 1 >= lt

    def ok(v: str) -> bool:
        if v in notin:
            return False
        if gt is None and lt is None:
            return True
        n = _as_int(v)
        return n is not None and (gt is None or n > gt) and (lt is None or n < lt)
    return not any(ok(v) for v in frozenset.intersection(*ins))


def exclusive(selector, term) -> list[tuple[str, list[Ask]]]:
    """(key, its asks) for each key on which ``selector`` (a nodeSelector) and ``term`` (a required NodeSelectorTerm,
    or None) exclude each other, in the order the keys are first asked."""
    return [(key, asks) for key, asks in _asks(selector, term).items()
            if len(asks) > 1 and not any(a.operator == "DoesNotExist" for a in asks) and _empty(asks)]


def describe(key: str, asks: list[Ask], mark_selector: bool = False) -> str:
    """``"key In [a b] and key NotIn [a]"`` (``mark_selector``: `` (nodeSelector)`` after the nodeSelector's)."""
    def one(a: Ask) -> str:
        what = f"[{' '.join(sorted(a.values))}]" if a.operator in ("In", "NotIn") else (
            "" if a.bound is None else str(a.bound))
        said = f"{key} {a.operator} {what}".rstrip()
        return f"{said} (nodeSelector)" if mark_selector and a.from_selector else said
    return " and ".join(one(a) for a in asks)
