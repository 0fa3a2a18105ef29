"""Requirements that exclude each other are not a DoesNotExist (scheduling/requirements.py ``conflict``): a pod asking
``team=b`` and ``team NotIn [b]`` fits no node, not even one without the label, so it is unschedulable with the reason;
a preferred term that contradicts the pod's selector is relaxed away instead of sending it to a NodePool whose nodes
cannot carry the label.  Karpenter's algebra reads both as DoesNotExist; before, such a pod got a node it never ran on
(found by a randomized differential audit)."""

from __future__ import annotations

import pytest

from karpenter_lambda.scheduling.predicates import labels_match
from karpenter_lambda.scheduling.requirements import Requirement, Requirements

from .helpers import node_of, nodepool, pod, run

TEAM = "example.com/team"


@pytest.mark.parametrize("a, b, conflict", [
    (("In", ["b"]), ("NotIn", ["b"]), True),
    (("In", ["a"]), ("In", ["b"]), True),
    (("In", ["b"]), ("DoesNotExist", None), True),
    (("Exists", None), ("DoesNotExist", None), True),
    (("Gt", ["5"]), ("Lt", ["3"]), True),
    (("NotIn", ["b"]), ("DoesNotExist", None), False),
    (("DoesNotExist", None), ("DoesNotExist", None), False),
    (("NotIn", ["a"]), ("NotIn", ["b"]), False),
])
def test_an_empty_intersection_is_a_conflict_unless_both_were_negative(a, b, conflict):
    r = Requirement.new(TEAM, *a).intersection(Requirement.new(TEAM, *b))
    assert r.conflict is conflict
    pod_reqs = Requirements([r])
    node = Requirements()                         # a NodePool that does not define the key
    assert (node.compatible(pod_reqs) is not None) is conflict
    assert (labels_match(pod_reqs, {}) is not None) is conflict   # a node without the label


def test_a_pod_whose_own_requirements_exclude_each_other_is_unschedulable_with_the_reason():
    p = pod("x", cpu="1", nodeSelector={TEAM: "b"},
            affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": TEAM, "operator": "NotIn", "values": ["b"]}]}]}}})
    res = run([p])
    assert not res.nodeclaims
    (u,) = res.unschedulable
    assert "exclude each other" in u.reason, u.reason


def test_a_preferred_term_contradicting_the_selector_is_relaxed_not_obeyed():
    pools = [nodepool("np-notin", requirements=[{"key": TEAM, "operator": "NotIn", "values": ["a", "b"]}]),
             nodepool("np-in", requirements=[{"key": TEAM, "operator": "In", "values": ["a", "b"]}])]
    p = pod("x", cpu="1", nodeSelector={TEAM: "a"},
            affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [{"key": TEAM, "operator": "NotIn",
                                                                     "values": ["a"]}]}}]}})
    res = run([p], pools=pools)
    assert not res.unschedulable
    nc = node_of(res, "default/x")
    assert nc.nodepool == "np-in" and nc.labels[TEAM] == "a"
