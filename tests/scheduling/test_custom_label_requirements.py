"""A NodePool requirement on a user's own label key labels its NodeClaims with a value it allows (Karpenter's
``resolveCustomLabelsFromRequirements`` / ``Requirement.Any``): ``team In [a, b]`` -> ``team=a`` unless a pod narrows
it, ``tier Exists`` / ``gen Gt 3`` -> an integer in range.  Without the label the node did not meet its own NodePool's
requirements, and drift replaced it every few minutes (tests/sim/test_custom_label_drift.py)."""

from __future__ import annotations

import pytest

from karpenter_lambda.scheduling.requirements import Requirement, Requirements

from .helpers import node_of, nodepool, pod, run


@pytest.mark.parametrize("op, values, want", [
    ("In", ["b", "a"], "a"),
    ("In", ["x"], "x"),
    ("Exists", None, "0"),
    ("NotIn", ["0", "1"], "2"),
    ("Gt", ["3"], "4"),
    ("Gte", ["3"], "3"),
    ("Lt", ["3"], "0"),
    ("DoesNotExist", None, None),
])
def test_label_value_is_a_value_the_requirement_allows(op, values, want):
    r = Requirement.new("team", op, values)
    assert r.label_value() == want
    if want is not None:
        assert r.has(want)


def test_an_empty_integer_range_gives_no_label():
    r = Requirement.new("gen", "Lt", ["1"])
    r2 = Requirement.new("gen", "NotIn", ["0"])
    reqs = Requirements([r])
    reqs.add(r2)
    assert reqs.get("gen").label_value() is None


def test_well_known_and_karpenter_keys_are_left_to_the_launch():
    reqs = Requirements.from_list([
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a", "us-east-1b"]},
        {"key": "karpenter.k8s.aws/instance-family", "operator": "Exists"},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "team", "operator": "In", "values": ["b", "a"]},
        {"key": "example.com/gen", "operator": "Gt", "values": ["3"]},
    ])
    assert reqs.node_labels() == {"kubernetes.io/arch": "amd64", "team": "a", "example.com/gen": "4"}


def test_the_plan_labels_each_nodeclaim_with_the_value_its_pods_need():
    pool = nodepool(requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                                  {"key": "team", "operator": "In", "values": ["a", "b"]}])
    free = pod("free", cpu="3")
    b = pod("b", cpu="3", nodeSelector={"team": "b"})
    res = run([free, b], pools=[pool])
    assert not res.unschedulable
    assert node_of(res, "default/b").labels["team"] == "b"
    assert node_of(res, "default/free").labels["team"] in ("a", "b")
    assert node_of(res, "default/free") is node_of(res, "default/b") or node_of(res, "default/free").labels["team"] == "a"
