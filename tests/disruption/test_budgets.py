"""Disruption budgets (pure): Karpenter v1's GetAllowedDisruptionsByReason, no clock, no I/O."""

from datetime import datetime, timezone

import pytest

from karpenter_lambda.api.cron import CronError, budget_active, parse_cron
from karpenter_lambda.api.objects import NodePool
from karpenter_lambda.disruption.budgets import (REASONS, UNLIMITED, Allowance, allowed_disruptions, budget_limit,
                                                 parse_nodes)


def nodepool(budgets=None, name="pool"):
    disruption = {} if budgets is None else {"budgets": budgets}
    return NodePool({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
                     "spec": {"template": {"spec": {}}, "disruption": disruption}})


def ts(s: str) -> float:
    return datetime.fromisoformat(s).replace(tzinfo=timezone.utc).timestamp()


MON_10 = ts("2026-12-07T10:00:00")   # Monday 7 Dec 2026, 10:00 UTC
MON_18 = ts("2026-12-07T18:00:00")
SAT_10 = ts("2026-12-12T10:00:00")
BUSINESS_HOURS_FREEZE = {"nodes": "0", "schedule": "0 9 * * 1-5", "duration": "8h"}


def allow(budgets, reason="Empty", total=10, disrupting=0, now=MON_10) -> Allowance:
    return allowed_disruptions(nodepool(budgets), reason, total_nodes=total, disrupting=disrupting, now=now)


def test_reasons_constant():
    assert REASONS == ("Empty", "Drifted", "Underutilized")


def test_default_is_ten_percent_rounded_up():
    a = allow(None, total=10)
    assert (a.nodepool, a.reason, a.limit, a.disrupting, a.allowed) == ("pool", "Empty", 1, 0, 1)
    assert 'nodes="10%"' in a.budget and "default" in a.budget
    assert allow(None, total=1).limit == 1          # 10% of 1 rounds up to 1
    assert allow(None, total=0).limit == 0          # 10% of 0 is 0
    assert allow(None, total=25).limit == 3         # 2.5 -> 3
    assert allow(None, total=20).limit == 2
    for reason in REASONS:                          # the default applies to every reason
        assert allow(None, reason, total=30).limit == 3


def test_counts_and_percentages():
    assert allow([{"nodes": "0"}]).limit == 0 and allow([{"nodes": "0"}]).allowed == 0
    assert allow([{"nodes": "5"}]).limit == 5
    assert allow([{"nodes": "30%"}], total=10).limit == 3
    assert allow([{"nodes": "10%"}], total=11).limit == 2     # 1.1 -> 2 (ceil)
    assert allow([{"nodes": "100%"}], total=7).limit == 7
    assert allow([{"nodes": "0%"}], total=7).limit == 0
    assert allow([{"nodes": "50"}], total=3).limit == 50      # a count may exceed the node count
    assert allow([{"reasons": ["Empty"]}], total=10).limit == 1   # nodes defaults to 10% (CRD default)


def test_parse_nodes():
    assert parse_nodes("0", 10) == 0
    assert parse_nodes("7", 0) == 7
    assert parse_nodes("30%", 10) == 3
    assert parse_nodes("10%", 11) == 2
    assert parse_nodes("1%", 1) == 1
    assert parse_nodes("100%", 9) == 9
    assert parse_nodes("33%", 100) == 33
    for bad in ("ten", "-1", "101%", "150%", "1.5", "", " 5", "5 ", "%", "10 %", "1e3", None, True):
        with pytest.raises(ValueError, match="nodes"):
            parse_nodes(bad, 10)


def test_reasons_filter():
    budgets = [{"nodes": "5"}, {"nodes": "1", "reasons": ["Drifted"]}]
    assert allow(budgets, "Drifted").limit == 1
    assert allow(budgets, "Empty").limit == 5                   # the Drifted budget does not limit Empty
    assert allow(budgets, "Underutilized").limit == 5
    only_drift = [{"nodes": "0", "reasons": ["Drifted"]}]
    assert allow(only_drift, "Drifted").allowed == 0
    assert allow(only_drift, "Empty").limit is None             # no budget applies to Empty: unlimited
    assert allow(only_drift, "Empty").allowed == UNLIMITED
    # an explicit empty reasons list applies to no reason (Karpenter: a nil slice is every reason, an empty one none)
    assert allow([{"nodes": "2", "reasons": []}], "Underutilized").limit is None
    assert allow([{"nodes": "2", "reasons": []}, {"nodes": "4"}], "Empty").limit == 4
    two = [{"nodes": "3", "reasons": ["Empty", "Underutilized"]}]
    assert allow(two, "Underutilized").limit == 3 and allow(two, "Drifted").limit is None


def test_minimum_of_active_budgets():
    budgets = [{"nodes": "50%"}, {"nodes": "4"}, {"nodes": "20%"}]
    a = allow(budgets, total=10)
    assert a.limit == 2 and a.budget.startswith("budgets[2]") and 'nodes="20%"' in a.budget
    assert allow(budgets, total=30).limit == 4                  # 15, 4, 6 -> 4
    assert allow(budgets, total=30).budget.startswith("budgets[1]")


def test_zero_budget_inside_and_outside_its_cron_window():
    budgets = [BUSINESS_HOURS_FREEZE, {"nodes": "100%"}]
    inside = allow(budgets, "Drifted", total=3, now=MON_10)
    assert inside.limit == 0 and inside.allowed == 0
    assert inside.budget == 'budgets[0] nodes="0" schedule="0 9 * * 1-5" duration=8h'
    assert "Drifted" in inside.message and "0 of 0" in inside.message
    assert allow(budgets, now=ts("2026-12-07T09:00:00")).limit == 0     # the hit itself is inside
    assert allow(budgets, now=ts("2026-12-07T16:59:59")).limit == 0
    assert allow(budgets, now=ts("2026-12-07T17:00:00")).limit == 10    # (hit, hit + 8h]: Go's !Next.After(now)
    assert allow(budgets, now=ts("2026-12-07T08:59:59")).limit == 10
    outside = allow(budgets, total=10, now=MON_18)
    assert outside.limit == 10 and outside.budget.startswith("budgets[1]")
    assert allow(budgets, now=SAT_10).limit == 10                       # weekend: no hit
    # without another budget, outside the window nothing applies: unlimited
    assert allow([BUSINESS_HOURS_FREEZE], now=MON_18).limit is None
    # the default is NOT added back when budgets are given
    assert allow([BUSINESS_HOURS_FREEZE], now=SAT_10).allowed == UNLIMITED


def test_window_crossing_midnight():
    night = [{"nodes": "1", "schedule": "0 22 * * *", "duration": "10h"}, {"nodes": "5"}]
    assert allow(night, now=ts("2026-12-07T23:30:00")).limit == 1
    assert allow(night, now=ts("2026-12-08T03:00:00")).limit == 1      # yesterday's 22:00 hit
    assert allow(night, now=ts("2026-12-08T07:59:00")).limit == 1
    assert allow(night, now=ts("2026-12-08T08:00:00")).limit == 5
    assert allow(night, now=ts("2026-12-08T21:59:00")).limit == 5
    # a weekend-only window that starts Friday night and runs into Monday morning
    weekend = [{"nodes": "0", "schedule": "0 20 * * fri", "duration": "60h"}]
    assert allow(weekend, now=ts("2026-12-13T12:00:00")).limit == 0    # Sunday
    assert allow(weekend, now=ts("2026-12-14T07:59:00")).limit == 0    # Monday 07:59
    assert allow(weekend, now=ts("2026-12-14T08:01:00")).limit is None


def test_descriptors():
    daily = [{"nodes": "2", "schedule": "@daily", "duration": "1h"}]
    assert allow(daily, now=ts("2026-12-08T00:00:00")).limit == 2
    assert allow(daily, now=ts("2026-12-08T00:30:00")).limit == 2
    assert allow(daily, now=ts("2026-12-08T01:00:00")).limit is None
    assert allow(daily, now=ts("2026-12-07T23:59:00")).limit is None
    hourly = [{"nodes": "0", "schedule": "@hourly", "duration": "15m"}]
    assert allow(hourly, now=ts("2026-12-08T13:10:00")).limit == 0
    assert allow(hourly, now=ts("2026-12-08T13:20:00")).limit is None
    monthly = [{"nodes": "0", "schedule": "@monthly", "duration": "24h"}]
    assert allow(monthly, now=ts("2026-12-01T18:00:00")).limit == 0
    assert allow(monthly, now=ts("2026-12-02T18:00:00")).limit is None
    # a long duration keeps a budget active across several hits ("1h30m0s" as Go prints it)
    assert allow([{"nodes": "3", "schedule": "*/30 * * * *", "duration": "1h30m0s"}], now=MON_18).limit == 3


def test_now_as_datetime():
    monday_10 = datetime(2026, 12, 7, 10, 0, tzinfo=timezone.utc)
    assert allow([BUSINESS_HOURS_FREEZE, {"nodes": "4"}], now=monday_10).limit == 0
    assert budget_limit({"budgets": [BUSINESS_HOURS_FREEZE]}, "Empty", 10, monday_10)[0] == 0


def test_disrupting_is_subtracted_and_floored():
    a = allow([{"nodes": "5"}], disrupting=3)
    assert (a.limit, a.disrupting, a.allowed) == (5, 3, 2)
    assert "2 of 5 left" in a.message and "Empty" in a.message
    assert allow([{"nodes": "5"}], disrupting=5).allowed == 0
    assert allow([{"nodes": "5"}], disrupting=9).allowed == 0           # never negative
    assert allow([{"nodes": "30%"}], total=10, disrupting=1).allowed == 2
    assert allow([], disrupting=100).allowed == UNLIMITED               # unlimited stays unlimited


@pytest.mark.parametrize("bad,why", [
    ({"nodes": "ten"}, "nodes"),
    ({"nodes": "150%"}, "nodes"),
    ({"nodes": "-1"}, "nodes"),
    ({"nodes": "1", "schedule": "61 * * * *", "duration": "1h"}, "minute"),
    ({"nodes": "1", "schedule": "0 9 * * funday", "duration": "1h"}, "day-of-week"),
    ({"nodes": "1", "schedule": "TZ=Mars/Base 0 9 * * *", "duration": "1h"}, 'unknown time zone "Mars/Base"'),
    ({"nodes": "1", "schedule": "@daily", "duration": "30s"}, "duration"),
    ({"nodes": "1", "schedule": "@daily", "duration": "soon"}, "duration"),
    ({"nodes": "1", "schedule": "@daily"}, "'schedule' must be set with 'duration'"),
    ({"nodes": "1", "duration": "1h"}, "'schedule' must be set with 'duration'"),
    ({"nodes": "1", "reasons": ["Expired"]}, "Expired"),
])
def test_an_invalid_budget_allows_zero_and_says_which(bad, why):
    a = allow([{"nodes": "100%"}, bad], total=10)
    assert a.limit == 0 and a.allowed == 0
    assert a.budget.startswith("budgets[1]") and "invalid" in a.budget and why in a.budget
    assert "budgets[1]" in a.message and "0 of 0 left" in a.message


def test_an_invalid_budget_blocks_every_reason_and_every_hour():
    # Karpenter's MustGetAllowedDisruptions: any budget error -> 0, whatever the reason or the budget's window
    budgets = [{"nodes": "100%"}, {"nodes": "bad", "reasons": ["Drifted"], "schedule": "0 3 * * *", "duration": "1h"}]
    for reason in REASONS:
        for now in (MON_10, MON_18, SAT_10):
            assert allow(budgets, reason, now=now).allowed == 0


def test_explicit_empty_list_is_unlimited():
    a = allow([], total=10)
    assert a.limit is None and a.allowed == UNLIMITED and a.budget == ""
    assert "unlimited" in a.message
    assert budget_limit({"budgets": []}, "Drifted", 10, MON_10) == (None, "")


def test_budget_limit_direct():
    assert budget_limit({}, "Empty", 10, MON_10)[0] == 1                          # default 10%
    assert budget_limit({"consolidateAfter": "0s"}, "Empty", 10, MON_10)[0] == 1
    limit, which = budget_limit({"budgets": [BUSINESS_HOURS_FREEZE]}, "Underutilized", 10, MON_10)
    assert limit == 0 and 'schedule="0 9 * * 1-5"' in which
    assert budget_limit({"budgets": [BUSINESS_HOURS_FREEZE]}, "Underutilized", 10, MON_18) == (None, "")
    limit, which = budget_limit({"budgets": "10%"}, "Empty", 10, MON_10)
    assert limit == 0 and "invalid" in which


def test_pure_no_clock(monkeypatch):
    # the answer depends only on the `now` passed in
    import time
    monkeypatch.setattr(time, "time", lambda: (_ for _ in ()).throw(AssertionError("clock read")))
    assert allow([BUSINESS_HOURS_FREEZE], now=MON_10).limit == 0
    assert allow([BUSINESS_HOURS_FREEZE], now=MON_18).limit is None


# --- the cron wrapper: robfig/cron ParseStandard semantics on cronsim -------------------------------------------


def dt(s: str) -> datetime:
    return datetime.fromisoformat(s).replace(tzinfo=timezone.utc)


def test_cron_day_or_semantics_follow_robfig():
    # robfig ORs day-of-month and day-of-week unless one is unrestricted ('*', '?', '*/1')
    odd_days_or_monday = parse_cron("0 0 */2 * 1")          # cronsim alone would AND ('*/2' starts with '*')
    assert odd_days_or_monday.matches(dt("2026-12-07T00:00:00"))      # Monday the 7th (odd anyway)
    assert odd_days_or_monday.matches(dt("2026-12-14T00:00:00"))      # Monday the 14th: OR
    assert odd_days_or_monday.matches(dt("2026-12-03T00:00:00"))      # Thursday the 3rd: OR
    assert not odd_days_or_monday.matches(dt("2026-12-04T00:00:00"))  # Friday the 4th
    mondays = parse_cron("0 0 ? * 1")                         # '?' is '*': AND -> Mondays only
    assert mondays.matches(dt("2026-12-14T00:00:00")) and not mondays.matches(dt("2026-12-03T00:00:00"))
    assert parse_cron("0 0 5,* * 1").matches(dt("2026-12-14T00:00:00"))
    assert not parse_cron("0 0 5,* * 1").matches(dt("2026-12-15T00:00:00"))   # a list with '*' is unrestricted


def test_cron_weekday_steps_stop_at_saturday():
    s = parse_cron("0 0 * * mon/2")                           # robfig: 1-6/2 = Mon, Wed, Fri
    assert s.weekdays == frozenset({1, 3, 5})
    assert s.next_after(dt("2026-12-11T12:00:00")) == dt("2026-12-14T00:00:00")   # Fri -> Mon, not Sunday
    assert parse_cron("0 0 * * */3").weekdays == frozenset({0, 3, 6})
    assert parse_cron("* * * * *").weekdays == frozenset(range(7))


@pytest.mark.parametrize("expr", ["0 0 L * *", "0 0 LW * *", "0 0 * * 5L", "0 0 * * 1#2", "0 0 * * 7", "@DAILY",
                                  "@every 1h", "CRON_TZ=Mars/Base 0 9 * * *", "0 0 30 2 *", "0 9 * * 1 *"])
def test_cron_refuses_what_robfig_or_karpenter_refuses(expr):
    with pytest.raises(CronError):
        parse_cron(expr)
    assert allow([{"nodes": "100%"}, {"nodes": "1", "schedule": expr, "duration": "1h"}]).allowed == 0


def test_budget_active_boundaries():
    # active in (hit, hit + duration]: Karpenter's !schedule.Next(now - d).After(now)
    assert budget_active("0 9 * * *", 3600, dt("2026-12-07T09:00:00"))
    assert budget_active("0 9 * * *", 3600, dt("2026-12-07T09:59:59"))
    assert not budget_active("0 9 * * *", 3600, dt("2026-12-07T10:00:00"))
    assert not budget_active("0 9 * * *", 3600, dt("2026-12-07T08:59:59"))
    assert not budget_active("0 9 * * *", 0, dt("2026-12-07T09:00:00"))   # a zero duration is never active


def test_a_node_drained_with_its_instance_terminated_is_in_neither_count():
    """Karpenter's budget mapping leaves out the NodeClaims whose instance is terminating (drained, the delete call
    made): they neither hold a slot nor count in the base of a percentage."""
    import builders
    from builders import claimed_node

    from karpenter_lambda.disruption.budgets import count_nodes

    live = [claimed_node(f"n{i}") for i in range(3)]
    done = claimed_node("gone", deleting=True, status={"termination": {"drainedAt": "2026-01-01T00:00:00Z",
                                                                        "instanceTerminatedAt": "2026-01-01T00:00:05Z"}})
    going = claimed_node("going", deleting=True)
    snap = builders.snapshot(*live, done, going)
    c = count_nodes(snap, "default")
    assert (c.total, c.external) == (4, 1)   # "gone" is in neither; "going" (still draining) holds a slot
