"""Budget schedules: 5-field cron and @descriptors in UTC; durations."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from karpenter_lambda.api.cron import (CronError, TimeZoneError, budget_active, parse_budget_schedule, parse_cron,
                                      split_time_zone)
from karpenter_lambda.api.durations import DurationError, format_duration, parse_duration, parse_go_duration, parse_nillable_duration


def t(s: str) -> datetime:
    return datetime.fromisoformat(s).replace(tzinfo=timezone.utc)


def test_descriptors_and_fields():
    assert parse_cron("@daily") == parse_cron("0 0 * * *").__class__(**{**parse_cron("0 0 * * *").__dict__, "expr": "@daily"})
    s = parse_cron("*/15 9-17 * jan-mar MON-FRI")
    assert s.minutes == frozenset({0, 15, 30, 45}) and s.hours == frozenset(range(9, 18))
    assert s.months == frozenset({1, 2, 3}) and s.weekdays == frozenset(range(1, 6))
    assert parse_cron("5/20 * * * *").minutes == frozenset({5, 25, 45})


@pytest.mark.parametrize("expr", ["", "* * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *", "* * * * 7", "5-1 * * * *", "a * * * *", "@every 1h", "TZ=UTC * * * * *", "CRON_TZ=Europe/Berlin 0 9 * * *", "1,,2 * * * *"])
def test_invalid(expr):
    with pytest.raises(CronError):
        parse_cron(expr)


def test_next_after_and_day_or_semantics():
    s = parse_cron("30 9 * * 1")  # Mondays 09:30
    assert s.next_after(t("2026-12-02T10:00:00")) == t("2026-12-07T09:30:00")
    assert s.next_after(t("2026-12-07T09:30:00")) == t("2026-12-14T09:30:00")  # strictly after
    both = parse_cron("0 0 13 * 5")  # the 13th OR a Friday
    assert both.matches(t("2026-12-04T00:00:00"))  # a Friday
    assert both.matches(t("2026-12-13T00:00:00"))  # a Sunday, the 13th
    assert not both.matches(t("2026-12-05T00:00:00"))
    assert parse_cron("0 0 29 2 *").next_after(t("2026-03-01T00:00:00")) == t("2028-02-29T00:00:00")


def test_budget_active_window():
    # 09:00 UTC on weekdays for 8h
    assert budget_active("0 9 * * mon-fri", 8 * 3600, t("2026-12-02T12:00:00"))
    assert budget_active("0 9 * * mon-fri", 8 * 3600, t("2026-12-02T09:00:00"))
    assert not budget_active("0 9 * * mon-fri", 8 * 3600, t("2026-12-02T17:00:01"))
    assert not budget_active("0 9 * * mon-fri", 8 * 3600, t("2026-12-05T12:00:00"))  # Saturday
    with pytest.raises(CronError):
        budget_active("not a cron", 60, t("2026-12-02T12:00:00"))


def test_durations():
    assert parse_duration("1h30m") == 5400
    assert parse_duration("0s") == 0
    assert parse_nillable_duration("Never") is None
    assert parse_go_duration("1m30s") == 90
    assert parse_go_duration("1.5h") == 5400
    assert parse_go_duration("300ms") * 1000 == 300
    assert format_duration(5400) == "1h30m" and format_duration(None) == "Never" and format_duration(0) == "0s"
    for bad in ("1d", "Never", "", "1.5h"):
        with pytest.raises(DurationError):
            parse_duration(bad)
    for bad in ("", "soon", "1", "h"):
        with pytest.raises(DurationError):
            parse_go_duration(bad)


# -- budget schedules in a time zone (issue 30 item 8: CRON_TZ=/TZ=, beyond Karpenter) ------------------------------
def test_a_budget_schedule_may_name_its_time_zone():
    assert split_time_zone("CRON_TZ=Europe/Berlin 0 22 * * *") == ("Europe/Berlin", "0 22 * * *")
    assert split_time_zone("  TZ=America/New_York @daily") == ("America/New_York", "@daily")
    assert split_time_zone("0 22 * * *") == (None, "0 22 * * *")
    s = parse_budget_schedule("CRON_TZ=Europe/Berlin 0 22 * * mon-fri")
    assert s.time_zone == "Europe/Berlin" and s.cron.hours == frozenset({22})
    assert parse_budget_schedule("@daily").time_zone is None
    with pytest.raises(TimeZoneError, match='^unknown time zone "Mars/Base"'):
        parse_budget_schedule("CRON_TZ=Mars/Base 0 9 * * *")
    for bad in ("TZ=localtime 0 9 * * *", "TZ= 0 9 * * *"):
        with pytest.raises(TimeZoneError):
            parse_budget_schedule(bad)
    with pytest.raises(CronError, match="minute field"):
        parse_budget_schedule("CRON_TZ=UTC 61 9 * * *")
    with pytest.raises(CronError, match="expected 5 fields"):
        parse_budget_schedule("CRON_TZ=UTC")
    with pytest.raises(CronError, match="time-zone prefix is not accepted here"):
        parse_cron("CRON_TZ=UTC 0 9 * * *")    # only a budget's schedule takes one


def test_a_zoned_budget_is_active_in_its_local_window():
    from karpenter_lambda.api.wallclock import budget_active_at

    night = "CRON_TZ=Europe/Berlin 0 22 * * *"          # 22:00-08:00 Berlin
    # winter (UTC+1): 21:00Z-07:00Z
    assert budget_active_at(night, 10 * 3600, t("2026-01-15T21:00:00"))
    assert not budget_active_at(night, 10 * 3600, t("2026-01-15T20:59:59"))
    assert budget_active_at(night, 10 * 3600, t("2026-01-16T06:59:59"))
    assert not budget_active_at(night, 10 * 3600, t("2026-01-16T07:00:00"))
    # summer (UTC+2): 20:00Z-06:00Z
    assert budget_active_at(night, 10 * 3600, t("2026-07-15T20:00:00"))
    assert not budget_active_at(night, 10 * 3600, t("2026-07-16T06:00:00"))
    # the same schedule without the prefix is UTC (Karpenter's IsActive)
    assert budget_active_at("0 22 * * *", 10 * 3600, t("2026-07-15T22:00:00"))
    assert not budget_active_at("0 22 * * *", 10 * 3600, t("2026-07-15T21:59:59"))
    assert not budget_active_at(night, 0, t("2026-01-15T21:00:00"))   # no duration: never active


def test_dst_transition_days_keep_the_local_wall_clock_window():
    from karpenter_lambda.api.wallclock import budget_active_at, budget_edges

    night = "CRON_TZ=Europe/Berlin 0 22 * * *"
    # spring forward (2026-03-29 02:00 -> 03:00 local): the night of the 28th runs 21:00Z-06:00Z, 9 hours
    assert budget_edges(night, 10 * 3600, t("2026-03-28T12:00:00"), t("2026-03-29T12:00:00")) == [
        t("2026-03-28T21:00:00"), t("2026-03-29T06:00:00")]
    assert budget_active_at(night, 10 * 3600, t("2026-03-29T05:59:59"))
    assert not budget_active_at(night, 10 * 3600, t("2026-03-29T06:00:00"))
    # fall back (2026-10-25 03:00 -> 02:00 local): the night of the 24th runs 20:00Z-07:00Z, 11 hours
    assert budget_edges(night, 10 * 3600, t("2026-10-24T12:00:00"), t("2026-10-25T12:00:00")) == [
        t("2026-10-24T20:00:00"), t("2026-10-25T07:00:00")]
    # a start inside the spring-forward gap (02:30 does not exist that day) starts when the gap ends, 03:00 local
    gap = "TZ=Europe/Berlin 30 2 * * *"
    assert not budget_active_at(gap, 3600, t("2026-03-29T00:59:59"))
    assert budget_active_at(gap, 3600, t("2026-03-29T01:00:00"))        # 03:00 CEST
    assert not budget_active_at(gap, 3600, t("2026-03-29T01:30:00"))    # ends at the nominal 02:30 + 1h = 03:30 CEST
    # an ambiguous start (02:30 twice on fall-back day) runs once, at the first 02:30 (CEST, 00:30Z), and lasts
    # until 03:30 local wall time, which is CET by then (02:30Z): two real hours
    assert budget_active_at(gap, 3600, t("2026-10-25T00:30:00"))
    assert budget_edges(gap, 3600, t("2026-10-24T12:00:00"), t("2026-10-25T12:00:00")) == [
        t("2026-10-25T00:30:00"), t("2026-10-25T02:30:00")]


def test_zoned_windows_are_the_off_peak_windows():
    """api.wallclock (budgets) and offpeak.window (OffPeakSchedules) are one definition, not two copies."""
    from karpenter_lambda.api import wallclock
    from karpenter_lambda.offpeak import window

    for name in ("Window", "window_at", "next_window", "localize"):
        assert getattr(window, name) is getattr(wallclock, name), name
