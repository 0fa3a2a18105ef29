"""Taints and tolerations (Kubernetes semantics)."""

from __future__ import annotations

__all__ = ["tolerates", "untolerated", "format_taint", "tolerates_taint", "untolerated_hard", "HARD_EFFECTS"]

# the effects the kube-scheduler filters on (PreferNoSchedule only scores)
HARD_EFFECTS = ("NoSchedule", "NoExecute")


def format_taint(t: dict) -> str:
    v = t.get("value")
    return f"{t.get('key', '')}{'=' + str(v) if v not in (None, '') else ''}:{t.get('effect', '')}"


def _tolerates_one(tol: dict, taint: dict) -> bool:
    eff = tol.get("effect") or ""
    if eff and eff != taint.get("effect"):
        return False
    key = tol.get("key") or ""
    op = tol.get("operator") or "Equal"
    if not key:
        # empty key + Exists tolerates everything (with the effect filter above)
        return op == "Exists"
    if key != taint.get("key"):
        return False
    if op == "Exists":
        return True
    return str(tol.get("value") or "") == str(taint.get("value") or "")


def untolerated(tolerations: list[dict] | None, taints: list[dict] | None, tolerate_prefer_no_schedule: bool = False) -> dict | None:
    """The first taint the tolerations do not tolerate (PreferNoSchedule counts unless relaxed), or None."""
    tols = tolerations or ()
    for t in taints or ():
        if tolerate_prefer_no_schedule and t.get("effect") == "PreferNoSchedule":
            continue
        if not any(_tolerates_one(tol, t) for tol in tols):
            return t
    return None


def tolerates(tolerations: list[dict] | None, taints: list[dict] | None) -> bool:
    return untolerated(tolerations, taints) is None


def tolerates_taint(tolerations: list[dict] | None, taint: dict) -> bool:
    """Is this one taint tolerated (whatever its effect)?"""
    return untolerated(tolerations, [taint]) is None


def untolerated_hard(tolerations: list[dict] | None, taints: list[dict] | None) -> dict | None:
    """The first NoSchedule / NoExecute taint the tolerations do not tolerate, or None (the kube-scheduler's
    TaintToleration filter)."""
    return untolerated(tolerations, [t for t in taints or () if t.get("effect") in HARD_EFFECTS])
