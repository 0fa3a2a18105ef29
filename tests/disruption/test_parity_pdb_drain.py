"""Parity with upstream Karpenter (core v1.14.1) for PDB blockers, the drain's deadline deletes and do-not-disrupt
durations; pure rules on hand-built pods and snapshots, plus the simulator's Eviction API on its object store.

* PDB blockers: core ``pkg/utils/pdb/pdb.go`` ``isEvictable`` (several PDBs block; a not-Ready pod is held unless the
  PDB says ``unhealthyPodEvictionPolicy: AlwaysAllow``; DaemonSet pods are asked, pods tolerating the disrupted taint
  are not);
* the Eviction API (kubernetes ``pkg/registry/core/pod/storage/eviction.go``): several PDBs -> 500; a not-Ready pod is
  evicted when ``AlwaysAllow`` or ``currentHealthy >= desiredHealthy > 0``;
* the drain: core ``terminator.go`` ``Drain`` / ``DeleteExpiringPods`` (grace at least 1 s; a terminating pod whose
  deletion ends after the deadline is deleted again);
* do-not-disrupt: core ``pkg/utils/pod/scheduling.go`` ``IsDoNotDisruptActive`` (Go durations; no start time holds).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from types import SimpleNamespace

import pytest

import builders
from builders import T0, claimed_node, iso, pdb, pod
from karpenter_lambda.controllers.termination import Terminator
from karpenter_lambda.disruption.candidates import build_candidates, do_not_disrupt_until, graceful_blockers
from karpenter_lambda.disruption.eviction import DrainStep, next_step
from karpenter_lambda.disruption.pdb import blocking_pdb
from karpenter_lambda.sim.kubeapi import ObjectStore, StoreError

DISRUPTED_TOLERATION = {"key": "karpenter.sh/disrupted", "operator": "Exists", "effect": "NoSchedule"}


# -- the drain at the terminationGracePeriod deadline --------------------------------------------------------------
class _Kube:
    def __init__(self):
        self.deletes: list[tuple[str, int | None]] = []

    def delete_pod(self, namespace, name, grace_period_seconds=None):
        self.deletes.append((name, grace_period_seconds))
        return True


def _deleted_with(pods, now, deadline):
    """The gracePeriodSeconds the drain sends for ``pods`` deleted at ``now`` (Terminator._act, a recording kube)."""
    kube = _Kube()
    t = Terminator(None, kube, None, clock=lambda: now, decide=lambda *a, **k: None)
    t._act(SimpleNamespace(name="nc"), "node-a", DrainStep(delete=list(pods), group=0), now, deadline,
           {"evicted": {}, "deleted": {}, "blocked": {}})
    return kube.deletes


def _drain_pod(name, *, grace=30, deleting_at=None):
    p = pod(name, node="node-a", terminationGracePeriodSeconds=grace)
    if deleting_at is not None:
        p["metadata"]["deletionTimestamp"] = iso(deleting_at)
    return p


def test_the_deadline_delete_never_sends_a_zero_grace():
    """Upstream clamps gracePeriodSeconds to at least 1 s: 0 would remove the pod from etcd while it may still run."""
    deadline = T0 + 3600
    assert _deleted_with([_drain_pod("late")], deadline + 5, deadline) == [("late", 1)]         # past the deadline
    assert _deleted_with([_drain_pod("edge")], deadline - 0.4, deadline) == [("edge", 1)]       # under a second left
    assert _deleted_with([_drain_pod("some")], deadline - 12, deadline) == [("some", 12)]
    assert _deleted_with([_drain_pod("fits")], deadline - 30, deadline) == [("fits", None)]     # its own 30 s


def test_a_terminating_pod_whose_deletion_ends_after_the_deadline_is_deleted_again():
    deadline = T0 + 3600
    slow = _drain_pod("slow", grace=600, deleting_at=deadline + 300)   # its 600 s end after the deadline
    done_in_time = _drain_pod("in-time", grace=600, deleting_at=deadline - 10)
    # before deadline - its grace: waited for, as any terminating pod
    early = next_step([slow, done_in_time], deadline - 700, deadline)
    assert early.delete == [] and {p["metadata"]["name"] for p in early.waiting} == {"slow", "in-time"}
    # from deadline - its grace: deleted again, with the time left; the one ending in time is waited for
    step = next_step([slow, done_in_time], deadline - 120, deadline)
    assert [p["metadata"]["name"] for p in step.delete] == ["slow"]
    assert [p["metadata"]["name"] for p in step.waiting] == ["in-time"]
    assert _deleted_with(step.delete, deadline - 120, deadline) == [("slow", 120)]
    assert _deleted_with(step.delete, deadline + 2, deadline) == [("slow", 1)]
    # never twice: once recorded as deleted, it is waited for
    again = next_step([slow], deadline - 60, deadline, deleted={slow["metadata"]["uid"]})
    assert again.delete == [] and [p["metadata"]["name"] for p in again.waiting] == ["slow"]
    # without a deadline nothing is deleted
    assert next_step([slow], deadline + 10_000, None).delete == []


# -- Karpenter's PDB blockers (graceful methods) -------------------------------------------------------------------
def _blockers(pods, pdbs):
    snap = builders.snapshot(claimed_node("a"), pods=pods, pdbs=pdbs)
    (cand,) = [c for c in build_candidates(snap)[0] if c.name == "a"]
    return graceful_blockers(cand, snap)


def _not_ready(p, status="False"):
    p["status"]["conditions"] = [c for c in p["status"]["conditions"] if c["type"] != "Ready"]
    if status is not None:
        p["status"]["conditions"].append({"type": "Ready", "status": status})
    return p


def test_a_pod_selected_by_two_pdbs_blocks_whatever_they_allow():
    pods = [pod("web-1", node="node-a", app="web"), pod("web-2", node="node-b", app="web")]
    pdbs = [pdb("one", app="web", maxUnavailable=5), pdb("two", app="web", minAvailable=0)]
    assert _blockers(pods, pdbs) == [("PDB", "pod default/web-1 is selected by more than one PDB (default/one, "
                                             "default/two): the Eviction API does not support that")]
    assert _blockers(pods, pdbs[:1]) == []


def test_daemonset_pods_are_asked_and_pods_tolerating_the_disrupted_taint_are_not():
    ds = pod("agent-1", node="node-a", app="agent", owner="DaemonSet")
    assert _blockers([ds], [pdb("agent", app="agent", maxUnavailable=0)]) == [
        ("PDB", "PDB default/agent allows no eviction of pod default/agent-1")]
    stays = pod("stays-1", node="node-a", app="stays", tolerations=[DISRUPTED_TOLERATION])
    assert _blockers([stays], [pdb("stays", app="stays", maxUnavailable=0)]) == []


def test_a_not_ready_pod_is_held_unless_its_pdb_always_allows_unhealthy_evictions():
    sick = _not_ready(pod("web-1", node="node-a", app="web"))
    assert _blockers([sick], [pdb("web", app="web", minAvailable=1)]) == [
        ("PDB", "PDB default/web allows no eviction of pod default/web-1")]
    assert _blockers([sick], [pdb("web", app="web", minAvailable=1, unhealthyPodEvictionPolicy="AlwaysAllow")]) == []
    # upstream reads the Ready condition: without one (not False) AlwaysAllow does not let it go
    unknown = _not_ready(pod("web-1", node="node-a", app="web"), status=None)
    assert _blockers([unknown], [pdb("web", app="web", minAvailable=1, unhealthyPodEvictionPolicy="AlwaysAllow")]) \
        == [("PDB", "PDB default/web allows no eviction of pod default/web-1")]


# -- the simulator's Eviction API ----------------------------------------------------------------------------------
def _store(pods, pdbs):
    store = ObjectStore(clock=lambda: T0)
    for p in pods:
        body = {k: v for k, v in p.items() if k != "status"}
        body["metadata"] = {k: v for k, v in p["metadata"].items() if k in ("name", "namespace", "labels")}
        store.create("pods", body)
        store.patch("pods", p["metadata"]["name"], {"status": p["status"]}, "default", subresource="status")
    for b in pdbs:
        store.create("poddisruptionbudgets", b)
    return store


def _ready(name, app="web", ready="True", phase="Running"):
    return {"metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
            "spec": {"containers": [{"name": "c", "image": "pause"}]},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": ready}]}}


def test_the_eviction_api_refuses_a_pod_with_several_pdbs_with_a_500(kube_api_server):
    store = kube_api_server.store
    store.create("pods", {k: v for k, v in _ready("a").items() if k != "status"})
    store.patch("pods", "a", {"status": _ready("a")["status"]}, "default", subresource="status")
    for name in ("one", "two"):
        store.create("poddisruptionbudgets", pdb(name, app="web", maxUnavailable=5))
    body = json.dumps({"apiVersion": "policy/v1", "kind": "Eviction",
                       "metadata": {"name": "a", "namespace": "default"}}).encode()
    req = urllib.request.Request(f"{kube_api_server.url}/api/v1/namespaces/default/pods/a/eviction", data=body,
                                 method="POST", headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 500
    assert "more than one PodDisruptionBudget" in json.loads(e.value.read())["message"]
    assert store.get("pods", "a", "default") is not None


@pytest.mark.parametrize("case,evicted", [
    ("only-pod-not-ready", False),          # currentHealthy 0 < desiredHealthy 1: 429
    ("desired-zero", False),                # maxUnavailable 1 of 1: desiredHealthy 0, the fast path is not taken
    ("always-allow", True),                 # AlwaysAllow: a not-Ready pod goes whatever the budget
    ("app-not-disrupted", True),            # 3 healthy >= 3 desired: the not-Ready pod goes, a Ready one would not
    ("pending", True),                      # a Pending pod is deleted without asking its PDB
])
def test_the_eviction_api_and_not_ready_pods(case, evicted):
    pods, spec = [_ready("a", ready="False")], {"minAvailable": 1}
    if case == "desired-zero":
        spec = {"maxUnavailable": 1}
    elif case == "always-allow":
        spec = {"minAvailable": 1, "unhealthyPodEvictionPolicy": "AlwaysAllow"}
    elif case == "app-not-disrupted":
        pods += [_ready(f"r{i}") for i in range(3)]
        spec = {"maxUnavailable": 1}
    elif case == "pending":
        pods = [_ready("a", ready="False", phase="Pending")]
    store = _store(pods, [pdb("web", app="web", **spec)])
    if case == "app-not-disrupted":   # the budget allows nothing for a Ready pod
        with pytest.raises(StoreError):
            store.evict("default", "r0")
    if evicted:
        store.evict("default", "a")
        assert store.get("pods", "a", "default") is None
    else:
        with pytest.raises(StoreError) as e:
            store.evict("default", "a")
        assert e.value.code == 429 and "web" in e.value.message


def test_blocking_pdb_counts_from_the_status_when_the_api_server_wrote_it():
    sick = _ready("a", ready="False")
    with_status = {**pdb("web", app="web", minAvailable=1),
                   "status": {"currentHealthy": 4, "desiredHealthy": 3, "disruptionsAllowed": 0}}
    assert blocking_pdb(sick, [with_status], [sick]) is None          # not disrupted: the not-Ready pod may go
    held = {**with_status, "status": {"currentHealthy": 2, "desiredHealthy": 3, "disruptionsAllowed": 0}}
    assert blocking_pdb(sick, [held], [sick]) is held


# -- do-not-disrupt durations ----------------------------------------------------------------------------------------
def _dnd(value, start=T0):
    p = pod("p", node="node-a", annotations={"karpenter.sh/do-not-disrupt": value})
    if start is None:
        p["status"].pop("startTime", None)
    else:
        p["status"]["startTime"] = iso(start)
    return p


def test_do_not_disrupt_takes_go_durations():
    assert do_not_disrupt_until(_dnd("1.5h")) == T0 + 5400
    assert do_not_disrupt_until(_dnd("300ms")) == pytest.approx(T0 + 0.3, abs=1e-3)
    assert do_not_disrupt_until(_dnd("1h30m")) == T0 + 5400
    for ignored in ("0s", "-5m", "soon", ""):
        assert do_not_disrupt_until(_dnd(ignored)) is None


def test_do_not_disrupt_duration_without_a_start_time_keeps_blocking():
    p = _dnd("10m", start=None)
    assert "creationTimestamp" in p["metadata"]
    assert do_not_disrupt_until(p) == float("inf")
    assert _blockers([p], []) == [("do-not-disrupt", "do-not-disrupt pod default/p")]


def test_a_mirror_pod_with_do_not_disrupt_blocks_the_node():
    """Karpenter's ValidatePodsDisruptable asks every active pod, a static (mirror) pod too."""
    import builders
    from builders import claimed_node, pod

    from karpenter_lambda.disruption.candidates import pod_blockers

    node = claimed_node("a")
    mirror = pod("kube-proxy-x", node="node-a", owner=None,
                 annotations={"kubernetes.io/config.mirror": "x", "karpenter.sh/do-not-disrupt": "true"})
    snap = builders.snapshot(node, pods=[mirror])
    assert pod_blockers([mirror], snap) == [("do-not-disrupt", "do-not-disrupt pod default/kube-proxy-x")]
    plain = pod("kube-proxy-y", node="node-a", owner=None, annotations={"kubernetes.io/config.mirror": "x"})
    assert pod_blockers([plain], builders.snapshot(node, pods=[plain])) == []
