"""Standard 5-field cron schedules in UTC, as Karpenter's disruption budgets read them (robfig/cron ParseStandard),
on the maintained ``cronsim`` library.

A budget with ``schedule`` + ``duration`` is active when a schedule hit happened within the last ``duration``
(Karpenter's ``Budget.IsActive``: the next hit after ``now - duration`` is not after ``now``).  Fields are
``minute hour day-of-month month day-of-week``; names for months and weekdays; day-of-month and day-of-week OR
when both are restricted (as robfig and Vixie cron; cronsim does the same).

What this wrapper adds to cronsim, so the accepted language is robfig's:

* the descriptors ``@yearly``/``@annually``/``@monthly``/``@weekly``/``@daily``/``@midnight``/``@hourly``;
* ``?`` (robfig's "no specific value", for day-of-month and day-of-week) is read as ``*``;
* day-of-week ``7`` is refused (robfig's ParseStandard range is 0-6; cronsim would take it as Sunday);
* ``TZ=``/``CRON_TZ=`` prefixes and ``@every`` are refused: Karpenter schedules are UTC.

Pure: callers pass the time in; nothing reads a clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from cronsim import CronSim, CronSimError

__all__ = ["CronError", "CronSchedule", "parse_cron", "budget_active", "DESCRIPTORS"]

DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_EPOCH = datetime(2000, 1, 1, tzinfo=timezone.utc)
_MONTHS = {n: i + 1 for i, n in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split())}
_DAYS = {n: i for i, n in enumerate("sun mon tue wed thu fri sat".split())}
_FIELDS = (("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day-of-month", 1, 31, {}), ("month", 1, 12, _MONTHS),
           ("day-of-week", 0, 6, _DAYS))


class CronError(ValueError):
    """A schedule that does not parse (the message says which field)."""


@dataclass(frozen=True)
class CronSchedule:
    expr: str                 # as written
    spec: str                 # the 5-field form given to cronsim
    minutes: frozenset
    hours: frozenset
    days: frozenset
    months: frozenset
    weekdays: frozenset

    def next_after(self, t: datetime) -> datetime | None:
        """The first hit strictly after ``t`` (UTC)."""
        t = _utc(t).replace(second=0, microsecond=0) + timedelta(minutes=1) - timedelta(seconds=1)
        try:
            return next(iter(CronSim(self.spec, t)))
        except StopIteration:
            return None

    def matches(self, t: datetime) -> bool:
        t = _utc(t).replace(second=0, microsecond=0)
        return self.next_after(t - timedelta(minutes=1)) == t


def _utc(t: datetime) -> datetime:
    return t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)


def parse_cron(expr: str) -> CronSchedule:
    if not isinstance(expr, str) or not expr.strip():
        raise CronError("empty schedule: expected 5 fields (minute hour day-of-month month day-of-week) or @daily-style")
    text = expr.strip()
    if text.startswith(("TZ=", "CRON_TZ=")):
        raise CronError(f"schedule {expr!r}: timezones are not supported (budget schedules are UTC)")
    if text.startswith("@"):
        if text.lower() not in DESCRIPTORS:
            raise CronError(f"schedule {expr!r}: unknown descriptor (use one of {', '.join(DESCRIPTORS)})")
        text = DESCRIPTORS[text.lower()]
    fields = text.split()
    if len(fields) != 5:
        raise CronError(f"schedule {expr!r}: expected 5 fields (minute hour day-of-month month day-of-week), got {len(fields)}")
    fields = [("*" if f == "?" and i in (2, 4) else f) for i, f in enumerate(fields)]
    if any(int(n) > 6 for n in re.findall(r"\d+", fields[4])):
        raise CronError(f"schedule {expr!r}: day-of-week must be 0-6 (Sunday is 0)")
    spec = " ".join(fields)
    try:
        sim = CronSim(spec, _EPOCH)
    except CronSimError as e:
        raise CronError(f"schedule {expr!r}: {_explain(fields) or e}") from None
    return CronSchedule(expr=expr, spec=spec, minutes=frozenset(sim.minutes), hours=frozenset(sim.hours),
                        days=frozenset(sim.days), months=frozenset(sim.months), weekdays=frozenset(sim.weekdays))


def _explain(fields: list[str]) -> str | None:
    """Which field is wrong and why, for the error message (cronsim only says "Bad minute")."""
    for text, (name, low, high, names) in zip(fields, _FIELDS):
        for part in text.split(","):
            rng, _, step = part.partition("/")
            if step and (not step.isdigit() or int(step) == 0):
                return f"{name} field: step {step!r} must be a positive integer"
            if rng in ("*", "?"):
                continue
            bounds = rng.split("-")
            if len(bounds) > 2 or not all(bounds):
                return f"{name} field: {part!r} is not a value, a range a-b or a step"
            vals = []
            for b in bounds:
                if b.isdigit():
                    vals.append(int(b))
                elif b.lower() in names:
                    vals.append(names[b.lower()])
                else:
                    return f"{name} field: {b!r} is not a number or a name"
            for v in vals:
                if not low <= v <= high:
                    return f"{name} field: {v} is out of range {low}-{high}"
            if len(vals) == 2 and vals[0] > vals[1]:
                return f"{name} field: range {part!r} is backwards"
    return None


def budget_active(schedule: str, duration_seconds: int, now: datetime) -> bool:
    """Karpenter's Budget.IsActive: the next hit after ``now - duration`` is not after ``now``.

    Raises :class:`CronError` for a bad schedule (callers fail closed: allow 0 disruptions).
    """
    sched = parse_cron(schedule)
    now = _utc(now)
    start = now - timedelta(seconds=duration_seconds)
    try:
        nxt = next(iter(CronSim(sched.spec, start)))
    except StopIteration:
        return False
    return nxt <= now
