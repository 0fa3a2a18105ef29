"""The minValues policy (issue 30 item 6; Karpenter's ``--min-values-policy``): Strict keeps pods pending when a
NodeClaim's instance types would no longer meet a requirement's minValues; BestEffort launches it with that minValues
lowered to what its types offer and marks the plan (the ``karpenter.sh/nodeclaim-min-values-relaxed`` annotation)."""

from __future__ import annotations

import pytest

from karpenter_lambda.api import labels as L
from karpenter_lambda.scheduling import (MIN_VALUES_BEST_EFFORT, MIN_VALUES_STRICT, ExistingNode, NodePoolInput,
                                         SchedulingError, SchedulingInput, simulate_removal, solve)

from .helpers import catalog, nodepool, pod

# three families asked for, at least three of them on every NodeClaim
FAMILIES_3 = [{"key": L.INSTANCE_FAMILY, "operator": "In", "values": ["m5", "c5", "r5"], "minValues": 3},
              {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}]


def _solve(pods, requirements=FAMILIES_3, **kw):
    return solve(SchedulingInput(pods=pods, nodepools=[NodePoolInput(nodepool(requirements=requirements), catalog())]),
                 **kw)


def _min_values(plan, key):
    return next(r for r in plan.requirements if r.key == key).min_values


def test_strict_is_the_default_and_keeps_the_pod_pending_naming_min_values():
    big = pod("big", cpu="20", memory="100Gi")      # only m5.8xlarge and r5.8xlarge hold it: two families of three
    for res in (_solve([big]), _solve([big], min_values_policy=MIN_VALUES_STRICT)):
        assert res.nodeclaims == []
        assert [u.pod for u in res.unschedulable] == ["default/big"]
        assert "minValues 3" in res.unschedulable[0].reason and L.INSTANCE_FAMILY in res.unschedulable[0].reason


def test_best_effort_launches_with_min_values_lowered_and_marked():
    res = _solve([pod("big", cpu="20", memory="100Gi")], min_values_policy=MIN_VALUES_BEST_EFFORT)
    assert res.unschedulable == []
    (plan,) = res.nodeclaims
    assert plan.pods == ["default/big"]
    assert {it.labels[L.INSTANCE_FAMILY] for it in plan.instance_types} == {"m5", "r5"}
    assert _min_values(plan, L.INSTANCE_FAMILY) == 2          # lowered to the two families its types offer
    assert plan.min_values_relaxed is True
    assert plan.annotations() == {L.NODECLAIM_MIN_VALUES_RELAXED: "true"}
    assert plan.to_dict()["minValuesRelaxed"] is True
    fam = next(r for r in plan.to_dict()["requirements"] if r["key"] == L.INSTANCE_FAMILY)
    assert fam["minValues"] == 2


def test_best_effort_keeps_min_values_that_are_met():
    res = _solve([pod("small", cpu="1", memory="1Gi")], min_values_policy=MIN_VALUES_BEST_EFFORT)
    (plan,) = res.nodeclaims
    assert {it.labels[L.INSTANCE_FAMILY] for it in plan.instance_types} == {"m5", "c5", "r5"}
    assert _min_values(plan, L.INSTANCE_FAMILY) == 3
    assert plan.min_values_relaxed is False
    assert plan.annotations() == {L.NODECLAIM_MIN_VALUES_RELAXED: "false"}
    assert "minValuesRelaxed" not in plan.to_dict()      # plan --json unchanged when nothing was relaxed
    # the same plan as under Strict
    strict = _solve([pod("small", cpu="1", memory="1Gi")])
    assert strict.to_dict() == res.to_dict()


def test_best_effort_pods_join_a_node_that_then_offers_fewer_values():
    # Strict: the big pod cannot share the small pod's NodeClaim nor open one of its own; BestEffort: both placed
    pods = [pod("small", cpu="1", memory="1Gi"), pod("big", cpu="20", memory="100Gi")]
    strict = _solve(pods)
    assert [u.pod for u in strict.unschedulable] == ["default/big"]
    best = _solve(pods, min_values_policy=MIN_VALUES_BEST_EFFORT)
    assert best.unschedulable == []
    assert sorted(k for p in best.nodeclaims for k in p.pods) == ["default/big", "default/small"]
    assert any(p.min_values_relaxed for p in best.nodeclaims)


def test_unknown_policy_is_refused():
    with pytest.raises(SchedulingError, match="min_values_policy"):
        _solve([pod("a")], min_values_policy="Lenient")


def test_simulate_removal_takes_the_policy():
    big = pod("big", cpu="20", memory="100Gi")
    node = ExistingNode(name="n1", labels={L.NODEPOOL: "default"}, allocatable={"cpu": 32000, "memory": 200 * 2**30,
                                                                                 "pods": 58}, pods=[big],
                        nodepool="default")
    npi = [NodePoolInput(nodepool(requirements=FAMILIES_3), catalog())]
    strict = simulate_removal([node], others=[], nodepools=npi)
    assert "default/big" in strict.unschedulable and "minValues" in strict.unschedulable["default/big"]
    best = simulate_removal([node], others=[], nodepools=npi, min_values_policy=MIN_VALUES_BEST_EFFORT)
    assert best.unschedulable == {}
    assert [p.min_values_relaxed for p in best.new_nodeclaims] == [True]


def test_instance_type_list_with_unknown_types_as_karpenters_e2e():
    # Karpenter's e2e: In [c5.large, invalid-1, invalid-2] minValues 3
    reqs = [{"key": L.INSTANCE_TYPE, "operator": "In", "values": ["c5.large", "invalid-1", "invalid-2"], "minValues": 3}]
    strict = _solve([pod("a", cpu="500m", memory="512Mi")], requirements=reqs)
    assert strict.nodeclaims == [] and "minValues 3" in strict.unschedulable[0].reason
    (plan,) = _solve([pod("a", cpu="500m", memory="512Mi")], requirements=reqs,
                     min_values_policy=MIN_VALUES_BEST_EFFORT).nodeclaims
    assert [it.name for it in plan.instance_types] == ["c5.large"]
    it_req = next(r for r in plan.to_dict()["requirements"] if r["key"] == L.INSTANCE_TYPE)
    assert it_req == {"key": L.INSTANCE_TYPE, "operator": "In", "values": ["c5.large"], "minValues": 1}
    assert plan.annotations()[L.NODECLAIM_MIN_VALUES_RELAXED] == "true"


def _limited(limits, pods):
    np_ = nodepool(requirements=FAMILIES_3, limits=limits)
    return solve(SchedulingInput(pods=pods, nodepools=[NodePoolInput(np_, catalog())]))


def _charge(plan, key):
    return max(it.capacity.get(key, 0) for it in plan.instance_types)


def test_limits_never_trim_a_nodeclaim_below_its_min_values():
    """A limited NodePool keeps each NodeClaim's options near what it counts against the limits; with minValues those
    options still span the values asked (here three families), and what the NodeClaim counts is the largest of them."""
    res = _limited({"cpu": "1000", "memory": "1000Gi"}, [pod("p", cpu="1", memory="1Gi")])
    (plan,) = res.nodeclaims
    assert len({it.labels[L.INSTANCE_FAMILY] for it in plan.instance_types}) >= 3
    assert _min_values(plan, L.INSTANCE_FAMILY) == 3
    assert "counts against NodePool default's limits" in plan.reason


def test_min_values_under_limits_are_met_within_what_the_limits_leave_or_the_pod_waits():
    """Karpenter filters the types by the remaining limits first, then checks minValues: with room for only two of the
    three families' smallest fitting types the pod stays pending, naming the limits."""
    one = [pod("p", cpu="1", memory="1Gi")]
    # c5.large (4Gi) and m5.large (8Gi) fit in 10Gi; r5.large (16Gi) does not: two families left
    res = _limited({"memory": "10Gi"}, one)
    assert res.nodeclaims == [] and [u.pod for u in res.unschedulable] == ["default/p"]
    assert "minValues 3" in res.unschedulable[0].reason and "within the NodePool's limits" in res.unschedulable[0].reason
    # with room for the three, one NodeClaim, counted as its largest option, and the next pod waits (no room left)
    res = _limited({"memory": "20Gi"}, one + [pod("q", cpu="1", memory="1Gi")])
    assert len(res.nodeclaims) == 1
    assert _charge(res.nodeclaims[0], "memory") <= 20 * 2**30
