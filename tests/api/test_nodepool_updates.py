"""The NodePool CRD's transition rules (Karpenter v1.14.1, CEL oldSelf): static <-> dynamic refused, nodeClassRef
group and kind immutable; checked by apply against the stored NodePool and by validate / simulate for a Scenario's
apply steps (before, a step turning a static NodePool dynamic went through and its nodes were consolidated away)."""

from __future__ import annotations

import copy

from karpenter_lambda.api.crosscheck import scenario_step_errors
from karpenter_lambda.api.updates import STATIC_TRANSITION, nodepool_update_errors

POOL = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"},
        "spec": {"template": {"spec": {"requirements": [],
                                       "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                        "name": "default"}}}}}


def _with(**spec):
    d = copy.deepcopy(POOL)
    d["spec"].update(spec)
    return d


def test_static_and_dynamic_do_not_transition():
    static = _with(replicas=2)
    assert [e.message.startswith(STATIC_TRANSITION) for e in nodepool_update_errors(POOL, static)] == [True]
    assert [e.path for e in nodepool_update_errors(static, POOL)] == ["spec"]
    assert nodepool_update_errors(static, _with(replicas=5)) == []     # scaling a static NodePool is fine
    assert nodepool_update_errors(POOL, _with(weight=10)) == []


def test_node_class_ref_group_and_kind_are_immutable_its_name_is_not():
    other = copy.deepcopy(POOL)
    other["spec"]["template"]["spec"]["nodeClassRef"]["name"] = "gpu"
    assert nodepool_update_errors(POOL, other) == []
    other["spec"]["template"]["spec"]["nodeClassRef"]["kind"] = "OtherClass"
    assert [e.path for e in nodepool_update_errors(POOL, other)] == ["spec.template.spec.nodeClassRef.kind"]


def test_a_scenario_step_turning_a_static_nodepool_dynamic_is_refused_before_the_run():
    scenario = {"spec": {"steps": [{"at": "3m", "apply": POOL}, {"at": "5m", "apply": _with(replicas=1)}]}}
    errors = scenario_step_errors(scenario, {"p": _with(replicas=2)})
    assert [e.path for e in errors] == ["spec.steps[0].apply.spec", "spec.steps[1].apply.spec"]
    assert "Cannot transition NodePool between static" in errors[0].message and "step 0" in errors[0].message
