"""api/runtimeclass.py: the RuntimeClass admission as the API server applies it to a pod (overhead, node selector,
tolerations; refusals), and validate's cross-check warning (api/admission_hints.runtime_class_warnings)."""

from __future__ import annotations

from karpenter_lambda.api.admission_hints import runtime_class_warnings
from karpenter_lambda.api.runtimeclass import admit, runtime_classes

KATA = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "kata"}, "handler": "kata",
        "overhead": {"podFixed": {"cpu": "250m", "memory": "160Mi"}},
        "scheduling": {"nodeSelector": {"runtime": "kata"},
                       "tolerations": [{"key": "kata", "operator": "Exists", "effect": "NoSchedule"}]}}
CLASSES = runtime_classes([KATA, {"kind": "Pod", "metadata": {"name": "not-a-class"}}])


def _pod(**spec) -> dict:
    return {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}], **spec}}


def test_the_class_gives_its_overhead_node_selector_and_tolerations():
    pod = _pod(runtimeClassName="kata", nodeSelector={"team": "a"},
               tolerations=[{"key": "kata", "operator": "Exists", "effect": "NoSchedule"}])
    admitted, problem = admit(pod, CLASSES)
    assert problem is None and list(CLASSES) == ["kata"]
    assert admitted["spec"]["overhead"] == {"cpu": "250m", "memory": "160Mi"}
    assert admitted["spec"]["nodeSelector"] == {"team": "a", "runtime": "kata"}
    assert admitted["spec"]["tolerations"] == pod["spec"]["tolerations"]   # already there: not added twice
    assert "overhead" not in pod["spec"]                                     # the input is not modified
    assert admit(_pod(), CLASSES) == (_pod(), None)                          # no class: as it is


def test_what_the_api_server_refuses():
    assert admit(_pod(runtimeClassName="katta"), CLASSES)[1] == "RuntimeClass katta not found"
    assert "does not match RuntimeClass kata's overhead.podFixed" in admit(
        _pod(runtimeClassName="kata", overhead={"cpu": "1"}), CLASSES)[1]
    assert admit(_pod(runtimeClassName="kata", overhead={"cpu": "250m", "memory": "160Mi"}), CLASSES)[1] is None
    assert admit(_pod(runtimeClassName="kata", nodeSelector={"runtime": "gvisor"}), CLASSES)[1] == (
        "nodeSelector runtime=gvisor conflicts with RuntimeClass kata's scheduling.nodeSelector runtime=kata: the API "
        "server refuses the pod")


def test_validate_warns_of_a_class_the_files_do_not_have_when_they_have_some():
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                  "spec": {"template": {"spec": {"runtimeClassName": "katta", "containers": [{"name": "c"}]}}}}
    found = [(pos, e.path, e.message) for pos, e in runtime_class_warnings([KATA, deployment])]
    assert found == [(1, "spec.template.spec.runtimeClassName",
                      "no RuntimeClass katta among the objects given (RuntimeClasses: kata): the API server refuses its "
                      "pods (did you mean kata?)")]
    # no class given at all: nothing known of the cluster's, the pods are taken as they are, with a warning
    assert admit(_pod(runtimeClassName="katta"), {}) == (_pod(runtimeClassName="katta"), None)
    assert [e.message for _, e in runtime_class_warnings([deployment])] == [
        "RuntimeClass katta is not among the objects given: plan and simulate do not count its overhead, node "
        "selector or tolerations (add the RuntimeClass)"]
