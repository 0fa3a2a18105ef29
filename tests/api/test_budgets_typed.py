"""Typed disruption budgets (issue 22): NodePool.budgets parsed and defaulted once, the one allowance rule."""

from datetime import datetime, timezone

from karpenter_lambda.api.budgets import UNLIMITED, Budget, allowance, parse_budgets
from karpenter_lambda.api.hashes import nodepool_hash
from karpenter_lambda.api.objects import NodePool

MON_10 = datetime(2026, 6, 1, 10, 0, tzinfo=timezone.utc).timestamp()   # a Monday
MON_18 = datetime(2026, 6, 1, 18, 0, tzinfo=timezone.utc).timestamp()


def np_(budgets=None, **disruption) -> NodePool:
    if budgets is not None:
        disruption["budgets"] = budgets
    return NodePool({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"},
                     "spec": {"disruption": disruption, "template": {"spec": {}}}})


def test_absent_budgets_default_to_one_ten_percent_budget():
    (b,) = np_().budgets
    assert b == Budget(nodes="10%", index=0, default=True, text='budgets[0] nodes="10%" (default)')
    assert b.valid and b.applies_to("Drifted") and b.is_active(MON_10) and b.limit(11) == 2


def test_explicit_empty_list_means_no_budget():
    assert np_([]).budgets == ()
    a = allowance(np_([]).budgets, "Empty", total_nodes=10, disrupting=3, now=MON_10)
    assert a.limit is None and a.allowed == UNLIMITED


def test_budget_fields_are_typed_and_the_manifest_is_unchanged():
    spec = [{"nodes": "0", "reasons": ["Drifted", "Underutilized"], "schedule": "0 9 * * 1-5", "duration": "8h"},
            {"nodes": "3"}]
    pool = np_(spec)
    before, doc_hash = pool.to_dict(), nodepool_hash(pool)
    freeze, cap = pool.budgets
    assert (freeze.nodes, freeze.reasons, freeze.schedule, freeze.duration, freeze.duration_seconds) == \
        ("0", ("Drifted", "Underutilized"), "0 9 * * 1-5", "8h", 8 * 3600)
    assert freeze.is_active(MON_10) and not freeze.is_active(MON_18)
    assert not freeze.applies_to("Empty") and cap.applies_to("Empty")
    assert pool.to_dict() == before and nodepool_hash(pool) == doc_hash   # the CRD shape did not move


def test_allowance_min_over_active_budgets_percent_rounded_up_minus_disrupting():
    budgets = np_([{"nodes": "25%"}, {"nodes": "5"}]).budgets
    a = allowance(budgets, "Underutilized", total_nodes=10, disrupting=1, now=MON_10, nodepool="p")
    assert (a.nodepool, a.limit, a.disrupting, a.allowed) == ("p", 3, 1, 2)        # ceil(2.5) = 3
    assert a.message == 'budget Underutilized 2 of 3 left (1 disrupting): budgets[0] nodes="25%"'
    assert allowance(budgets, "Empty", total_nodes=10, disrupting=7, now=MON_10).allowed == 0   # never below 0


def test_a_scheduled_zero_budget_holds_only_inside_its_window():
    budgets = np_([{"nodes": "0", "schedule": "0 9 * * 1-5", "duration": "8h"}, {"nodes": "50%"}]).budgets
    assert allowance(budgets, "Drifted", total_nodes=4, disrupting=0, now=MON_10).allowed == 0
    assert allowance(budgets, "Drifted", total_nodes=4, disrupting=0, now=MON_18).allowed == 2


def test_invalid_budget_is_parsed_with_its_problem_and_fails_closed_for_every_reason():
    budgets = parse_budgets({"budgets": [{"nodes": "3"}, {"nodes": "ten"}]})
    assert budgets[0].valid and not budgets[1].valid and "nodes 'ten'" in budgets[1].problem
    for reason in ("Empty", "Drifted", "Underutilized"):
        a = allowance(budgets, reason, total_nodes=10, disrupting=0, now=MON_10)
        assert a.allowed == 0 and a.budget.startswith('budgets[1] nodes="ten" is invalid')
    (whole,) = parse_budgets({"budgets": "10%"})
    assert not whole.valid and whole.problem == "must be a list"
    assert allowance((whole,), "Empty", total_nodes=5, disrupting=0, now=MON_10).budget == \
        "budgets '10%' is invalid (must be a list): allows 0"


def test_schedule_without_duration_is_invalid():
    (b,) = parse_budgets({"budgets": [{"nodes": "1", "schedule": "@daily"}]})
    assert b.problem == "'schedule' must be set with 'duration'"


def test_a_budget_schedule_in_a_time_zone_follows_its_local_clock():
    # nodes: 0 from 09:00 to 17:00 New York time on weekdays (beyond Karpenter: CRON_TZ=)
    (b,) = np_([{"nodes": "0", "schedule": "CRON_TZ=America/New_York 0 9 * * mon-fri", "duration": "8h"}]).budgets
    assert b.valid
    assert not b.is_active(MON_10)                                   # 06:00 in New York (EDT, UTC-4)
    assert b.is_active(datetime(2026, 6, 1, 13, 0, tzinfo=timezone.utc).timestamp())   # 09:00 EDT
    assert b.is_active(MON_18) and not b.is_active(datetime(2026, 6, 1, 21, 0, tzinfo=timezone.utc).timestamp())
    winter = datetime(2026, 12, 7, 13, 30, tzinfo=timezone.utc).timestamp()   # 08:30 EST (UTC-5): not yet
    assert not b.is_active(winter) and b.is_active(winter + 1800)
    a = allowance(np_([{"nodes": "0", "schedule": "TZ=America/New_York 0 9 * * mon-fri", "duration": "8h"},
                       {"nodes": "100%"}]).budgets, "Drifted", total_nodes=4, disrupting=0, now=MON_18)
    assert a.limit == 0 and "TZ=America/New_York" in a.budget


def test_an_unknown_time_zone_is_a_validation_error_naming_the_field():
    from karpenter_lambda.api.manifests import load_text

    from .helpers import manifest_text

    patch = ("spec:\n  disruption:\n    consolidateAfter: 0s\n    budgets:\n"
             "      - {nodes: '0', schedule: 'CRON_TZ=Mars/Base 0 9 * * *', duration: 1h}\n")
    result = load_text(manifest_text("NodePool", patch), "np.yaml")
    assert result.objects == []
    assert [(i.path, i.message.split(" (")[0]) for i in result.issues] == [
        ("spec.disruption.budgets[0].schedule", 'unknown time zone "Mars/Base"')]
    (b,) = np_([{"nodes": "0", "schedule": "CRON_TZ=Mars/Base 0 9 * * *", "duration": "1h"}]).budgets
    assert not b.valid and b.problem.startswith('unknown time zone "Mars/Base"')   # fails closed: allows 0
    assert allowance((b,), "Empty", total_nodes=5, disrupting=0, now=MON_10).allowed == 0
    ok = load_text(manifest_text("NodePool", patch.replace("Mars/Base", "Europe/Berlin")), "np.yaml")
    assert ok.issues == [] and len(ok.objects) == 1
