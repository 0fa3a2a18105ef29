"""Standard 5-field cron schedules (as robfig/cron's ParseStandard reads them), in UTC.

Karpenter disruption budgets use ``schedule`` + ``duration``: a budget is active
when a schedule hit happened within the last ``duration``.  Fields are
``minute hour day-of-month month day-of-week``; each is ``*``/``?``, a value, a
range ``a-b``, a step ``*/n``, ``a/n`` or ``a-b/n``, or a comma list of those.
Months and weekdays take names (``JAN``, ``mon``).  Descriptors: ``@yearly``,
``@annually``, ``@monthly``, ``@weekly``, ``@daily``, ``@midnight``, ``@hourly``.
Timezone prefixes (``TZ=``/``CRON_TZ=``) are rejected: Karpenter schedules are UTC.

Pure: callers pass the time in; nothing reads a clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

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

_MONTHS = {n: i + 1 for i, n in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split())}
_DAYS = {n: i for i, n in enumerate("sun mon tue wed thu fri sat".split())}
# (name, low, high, names)
_FIELDS = (
    ("minute", 0, 59, None),
    ("hour", 0, 23, None),
    ("day-of-month", 1, 31, None),
    ("month", 1, 12, _MONTHS),
    ("day-of-week", 0, 6, _DAYS),
)


class CronError(ValueError):
    """A schedule that does not parse; the message names the field and the problem."""


def _value(text: str, name: str, low: int, high: int, names) -> int:
    if names and text.lower() in names:
        return names[text.lower()]
    if not text.isdigit():
        raise CronError(f"{name} field: {text!r} is not a number" + (" or a name" if names else ""))
    v = int(text)
    if not low <= v <= high:
        raise CronError(f"{name} field: {v} is out of range {low}-{high}")
    return v


def _field(text: str, name: str, low: int, high: int, names) -> tuple[frozenset[int], bool]:
    """Parse one field -> (allowed values, is_star)."""
    if text == "":
        raise CronError(f"{name} field is empty")
    values: set[int] = set()
    star = False
    for part in text.split(","):
        if part == "":
            raise CronError(f"{name} field: empty list element in {text!r}")
        rng, _, step_s = part.partition("/")
        step = 1
        if _:
            if not step_s.isdigit() or int(step_s) == 0:
                raise CronError(f"{name} field: step {step_s!r} must be a positive integer")
            step = int(step_s)
        if rng in ("*", "?"):
            lo, hi = low, high
            star = star or step == 1
        elif "-" in rng:
            a, _, b = rng.partition("-")
            lo, hi = _value(a, name, low, high, names), _value(b, name, low, high, names)
            if lo > hi:
                raise CronError(f"{name} field: range {rng!r} runs backwards")
        else:
            lo = _value(rng, name, low, high, names)
            hi = high if _ else lo
        values.update(range(lo, hi + 1, step))
    return frozenset(values), star


@dataclass(frozen=True)
class CronSchedule:
    expr: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    dom_star: bool
    dow_star: bool

    def _day_matches(self, d: datetime) -> bool:
        dom = d.day in self.days
        dow = (d.isoweekday() % 7) in self.weekdays
        if self.dom_star or self.dow_star:
            return dom and dow
        return dom or dow  # both restricted: either may match (cron semantics)

    def matches(self, t: datetime) -> bool:
        t = _utc(t)
        return t.minute in self.minutes and t.hour in self.hours and t.month in self.months and self._day_matches(t)

    def next_after(self, t: datetime) -> datetime | None:
        """The first hit strictly after ``t`` (UTC, whole minutes); ``None`` if none within 5 years."""
        t = _utc(t).replace(second=0, microsecond=0) + timedelta(minutes=1)
        day = t.replace(hour=0, minute=0)
        for _ in range(366 * 5 + 2):
            if day.month in self.months and self._day_matches(day):
                for h in sorted(self.hours):
                    for m in sorted(self.minutes):
                        hit = day.replace(hour=h, minute=m)
                        if hit >= t:
                            return hit
            day += timedelta(days=1)
        return None


def _utc(t: datetime) -> datetime:
    if t.tzinfo is None:
        return t.replace(tzinfo=timezone.utc)
    return t.astimezone(timezone.utc)


def parse_cron(expr: str) -> CronSchedule:
    """Parse a 5-field schedule or an @descriptor; raises :class:`CronError` with a specific message."""
    if not isinstance(expr, str):
        raise CronError(f"schedule must be a string, got {type(expr).__name__}")
    text = expr.strip()
    if text.upper().startswith(("TZ=", "CRON_TZ=")):
        raise CronError("timezones are not supported: budget schedules are always UTC")
    if text.startswith("@"):
        if text not in DESCRIPTORS:
            raise CronError(f"unknown descriptor {text!r}: expected one of {', '.join(DESCRIPTORS)}")
        text = DESCRIPTORS[text]
    parts = text.split()
    if len(parts) != 5:
        raise CronError(f"expected 5 fields (minute hour day-of-month month day-of-week), got {len(parts)}")
    parsed = [_field(p, *spec) for p, spec in zip(parts, _FIELDS)]
    return CronSchedule(
        expr=expr,
        minutes=parsed[0][0],
        hours=parsed[1][0],
        days=parsed[2][0],
        months=parsed[3][0],
        weekdays=parsed[4][0],
        dom_star=parsed[2][1],
        dow_star=parsed[4][1],
    )


def budget_active(schedule: str, duration_seconds: int, now: datetime) -> bool:
    """Karpenter's Budget.IsActive: the next hit after ``now - duration`` is not after ``now``.

    Raises :class:`CronError` for a bad schedule (callers fail closed: allow 0 disruptions).
    """
    sched = parse_cron(schedule)
    now = _utc(now)
    nxt = sched.next_after(now - timedelta(seconds=duration_seconds))
    return nxt is not None and nxt <= now
