"""Issue 22: the provisioner and the lifecycle sweep share controllers/base.Controller (one decision logger, same
lines), and Kubernetes models become dicts in adapters/kube."""

from __future__ import annotations

import logging

from kubernetes.client import V1Node, V1NodeSpec, V1ObjectMeta

from karpenter_lambda.controllers.base import Controller
from karpenter_lambda.controllers.cluster_state import as_dict
from karpenter_lambda.controllers.lifecycle import Lifecycle
from karpenter_lambda.controllers.provision import Provisioner


def test_both_controllers_derive_from_the_base_without_their_own_decision_helper():
    for cls in (Provisioner, Lifecycle):
        assert issubclass(cls, Controller) and "_decision" not in vars(cls)


def test_decision_lines_keep_their_logger_and_fields(caplog):
    caplog.set_level(logging.INFO)
    Provisioner(None, None, None)._decision("skip", "pod default/a skipped: gone", pod="default/a")
    Lifecycle(None, None, None, "c1")._decision("release", "released stale launch claim x", nodeclaim="x")
    got = [(r.name, r.getMessage(), r.decision, getattr(r, "pod", None) or getattr(r, "nodeclaim", None))
           for r in caplog.records]
    assert got == [("karpenter_lambda.controllers.provision", "pod default/a skipped: gone", "skip", "default/a"),
                   ("karpenter_lambda.controllers.lifecycle", "released stale launch claim x", "release", "x")]


def test_a_reserved_field_name_goes_into_the_line_as_json(caplog):
    caplog.set_level(logging.INFO)
    Provisioner(None, None, None)._decision("launch", "launched", name="n1")   # "name" is a LogRecord attribute
    assert caplog.records[-1].getMessage() == 'launched {"decision": "launch", "name": "n1"}'


def test_kubernetes_models_become_camel_case_dicts():
    node = V1Node(metadata=V1ObjectMeta(name="n1", labels={"a": "b"}), spec=V1NodeSpec(provider_id="aws:///z/i-1"))
    assert as_dict(node) == {"metadata": {"name": "n1", "labels": {"a": "b"}}, "spec": {"providerID": "aws:///z/i-1"}}
    assert as_dict({"x": 1}) == {"x": 1} and as_dict(None) is None
