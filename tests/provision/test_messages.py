"""Watcher message parsing: every malformed body is rejected with a message naming the problem."""

import json

import pytest

from karpenter_lambda.controllers.messages import MalformedMessage, parse_body

POD = {"metadata": {"name": "web-0", "namespace": "default", "uid": "u-1"},
       "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m"}}}]}}


def body(**kw):
    doc = {"type": "pod", "pod": POD, "cluster": "c1", "sentAt": "2026-01-01T00:00:00Z"}
    doc.update(kw)
    return json.dumps(doc)


def test_valid_pod_message():
    msg = parse_body(body(), "c1")
    assert msg.key == "default/web-0" and msg.uid == "u-1"


def test_other_types_are_ignored():
    assert parse_body(json.dumps({"type": "node", "node": {}}), "c1") is None
    assert parse_body(json.dumps({"type": "pod-bound", "pod": {}}), "c1") is None


@pytest.mark.parametrize("raw, problem", [
    ("", "empty message body"),
    ("{oops", "body is not JSON"),
    ("[1, 2]", "body must be a JSON object"),
    (json.dumps({"type": "pods"}), "type: unsupported message type 'pods'"),
    (body(cluster="other"), "cluster: message is for cluster 'other'"),
    (json.dumps({"type": "pod"}), "pod: required object missing"),
    (json.dumps({"type": "pod", "pod": {"metadata": {"uid": "u"}}}), "pod.metadata.name: required string missing"),
    (json.dumps({"type": "pod", "pod": {"metadata": {"name": "x"}}}), "pod.metadata.uid: required string missing"),
    (json.dumps({"type": "pod", "pod": {"metadata": {"name": "x", "uid": "u"}, "spec": {"containers": {}}}}),
     "pod.spec.containers: must be a list"),
    (json.dumps({"type": "pod", "pod": {"metadata": {"name": "x", "uid": "u"}, "spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": "lots"}}}]}}}), "pod.spec.containers[0].resources.requests.cpu"),
])
def test_malformed(raw, problem):
    with pytest.raises(MalformedMessage, match=None) as e:
        parse_body(raw, "c1")
    assert problem in str(e.value)


@pytest.mark.parametrize("pod_or_doc, problem", [
    ({"type": ["pod"]}, r"type: unsupported message type \['pod'\]"),
    ({"metadata": {"name": "x", "uid": "u", "namespace": 7}}, "pod.metadata.namespace: must be a non-empty string"),
    ({"metadata": {"name": "x", "uid": "u"}, "spec": {"initContainers": 3}}, "pod.spec.initContainers: must be a list"),
    ({"metadata": {"name": "x", "uid": "u"}, "spec": {"containers": [{"name": "c", "resources": ["cpu"]}]}},
     r"pod.spec.containers\[0\].resources: must be an object, got list"),
    ({"metadata": {"name": "x", "uid": "u"}, "spec": {"containers": [{"name": "c", "resources": {"requests": [1]}}]}},
     r"pod.spec.containers\[0\].resources.requests: must be an object, got list"),
    ({"metadata": {"name": "x", "uid": "u"}, "spec": {"containers": [{"name": "c",
                                                                       "resources": {"requests": {"cpu": "-1"}}}]}},
     r"pod.spec.containers\[0\].resources.requests.cpu: must be greater than or equal to 0"),
])
def test_every_shape_error_is_a_malformed_message_naming_the_field(pod_or_doc, problem):
    """Whatever the shape, the parser raises MalformedMessage (the handler logs it with the message id), never an
    AttributeError or TypeError from deep inside."""
    doc = pod_or_doc if "type" in pod_or_doc else {"type": "pod", "pod": pod_or_doc}
    with pytest.raises(MalformedMessage, match=f"^{problem}"):
        parse_body(json.dumps(doc), "c1")
    with pytest.raises(MalformedMessage, match="^body is not decodable JSON"):
        parse_body("[" * 100_000, "c1")
