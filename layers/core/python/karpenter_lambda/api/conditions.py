"""status.conditions, one definition: build a condition and set it on a status (replacing the same type)."""

from __future__ import annotations

from .times import format_time


def make_condition(type_: str, status: str, reason: str, message: str, now: float, **extra) -> dict:
    """``{"type", "status", "reason", "message", "lastTransitionTime"}``; ``status`` is "True"/"False"/"Unknown"
    (a bool is accepted).  ``extra`` adds fields (a Node's ``lastHeartbeatTime``)."""
    if isinstance(status, bool):
        status = "True" if status else "False"
    return {"type": type_, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": format_time(now), **extra}


def get_condition(status: dict | None, type_: str) -> dict | None:
    for c in (status or {}).get("conditions") or []:
        if c.get("type") == type_:
            return c
    return None


def set_condition(status: dict, cond: dict | None, *, remove: str | None = None) -> dict:
    """Put ``cond`` into ``status["conditions"]`` in place of any condition of its type (or drop type ``remove``
    when ``cond`` is None).  Returns ``status``."""
    t = remove if cond is None else cond["type"]
    conds = [c for c in status.get("conditions") or [] if c.get("type") != t]
    if cond is not None:
        conds.append(cond)
    status["conditions"] = conds
    return status
