"""Disruption budgets (pure), as Karpenter v1's ``NodePool.GetAllowedDisruptionsByReason``.

Provisional version (replaced by the full module): default ``[{nodes: "10%"}]``; a budget applies when its
``reasons`` is empty or names the reason; active without a schedule, or inside schedule + duration (UTC cron);
``nodes`` is a count or a percentage of the NodePool's nodes rounded up; the minimum of the active budgets wins;
an invalid budget allows 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone

from ..api.cron import budget_active
from ..api.durations import parse_duration

REASONS = ("Empty", "Drifted", "Underutilized")
UNLIMITED = 10 ** 9


@dataclass
class Allowance:
    nodepool: str
    reason: str
    limit: int | None
    disrupting: int
    allowed: int
    budget: str
    message: str


def parse_nodes(value, total: int) -> int:
    text = str(value).strip()
    if text.endswith("%"):
        pct = int(text[:-1])
        if not 0 <= pct <= 100:
            raise ValueError(f"nodes {value!r}: a percentage must be 0-100%")
        return math.ceil(total * pct / 100)
    n = int(text)
    if n < 0:
        raise ValueError(f"nodes {value!r}: must not be negative")
    return n


def budget_limit(disruption: dict, reason: str, total_nodes: int, now: float) -> tuple[int | None, str]:
    budgets = (disruption or {}).get("budgets")
    if budgets is None:
        budgets = [{"nodes": "10%"}]
    best, which = None, ""
    for i, b in enumerate(budgets):
        reasons = b.get("reasons") or []
        if reasons and reason not in reasons:
            continue
        desc = f'budgets[{i}] nodes="{b.get("nodes")}"' + (f' schedule="{b["schedule"]}" duration={b.get("duration")}' if b.get("schedule") else "")
        try:
            if bool(b.get("schedule")) != bool(b.get("duration")):
                raise ValueError("schedule and duration go together")
            if b.get("schedule") and not budget_active(b["schedule"], parse_duration(b["duration"]), datetime.fromtimestamp(now, tz=timezone.utc)):
                continue
            n = parse_nodes(b.get("nodes", "10%"), total_nodes)
        except Exception as e:
            return 0, f"{desc} is invalid ({e}): allows 0"
        if best is None or n < best:
            best, which = n, desc
    return best, which


def allowed_disruptions(nodepool, reason: str, *, total_nodes: int, disrupting: int, now: float) -> Allowance:
    name = getattr(nodepool, "name", "")
    limit, which = budget_limit(getattr(nodepool, "disruption", {}) or {}, reason, total_nodes, now)
    allowed = UNLIMITED if limit is None else max(limit - disrupting, 0)
    shown = "unlimited" if limit is None else str(limit)
    return Allowance(name, reason, limit, disrupting, allowed, which,
                     f"budget {reason} {min(allowed, UNLIMITED)} of {shown} left")
