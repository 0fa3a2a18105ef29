"""Disruption budgets (pure), as Karpenter v1's ``NodePool.GetAllowedDisruptionsByReason``.

How many more nodes of a NodePool may be disrupted for a reason (``Empty``, ``Drifted``, ``Underutilized``):

* ``spec.disruption.budgets`` absent -> the CRD default ``[{nodes: "10%"}]``; an explicit ``[]`` -> no budget
  at all (unlimited).
* A budget applies to a reason when its ``reasons`` is absent or empty, or names the reason.
* A budget is active when it has neither ``schedule`` nor ``duration``, or when a hit of its ``schedule`` (5-field
  UTC cron or ``@daily``-style, :mod:`karpenter_lambda.api.cron`) happened in ``(now - duration, now]``
  (Karpenter's ``Budget.IsActive``: the next hit after ``now - duration`` is not after ``now``).  ``schedule``
  without ``duration`` (or the reverse) is invalid, as the CRD's CEL rule says.
* ``nodes`` is a count (``"5"``) or a percentage of the NodePool's nodes (``"30%"``), rounded UP like
  ``intstr.GetScaledValueFromIntOrPercent(..., roundUp=true)``: 10% of 1 node is 1, 10% of 0 is 0.
* The minimum over the active, applying budgets is the limit; no active applying budget -> unlimited.
* Fail closed: one invalid budget (bad ``nodes``, cron, ``duration`` or ``reasons``) makes the NodePool allow 0,
  for every reason (Karpenter's ``MustGetAllowedDisruptions`` returns 0 on any budget error).  Every budget is
  checked against the CRD's patterns whether or not it is active now, so the answer does not flip with the clock.
* ``allowed = max(limit - disrupting, 0)``, where ``disrupting`` counts the NodePool's nodes already being
  disrupted (deleting, marked, or NotReady: the caller counts them).

Pure: stdlib and ``karpenter_lambda.api`` only; ``now`` is passed in (epoch seconds or an aware datetime).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone

from ..api.cron import CronError, budget_active, parse_cron
from ..api.durations import BUDGET_DURATION_RE, parse_duration

__all__ = ["REASONS", "UNLIMITED", "DEFAULT_BUDGETS", "Allowance", "parse_nodes", "budget_limit",
           "allowed_disruptions"]

REASONS = ("Empty", "Drifted", "Underutilized")
UNLIMITED = 10 ** 9                       # ``allowed`` when no budget limits the reason
DEFAULT_BUDGETS = ({"nodes": "10%"},)    # the CRD default of spec.disruption.budgets
NODES_RE = re.compile(r"^((100|[0-9]{1,2})%|[0-9]+)$")   # the CRD pattern of budgets[].nodes


@dataclass
class Allowance:
    nodepool: str
    reason: str
    limit: int | None      # min over the active applying budgets (None: no active budget, unlimited)
    disrupting: int        # nodes already counted against it
    allowed: int           # max(limit - disrupting, 0), or UNLIMITED when limit is None
    budget: str            # the budget that decided, e.g. 'budgets[1] nodes="0" schedule="0 9 * * 1-5" duration=8h'
    message: str           # for humans, e.g. 'budget Drifted 0 of 3 left (...)'


def parse_nodes(value: str, total: int) -> int:
    """A budget's ``nodes``: ``"5"`` -> 5; ``"30%"`` of ``total`` rounded up (30% of 10 -> 3, 10% of 11 -> 2).

    Raises :class:`ValueError` for anything outside the CRD pattern ``^((100|[0-9]{1,2})%|[0-9]+)$``.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"nodes {value!r} must be a string: a count such as \"5\" or a percentage such as \"10%\"")
    if isinstance(value, int):          # not what the CRD accepts, but unambiguous
        if value < 0:
            raise ValueError(f"nodes {value} must not be negative")
        return value
    if not NODES_RE.match(value):
        raise ValueError(f"nodes {value!r} must be a non-negative count such as \"5\" or a percentage "
                         f"0%-100% such as \"10%\"")
    total = max(int(total), 0)
    if value.endswith("%"):
        return -(-total * int(value[:-1]) // 100)     # ceil without floats
    return int(value)


def _describe(i: int, b, default: bool) -> str:
    if not isinstance(b, dict):
        return f"budgets[{i}] {b!r}"
    out = f'budgets[{i}] nodes="{b.get("nodes", "10%")}"'
    if b.get("reasons"):
        reasons = b["reasons"]
        out += " reasons=" + (",".join(map(str, reasons)) if isinstance(reasons, (list, tuple)) else repr(reasons))
    if b.get("schedule") is not None:
        out += f' schedule="{b["schedule"]}"'
    if b.get("duration") is not None:
        out += f" duration={b['duration']}"
    return out + (" (default)" if default else "")


def _check(b) -> tuple[str | None, int | None]:
    """(problem, duration seconds) of one budget; the problem is None when the budget is valid."""
    if not isinstance(b, dict):
        return "a budget must be a mapping", None
    try:
        parse_nodes(b.get("nodes", "10%"), 0)
    except ValueError as e:
        return str(e), None
    reasons = b.get("reasons")
    if reasons is not None:
        if not isinstance(reasons, (list, tuple)):
            return f"reasons must be a list of {', '.join(REASONS)}", None
        for r in reasons:
            if r not in REASONS:
                return f"reason {r!r} is not one of {', '.join(REASONS)}", None
    schedule, duration = b.get("schedule"), b.get("duration")
    if schedule is None and duration is None:
        return None, None
    if schedule is None or duration is None:
        return "'schedule' must be set with 'duration'", None
    try:
        parse_cron(schedule)
    except CronError as e:
        return str(e), None
    if not isinstance(duration, str) or not BUDGET_DURATION_RE.match(duration):
        return (f"duration {duration!r} must be hours and/or minutes such as 30m, 8h or 1h30m", None)
    return None, parse_duration(duration)          # "1h30m0s" (Go's String()) parses too


def _as_datetime(now) -> datetime:
    if isinstance(now, datetime):
        return now.replace(tzinfo=timezone.utc) if now.tzinfo is None else now.astimezone(timezone.utc)
    return datetime.fromtimestamp(float(now), tz=timezone.utc)


def budget_limit(nodepool_disruption: dict, reason: str, total_nodes: int, now) -> tuple[int | None, str]:
    """(limit, deciding budget) for ``reason`` from a NodePool's ``spec.disruption``.

    ``limit`` is None when no budget applies to ``reason`` at ``now`` (unlimited), 0 when a budget is invalid
    (then the text names the budget and says why).  ``now`` is epoch seconds or a datetime (UTC).
    """
    disruption = nodepool_disruption or {}
    raw = disruption.get("budgets") if isinstance(disruption, dict) else None
    default = raw is None
    budgets = list(DEFAULT_BUDGETS) if default else raw
    if not isinstance(budgets, (list, tuple)):
        return 0, f"budgets {budgets!r} is invalid (must be a list): allows 0"
    checked = []
    for i, b in enumerate(budgets):
        problem, seconds = _check(b)
        if problem:
            return 0, f"{_describe(i, b, default)} is invalid ({problem}): allows 0"
        checked.append((i, b, seconds))
    at = None
    best, which = None, ""
    for i, b, seconds in checked:
        reasons = b.get("reasons") or []
        if reasons and reason not in reasons:
            continue
        if b.get("schedule") is not None:
            at = at or _as_datetime(now)
            if not budget_active(b["schedule"], seconds, at):
                continue
        n = parse_nodes(b.get("nodes", "10%"), total_nodes)
        if best is None or n < best:
            best, which = n, _describe(i, b, default)
    return best, which


def allowed_disruptions(nodepool, reason: str, *, total_nodes: int, disrupting: int, now) -> Allowance:
    """The :class:`Allowance` of ``nodepool`` (an ``api.objects.NodePool``) for ``reason`` at ``now``.

    ``total_nodes`` is the NodePool's node count (the base of percentages); ``disrupting`` the nodes already
    being disrupted, subtracted from the limit (never below 0).
    """
    if isinstance(nodepool, dict):
        name = (nodepool.get("metadata") or {}).get("name", "")
        disruption = (nodepool.get("spec") or {}).get("disruption") or {}
    else:
        name = getattr(nodepool, "name", "") or ""
        disruption = getattr(nodepool, "disruption", None) or {}
    disrupting = max(int(disrupting), 0)
    limit, which = budget_limit(disruption, reason, total_nodes, now)
    if limit is None:
        return Allowance(name, reason, None, disrupting, UNLIMITED, "",
                         f"budget {reason}: unlimited (no active budget applies to {reason})")
    allowed = max(limit - disrupting, 0)
    message = f"budget {reason} {allowed} of {limit} left"
    if disrupting:
        message += f" ({disrupting} disrupting)"
    if which:
        message += f": {which}"
    return Allowance(name, reason, limit, disrupting, allowed, which, message)
