"""Cron windows in wall-clock time of an IANA time zone: when a window of ``schedule`` + ``duration`` starts and ends.

The rules are the off-peak windows' (``offpeak/window.py`` re-exports this module and documents the rules at length): a window starts at each hit of the 5-field ``schedule`` read as a
local wall time in ``time_zone`` and lasts ``duration`` of *wall-clock* time, so a 22:00 start with 10h always ends
at 08:00 local (the night of a DST change is 9 h or 11 h long).  Daylight saving, as cron (cronsim) runs it:

* fixed-time schedules (minute and hour not starting with ``*``): a start in a spring-forward gap runs at the end of
  the gap; an ambiguous start (fall back) runs once, at its first occurrence;
* wildcard schedules (``0 * * * *``): hits are real instants (twice in a repeated hour, none in a skipped one);
* the end is the nominal wall start plus the duration, localised the same way (ambiguous: the first occurrence
  unless that is not after the start); a window whose end is not after its start does not happen.

Here so that ``api`` (budget schedules with a ``CRON_TZ=`` prefix, :mod:`.cron`) and ``offpeak`` share one
definition; ``api`` cannot import ``offpeak``.  Pure: ``now`` is passed in; ``zoneinfo`` reads the time-zone data.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Iterator
from zoneinfo import ZoneInfo

from cronsim import CronSim

from .cron import budget_active, parse_budget_schedule, parse_cron, split_time_zone
from .times import to_datetime

__all__ = ["Window", "window_at", "next_window", "localize", "budget_active_at", "budget_edges"]

UTC = timezone.utc
_MARGIN = timedelta(days=1)          # more than any UTC offset change, so naive bounds enclose `now`
_ONE_SECOND = timedelta(seconds=1)


@dataclass(frozen=True)
class Window:
    start: datetime      # tz-aware, in UTC
    end: datetime        # tz-aware, in UTC

    def contains(self, t: datetime) -> bool:
        """``start <= t < end``."""
        return self.start <= _aware(t) < self.end


def window_at(schedule: str, time_zone: str, duration_seconds: int, now: datetime) -> Window | None:
    """The window holding ``now`` (the latest start <= now whose end > now), or None.  ``schedule``: 5 fields or
    ``@daily``-style, without a time-zone prefix."""
    spec, tz, duration = _inputs(schedule, time_zone, duration_seconds)
    now = _aware(now)
    oldest = now - duration - _MARGIN
    for start, nominal in _starts(spec, tz, now, reverse=True):
        if start < oldest:
            return None
        w = _window(start, nominal, tz, duration)
        if w is not None and w.end > now:
            return w
    return None


def next_window(schedule: str, time_zone: str, duration_seconds: int, now: datetime) -> Window:
    """The first window starting strictly after ``now``."""
    spec, tz, duration = _inputs(schedule, time_zone, duration_seconds)
    now = _aware(now)
    for start, nominal in _starts(spec, tz, now, reverse=False):
        w = _window(start, nominal, tz, duration)
        if w is not None:
            return w
    raise ValueError(f"schedule {schedule!r} never starts a window after {now.isoformat()}")


def localize(wall: datetime, tz: ZoneInfo, *, after: datetime | None = None) -> datetime:
    """The UTC instant of the naive local ``wall`` time in ``tz``: in a spring-forward gap the end of the gap; when
    ambiguous (fall back) the first occurrence, unless ``after`` is given and that is not after it."""
    first = wall.replace(tzinfo=tz, fold=0)
    if _imaginary(first):
        return _gap_end(wall, tz)
    first_utc = first.astimezone(UTC)
    if after is not None and first_utc <= after:
        second = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
        if second > first_utc:
            return second
    return first_utc


# ----------------------------------------------------------------------------- internals
def _inputs(schedule: str, time_zone: str, duration_seconds: int) -> tuple[str, ZoneInfo, timedelta]:
    if not isinstance(duration_seconds, int) or isinstance(duration_seconds, bool) or duration_seconds <= 0:
        raise ValueError(f"duration must be a positive number of seconds, got {duration_seconds!r}")
    return parse_cron(schedule).spec, ZoneInfo(time_zone or "UTC"), timedelta(seconds=duration_seconds)


def _aware(t: datetime) -> datetime:
    return to_datetime(t).astimezone(UTC)


def _fixed_time(spec: str) -> bool:
    """cronsim's test for Debian cron's DST handling: minute and hour do not start with ``*``."""
    minute, hour = spec.split()[:2]
    return not minute.startswith("*") and not hour.startswith("*")


def _starts(spec: str, tz: ZoneInfo, now: datetime, *, reverse: bool) -> Iterator[tuple[datetime, datetime]]:
    """(start instant in UTC, nominal naive local wall time) after ``now`` (forward) or at/before it (newest first)."""
    for start, wall in _hits(spec, tz, now, reverse):
        if (start <= now) if reverse else (start > now):
            yield start, wall


def _hits(spec: str, tz: ZoneInfo, now: datetime, reverse: bool) -> Iterator[tuple[datetime, datetime]]:
    if not _fixed_time(spec):
        # real instants; reverse iteration ticks back one second before matching: start one second after `now`
        base = now.replace(microsecond=0) + _ONE_SECOND if reverse else now
        for hit in CronSim(spec, base.astimezone(tz), reverse=reverse):
            yield hit.astimezone(UTC), hit.replace(tzinfo=None)
        return
    # the naive wall clock, localised here (cronsim's own repair gives the same starts); several nominal times in
    # one gap map to one start: the earliest nominal time is kept
    local_now = now.astimezone(tz).replace(tzinfo=None)
    bound = local_now + _MARGIN if reverse else local_now - _MARGIN
    pending = None
    for wall in CronSim(spec, bound, reverse=reverse):
        start = localize(wall, tz)
        if pending is not None and start == pending[0]:
            if reverse:
                pending = (start, wall)
            continue
        if pending is not None:
            yield pending
        pending = (start, wall)
    if pending is not None:
        yield pending


def _window(start: datetime, nominal: datetime, tz: ZoneInfo, duration: timedelta) -> Window | None:
    end = localize(nominal + duration, tz, after=start)
    return Window(start, end) if end > start else None


def _imaginary(local: datetime) -> bool:
    return local.astimezone(UTC).astimezone(local.tzinfo).replace(tzinfo=None) != local.replace(tzinfo=None)


def _gap_end(wall: datetime, tz: ZoneInfo) -> datetime:
    """The transition instant (UTC) that skipped ``wall``: the first valid instant after it (bisected in seconds)."""
    a = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)     # read with the later offset: before the transition
    b = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)     # read with the earlier offset: after it
    lo, hi = min(a, b).replace(microsecond=0), max(a, b)
    if hi.microsecond:
        hi = hi.replace(microsecond=0) + _ONE_SECOND
    before = lo.astimezone(tz).utcoffset()
    low, high = 0, int((hi - lo).total_seconds())
    while high - low > 1:
        mid = (low + high) // 2
        if (lo + timedelta(seconds=mid)).astimezone(tz).utcoffset() == before:
            low = mid
        else:
            high = mid
    return lo + timedelta(seconds=high)


# ----------------------------------------------------------------------------- disruption budget schedules
def budget_active_at(schedule: str, duration_seconds: int, now) -> bool:
    """A budget's ``schedule`` + ``duration`` is active at ``now``.  UTC (no prefix): Karpenter's ``IsActive``
    (:func:`.cron.budget_active`).  ``CRON_TZ=Area/City `` / ``TZ=``: a window of this module holds ``now``.
    Raises :class:`.cron.CronError` for a bad schedule (callers fail closed)."""
    zone, rest = split_time_zone(schedule)
    if zone is None:
        return budget_active(schedule, duration_seconds, to_datetime(now))
    parse_budget_schedule(schedule)          # the zone and the fields, with their messages
    if duration_seconds <= 0:
        return False
    return window_at(rest, zone, duration_seconds, now) is not None


def budget_edges(schedule: str, duration_seconds: int, after, until) -> list[datetime]:
    """The instants in ``(after, until]`` where a budget's window opens or closes (UTC datetimes, sorted): where a
    caller with a clock (the simulator's timers) should look at the budgets again."""
    after, until = _aware(after), _aware(until)
    zone, rest = split_time_zone(schedule)
    edges: set[datetime] = set()
    if duration_seconds <= 0:
        return []
    w = window_at(rest, zone or "UTC", duration_seconds, after)
    if w is not None and after < w.end <= until:
        edges.add(w.end)
    t = after
    while True:
        w = next_window(rest, zone or "UTC", duration_seconds, t)
        if w.start > until:
            break
        edges.update(x for x in (w.start, w.end) if after < x <= until)
        t = w.start
    return sorted(edges)
