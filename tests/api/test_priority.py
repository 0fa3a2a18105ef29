"""api/priority.py: the Priority admission (a class's value and preemption policy, the global default, the built-in
classes, refusals) and validate's warning (api/admission_hints.priority_class_warnings); the simulated API server
applies it when a pod is created."""

from __future__ import annotations

import pytest

from karpenter_lambda.api.admission_hints import priority_class_warnings
from karpenter_lambda.api.priority import admit, priority_classes

HIGH = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000,
        "preemptionPolicy": "Never"}
LOW_DEFAULT = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "low"},
               "value": 10, "globalDefault": True}
CLASSES = priority_classes([HIGH, LOW_DEFAULT])


def _pod(**spec) -> dict:
    return {"metadata": {"name": "p"}, "spec": {"containers": [], **spec}}


def test_a_class_gives_its_value_and_policy_and_the_default_class_the_rest():
    admitted, problem = admit(_pod(priorityClassName="high"), CLASSES)
    assert problem is None and admitted["spec"]["priority"] == 1000 and admitted["spec"]["preemptionPolicy"] == "Never"
    admitted, _ = admit(_pod(), CLASSES)
    assert (admitted["spec"]["priorityClassName"], admitted["spec"]["priority"]) == ("low", 10)
    admitted, _ = admit(_pod(priorityClassName="system-node-critical"), {})
    assert admitted["spec"]["priority"] == 2000001000
    assert admit(_pod(), {}) == (_pod(), None)   # no class, no default: as it is (priority 0)


def test_what_the_api_server_refuses():
    assert admit(_pod(priorityClassName="hihg"), CLASSES)[1] == "no PriorityClass with name hihg was found"
    assert "must not be provided in pod spec" in admit(_pod(priorityClassName="high", priority=5), CLASSES)[1]


def test_validate_warns_of_a_class_the_files_lack_when_they_have_some():
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"priorityClassName": "hihg"}}
    found = [(pos, e.path, e.message) for pos, e in priority_class_warnings([HIGH, pod])]
    assert found == [(1, "spec.priorityClassName", "no PriorityClass hihg among the objects given (PriorityClasses: "
                                                    "high, system-cluster-critical, system-node-critical): the API "
                                                    "server refuses its pods (did you mean high?)")]
    # no class given at all: the pods keep priority 0, with a warning (a built-in class is always there)
    assert admit(_pod(priorityClassName="hihg"), {}) == (_pod(priorityClassName="hihg"), None)
    assert [e.message for _, e in priority_class_warnings([pod])] == [
        "PriorityClass hihg is not among the objects given: simulate keeps its pods at priority 0 (add the "
        "PriorityClass)"]
    pod["spec"]["priorityClassName"] = "system-node-critical"
    assert priority_class_warnings([pod]) == []


def test_the_simulated_api_server_admits_pods_with_their_priority():
    from karpenter_lambda.sim.kubeapi import ObjectStore, StoreError

    store = ObjectStore()
    store.create("priorityclasses", {"metadata": {"name": "high"}, "value": 1000})
    assert store.create("pods", _pod(priorityClassName="high"), "default")["spec"]["priority"] == 1000
    with pytest.raises(StoreError) as e:
        store.create("pods", {"metadata": {"name": "q"}, "spec": {"priorityClassName": "hihg", "containers": []}})
    assert e.value.code == 403 and "no PriorityClass with name hihg was found" in str(e.value)
