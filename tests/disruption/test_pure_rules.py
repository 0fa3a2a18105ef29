"""The pure rules: budgets, PDB arithmetic, do-not-disrupt durations (no I/O, no clock)."""

from datetime import datetime, timezone

import pytest

from karpenter_lambda.api.objects import NodePool
from karpenter_lambda.disruption.budgets import allowed_disruptions, parse_nodes
from karpenter_lambda.disruption.candidates import do_not_disrupt_until
from karpenter_lambda.disruption.pdb import blocking_pdb, disruptions_allowed


def np_(budgets=None):
    d = {} if budgets is None else {"budgets": budgets}
    return NodePool({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"},
                     "spec": {"template": {"spec": {}}, "disruption": d}})


def ts(s):
    return datetime.fromisoformat(s).replace(tzinfo=timezone.utc).timestamp()


MON_10 = ts("2026-12-07T10:00:00")   # a Monday
MON_18 = ts("2026-12-07T18:00:00")


def allowed(budgets, reason="Empty", total=10, disrupting=0, now=MON_10):
    return allowed_disruptions(np_(budgets), reason, total_nodes=total, disrupting=disrupting, now=now)


def test_defaults_and_rounding():
    assert allowed(None).limit == 1 and allowed(None, total=11).limit == 2      # 10%, rounded up
    assert allowed(None, total=0).limit == 0
    assert allowed([{"nodes": "30%"}]).limit == 3
    assert allowed([{"nodes": "0"}]).allowed == 0
    assert allowed([]).limit is None and allowed([]).allowed > 10 ** 6     # an explicit empty list: no limit
    assert parse_nodes("100%", 7) == 7
    with pytest.raises(ValueError):
        parse_nodes("-1", 3)


def test_reasons_minimum_and_disrupting():
    budgets = [{"nodes": "5"}, {"nodes": "1", "reasons": ["Drifted"]}]
    assert allowed(budgets, "Drifted").limit == 1 and allowed(budgets, "Empty").limit == 5
    assert allowed(budgets, "Empty", disrupting=3).allowed == 2
    assert allowed(budgets, "Empty", disrupting=9).allowed == 0                 # never below 0


def test_cron_windows():
    budgets = [{"nodes": "0", "schedule": "0 9 * * 1-5", "duration": "8h"}, {"nodes": "100%"}]
    assert allowed(budgets, now=MON_10).limit == 0                              # inside 09:00-17:00 on a weekday
    assert allowed(budgets, now=MON_18).limit == 10                             # outside: the other budget
    night = [{"nodes": "0", "schedule": "0 22 * * *", "duration": "10h"}]        # crosses midnight
    assert allowed(night, now=ts("2026-12-08T03:00:00")).limit == 0
    assert allowed(night, now=ts("2026-12-08T09:00:00")).limit is None
    assert allowed([{"nodes": "2", "schedule": "@daily", "duration": "1h"}], now=ts("2026-12-08T00:30:00")).limit == 2


@pytest.mark.parametrize("bad", [{"nodes": "ten"}, {"nodes": "1", "schedule": "61 * * * *", "duration": "1h"},
                                 {"nodes": "1", "schedule": "@daily"}, {"nodes": "150%"}])
def test_an_invalid_budget_allows_zero(bad):
    a = allowed([{"nodes": "100%"}, bad])
    assert a.limit == 0 and a.allowed == 0 and "budgets[1]" in a.budget


def pod(name, labels, ready=True, phase="Running"):
    conds = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {"metadata": {"name": name, "namespace": "default", "labels": labels, "uid": name},
            "status": {"phase": phase, "conditions": conds}}


def pdb(**spec):
    return {"metadata": {"name": "b", "namespace": "default"}, "spec": {"selector": {"matchLabels": {"app": "a"}}, **spec}}


def test_pdb_arithmetic():
    pods = [pod(f"a{i}", {"app": "a"}) for i in range(4)] + [pod("x", {"app": "b"})]
    assert disruptions_allowed(pdb(maxUnavailable=0), pods) == 0
    assert disruptions_allowed(pdb(maxUnavailable="50%"), pods) == 2
    assert disruptions_allowed(pdb(minAvailable=3), pods) == 1
    pods[0] = pod("a0", {"app": "a"}, ready=False)
    assert disruptions_allowed(pdb(maxUnavailable=1), pods) == 0              # one already unavailable
    assert blocking_pdb(pods[1], [pdb(maxUnavailable=1)], pods) is not None
    assert blocking_pdb(pods[0], [pdb(maxUnavailable=1)], pods) is None       # an unhealthy pod is never held
    assert blocking_pdb(pods[4], [pdb(maxUnavailable=0)], pods) is None       # not selected
    with_status = {**pdb(maxUnavailable=0), "status": {"disruptionsAllowed": 2}}
    assert disruptions_allowed(with_status, pods) == 2                        # the API server's number wins


def test_pdb_expected_count_is_the_controllers_replicas_when_known():
    """A Deployment of 4 with one pod evicted and not yet replaced: maxUnavailable 1 allows no more (the controller's
    replicas, not the 3 pods left, are what "all" is), nor does minAvailable 75%; an integer minAvailable counts pods."""
    pods = [pod(f"a{i}", {"app": "a"}) for i in range(3)] + [pod("bare", {"app": "a"})]
    scale = {f"a{i}": ("Deployment/default/a", 4) for i in range(3)}.get    # "bare" has no controller: counts itself
    by_pod = lambda p: scale(p["metadata"]["name"])   # noqa: E731
    assert disruptions_allowed(pdb(maxUnavailable=1), pods) == 1             # pods only: 4 of 4 healthy
    assert disruptions_allowed(pdb(maxUnavailable=1), pods, by_pod) == 0     # 5 expected (4 + the bare one), 4 healthy
    assert disruptions_allowed(pdb(maxUnavailable=2), pods, by_pod) == 1
    assert disruptions_allowed(pdb(minAvailable="80%"), pods, by_pod) == 0   # ceil(0.8 * 5) = 4 of 4 healthy
    assert disruptions_allowed(pdb(minAvailable=3), pods, by_pod) == 1       # integer: the pods, as Kubernetes does
    assert blocking_pdb(pods[0], [pdb(maxUnavailable=1)], pods, by_pod) is not None


def test_do_not_disrupt_values():
    p = pod("p", {})
    p["status"]["startTime"] = "2026-12-07T10:00:00Z"
    p["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
    assert do_not_disrupt_until(p) == float("inf")
    p["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "30m"}
    assert do_not_disrupt_until(p) == MON_10 + 1800
    p["metadata"]["annotations"] = {"karpenter.sh/do-not-disrupt": "soon"}
    assert do_not_disrupt_until(p) is None


def test_budget_message_says_when_earlier_candidates_hold_what_is_left():
    """Issue 23: "DisruptionBlocked ... budget 1 of 1 left" read as if the budget had room; the candidates the sweep put
    first hold it."""
    from karpenter_lambda.api.snapshot import ClusterSnapshot
    from karpenter_lambda.disruption.plan import SweepBudgets

    snap = ClusterSnapshot(nodepools={"p": np_([{"nodes": "1"}])}, now=MON_10)
    b = SweepBudgets(snap, {})
    assert b.message("p", "Underutilized") == 'budget Underutilized 1 of 1 left (budgets[0] nodes="1")'
    held = b.message("p", "Underutilized", ahead=1)
    assert "1 of 1 left" in held and "held by the 1 candidate(s) of NodePool p considered before this one" in held
    b.take("p", "Underutilized")
    assert b.message("p", "Underutilized", ahead=1).startswith("budget Underutilized 0 of 1 left")


def test_spot_to_spot_keeps_as_many_cheapest_types_as_min_values_need():
    """Spot -> spot offers the 15 cheapest types, or as many of the cheapest as the NodePool's minValues need
    (Karpenter takes the larger): 20 cheaper types, of which the 15 cheapest are of 2 families, under
    ``instance-family minValues: 3`` -> the 16 cheapest (the 16th brings the third family); with minValues 2 -> 15."""
    from types import SimpleNamespace

    from karpenter_lambda.api import labels as L
    from karpenter_lambda.catalog.types import InstanceType, Offering
    from karpenter_lambda.disruption.consolidation import _cheaper_plan
    from karpenter_lambda.scheduling.requirements import Requirement, Requirements

    def spot_type(name: str, price: float) -> InstanceType:
        return InstanceType(name=name, labels={L.INSTANCE_TYPE: name, "karpenter.k8s.aws/instance-family": name[0]},
                            capacity={"cpu": 2000}, offerings=[Offering("us-east-1a", "spot", price)])

    types = ([spot_type(f"c{i}.large", 0.01 + i / 1000) for i in range(8)]
             + [spot_type(f"m{i}.large", 0.02 + i / 1000) for i in range(7)]
             + [spot_type(f"r{i}.large", 0.04 + i / 1000) for i in range(5)])
    candidate = SimpleNamespace(capacity_type="spot", price=0.5, instance_type="x9.large")
    for min_values, expected in ((3, 16), (2, 15)):
        reqs = Requirements([Requirement.new(L.CAPACITY_TYPE, "In", ["spot"]),
                             Requirement.new(L.ZONE, "In", ["us-east-1a"]),
                             Requirement("karpenter.k8s.aws/instance-family", True, set(), None, None, min_values)])
        plan = SimpleNamespace(instance_types=types, requirements=reqs, capacity_type="spot")
        new, _, why = _cheaper_plan(plan, 0.5, [candidate])
        assert why == "" and len(new.instance_types) == expected, (min_values, why)
        assert len({t.labels["karpenter.k8s.aws/instance-family"] for t in new.instance_types}) >= min_values


def test_several_spot_nodes_merge_into_one_spot_node_without_the_fifteen_type_rule():
    """Karpenter's multi-node consolidation returns its command before the spot -> spot checks: several spot nodes
    merged into one spot node need neither 15 cheaper types nor the cut to the 15 cheapest; one spot node still does."""
    from types import SimpleNamespace

    from karpenter_lambda.api import labels as L
    from karpenter_lambda.catalog.types import InstanceType, Offering
    from karpenter_lambda.disruption.consolidation import _cheaper_plan
    from karpenter_lambda.scheduling.requirements import Requirement, Requirements

    types = [InstanceType(name=f"c{i}.xlarge", labels={L.INSTANCE_TYPE: f"c{i}.xlarge"}, capacity={"cpu": 4000},
                          offerings=[Offering("us-east-1a", "spot", 0.05 + i / 100)]) for i in range(20)]
    reqs = Requirements([Requirement.new(L.CAPACITY_TYPE, "In", ["spot"]), Requirement.new(L.ZONE, "In", ["us-east-1a"])])
    plan = SimpleNamespace(instance_types=types, requirements=reqs, capacity_type="spot")
    three = [SimpleNamespace(capacity_type="spot", price=0.04, instance_type="m5.large") for _ in range(3)]
    new, _, why = _cheaper_plan(plan, 0.12, three)          # 7 types under $0.12/h: fewer than 15, all offered
    assert why == "" and [t.name for t in new.instance_types] == [f"c{i}.xlarge" for i in range(7)]
    new, _, why = _cheaper_plan(plan, 0.30, three)          # 20 cheaper: all offered, not the 15 cheapest
    assert why == "" and len(new.instance_types) == 20
    new, _, why = _cheaper_plan(plan, 0.12, three[:1])      # one spot node: the rule holds
    assert new is None and why == "spot to spot needs 15 cheaper spot instance types, 7 possible"


def test_consolidation_orders_by_savings_ratio_and_single_node_takes_the_nodepools_in_turn():
    """Karpenter v1.14: candidates by price / (1 + the pods' positive eviction costs), highest first; single-node then
    interleaves the NodePools.  a (m5.2xlarge, 2 pods) goes before b (m5.large, 1 pod): 0.384/3 > 0.096/2, where
    v1.13's cheapest-to-disrupt-first order put b first."""
    import builders
    from builders import claimed_node, nodepool, pod

    from karpenter_lambda.disruption.candidates import build_candidates
    from karpenter_lambda.disruption.consolidation import interleaved, ordered, savings_ratio

    a = claimed_node("a", instance_type="m5.2xlarge")
    b = claimed_node("b", instance_type="m5.large")
    c = claimed_node("c", instance_type="m5.xlarge", nodepool="other")
    d = claimed_node("d", instance_type="m5.large", nodepool="other")
    pods = [pod("a-0", node="node-a"), pod("a-1", node="node-a"), pod("b-0", node="node-b"),
            pod("c-0", node="node-c"), pod("d-0", node="node-d")]
    snap = builders.snapshot(a, b, c, d, pods=pods, nodepools=[nodepool(), nodepool("other")])
    cands, _ = build_candidates(snap)
    ratio = {x.name: savings_ratio(x) for x in cands}
    assert ratio["a"] == pytest.approx(builders.price("m5.2xlarge") / 3)
    assert ratio["b"] == pytest.approx(builders.price("m5.large") / 2)
    assert [x.name for x in ordered(cands)] == ["a", "c", "b", "d"]
    # single-node: default's best, other's best, then the seconds
    assert [x.name for x in interleaved(cands)] == ["a", "c", "b", "d"]
    only_b = [x for x in cands if x.name != "c"]
    assert [x.name for x in interleaved(only_b)] == ["a", "d", "b"]


def _spot_and_od_types(n: int = 20):
    from karpenter_lambda.api import labels as L
    from karpenter_lambda.catalog.types import InstanceType, Offering
    return [InstanceType(name=f"c{i}.xlarge", labels={L.INSTANCE_TYPE: f"c{i}.xlarge"}, capacity={"cpu": 4000},
                         offerings=[Offering("us-east-1a", "on-demand", 0.20 + i / 100),
                                    Offering("us-east-1a", "spot", 0.05 + i / 100)]) for i in range(n)]


def test_an_on_demand_node_replaced_where_spot_is_allowed_gets_a_spot_only_replacement():
    """Karpenter's computeConsolidation: the replacement is priced at spot prices, so it is made spot only (an
    on-demand fallback when spot runs out would cost as much as the node, and be replaced again and again); the
    capacity-type requirement says so and the plan's offering is the spot one."""
    from types import SimpleNamespace

    from karpenter_lambda.api import labels as L
    from karpenter_lambda.disruption.consolidation import _cheaper_plan
    from karpenter_lambda.scheduling.requirements import Requirement, Requirements

    reqs = Requirements([Requirement.new(L.CAPACITY_TYPE, "In", ["on-demand", "spot"]),
                         Requirement.new(L.ZONE, "In", ["us-east-1a"])])
    plan = SimpleNamespace(instance_types=_spot_and_od_types(), requirements=reqs, capacity_type="spot",
                           zone="us-east-1a", labels={})
    od = SimpleNamespace(capacity_type="on-demand", price=0.20, instance_type="m5.xlarge")
    new, _, why = _cheaper_plan(plan, 0.20, [od])
    assert why == ""
    assert sorted(new.requirements.get(L.CAPACITY_TYPE).values) == ["spot"]
    assert new.capacity_type == "spot" and new.price == 0.05 and new.labels[L.CAPACITY_TYPE] == "spot"
    assert sorted(plan.requirements.get(L.CAPACITY_TYPE).values) == ["on-demand", "spot"]   # the input is unchanged


def test_spot_nodes_replaced_where_both_are_allowed_are_priced_and_launched_as_spot_only():
    """All candidates spot and the replacement allows spot (and on-demand): Karpenter's spot-to-spot path, spot only;
    on-demand types cheaper than the node do not count, nor can the launch fall back to them."""
    from types import SimpleNamespace

    from karpenter_lambda.api import labels as L
    from karpenter_lambda.disruption.consolidation import _cheaper_plan
    from karpenter_lambda.scheduling.requirements import Requirement, Requirements

    reqs = Requirements([Requirement.new(L.CAPACITY_TYPE, "In", ["on-demand", "spot"]),
                         Requirement.new(L.ZONE, "In", ["us-east-1a"])])
    plan = SimpleNamespace(instance_types=_spot_and_od_types(), requirements=reqs, capacity_type="on-demand",
                           zone="us-east-1a", labels={})
    spot = SimpleNamespace(capacity_type="spot", price=0.30, instance_type="m5.2xlarge")
    new, _, why = _cheaper_plan(plan, 0.30, [spot])
    assert why == "" and sorted(new.requirements.get(L.CAPACITY_TYPE).values) == ["spot"]
    assert len(new.instance_types) == 15 and new.capacity_type == "spot"   # the 15 cheapest spot types
    new, _, why = _cheaper_plan(plan, 0.30, [spot], spot_to_spot=False)
    assert new is None and why == "SpotToSpotConsolidation is disabled: a spot node is not replaced by a spot node"
    # an on-demand node in the same NodePool is still replaced (by spot) with the gate off
    od = SimpleNamespace(capacity_type="on-demand", price=0.30, instance_type="m5.2xlarge")
    new, _, why = _cheaper_plan(plan, 0.30, [od], spot_to_spot=False)
    assert why == "" and new.capacity_type == "spot"
