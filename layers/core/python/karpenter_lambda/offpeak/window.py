"""Off-peak windows in wall-clock time: when an OffPeakSchedule's window starts and ends.

A window starts at each hit of ``schedule`` (5-field cron or ``@daily``-style, robfig's grammar as in
:mod:`karpenter_lambda.api.cron`), read as a local wall time in ``time_zone`` (IANA, via ``zoneinfo``), and lasts ``duration``
of *wall-clock* time: the end is the local wall start plus the duration, localised again.  So a 20:00 start
stays 20:00 and ``"0 20 * * *"`` with ``12h`` always ends at 08:00 local; the night of a DST change is 11 h
(spring forward) or 13 h (fall back) long.  The times returned are tz-aware UTC.

Daylight-saving rules (cronsim's, which follow Debian cron; cronsim is the cron library the disruption budgets
use):

* **Fixed-time schedules** (the minute and hour fields do not start with ``*``, e.g. ``0 20 * * 1-5``,
  ``30 2 * * *``, ``@daily``): a start in a non-existent local time (spring forward, 02:00-03:00 in Berlin) runs
  at the first valid instant after it (03:00 local, as cron does); an ambiguous start (fall back, 02:00-03:00
  twice in Berlin) runs once, at the first occurrence (summer time).
* **Wildcard schedules** (``0 * * * *``, ``*/30 2 * * *``, ``@hourly``): hits are real instants, as cron runs
  them: on fall back an hourly schedule fires at 02:00 summer time and again at 02:00 winter time; on spring
  forward nothing fires in the missing hour (``*/30 2 * * *`` does not fire that day at all).
* **The end** is the *nominal* wall start (e.g. 02:30 even when the start moved to 03:00) plus the duration,
  localised with the same rules: non-existent -> the first valid instant after it; ambiguous -> the first
  occurrence, unless that is not after the start (then the second).  A window whose end is not after its start
  (it fell entirely into a spring-forward gap, e.g. ``30 2 * * *`` with ``30m``) does not happen that day.
* Windows may overlap (a duration longer than the schedule's period); :func:`window_at` gives the one with the
  latest start.

Pure: ``now`` is passed in; nothing reads a clock.  ``zoneinfo`` reads the time-zone database.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Iterator
from zoneinfo import ZoneInfo

from cronsim import CronSim

from ..api.cron import parse_cron
from ..api.times import to_datetime

__all__ = ["Window", "window_at", "next_window", "localize"]

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
    """The window holding ``now`` (the latest start <= now whose end > now), or None."""
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
    """The UTC instant of the naive local ``wall`` time in ``tz``.

    Non-existent (in a spring-forward gap): the first valid instant after it, i.e. the end of the gap.
    Ambiguous (fall back): the first occurrence, unless ``after`` is given and that is not after it.
    """
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
    """In UTC (naive = UTC, as every time in the project: :func:`..api.times.to_datetime`)."""
    return to_datetime(t).astimezone(UTC)


def _fixed_time(spec: str) -> bool:
    """cronsim's test for Debian cron's DST handling: minute and hour do not start with ``*``."""
    minute, hour = spec.split()[:2]
    return not minute.startswith("*") and not hour.startswith("*")


def _starts(spec: str, tz: ZoneInfo, now: datetime, *, reverse: bool) -> Iterator[tuple[datetime, datetime]]:
    """(start instant in UTC, nominal naive local wall time) for hits after ``now`` (forward) or at/before it
    (reverse, newest first)."""
    for start, wall in _hits(spec, tz, now, reverse):
        if (start <= now) if reverse else (start > now):
            yield start, wall


def _hits(spec: str, tz: ZoneInfo, now: datetime, reverse: bool) -> Iterator[tuple[datetime, datetime]]:
    if not _fixed_time(spec):
        # Real instants: cronsim ticks in UTC.  Reverse iteration ticks back one second before matching, so start
        # one second after `now` (whole seconds) to include a hit exactly at `now`.
        base = now.replace(microsecond=0) + _ONE_SECOND if reverse else now
        for hit in CronSim(spec, base.astimezone(tz), reverse=reverse):
            yield hit.astimezone(UTC), hit.replace(tzinfo=None)
        return
    # cronsim strips the zone for these and repairs imaginary/ambiguous results itself; iterating the naive wall
    # clock here gives the same starts (see `localize`) and keeps the nominal wall time for the end.  Several
    # nominal times in one gap map to one start (cronsim fires once): keep the earliest nominal time.
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
    """The transition instant (UTC) that skipped ``wall``: the first valid instant after it."""
    a = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)     # read with the later offset: before the transition
    b = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)     # read with the earlier offset: after it
    lo, hi = min(a, b).replace(microsecond=0), max(a, b)
    if hi.microsecond:
        hi = hi.replace(microsecond=0) + _ONE_SECOND
    before = lo.astimezone(tz).utcoffset()
    steps = int((hi - lo).total_seconds())                  # the offset changes within (lo, hi]: bisect in seconds
    low, high = 0, steps
    while high - low > 1:
        mid = (low + high) // 2
        if (lo + timedelta(seconds=mid)).astimezone(tz).utcoffset() == before:
            low = mid
        else:
            high = mid
    return lo + timedelta(seconds=high)
