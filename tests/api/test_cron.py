"""Budget schedules: 5-field cron and @descriptors in UTC; durations."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from karpenter_lambda.api.cron import CronError, budget_active, parse_cron
from karpenter_lambda.api.durations import DurationError, format_duration, parse_duration, parse_go_duration, parse_nillable_duration


def t(s: str) -> datetime:
    return datetime.fromisoformat(s).replace(tzinfo=timezone.utc)


def test_descriptors_and_fields():
    assert parse_cron("@daily") == parse_cron("0 0 * * *").__class__(**{**parse_cron("0 0 * * *").__dict__, "expr": "@daily"})
    s = parse_cron("*/15 9-17 * jan-mar MON-FRI")
    assert s.minutes == frozenset({0, 15, 30, 45}) and s.hours == frozenset(range(9, 18))
    assert s.months == frozenset({1, 2, 3}) and s.weekdays == frozenset(range(1, 6))
    assert parse_cron("5/20 * * * *").minutes == frozenset({5, 25, 45})


@pytest.mark.parametrize("expr", ["", "* * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *", "* * * * 7", "5-1 * * * *", "a * * * *", "@every 1h", "TZ=UTC * * * * *", "1,,2 * * * *"])
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
