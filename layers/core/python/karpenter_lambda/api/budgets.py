"""Disruption budgets, typed: ``NodePool.budgets`` and the ONE allowance rule (Karpenter v1's
``NodePool.GetAllowedDisruptionsByReason``).

A NodePool's ``spec.disruption.budgets`` is parsed and defaulted once, here, into frozen :class:`Budget` objects:

* ``budgets`` absent -> the CRD default, one budget ``nodes: "10%"``; an explicit ``[]`` -> no budget at all
  (unlimited).
* A budget applies to a reason when it has no ``reasons``, or names the reason; an explicit empty list
  (``reasons: []``) applies to none, as Karpenter reads it (a nil slice is every reason, an empty one none).
* A budget is active when it has neither ``schedule`` nor ``duration``, or when a hit of its ``schedule`` (5-field
  UTC cron or ``@daily``-style, :mod:`.cron`) happened in ``(now - duration, now]`` (Karpenter's
  ``Budget.IsActive``).  Beyond Karpenter, ``schedule`` may start with ``CRON_TZ=Area/City `` (or ``TZ=``): it is
  then read in that zone and its window lasts ``duration`` of wall-clock time there (:mod:`.wallclock`).  ``schedule`` without ``duration`` (or the reverse) is invalid, as the CRD's CEL rule says.
* ``nodes`` is a count (``"5"``) or a percentage of the NodePool's nodes (``"30%"``), rounded UP like
  ``intstr.GetScaledValueFromIntOrPercent(..., roundUp=true)``: 10% of 1 node is 1, 10% of 0 is 0.
* A budget that does not parse keeps its ``problem``: the NodePool then allows 0, for every reason (fail closed,
  Karpenter's ``MustGetAllowedDisruptions``).  Every budget is checked whether or not it is active now, so the
  answer does not flip with the clock.

:func:`allowance` is the rule every caller uses (the sweeps' ``SweepBudgets``, the ledger's conditional reservation,
interruption's rebalance budget): ``allowed = max(min over the active applying budgets - disrupting, 0)``, where
``disrupting`` counts the NodePool's nodes already being disrupted (the caller counts them from its snapshot:
:func:`karpenter_lambda.disruption.budgets.count_nodes`).

Pure: stdlib and ``karpenter_lambda.api`` only; ``now`` is passed in (epoch seconds or an aware datetime).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from .cron import CronError, parse_budget_schedule
from .durations import BUDGET_DURATION_RE, parse_duration
from .times import to_datetime
from .wallclock import budget_active_at

__all__ = ["REASONS", "UNLIMITED", "DEFAULT_BUDGETS", "NODES_RE", "Budget", "Allowance", "parse_nodes",
           "parse_budgets", "budget_limit", "allowance"]

REASONS = ("Empty", "Drifted", "Underutilized")
UNLIMITED = 10 ** 9                       # ``allowed`` when no budget limits the reason
DEFAULT_BUDGETS = ({"nodes": "10%"},)    # the CRD default of spec.disruption.budgets
NODES_RE = re.compile(r"^((100|[0-9]{1,2})%|[0-9]+)$")   # the CRD pattern of budgets[].nodes


def parse_nodes(value, total: int) -> int:
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


@dataclass(frozen=True)
class Budget:
    """One entry of ``spec.disruption.budgets``, parsed.  ``problem`` is set (and the rest is what could be read)
    when the entry is invalid; ``text`` names it for humans (``budgets[1] nodes="0" schedule="0 9 * * 1-5"
    duration=8h``)."""

    nodes: str | int = "10%"
    reasons: tuple[str, ...] | None = None   # None: no ``reasons`` field (every reason)
    schedule: str | None = None
    duration: str | None = None
    duration_seconds: int | None = None
    index: int = 0
    default: bool = False                 # the CRD default (spec.disruption.budgets absent)
    text: str = ""
    problem: str | None = None

    @property
    def valid(self) -> bool:
        return self.problem is None

    def applies_to(self, reason: str) -> bool:
        return self.reasons is None or reason in self.reasons

    def is_active(self, now) -> bool:
        """Always without a schedule; else a schedule hit in ``(now - duration, now]`` (in its time zone, if any)."""
        if self.schedule is None:
            return True
        return budget_active_at(self.schedule, self.duration_seconds or 0, to_datetime(now))

    def limit(self, total_nodes: int) -> int:
        """``nodes`` of ``total_nodes`` (a percentage rounded up)."""
        return parse_nodes(self.nodes, total_nodes)


def _describe(i: int, b, default: bool) -> str:
    if not isinstance(b, dict):
        return f"budgets[{i}] {b!r}"
    out = f'budgets[{i}] nodes="{b.get("nodes", "10%")}"'
    if b.get("reasons") is not None:
        reasons = b["reasons"]
        out += " reasons=" + ((",".join(map(str, reasons)) or "[] (no reason)") if isinstance(reasons, (list, tuple))
                              else repr(reasons))
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
        parse_budget_schedule(schedule)
    except CronError as e:
        return str(e), None
    if not isinstance(duration, str) or not BUDGET_DURATION_RE.match(duration):
        return (f"duration {duration!r} must be hours and/or minutes such as 30m, 8h or 1h30m", None)
    return None, parse_duration(duration)          # "1h30m0s" (Go's String()) parses too


def _one(i: int, b, default: bool) -> Budget:
    problem, seconds = _check(b)
    text = _describe(i, b, default)
    if not isinstance(b, dict):
        return Budget(index=i, default=default, text=text, problem=problem)
    reasons = b.get("reasons")
    return Budget(nodes=b.get("nodes", "10%"),
                  reasons=tuple(reasons) if isinstance(reasons, (list, tuple)) else None,
                  schedule=b.get("schedule"), duration=b.get("duration"), duration_seconds=seconds, index=i,
                  default=default, text=text, problem=problem)


def parse_budgets(disruption) -> tuple[Budget, ...]:
    """The budgets of a NodePool's ``spec.disruption`` (a dict, or None), defaulted: absent -> one ``nodes: "10%"``.

    Never raises: an entry that does not parse is a :class:`Budget` with its ``problem`` (a ``budgets`` that is not
    a list is one such entry), and :func:`allowance` then allows 0."""
    raw = disruption.get("budgets") if isinstance(disruption, dict) else None
    default = raw is None
    budgets = list(DEFAULT_BUDGETS) if default else raw
    if not isinstance(budgets, (list, tuple)):
        return (Budget(index=-1, text=f"budgets {budgets!r}", problem="must be a list"),)
    return tuple(_one(i, b, default) for i, b in enumerate(budgets))


def budget_limit_of(budgets: Sequence[Budget], reason: str, total_nodes: int, now) -> tuple[int | None, str]:
    """(limit, deciding budget's text) for ``reason``: the minimum over the active budgets that apply; None when
    none applies at ``now`` (unlimited); 0 when a budget is invalid (the text then says which and why)."""
    for b in budgets:
        if not b.valid:
            return 0, f"{b.text} is invalid ({b.problem}): allows 0"
    best, which = None, ""
    at = None
    for b in budgets:
        if not b.applies_to(reason):
            continue
        if b.schedule is not None:
            at = at or to_datetime(now)
            if not b.is_active(at):
                continue
        n = b.limit(total_nodes)
        if best is None or n < best:
            best, which = n, b.text
    return best, which


def budget_limit(nodepool_disruption: dict, reason: str, total_nodes: int, now) -> tuple[int | None, str]:
    """:func:`budget_limit_of` on a NodePool's raw ``spec.disruption`` (``now``: epoch seconds or a datetime)."""
    return budget_limit_of(parse_budgets(nodepool_disruption or {}), reason, total_nodes, now)


@dataclass
class Allowance:
    nodepool: str
    reason: str
    limit: int | None      # min over the active applying budgets (None: no active budget, unlimited)
    disrupting: int        # nodes already counted against it
    allowed: int           # max(limit - disrupting, 0), or UNLIMITED when limit is None
    budget: str            # the budget that decided, e.g. 'budgets[1] nodes="0" schedule="0 9 * * 1-5" duration=8h'
    message: str           # for humans, e.g. 'budget Drifted 0 of 3 left (...)'


def allowance(budgets: Sequence[Budget], reason: str, *, total_nodes: int, disrupting: int, now,
              nodepool: str = "") -> Allowance:
    """THE allowance rule: how many more NodeClaims of a NodePool may be disrupted now for ``reason``.

    ``budgets``: ``NodePool.budgets``; ``total_nodes``: the base of percentages; ``disrupting``: nodes already being
    disrupted, subtracted from the limit (never below 0).  No active applying budget: ``allowed`` is
    :data:`UNLIMITED` and ``limit`` None."""
    disrupting = max(int(disrupting), 0)
    limit, which = budget_limit_of(budgets, reason, total_nodes, now)
    if limit is None:
        return Allowance(nodepool, reason, None, disrupting, UNLIMITED, "",
                         f"budget {reason}: unlimited (no active budget applies to {reason})")
    allowed = max(limit - disrupting, 0)
    message = f"budget {reason} {allowed} of {limit} left"
    if disrupting:
        message += f" ({disrupting} disrupting)"
    if which:
        message += f": {which}"
    return Allowance(nodepool, reason, limit, disrupting, allowed, which, message)
