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

The code is :mod:`karpenter_lambda.api.wallclock` (re-exported here).  Pure: ``now`` is passed in; nothing reads a
clock.  ``zoneinfo`` reads the time-zone database.
"""

from __future__ import annotations

# one definition, shared with the disruption budgets' CRON_TZ= schedules (api cannot import offpeak)
from ..api.wallclock import Window, localize, next_window, window_at

__all__ = ["Window", "window_at", "next_window", "localize"]
