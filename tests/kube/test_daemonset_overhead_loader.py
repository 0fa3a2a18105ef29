"""The snapshot loader counts a DaemonSet's overhead from what the API server's admission gives its pods, against the
local Kubernetes API server over HTTP (sim/kubeapi, whose pod creation applies the LimitRanger and the RuntimeClass
admission) and the DynamoDB store (moto).

A DaemonSet with a pod: that pod (the newest), as admitted -- no RuntimeClass or LimitRange is listed for it.  One
without a pod yet: its template admitted with the cluster's LimitRanges and, when it names a class, RuntimeClasses,
listed then only.  A list that fails is logged and the template counted as written.
"""

from __future__ import annotations

import logging

import pytest
from moto import mock_aws

from karpenter_lambda.adapters.store import Store
from karpenter_lambda.controllers.snapshot import SnapshotLoader
from karpenter_lambda.scheduling.resources import pod_requests

KATA = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "kata"}, "handler": "kata",
        "overhead": {"podFixed": {"cpu": "1"}}}
DEFAULTS = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "lr", "namespace": "kube-system"},
            "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "1"}, "default": {"cpu": "1"}}]}}
LISTS = ("runtimeclasses", "limitranges")


@pytest.fixture
def store():
    with mock_aws():
        s = Store("test-cluster", table_name="state-test")
        s.ensure_table()
        yield s


def _daemonset(name: str, **spec) -> dict:
    ctr = {"name": "d", "image": "agent"}
    if "cpu" in spec:
        ctr["resources"] = {"requests": {"cpu": spec.pop("cpu")}}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "kube-system"},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [ctr], **spec}}}}


@pytest.fixture
def cluster(server):
    """kube-system with a LimitRange defaulting containers to 1 CPU, the RuntimeClass kata (1 CPU overhead), and
    two DaemonSets: ``kata-agent`` (10m, kata) and ``bare`` (no requests)."""
    s = server.store
    s.create("runtimeclasses", KATA)
    s.create("limitranges", DEFAULTS, "kube-system")
    out = {name: s.create("daemonsets", _daemonset(name, **spec), "kube-system")
           for name, spec in (("kata-agent", {"cpu": "10m", "runtimeClassName": "kata"}), ("bare", {}))}
    server.request_log.clear()
    return out


def _pod_of(server, ds: dict, node: str, cpu: str | None = None) -> dict:
    """A pod of ``ds`` as its controller creates it (the server's admission applies the LimitRange and the class)."""
    spec = dict(ds["spec"]["template"]["spec"])
    if cpu is not None:
        spec["containers"] = [{**spec["containers"][0], "resources": {"requests": {"cpu": cpu}}}]
    meta = {"name": f"{ds['metadata']['name']}-{node}", "namespace": "kube-system",
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": ds["metadata"]["name"],
                                 "uid": ds["metadata"]["uid"], "controller": True}]}
    return server.store.create("pods", {"metadata": meta, "spec": {**spec, "nodeName": node}}, "kube-system")


def _overheads(snap) -> dict[str, int]:
    return {ds["metadata"]["name"]: pod_requests({"spec": ds["spec"]["template"]["spec"]}).get("cpu", 0)
            for ds in snap.daemonsets}


def _lists(server) -> dict[str, int]:
    return {r: len(server.requests("GET", rf"/{r}(\?|$)")) for r in LISTS}


def test_daemonsets_without_pods_are_counted_as_admitted(server, kc, store, cluster):
    snap = SnapshotLoader(store, kc).load(1000.0, instance_types=False)
    # kata-agent: 10m + the class's 1 CPU + nothing from the LimitRange (its own cpu request);
    # bare: the LimitRange's 1 CPU default request
    assert _overheads(snap) == {"kata-agent": 1010, "bare": 1000}
    assert _lists(server) == {"runtimeclasses": 1, "limitranges": 1}
    assert [x["kind"] for x in snap.runtimeclasses] == ["RuntimeClass"]
    assert [x["kind"] for x in snap.limitranges] == ["LimitRange"]
    # nothing written, the cluster's DaemonSets as they were
    assert [r for r in server.requests() if r[0] != "GET"] == []
    assert "overhead" not in kc.list_daemonsets()[0]["spec"]["template"]["spec"]


def test_a_live_pod_is_counted_and_nothing_more_is_listed(server, kc, store, cluster):
    # the cluster's admission gave the pods what it gives (the class's overhead, the LimitRange's default)...
    _pod_of(server, cluster["kata-agent"], "n1")
    _pod_of(server, cluster["bare"], "n1", cpu="300m")   # e.g. a VPA's request on the pod, not the template
    server.request_log.clear()
    snap = SnapshotLoader(store, kc).load(1000.0, instance_types=False)
    assert _overheads(snap) == {"kata-agent": 1010, "bare": 300}
    # ...so no RuntimeClass or LimitRange is listed: every DaemonSet has a pod
    assert _lists(server) == {"runtimeclasses": 0, "limitranges": 0}
    assert snap.runtimeclasses == [] and snap.limitranges == []


def test_runtimeclasses_are_listed_only_for_a_template_naming_one(server, kc, store, cluster):
    _pod_of(server, cluster["kata-agent"], "n1")
    server.request_log.clear()
    snap = SnapshotLoader(store, kc).load(1000.0, instance_types=False)
    assert _overheads(snap) == {"kata-agent": 1010, "bare": 1000}
    assert _lists(server) == {"runtimeclasses": 0, "limitranges": 1}


def test_a_failing_list_is_logged_and_the_template_counted_as_written(server, kc, store, cluster, caplog):
    server.add_fault(status=403, times=100, method="GET", path=r"^/api/v1/limitranges", message="injected 403")
    with caplog.at_level(logging.WARNING, logger="karpenter_lambda.controllers.snapshot"):
        snap = SnapshotLoader(store, kc).load(1000.0, instance_types=False)
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "could not list LimitRanges for the overhead of a DaemonSet without a pod" in warning and "403" in warning
    assert _overheads(snap) == {"kata-agent": 1010, "bare": 0}
