"""Off-peak windows in wall-clock time (offpeak/window.py): DST in Europe/Berlin, weekday schedules,
exact boundaries (start inclusive, end exclusive), macros, UTC."""

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim

from karpenter_lambda.api.cron import CronError, parse_cron
from karpenter_lambda.api.manifests import load_text
from karpenter_lambda.offpeak.window import Window, localize, next_window, window_at

BERLIN = "Europe/Berlin"
B = ZoneInfo(BERLIN)
UTC = timezone.utc
H = 3600


def utc(*a) -> datetime:
    return datetime(*a, tzinfo=UTC)


def local(*a, fold=0) -> datetime:
    return datetime(*a, tzinfo=B, fold=fold)


# -- "0 20 * * *" for 12h across both DST changes of 2026 ------------------------------------------------------
def test_spring_forward_night_is_11_hours_and_ends_at_8_local():
    w = window_at("0 20 * * *", BERLIN, 12 * H, utc(2026, 3, 28, 23, 0))
    assert w == Window(utc(2026, 3, 28, 19, 0), utc(2026, 3, 29, 6, 0))       # 20:00 CET -> 08:00 CEST
    assert w.end.astimezone(B).hour == 8 and w.end - w.start == timedelta(hours=11)
    nxt = next_window("0 20 * * *", BERLIN, 12 * H, utc(2026, 3, 29, 6, 0))
    assert nxt == Window(utc(2026, 3, 29, 18, 0), utc(2026, 3, 30, 6, 0))     # 20:00 CEST stays 20:00
    assert nxt.start.astimezone(B).hour == 20


def test_fall_back_night_is_13_hours_and_ends_at_8_local():
    w = window_at("0 20 * * *", BERLIN, 12 * H, utc(2026, 10, 25, 6, 59))
    assert w == Window(utc(2026, 10, 24, 18, 0), utc(2026, 10, 25, 7, 0))      # 20:00 CEST -> 08:00 CET
    assert w.end - w.start == timedelta(hours=13)
    assert window_at("0 20 * * *", BERLIN, 12 * H, utc(2026, 10, 25, 7, 0)) is None
    assert next_window("0 20 * * *", BERLIN, 12 * H, w.start) == Window(utc(2026, 10, 25, 19, 0), utc(2026, 10, 26, 7, 0))


def test_start_inside_the_spring_forward_gap_runs_at_3_and_ends_at_the_nominal_wall_end():
    # 02:30 does not exist on 2026-03-29 in Berlin: cron runs it at 03:00 CEST; 02:30 + 12h = 14:30 CEST
    w = next_window("30 2 * * *", BERLIN, 12 * H, utc(2026, 3, 28, 12, 0))
    assert w.start == utc(2026, 3, 29, 1, 0) and w.start.astimezone(B).strftime("%H:%M %Z") == "03:00 CEST"
    assert w.end == utc(2026, 3, 29, 12, 30) and w.end.astimezone(B).strftime("%H:%M %Z") == "14:30 CEST"
    assert window_at("30 2 * * *", BERLIN, 12 * H, utc(2026, 3, 29, 0, 59)) is None     # 01:59 CET: not yet
    assert window_at("30 2 * * *", BERLIN, 12 * H, utc(2026, 3, 29, 1, 0)) == w
    assert next_window("30 2 * * *", BERLIN, 12 * H, w.start).start == local(2026, 3, 30, 2, 30)


def test_a_window_entirely_inside_the_gap_does_not_happen_that_day():
    # 02:30 + 30m = 03:00 local, and the start moved to 03:00: empty, skipped
    w = next_window("30 2 * * *", BERLIN, 30 * 60, utc(2026, 3, 28, 12, 0))
    assert w.start == local(2026, 3, 30, 2, 30)
    assert window_at("30 2 * * *", BERLIN, 30 * 60, utc(2026, 3, 29, 1, 0)) is None


def test_ambiguous_start_on_fall_back_runs_once_at_the_first_occurrence():
    w = next_window("30 2 * * *", BERLIN, 12 * H, utc(2026, 10, 24, 12, 0))
    assert w.start == utc(2026, 10, 25, 0, 30)                  # 02:30 summer time (the first 02:30)
    assert w.start.astimezone(B).strftime("%H:%M %Z") == "02:30 CEST"
    assert w.end == utc(2026, 10, 25, 13, 30) and w.end.astimezone(B).strftime("%H:%M %Z") == "14:30 CET"
    # the second 02:30 (CET, 01:30Z) starts nothing new: still the same window, and the next one is tomorrow
    assert window_at("30 2 * * *", BERLIN, 12 * H, utc(2026, 10, 25, 1, 30)) == w
    assert next_window("30 2 * * *", BERLIN, 12 * H, w.start).start == local(2026, 10, 26, 2, 30)


def test_ambiguous_end_takes_the_first_occurrence():
    # 20:00 + 6h30m = 02:30, which happens twice on 2026-10-25: the first (CEST) ends the window
    w = window_at("0 20 * * *", BERLIN, 6 * H + 30 * 60, utc(2026, 10, 24, 20, 0))
    assert w.end == utc(2026, 10, 25, 0, 30)


@pytest.mark.parametrize("schedule", ["0 20 * * *", "30 2 * * *", "0 2 * * *", "15 2,3 * * *", "0 0 * * 0", "@daily"])
def test_fixed_time_starts_are_cronsims_own(schedule):
    """The starts equal cronsim's hits for a zone-aware start (its Debian-cron DST handling)."""
    spec = parse_cron(schedule).spec
    for day in (datetime(2026, 3, 27, tzinfo=B), datetime(2026, 10, 23, tzinfo=B)):
        it = CronSim(spec, day)
        expected = [next(it).astimezone(UTC) for _ in range(6)]
        got, t = [], day.astimezone(UTC)
        for _ in range(6):
            t = next_window(schedule, BERLIN, 12 * H, t).start
            got.append(t)
        assert got == expected


def test_wildcard_schedules_fire_on_real_instants_twice_on_fall_back():
    # "0 * * * *": 02:00 CEST (00:00Z) and 02:00 CET (01:00Z) both start a 30-minute window
    w1 = next_window("0 * * * *", BERLIN, 30 * 60, utc(2026, 10, 24, 23, 30))
    w2 = next_window("0 * * * *", BERLIN, 30 * 60, w1.start)
    assert (w1.start, w1.end) == (utc(2026, 10, 25, 0, 0), utc(2026, 10, 25, 0, 30))
    assert (w2.start, w2.end) == (utc(2026, 10, 25, 1, 0), utc(2026, 10, 25, 1, 30))
    assert window_at("0 * * * *", BERLIN, 30 * 60, utc(2026, 10, 25, 1, 15)) == w2
    # spring forward: nothing fires in the missing hour
    w = next_window("0 * * * *", BERLIN, 30 * 60, utc(2026, 3, 29, 0, 30))
    assert w.start == utc(2026, 3, 29, 1, 0) == local(2026, 3, 29, 3, 0)


# -- weekdays, boundaries, macros, UTC ---------------------------------------------------------------------------
def test_weekday_schedule_friday_night_spans_saturday_and_weekend_has_none():
    sched = "0 20 * * 1-5"
    fri = utc(2026, 3, 6, 20, 0)                                  # a Friday
    assert fri.weekday() == 4
    w = window_at(sched, "UTC", 12 * H, utc(2026, 3, 7, 7, 59))    # Saturday morning: Friday's window
    assert w == Window(fri, utc(2026, 3, 7, 8, 0))
    assert window_at(sched, "UTC", 12 * H, utc(2026, 3, 7, 8, 0)) is None
    assert window_at(sched, "UTC", 12 * H, utc(2026, 3, 7, 21, 0)) is None     # Saturday night: no window
    assert window_at(sched, "UTC", 12 * H, utc(2026, 3, 8, 21, 0)) is None     # Sunday night: none
    assert next_window(sched, "UTC", 12 * H, utc(2026, 3, 7, 8, 0)).start == utc(2026, 3, 9, 20, 0)   # Monday


def test_boundaries_start_inclusive_end_exclusive():
    start, end = utc(2026, 5, 4, 20, 0), utc(2026, 5, 5, 8, 0)
    assert window_at("0 20 * * *", "UTC", 12 * H, start) == Window(start, end)
    assert window_at("0 20 * * *", "UTC", 12 * H, start - timedelta(microseconds=1)) is None
    assert window_at("0 20 * * *", "UTC", 12 * H, start + timedelta(microseconds=500)) == Window(start, end)
    assert window_at("0 20 * * *", "UTC", 12 * H, end - timedelta(microseconds=1)) == Window(start, end)
    assert window_at("0 20 * * *", "UTC", 12 * H, end) is None
    w = Window(start, end)
    assert w.contains(start) and not w.contains(end) and w.contains(end - timedelta(seconds=1))
    # next_window: strictly after
    assert next_window("0 20 * * *", "UTC", 12 * H, start).start == start + timedelta(days=1)
    assert next_window("0 20 * * *", "UTC", 12 * H, start - timedelta(seconds=1)).start == start


def test_daily_macro_and_utc_default():
    assert window_at("@daily", "UTC", H, utc(2026, 1, 1, 0, 30)) == Window(utc(2026, 1, 1), utc(2026, 1, 1, 1))
    assert window_at("@daily", "", H, utc(2026, 1, 1, 0, 30)) == Window(utc(2026, 1, 1), utc(2026, 1, 1, 1))
    # a naive `now` is UTC
    assert window_at("@daily", "UTC", H, datetime(2026, 1, 1, 0, 30)) is not None
    # the object's time zone defaults to UTC
    res = load_text("apiVersion: karpenter-lambda.io/v1alpha1\nkind: OffPeakSchedule\nmetadata: {name: n}\n"
                    "spec: {schedule: '@daily', duration: 1h, nodePools: [{name: default, drain: true}]}\n")
    s = res.objects[0]
    assert s.time_zone == "UTC" and s.duration_seconds == H
    assert window_at(s.schedule, s.time_zone, s.duration_seconds, utc(2026, 1, 1, 0, 59)).start == utc(2026, 1, 1)


def test_overlapping_windows_give_the_latest_start():
    w = window_at("0 * * * *", "UTC", 3 * H, utc(2026, 1, 1, 5, 10))
    assert w == Window(utc(2026, 1, 1, 5), utc(2026, 1, 1, 8))


def test_local_zone_other_than_berlin():
    # New York: 2026-03-08 spring forward at 02:00 -> 03:00; "0 22 * * *" for 10h ends at 08:00 EDT
    w = window_at("0 22 * * *", "America/New_York", 10 * H, utc(2026, 3, 8, 11, 0))
    assert w.start == utc(2026, 3, 8, 3, 0) and w.end == utc(2026, 3, 8, 12, 0)


def test_localize_gap_and_fold():
    assert localize(datetime(2026, 3, 29, 2, 30), B) == utc(2026, 3, 29, 1, 0)
    assert localize(datetime(2026, 10, 25, 2, 30), B) == utc(2026, 10, 25, 0, 30)
    assert localize(datetime(2026, 10, 25, 2, 30), B, after=utc(2026, 10, 25, 0, 30)) == utc(2026, 10, 25, 1, 30)


def test_bad_inputs_raise():
    with pytest.raises(CronError):
        window_at("0 20 * *", "UTC", H, utc(2026, 1, 1))
    with pytest.raises(KeyError):                       # zoneinfo.ZoneInfoNotFoundError
        next_window("0 20 * * *", "Mars/Olympus", H, utc(2026, 1, 1))
    with pytest.raises(ValueError):
        window_at("0 20 * * *", "UTC", 0, utc(2026, 1, 1))


@pytest.mark.parametrize("schedule,duration", [("0 20 * * 1-5", 12 * H), ("30 2 * * *", 12 * H), ("30 2 * * *", 30 * 60),
                                               ("0 * * * *", 90 * 60), ("*/20 1-3 * * *", 15 * 60), ("15 2,3 * * *", H)])
def test_window_at_agrees_with_next_window_every_10_minutes_over_both_dst_changes(schedule, duration):
    for first in (utc(2026, 3, 28, 12), utc(2026, 10, 24, 12)):
        t = first
        while t < first + timedelta(hours=36):
            w = window_at(schedule, BERLIN, duration, t)
            nxt = next_window(schedule, BERLIN, duration, t)
            assert nxt.start > t
            if w is not None:
                assert w.contains(t) and w.end > w.start
                assert next_window(schedule, BERLIN, duration, w.start - timedelta(seconds=1)) == w
                assert nxt.start > w.start
            else:       # not inside a window: the previous window (if recent) ended at or before t
                prev = next_window(schedule, BERLIN, duration, t - timedelta(hours=24))
                while prev.start <= t:
                    assert not prev.contains(t)
                    prev = next_window(schedule, BERLIN, duration, prev.start)
            t += timedelta(minutes=10)
