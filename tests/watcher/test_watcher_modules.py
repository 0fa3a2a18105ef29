"""The watcher package split by job (issue 22): the shared helpers of its modules, and the layout itself."""

import ast
import json
import time
from pathlib import Path

from karpenter_lambda.api.kube import pod_key as project_pod_key
from karpenter_lambda_watcher import messages, watcher
from karpenter_lambda_watcher.__main__ import JsonFormatter
from karpenter_lambda_watcher.messages import iso_time, node_event, pod_event, pod_key, pod_key_in, pod_message

PACKAGE = Path(__file__).resolve().parents[2] / "watcher" / "karpenter_lambda_watcher"


def test_iso_time_formats_milliseconds_and_seconds_in_utc():
    epoch = 1767323045.6789  # 2026-01-02T03:04:05.678900Z
    assert iso_time(epoch) == "2026-01-02T03:04:05.678Z"          # truncated, not rounded
    assert iso_time(epoch, millis=False) == "2026-01-02T03:04:05Z"
    assert iso_time(1767323045.0) == "2026-01-02T03:04:05.000Z"
    before = time.time()
    now = iso_time()
    assert iso_time(before)[:19] <= now[:19] <= iso_time(time.time())[:19] and now.endswith("Z") and len(now) == 24


def test_log_lines_use_the_same_time_format():
    import logging

    record = logging.LogRecord("karpenter_lambda_watcher", logging.INFO, __file__, 1, "hello", None, None)
    record.created = 1767323045.9999
    out = json.loads(JsonFormatter().format(record))
    assert out["time"] == "2026-01-02T03:04:05Z" and out["message"] == "hello"


def test_pod_key_matches_the_project_pod_key():
    pods = [
        {"metadata": {"namespace": "team-a", "name": "p"}},
        {"metadata": {"name": "no-namespace"}},
        {"metadata": {"namespace": "", "name": "empty-namespace"}},
        {},
    ]
    for pod in pods:
        assert pod_key(pod) == project_pod_key(pod)
    assert pod_key(pods[1]) == "default/no-namespace"


def test_pod_key_in_reads_the_pod_of_a_message_body():
    body = pod_message({"metadata": {"namespace": "ns", "name": "web-1", "uid": "u1"}, "spec": {}}, "c")
    assert pod_key_in(body) == "ns/web-1"
    assert pod_key_in(pod_message({"metadata": {"name": "bare"}, "spec": {}}, "c")) == "default/bare"
    assert pod_key_in(pod_event("pod-bound", "c", {"metadata": {"name": "x"}})) == ""   # an event, not a pod body
    assert pod_key_in(node_event("ADDED", "c", {"name": "n1"})) == ""
    assert pod_key_in("not json") == "" and pod_key_in('{"pod": ["x"]}') == ""


def test_event_bodies_keep_their_shape():
    pod = {"metadata": {"namespace": "ns", "name": "p", "uid": "u", "resourceVersion": "7",
                        "ownerReferences": [{"kind": "ReplicaSet", "controller": True}]}, "spec": {"nodeName": "n1"}}
    ev = json.loads(pod_event("pod-bound", "c1", pod))
    assert list(ev) == ["type", "cluster", "sentAt", "pod"]
    assert ev["type"] == "pod-bound" and ev["cluster"] == "c1" and len(ev["sentAt"]) == 24
    assert ev["pod"] == {"namespace": "ns", "name": "p", "uid": "u", "resourceVersion": "7", "nodeName": "n1",
                         "ownerKind": "ReplicaSet"}
    node = json.loads(node_event("DELETED", "c1", {"name": "n1"}))
    assert list(node) == ["type", "event", "cluster", "sentAt", "node"]
    assert (node["type"], node["event"], node["node"]) == ("node", "DELETED", {"name": "n1"})


def test_modules_are_small_and_watcher_keeps_its_names():
    for f in PACKAGE.glob("*.py"):
        assert len(f.read_text().splitlines()) <= 400, f.name
    for name in watcher.__all__:
        assert hasattr(watcher, name), name
    assert watcher.MAX_MESSAGE_BYTES == messages.MAX_MESSAGE_BYTES == 256 * 1024
    assert watcher._PodHandler.__module__ == "karpenter_lambda_watcher.handlers"


def test_modules_import_one_way():
    """stats, kubeclient <- messages <- sender <- handlers / reflector <- watcher <- __main__: no cycle."""
    order = ["stats", "kubeclient", "messages", "sender", "reflector", "handlers", "watcher", "__main__", "__init__"]
    for f in PACKAGE.glob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                assert order.index(node.module) < order.index(f.stem), f"{f.stem} imports {node.module}"
