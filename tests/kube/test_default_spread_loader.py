"""The snapshot loader and Karpenter's default topology spread (``--scheduler-config``), against the local Kubernetes
API server over HTTP (sim/kubeapi) and the DynamoDB store (moto).

With the setting, the loader lists the Services and the pods' controllers (all namespaces), gives each list item the
``apiVersion``/``kind`` a list leaves out, and the snapshot's pods that declare no topologySpreadConstraints carry the
defaults with the selector deduced from them (scheduling/default_spread.py); the cluster's pods are never written.
Without it, not one request more is made.  A list that fails is logged and taken as empty: the snapshot still loads,
with the selector the other objects give (as upstream, which logs lister errors and goes on).
"""

from __future__ import annotations

import logging

import pytest
from moto import mock_aws

from karpenter_lambda.adapters.store import Store
from karpenter_lambda.api.scheduler_config import parse_scheduler_config
from karpenter_lambda.controllers.snapshot import SnapshotLoader
from karpenter_lambda.controllers.sweep_shortcuts import Prefetched

ZONE = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}
CONFIG = parse_scheduler_config({"podTopologySpread": {"defaultConstraints": [ZONE]}}, "test")
HASH = "5d8f7c9b4"
RS_SELECTOR = {"matchLabels": {"app": "web", "pod-template-hash": HASH}}
# what kube-scheduler deduces for a web pod: the Service's selector, ANDed with the ReplicaSet's
WEB_SELECTOR = {"matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]},
                                     {"key": "pod-template-hash", "operator": "In", "values": [HASH]}]}
LISTS = ("services", "replicasets", "statefulsets", "replicationcontrollers")


@pytest.fixture
def store():
    with mock_aws():
        s = Store("test-cluster", table_name="state-test")
        s.ensure_table()
        yield s


def _pod(name: str, labels: dict, owner: dict | None = None, **spec) -> dict:
    meta: dict = {"name": name, "namespace": "shop", "labels": labels}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
                                    "uid": owner["metadata"]["uid"], "controller": True}]
    return {"metadata": meta, "spec": {"containers": [{"name": "c", "image": "nginx"}], **spec}}


@pytest.fixture
def cluster(server):
    """A namespace ``shop`` with a Service selecting ``app=web``, the ReplicaSet of three pending web pods, a pod with
    its own spread constraint, and a pod nothing selects; a Service of another namespace with the same selector."""
    s = server.store
    for ns in ("shop", "other"):
        s.create("namespaces", {"metadata": {"name": ns}})
    s.create("services", {"metadata": {"name": "web", "namespace": "shop"},
                          "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})
    s.create("services", {"metadata": {"name": "web", "namespace": "other"},
                          "spec": {"selector": {"app": "web", "team": "other"}, "ports": [{"port": 80}]}})
    rs = s.create("replicasets", {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                  "metadata": {"name": f"web-{HASH}", "namespace": "shop"},
                                  "spec": {"replicas": 3, "selector": RS_SELECTOR, "template": {
                                      "metadata": {"labels": RS_SELECTOR["matchLabels"]},
                                      "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    labels = dict(RS_SELECTOR["matchLabels"])
    for i in range(3):
        s.create("pods", _pod(f"web-{i}", labels, {**rs, "apiVersion": "apps/v1", "kind": "ReplicaSet"}), "shop")
    own = [{"maxSkew": 2, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": "own"}}}]
    s.create("pods", _pod("own-0", {"app": "own"}, topologySpreadConstraints=own), "shop")
    s.create("pods", _pod("lone-0", {"app": "lone"}), "shop")
    server.request_log.clear()
    return {"rs": rs, "own": own}


def _by_name(snap) -> dict[str, dict]:
    return {p["metadata"]["name"]: p for p in snap.pods}


def _list_requests(server) -> dict[str, int]:
    return {r: len(server.requests("GET", rf"/{r}(\?|$)")) for r in LISTS}


def test_with_the_setting_pending_pods_carry_the_defaults_and_the_deduced_selector(server, kc, store, cluster):
    snap = SnapshotLoader(store, kc, scheduler_config=CONFIG).load(1000.0, instance_types=False)
    pods = _by_name(snap)
    assert snap.default_spread == (ZONE,)
    for i in range(3):
        assert pods[f"web-{i}"]["spec"]["topologySpreadConstraints"] == [{**ZONE, "labelSelector": WEB_SELECTOR}]
    assert pods["own-0"]["spec"]["topologySpreadConstraints"] == cluster["own"]   # its own win, all or nothing
    assert "topologySpreadConstraints" not in pods["lone-0"]["spec"]               # no selector deduced: not defaulted
    # the list items carry apiVersion and kind (a list's items have neither)
    assert sorted((x["apiVersion"], x["kind"], x["metadata"]["namespace"]) for x in snap.services) == \
        [("v1", "Service", "other"), ("v1", "Service", "shop")]
    assert [(x["apiVersion"], x["kind"], x["metadata"]["name"]) for x in snap.workload_controllers] == \
        [("apps/v1", "ReplicaSet", f"web-{HASH}")]
    # one list each of what the pods' controllers are (ReplicaSets), none of the kinds no pod is controlled by
    assert _list_requests(server) == {"services": 1, "replicasets": 1, "statefulsets": 0, "replicationcontrollers": 0}
    # the defaults live on the snapshot's copies only: nothing was written, the cluster's pods have no constraints
    assert [r for r in server.requests() if r[0] != "GET"] == []
    assert "topologySpreadConstraints" not in kc.get_pod("shop", "web-0")["spec"]


def test_without_the_setting_no_request_more_and_no_defaults(server, kc, store, cluster):
    snap = SnapshotLoader(store, kc).load(1000.0, instance_types=False)
    assert snap.default_spread == () and snap.services == [] and snap.workload_controllers == []
    assert all("topologySpreadConstraints" not in p["spec"] for n, p in _by_name(snap).items() if n != "own-0")
    assert _list_requests(server) == dict.fromkeys(LISTS, 0)
    # a setting with no constraints (``podTopologySpread: {}``) is the same
    snap = SnapshotLoader(store, kc, scheduler_config=parse_scheduler_config("podTopologySpread: {}")).load(
        1000.0, instance_types=False)
    assert snap.default_spread == () and _list_requests(server) == dict.fromkeys(LISTS, 0)


def test_pods_that_all_declare_their_own_need_no_list(server, kc, store, cluster):
    for name in ("web-0", "web-1", "web-2", "lone-0"):
        server.store.delete("pods", name, "shop")
    server.request_log.clear()
    snap = SnapshotLoader(store, kc, scheduler_config=CONFIG).load(1000.0, instance_types=False)
    assert [p["metadata"]["name"] for p in snap.pods] == ["own-0"]
    assert _list_requests(server) == dict.fromkeys(LISTS, 0)


def test_a_statefulset_and_a_replicationcontroller_owner_are_listed(server, kc, store, cluster):
    s = server.store
    sts = s.create("statefulsets", {"apiVersion": "apps/v1", "kind": "StatefulSet",
                                    "metadata": {"name": "db", "namespace": "shop"},
                                    "spec": {"replicas": 1, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                                             "template": {"metadata": {"labels": {"app": "db"}},
                                                          "spec": {"containers": [{"name": "c", "image": "pg"}]}}}})
    s.create("pods", _pod("db-0", {"app": "db"}, {**sts, "apiVersion": "apps/v1", "kind": "StatefulSet"}), "shop")
    rc = {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": "legacy", "uid": "rc-uid"}}
    s.create("pods", _pod("legacy-0", {"app": "legacy"}, rc), "shop")
    server.request_log.clear()
    snap = SnapshotLoader(store, kc, scheduler_config=CONFIG).load(1000.0, instance_types=False)
    pods = _by_name(snap)
    assert pods["db-0"]["spec"]["topologySpreadConstraints"] == [
        {**ZONE, "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["db"]}]}}]
    assert _list_requests(server)["statefulsets"] == 1 and _list_requests(server)["replicationcontrollers"] == 1
    assert {(x["apiVersion"], x["kind"]) for x in snap.workload_controllers} >= {("apps/v1", "ReplicaSet"),
                                                                                 ("apps/v1", "StatefulSet")}
    # the local server does not serve ReplicationControllers (404: a resource the server lacks, so none): the
    # legacy pod, which no Service selects either, is not defaulted
    rc_codes = {code for _m, _p, code in server.requests("GET", r"/replicationcontrollers")}
    assert rc_codes <= {200, 404}
    assert "topologySpreadConstraints" not in pods["legacy-0"]["spec"]


@pytest.mark.parametrize("status, path, what", [
    (403, r"^/api/v1/services", "Services"),                 # RBAC: the role lacks services list
    (500, r"^/apis/apps/v1/replicasets", "ReplicaSets"),     # the server keeps failing, past the client's retries
])
def test_a_failing_list_is_logged_and_the_snapshot_goes_on(server, kc, store, cluster, caplog, status, path, what):
    server.add_fault(status=status, times=100, method="GET", path=path, message=f"injected {status}")
    with caplog.at_level(logging.WARNING, logger="karpenter_lambda.controllers.snapshot"):
        snap = SnapshotLoader(store, kc, scheduler_config=CONFIG).load(1000.0, instance_types=False)
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert f"could not list {what}" in warning and str(status) in warning
    web = _by_name(snap)["web-0"]["spec"]["topologySpreadConstraints"]
    if what == "Services":     # the ReplicaSet's selector alone
        assert snap.services == []
        assert web == [{**ZONE, "labelSelector": {"matchExpressions": WEB_SELECTOR["matchExpressions"]}}]
    else:                      # the Service's alone
        assert snap.workload_controllers == []
        assert web == [{**ZONE, "labelSelector": {"matchLabels": {"app": "web"}}}]
    # the rest of the snapshot is there: every pod, the other list
    assert len(snap.pods) == 5 and (snap.services if what != "Services" else snap.workload_controllers)


def test_the_sweeps_prefetched_lists_get_the_defaults_too(server, kc, store, cluster):
    """A sweep hands the loader what its shortcut already read (sweep_shortcuts.Prefetched): the Services and
    controllers are still listed, the defaults applied to the snapshot's copies, the prefetched pods left as read."""
    pre = Prefetched.from_store(store)
    pre.pods, pre.nodes, pre.daemonsets, pre.pdbs = kc.list_pods(), kc.list_nodes(), kc.list_daemonsets(), kc.list_pdbs()
    server.request_log.clear()
    snap = SnapshotLoader(store, kc, scheduler_config=CONFIG).load(1000.0, instance_types=False, pdbs=True, prefetched=pre)
    assert _by_name(snap)["web-1"]["spec"]["topologySpreadConstraints"] == [{**ZONE, "labelSelector": WEB_SELECTOR}]
    assert len(server.requests("GET", r"/pods(\?|$)")) == 0                 # the pods were not read again
    assert _list_requests(server)["services"] == 1
    assert all("topologySpreadConstraints" not in p["spec"] for p in pre.pods if p["metadata"]["name"] != "own-0")


def test_the_quiet_consolidation_sweep_sees_a_selector_change_only_with_the_setting(server, kc, store, cluster):
    """The consolidation shortcut's fingerprint (sweep_shortcuts.QuietSweeps) covers what the default constraints are
    deduced from when the setting is on: a Service's new selector is a change (the sweep runs in full), a ReplicaSet's
    status is not; without the setting neither is read (not one list request more)."""
    import boto3

    from karpenter_lambda.adapters.store.ledger import DisruptionLedger
    from karpenter_lambda.controllers.sweep_shortcuts import QuietSweeps, SweepMarker

    ddb = boto3.client("dynamodb", region_name="us-east-1")
    ledger, marker = DisruptionLedger(ddb, "test-cluster", "state-test"), SweepMarker(ddb, "test-cluster", "state-test")
    on = QuietSweeps(store, kc, ledger, marker, default_spread=True)
    off = QuietSweeps(store, kc, ledger, marker)
    first, plain = on.observe().fingerprint, off.observe().fingerprint
    rs = server.store.get("replicasets", "web-" + HASH, "shop")
    rs["status"] = {"replicas": 3, "readyReplicas": 2}
    server.store.update("replicasets", rs)
    assert on.observe().fingerprint == first                      # a status change: nothing to deduce anew
    svc = server.store.get("services", "web", "shop")
    svc["spec"]["selector"] = {"app": "web", "tier": "front"}
    server.store.update("services", svc)
    assert on.observe().fingerprint != first                      # the selector a default constraint is built from
    server.request_log.clear()
    assert off.observe().fingerprint == plain
    assert all(n == 0 for n in _list_requests(server).values())
