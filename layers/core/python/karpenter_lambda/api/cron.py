"""Standard 5-field cron schedules in UTC, as Karpenter's disruption budgets read them (robfig/cron ParseStandard),
on the maintained ``cronsim`` library.

A budget with ``schedule`` + ``duration`` is active when a schedule hit happened within the last ``duration``
(Karpenter's ``Budget.IsActive``: the next hit after ``now - duration`` is not after ``now``).  Fields are
``minute hour day-of-month month day-of-week``; names for months and weekdays (any case).

cronsim evaluates; this wrapper decides what is accepted (robfig's grammar) and bridges where cronsim and robfig
differ:

* descriptors ``@yearly``/``@annually``/``@monthly``/``@weekly``/``@daily``/``@midnight``/``@hourly`` are
  expanded here (lower case only, as robfig and the CRD pattern);
* ``?`` (robfig's "any", like ``*``) is read as ``*`` in every field;
* day-of-week ``N/step`` runs from N to 6 as in robfig (cronsim runs on to its 7, a second Sunday), and the
  ``weekdays`` set reports Sunday as 0 only;
* the grammar is robfig's: ``*``, values, ``a-b`` ranges, ``/step`` and comma lists; cronsim's extensions
  (``L``, ``LW``, ``5L``, ``1#2``) are refused, and so is day-of-week ``7`` (robfig's range is 0-6; cronsim would
  read it as Sunday);
* day-of-month / day-of-week: robfig ANDs the two when either field is unrestricted (``*``, ``?``, ``*/1``, or a
  list holding one of those), otherwise ORs them; cronsim ANDs when either field merely *starts* with ``*``.  The
  wrapper rewrites the fields so cronsim's rule gives robfig's answer: a field robfig sees as unrestricted becomes
  ``*`` (its set is the full range anyway), and a stepped star (``*/2``) becomes the explicit range (``1-31/2``,
  ``0-6/2``), which robfig treats as restricted;
* ``@every`` is refused (the CRD pattern does not admit it), and so is a ``TZ=``/``CRON_TZ=`` prefix by
  :func:`parse_cron`; a *budget* schedule may carry one (:func:`parse_budget_schedule`, beyond Karpenter, whose
  budget schedules are UTC): ``CRON_TZ=Europe/Berlin 0 22 * * *`` is read in that IANA zone, its windows in
  wall-clock time with the off-peak windows' DST rules (:mod:`.wallclock`, :func:`.wallclock.budget_active_at`);
* a schedule that can never fire (``0 0 30 2 *``) is refused (cronsim's check).  robfig would accept it and its
  ``Next`` would return the zero time, which Karpenter's IsActive reads as "always active"; refusing it makes a
  budget with it invalid (fail closed) instead.

Pure: callers pass the time in; nothing reads a clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from cronsim import CronSim, CronSimError

__all__ = ["CronError", "TimeZoneError", "CronSchedule", "BudgetSchedule", "parse_cron", "parse_budget_schedule",
           "split_time_zone", "budget_active", "DESCRIPTORS", "TZ_PREFIXES"]

TZ_PREFIXES = ("CRON_TZ=", "TZ=")   # a budget schedule's time-zone prefix, as Kubernetes CronJobs once accepted

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


class TimeZoneError(CronError):
    """A budget schedule's ``CRON_TZ=``/``TZ=`` prefix names no known time zone (the message is the whole reason:
    ``unknown time zone "Mars/Base"``)."""


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
        try:
            return next(iter(CronSim(self.spec, _utc(t))))     # cronsim yields hits strictly after its start
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
    if text.startswith(TZ_PREFIXES):
        raise CronError(f"schedule {expr!r}: a time-zone prefix is not accepted here (only in a disruption budget's "
                        "schedule)")
    if text.startswith("@"):
        if text not in DESCRIPTORS:
            raise CronError(f"schedule {expr!r}: unknown descriptor (use one of {', '.join(DESCRIPTORS)})")
        text = DESCRIPTORS[text]
    fields = text.split()
    if len(fields) != 5:
        raise CronError(f"schedule {expr!r}: expected 5 fields (minute hour day-of-month month day-of-week), got {len(fields)}")
    problem = _explain(fields)           # robfig's grammar and ranges, with a precise message
    if problem:
        raise CronError(f"schedule {expr!r}: {problem}")
    spec = " ".join(_for_cronsim(i, f) for i, f in enumerate(fields))
    try:
        sim = CronSim(spec, _EPOCH)
    except CronSimError as e:
        raise CronError(f"schedule {expr!r}: {e} (this schedule never fires)") from None
    return CronSchedule(expr=expr, spec=spec, minutes=frozenset(sim.minutes), hours=frozenset(sim.hours),
                        days=frozenset(sim.days), months=frozenset(sim.months),
                        weekdays=frozenset(d % 7 for d in sim.weekdays))      # cronsim's 7 (Sunday) is 0


def _for_cronsim(index: int, field: str) -> str:
    """The field as cronsim should read it to give robfig's result (see the module docstring)."""
    parts = [("*" + p[1:]) if p.startswith("?") else p for p in field.split(",")]
    if index not in (2, 4):
        return ",".join(parts)
    if any(p in ("*", "*/1") for p in parts):     # robfig's star bit: the field is unrestricted
        return "*"
    low, high = _FIELDS[index][1:3]
    out = []
    for p in parts:
        rng, slash, step = p.partition("/")
        if rng == "*" and slash:
            p = f"{low}-{high}/{step}"           # robfig: a stepped star is a restricted field
        elif slash and "-" not in rng and index == 4:
            p = f"{rng}-{high}/{step}"           # "N/step" runs to 6 (Saturday); cronsim would run on to 7 (Sunday)
        out.append(p)
    return ",".join(out)


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


@dataclass(frozen=True)
class BudgetSchedule:
    """A disruption budget's schedule: the cron part, and the IANA zone it is read in (None: UTC, as Karpenter)."""

    time_zone: str | None
    cron: CronSchedule


def split_time_zone(expr: str) -> tuple[str | None, str]:
    """(``Area/City`` of a ``CRON_TZ=Area/City `` or ``TZ=Area/City `` prefix or None, the rest of the schedule)."""
    text = expr.strip() if isinstance(expr, str) else expr
    if not isinstance(text, str) or not text.startswith(TZ_PREFIXES):
        return None, expr
    head, _, rest = text.partition(" ")
    return head.partition("=")[2], rest.strip()


def _zone_known(name: str) -> bool:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError   # stdlib; here only, where a zone is named

    if not name or name == "localtime":   # 'localtime' depends on the machine
        return False
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return False
    return True


def parse_budget_schedule(expr: str) -> BudgetSchedule:
    """A budget's ``schedule``: :func:`parse_cron`'s grammar, optionally after ``CRON_TZ=Area/City `` (or ``TZ=``).
    Raises :class:`TimeZoneError` for a zone ``zoneinfo`` does not know, :class:`CronError` for the rest."""
    zone, rest = split_time_zone(expr)
    if zone is not None:
        if not rest:
            raise CronError(f"schedule {expr!r}: expected 5 fields (minute hour day-of-month month day-of-week) "
                            f"after the time zone")
        if not _zone_known(zone):
            raise TimeZoneError(f'unknown time zone "{zone}" (expected an IANA name such as Europe/Berlin, '
                                f'America/New_York or UTC)')
    return BudgetSchedule(zone, parse_cron(rest))


def budget_active(schedule: str, duration_seconds: int, now: datetime) -> bool:
    """Karpenter's Budget.IsActive: the next hit after ``now - duration`` is not after ``now`` (UTC schedules;
    :func:`.wallclock.budget_active_at` also reads a time-zone prefix).

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
