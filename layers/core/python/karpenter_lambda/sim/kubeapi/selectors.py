"""Selectors of list and watch queries: the ``labelSelector`` / ``fieldSelector`` string syntax.

A ``metav1.LabelSelector`` object is matched by :func:`karpenter_lambda.api.selectors.selector_matches` (the one
definition; :func:`match_selector_object` is that function, ``None`` matching nothing).
"""

from __future__ import annotations

import re
from typing import Any

from ...api.selectors import selector_matches as _match_selector_object
from .resources import StoreError

_SET_RE = re.compile(r"^\s*([^\s!=,()]+)\s+(in|notin)\s+\((.*)\)\s*$")


def _split_top(s: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def parse_label_selector(selector: str | None) -> list[tuple[str, str, tuple[str, ...]]]:
    """Parse a label selector string into ``(key, op, values)`` terms.

    ``op`` is one of ``in``, ``notin``, ``exists``, ``!exists``.  Raises
    :class:`StoreError` (400) naming the bad term.
    """
    terms: list[tuple[str, str, tuple[str, ...]]] = []
    if not selector:
        return terms
    for part in _split_top(selector):
        m = _SET_RE.match(part)
        if m:
            vals = tuple(v.strip() for v in m.group(3).split(",") if v.strip())
            terms.append((m.group(1), m.group(2), vals))
        elif part.startswith("!"):
            terms.append((part[1:].strip(), "!exists", ()))
        elif "!=" in part:
            k, v = part.split("!=", 1)
            terms.append((k.strip(), "notin", (v.strip(),)))
        elif "==" in part:
            k, v = part.split("==", 1)
            terms.append((k.strip(), "in", (v.strip(),)))
        elif "=" in part:
            k, v = part.split("=", 1)
            terms.append((k.strip(), "in", (v.strip(),)))
        elif re.match(r"^[A-Za-z0-9._/-]+$", part):
            terms.append((part, "exists", ()))
        else:
            raise StoreError(400, "BadRequest", f"unable to parse requirement {part!r} in labelSelector {selector!r}")
    return terms


def match_label_selector(terms, labels: dict | None) -> bool:
    labels = labels or {}
    for key, op, vals in terms:
        present = key in labels
        if op == "in" and (not present or labels[key] not in vals):
            return False
        if op == "notin" and present and labels[key] in vals:
            return False
        if op == "exists" and not present:
            return False
        if op == "!exists" and present:
            return False
    return True


# a metav1.LabelSelector object (PDBs, workloads) matches through the one definition in api.selectors; the name is
# kept for the callers of this module
match_selector_object = _match_selector_object


def _field_value(obj: dict, path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return ""
        cur = cur[part]
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def parse_field_selector(selector: str | None) -> list[tuple[str, bool, str]]:
    out = []
    if not selector:
        return out
    for part in selector.split(","):
        part = part.strip()
        if not part:
            continue
        if "!=" in part:
            k, v = part.split("!=", 1)
            out.append((k.strip(), False, v.strip()))
        elif "==" in part:
            k, v = part.split("==", 1)
            out.append((k.strip(), True, v.strip()))
        elif "=" in part:
            k, v = part.split("=", 1)
            out.append((k.strip(), True, v.strip()))
        else:
            raise StoreError(400, "BadRequest", f"invalid fieldSelector term {part!r}: expected key=value or key!=value")
    return out


def match_field_selector(terms, obj: dict) -> bool:
    for path, eq, value in terms:
        if (_field_value(obj, path) == value) != eq:
            return False
    return True



def selector_string(selector: dict | None) -> str:
    """A ``metav1.LabelSelector`` as the string syntax (``a=b,c in (d,e),!f``), as a Scale's ``status.selector``."""
    terms = [f"{k}={v}" for k, v in sorted(((selector or {}).get("matchLabels") or {}).items())]
    for e in (selector or {}).get("matchExpressions") or []:
        op, key, vals = e.get("operator"), e.get("key"), ",".join(sorted(e.get("values") or []))
        terms.append({"In": f"{key} in ({vals})", "NotIn": f"{key} notin ({vals})", "Exists": key,
                      "DoesNotExist": f"!{key}"}.get(op, ""))
    return ",".join(t for t in terms if t)
