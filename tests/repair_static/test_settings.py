"""The settings of issue 30 in runtime.Config: KARPENTER_LAMBDA_NODE_REPAIR (true | false, default true) and
KARPENTER_LAMBDA_MIN_VALUES_POLICY (Strict | BestEffort, default Strict); a bad value names the variable.  And the
Scenario step ``nodeUnhealthy``'s validation."""

from __future__ import annotations

import pytest

from karpenter_lambda.api.scenario import ScenarioError, parse_scenario
from karpenter_lambda.controllers.runtime import Config

BASE = {"KARPENTER_LAMBDA_CLUSTER": "c"}


def test_defaults():
    c = Config.from_env(dict(BASE))
    assert c.node_repair is True and c.min_values_policy == "Strict"


@pytest.mark.parametrize("raw, want", [("false", False), ("FALSE", False), ("true", True), (" True ", True)])
def test_node_repair_switch(raw, want):
    assert Config.from_env({**BASE, "KARPENTER_LAMBDA_NODE_REPAIR": raw}).node_repair is want


@pytest.mark.parametrize("var, raw", [("KARPENTER_LAMBDA_NODE_REPAIR", "off"),
                                      ("KARPENTER_LAMBDA_MIN_VALUES_POLICY", "strict"),
                                      ("KARPENTER_LAMBDA_MIN_VALUES_POLICY", "Lenient")])
def test_bad_values_name_the_variable(var, raw):
    with pytest.raises(ValueError, match=var):
        Config.from_env({**BASE, var: raw})


def test_min_values_policy_best_effort():
    assert Config.from_env({**BASE, "KARPENTER_LAMBDA_MIN_VALUES_POLICY": "BestEffort"}).min_values_policy == "BestEffort"


def scenario(step: dict) -> dict:
    return {"apiVersion": "karpenter-lambda.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "s"},
            "spec": {"steps": [{"at": "1m", "nodeUnhealthy": step}]}}


def test_node_unhealthy_step():
    s = parse_scenario(scenario({"nodePool": "a", "count": 2, "condition": "KernelReady", "duration": "31m"}))
    assert s.steps[0].action == "nodeUnhealthy"
    assert s.steps[0].describe() == "KernelReady=False on the 2 oldest node(s) of NodePool a for 31m"
    assert parse_scenario(scenario({"node": "ip-1", "status": "Unknown"})).steps[0].describe() == "Ready=Unknown on node ip-1"


@pytest.mark.parametrize("step, problem", [
    ({}, "exactly one of nodePool"),
    ({"nodePool": "a", "node": "n"}, "exactly one of nodePool"),
    ({"nodePool": "a", "status": False}, "status: must be one of"),
    ({"nodePool": "a", "duration": "soon"}, "duration: must be a duration"),
    ({"nodePool": "a", "count": 0}, "count: must be an integer >= 1"),
    ({"nodePool": "a", "colour": "red"}, "colour: unknown field"),
])
def test_node_unhealthy_step_problems(step, problem):
    with pytest.raises(ScenarioError, match=problem):
        parse_scenario(scenario(step))
