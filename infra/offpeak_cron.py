"""OffPeakSchedule cron -> EventBridge Scheduler ``cron(...)`` expressions (pure: no CDK, no clock).

An OffPeakSchedule's ``spec.schedule`` uses Karpenter's (robfig's) 5-field grammar, read by
:func:`karpenter_lambda.api.cron.parse_cron` (``minute hour day-of-month month day-of-week``, day-of-week 0-6 with
Sunday = 0, names, ``@daily``-style descriptors).  EventBridge Scheduler wants 6 fields,
``cron(minute hour day-of-month month day-of-week year)``, day-of-week 1-7 with Sunday = 1, no ``/`` in
day-of-week, and exactly one of day-of-month / day-of-week set to ``?``.

The conversion works on the *sets* ``parse_cron`` computes (so it agrees with the function's own reading of the
schedule, robfig's day rule included) and writes each set back compactly: ``*`` for the full range, ``a-b`` runs,
``first/step`` when a progression runs to the end of the range (not in day-of-week), else a comma list.

What EventBridge cannot express (:class:`CronConversionError` / ``None``), where the deployed stack then relies on
the periodic reconcile (``offpeakIntervalMinutes``) alone, so a window edge is late by at most that interval:

* **start**: day-of-month *and* day-of-week both restricted (robfig ORs them: "the 1st, or any Monday"), unless
  one of them covers every day anyway;
* **end** (start + duration, in local wall time as the function computes it): the duration is rounded *up* to
  whole minutes (an invocation just after the end is what ends the window; one before it would change nothing);
  the shifted times must still be one cron: unless the schedule runs every day, every start (hour, minute) must
  carry into the same number of days, and the shifted (hour, minute) pairs must form a product again (``0,30 20`` + 45 min gives 20:45 and 21:15: no);
  a day carry can shift a day-of-week list (modulo 7) but not a restricted day-of-month (month lengths) nor a
  restricted month.

Invocations are idempotent (every run converges to what should hold now), so an extra invocation costs one run
and a missing one delays the edge by at most the reconcile interval.
"""

from __future__ import annotations

from dataclasses import dataclass

from karpenter_lambda.api.cron import parse_cron

MINUTE, HOUR, DOM, MONTH, DOW = range(5)
_RANGES = {MINUTE: (0, 59), HOUR: (0, 23), DOM: (1, 31), MONTH: (1, 12), DOW: (1, 7)}   # DOW in EventBridge's 1-7


class CronConversionError(ValueError):
    """The schedule parses but EventBridge Scheduler cannot express it; ``field`` names the cron field."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(message)


@dataclass(frozen=True)
class _Days:
    """The day part of a schedule in EventBridge terms: ``dom``/``dow`` text (one of them ``?``), ``months`` set."""

    dom: str
    dow: str
    dom_restricted: bool
    dow_set: frozenset          # EventBridge numbering 1-7; empty when dow is "?"
    months: frozenset


def compress(values, field: int) -> str:
    """A set of field values as EventBridge cron text (``*``, ``a-b`` runs, ``first/step``, comma lists)."""
    low, high = _RANGES[field]
    vals = sorted(set(values))
    if not vals:
        raise ValueError("empty cron field")
    if vals == list(range(low, high + 1)):
        return "*"
    if field != DOW and len(vals) >= 3:
        step = vals[1] - vals[0]
        if step >= 2 and vals == list(range(vals[0], high + 1, step)):
            return f"{vals[0]}/{step}"
    runs: list[list[int]] = []
    for v in vals:
        if runs and v == runs[-1][-1] + 1:
            runs[-1].append(v)
        else:
            runs.append([v])
    return ",".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def _days(expr: str):
    """(parsed schedule, _Days) or CronConversionError when both day fields are restricted."""
    sched = parse_cron(expr)
    spec = sched.spec.split()
    dom_restricted = spec[DOM] != "*"          # parse_cron rewrites robfig's "unrestricted" day fields to "*"
    dow_restricted = spec[DOW] != "*"
    dow_eb = frozenset(d + 1 for d in sched.weekdays)              # robfig 0-6 (Sunday 0) -> EventBridge 1-7
    every_day = (dom_restricted and dow_restricted and
                 (len(sched.days) == 31 or len(sched.weekdays) == 7))   # robfig ORs: one full field = every day
    if dom_restricted and dow_restricted and not every_day:
        raise CronConversionError(
            "day-of-month/day-of-week",
            f"schedule {expr!r} restricts both day-of-month and day-of-week (cron runs on either); EventBridge "
            "Scheduler needs one of them unrestricted ('?')")
    if every_day or not dow_restricted:
        dom = "*" if every_day else compress(sched.days, DOM)
        days = _Days(dom=dom, dow="?", dom_restricted=dom != "*", dow_set=frozenset(), months=sched.months)
    else:
        days = _Days(dom="?", dow=compress(dow_eb, DOW), dom_restricted=False, dow_set=dow_eb, months=sched.months)
    return sched, days


def _render(minutes, hours, days: _Days) -> str:
    return f"cron({compress(minutes, MINUTE)} {compress(hours, HOUR)} {days.dom} {compress(days.months, MONTH)} {days.dow} *)"


def to_eventbridge_cron(expr: str) -> str:
    """``0 20 * * 1-5`` -> ``cron(0 20 ? * 2-6 *)``.  Raises ``api.cron.CronError`` (does not parse) or
    :class:`CronConversionError` (parses, but EventBridge cannot express it)."""
    sched, days = _days(expr)
    return _render(sched.minutes, sched.hours, days)


def end_expression_or_reason(expr: str, duration_seconds: int) -> tuple[str | None, str]:
    """(the EventBridge cron of the window ends, "") or (None, why not).  See the module docstring."""
    try:
        sched, days = _days(expr)
    except CronConversionError as e:
        return None, str(e)
    shift = -(-int(duration_seconds) // 60)                         # whole minutes, rounded up
    ends = {}
    for h in sched.hours:
        for m in sched.minutes:
            carry, rest = divmod(h * 60 + m + shift, 1440)
            ends[(h, m)] = (carry, *divmod(rest, 60))
    carries = {c for c, _, _ in ends.values()}
    every_day = days.dom == "*" and days.dow == "?" and len(days.months) == 12
    if every_day:                                                   # a day carry changes nothing
        carries = {0}
    if len(carries) > 1:
        return None, (f"the start times of {expr!r} plus the duration end on different days "
                      f"({', '.join(str(c) for c in sorted(carries))} days later): not one cron")
    (carry,) = carries
    pairs = {(h, m) for _, h, m in ends.values()}
    hours, minutes = {h for h, _ in pairs}, {m for _, m in pairs}
    if len(pairs) != len(hours) * len(minutes):
        return None, (f"the start times of {expr!r} plus the duration are not a set of hours x minutes "
                      f"({', '.join(f'{h:02d}:{m:02d}' for h, m in sorted(pairs))}): not one cron")
    if carry:
        if days.dom_restricted:
            return None, (f"the window of {expr!r} ends {carry} day(s) after a restricted day-of-month "
                          "(month lengths differ): not one cron")
        if len(days.months) != 12:
            return None, (f"the window of {expr!r} ends {carry} day(s) later and the month is restricted "
                          "(an end can fall in the next month): not one cron")
        if days.dow_set:
            shifted = frozenset((d - 1 + carry) % 7 + 1 for d in days.dow_set)
            days = _Days(dom="?", dow=compress(shifted, DOW), dom_restricted=False, dow_set=shifted, months=days.months)
    return _render(minutes, hours, days), ""


def end_expression(expr: str, duration_seconds: int) -> str | None:
    """The EventBridge cron firing at each window end (start + duration in local wall time), or None when no single
    cron can: ``0 20 * * 1-5`` + 12 h -> ``cron(0 8 ? * 3-7 *)`` (Tuesday-Saturday 08:00)."""
    return end_expression_or_reason(expr, duration_seconds)[0]
