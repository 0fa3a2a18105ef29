"""The disruption question: simulate_removal (pure, through the real solver)."""

from __future__ import annotations

import copy

from karpenter_lambda.api import labels as L
from karpenter_lambda.scheduling import (ExistingNode, NodePoolInput, SchedulingInput, is_reschedulable,
                                         simulate_removal, solve)

from .helpers import GI, catalog, nodepool, pod

TYPES = catalog()
TYPES_BY_NAME = {t.name: t for t in TYPES}


def pools(*nps):
    return [NodePoolInput(np_, TYPES) for np_ in (nps or (nodepool(),))]


def node(name, pods=(), cpu=2000, memory=8 * GI, itype="m5.large", zone="us-east-1a", **kw):
    """A managed node of NodePool default; pods get spec.nodeName = name."""
    bound = []
    for p in pods:
        p = copy.deepcopy(p)
        p["spec"]["nodeName"] = name
        bound.append(p)
    return ExistingNode(name=name, labels={L.ZONE: zone, L.INSTANCE_TYPE: itype, L.NODEPOOL: "default"},
                        allocatable={"cpu": cpu, "memory": memory, "pods": 29}, pods=bound, nodepool="default",
                        instance_type=itype, zone=zone, capacity_type="on-demand", **kw)


def anti(app):
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": L.HOSTNAME}]}}


def test_empty_candidate_launches_nothing():
    r = simulate_removal([node("cand")], others=[], nodepools=pools())
    assert r.new_nodeclaims == [] and r.price == 0
    assert r.all_rescheduled and r.rescheduled == [] and r.unschedulable == {}


def test_pods_fit_on_another_node_no_launch():
    cand = node("cand", [pod("a", cpu="500m", memory="1Gi"), pod("b", cpu="500m", memory="1Gi")])
    other = node("other", [pod("old", cpu="500m", memory="1Gi")])
    r = simulate_removal([cand], others=[other], nodepools=pools())
    assert r.new_nodeclaims == [] and r.price == 0
    assert r.placements == {"default/a": "other", "default/b": "other"}
    assert r.all_rescheduled and sorted(r.rescheduled) == ["default/a", "default/b"]


def test_pods_fit_nowhere_one_nodeclaim():
    cand = node("cand", [pod("a", cpu="1500m", memory="2Gi")])
    other = node("other", [pod("old", cpu="1500m", memory="2Gi")])
    r = simulate_removal([cand], others=[other], nodepools=pools())
    assert len(r.new_nodeclaims) == 1
    plan = r.new_nodeclaims[0]
    assert plan.pods == ["default/a"] and plan.nodepool == "default"
    assert r.price == plan.price > 0
    assert r.placements == {} and r.all_rescheduled


def test_candidate_is_not_capacity_for_itself_or_another_candidate():
    big = node("big", cpu=16000, memory=64 * GI, itype="m5.4xlarge")
    cand = node("cand", [pod("a", cpu="1", memory="1Gi")])
    r = simulate_removal([cand, big], others=[big, cand], nodepools=pools())  # also listed in others: still gone
    assert r.placements == {} and [p.pods for p in r.new_nodeclaims] == [["default/a"]]
    # with big kept, the pod goes there
    r = simulate_removal([cand], others=[big, cand], nodepools=pools())
    assert r.placements == {"default/a": "big"} and not r.new_nodeclaims


def test_pod_on_uninitialized_node_is_not_rescheduled():
    cand = node("cand", [pod("a", cpu="500m", memory="1Gi")])
    for other in (node("fresh", initialized=False),
                  ExistingNode(name="claim-1", in_flight=True, nodepool="default", instance_type="m5.large",
                               allocatable={"cpu": 1900, "memory": 7 * GI, "pods": 29})):
        r = simulate_removal([cand], others=[other], nodepools=pools())
        assert r.placements == {"default/a": other.name}
        assert r.pods_on_uninitialized == {"default/a": other.name}
        assert "uninitialized" in r.unschedulable["default/a"] and not r.all_rescheduled
    r = simulate_removal([cand], others=[node("ready")], nodepools=pools())
    assert r.placements == {"default/a": "ready"} and r.all_rescheduled and not r.pods_on_uninitialized


def _ignored_pods():
    ds = pod("ds", cpu="4", memory="1Gi")
    ds["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "d"}]
    mirror = pod("kube-proxy", cpu="4", memory="1Gi", ns="kube-system")
    mirror["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": "cand", "uid": "n"}]
    done = pod("done", cpu="4", memory="1Gi")
    done["status"] = {"phase": "Succeeded"}
    failed = pod("failed", cpu="4", memory="1Gi")
    failed["status"] = {"phase": "Failed"}
    leaving = pod("leaving", cpu="4", memory="1Gi", owner="web")
    leaving["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    stays = pod("stays", cpu="4", memory="1Gi",
                tolerations=[{"key": L.DISRUPTED_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}])
    everything = pod("everything", cpu="4", memory="1Gi", tolerations=[{"operator": "Exists"}])
    return [ds, mirror, done, failed, leaving, stays, everything]


def test_daemonset_mirror_terminal_terminating_and_disrupted_tolerating_pods_are_ignored():
    ignored = _ignored_pods()
    assert not any(is_reschedulable(p) for p in ignored)
    cand = node("cand", ignored)
    r = simulate_removal([cand], others=[], nodepools=pools())
    assert r.rescheduled == [] and r.new_nodeclaims == [] and r.all_rescheduled
    # the same pods, reschedulable, would need capacity (4 CPU each does not fit the empty m5.large)
    plain = [pod(p["metadata"]["name"], cpu="4", memory="1Gi") for p in ignored]
    r = simulate_removal([node("cand", plain)], others=[node("other")], nodepools=pools())
    assert len(r.rescheduled) == 7 and r.new_nodeclaims


def test_terminating_statefulset_pod_is_reschedulable():
    p = pod("db-0", cpu="1", memory="1Gi")
    p["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "s"}]
    p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert is_reschedulable(p)
    r = simulate_removal([node("cand", [p])], others=[], nodepools=pools())
    assert r.rescheduled == ["default/db-0"] and [c.pods for c in r.new_nodeclaims] == [["default/db-0"]]


def test_freed_usage_lets_a_replacement_fit_under_a_limit():
    limited = nodepool(limits={"cpu": "4", "nodes": "1"})
    cand = node("cand", [pod("a", cpu="1", memory="1Gi")], cpu=3900, memory=15 * GI, itype="m5.xlarge")
    usage = {"default": {"cpu": 4000, "memory": 16 * GI, "nodes": 1}}  # the candidate's m5.xlarge is the usage
    # asked without freeing the candidate, the limit blocks the replacement
    blocked = solve(SchedulingInput(pods=[pod("a", cpu="1", memory="1Gi")], nodepools=pools(limited),
                                    nodepool_usage=usage))
    assert not blocked.nodeclaims and blocked.unschedulable
    r = simulate_removal([cand], others=[], nodepools=pools(limited), usage=usage)
    assert [c.pods for c in r.new_nodeclaims] == [["default/a"]] and r.all_rescheduled
    assert r.usage["default"] == {"cpu": 0, "memory": 16 * GI - TYPES_BY_NAME["m5.xlarge"].capacity["memory"],
                                  "nodes": 0}
    assert usage == {"default": {"cpu": 4000, "memory": 16 * GI, "nodes": 1}}


def test_candidate_capacity_override_and_allocatable_fallback():
    limited = nodepool(limits={"cpu": "4"})
    usage = {"default": {"cpu": 4000}}
    cand = node("cand", [pod("a", cpu="1", memory="1Gi")], cpu=2000, itype="unknown.type")
    # capacity unknown to the catalog: its allocatable (2 CPU) is freed; 2 CPU left: a 2-vCPU type fits
    r = simulate_removal([cand], others=[], nodepools=pools(limited), usage=usage)
    assert r.usage["default"] == {"cpu": 2000}
    assert [TYPES_BY_NAME[c.instance_type].capacity["cpu"] for c in r.new_nodeclaims] == [2000]
    # a given capacity wins; freeing nothing leaves no room
    r = simulate_removal([cand], others=[], nodepools=pools(limited), usage=usage, capacity={"cand": {"cpu": "0"}})
    assert r.usage["default"] == {"cpu": 4000} and not r.new_nodeclaims and not r.all_rescheduled
    assert "limits" in r.unschedulable["default/a"]


def test_pending_pod_competes_for_the_room():
    cand = node("cand", [pod("a", cpu="1", memory="1Gi")])
    other = node("other", [pod("old", cpu="500m", memory="1Gi")])  # 1.5 CPU free
    alone = simulate_removal([cand], others=[other], nodepools=pools())
    assert alone.placements == {"default/a": "other"} and not alone.new_nodeclaims
    # a pending pod wants the same room: only one of the two fits there, the other needs a new node
    r = simulate_removal([cand], others=[other], nodepools=pools(), pending=[pod("urgent", cpu="1500m", memory="1Gi")])
    assert len(r.placements) == 1 and set(r.placements.values()) == {"other"}
    assert len(r.new_nodeclaims) == 1 and r.price == r.new_nodeclaims[0].price > 0
    assert set(r.placements) | set(r.new_nodeclaims[0].pods) == {"default/a", "default/urgent"}
    assert r.all_rescheduled and r.rescheduled == ["default/a"] and r.pending_unschedulable == {}


def test_pending_pod_failure_is_reported_apart():
    cand = node("cand", [pod("a", cpu="1", memory="1Gi")])
    huge = pod("huge", cpu="1000", memory="1Gi")
    r = simulate_removal([cand], others=[], nodepools=pools(), pending=[huge])
    assert "default/huge" in r.pending_unschedulable and r.unschedulable == {} and r.all_rescheduled


def test_inputs_are_not_modified():
    cand = node("cand", [pod("a", cpu="1500m", memory="1Gi"), *_ignored_pods()])
    other = node("other", [pod("old", cpu="1", memory="1Gi")], initialized=False)
    pending = [pod("p", cpu="100m", memory="100Mi")]
    usage = {"default": {"cpu": 2000, "nodes": 1}}
    before = copy.deepcopy((cand, other, pending, usage))
    simulate_removal([cand], others=[other], nodepools=pools(), pending=pending, usage=usage)
    assert (cand, other, pending, usage) == before
    assert cand.pods[0]["spec"]["nodeName"] == "cand"


def test_required_anti_affinity_is_respected():
    web = dict(labels={"app": "web"}, affinity=anti("web"))
    cand = node("cand", [pod("w1", cpu="200m", memory="256Mi", **web)])
    other = node("other", [pod("w0", cpu="200m", memory="256Mi", **web)], cpu=8000, memory=32 * GI)
    r = simulate_removal([cand], others=[other], nodepools=pools())
    assert r.placements == {} and [c.pods for c in r.new_nodeclaims] == [["default/w1"]]
    # two candidates' pods with anti-affinity to each other need two nodes
    cand2 = node("cand2", [pod("w2", cpu="200m", memory="256Mi", **web)])
    r = simulate_removal([cand, cand2], others=[other], nodepools=pools())
    assert sorted(c.pods[0] for c in r.new_nodeclaims) == ["default/w1", "default/w2"]
    assert all(len(c.pods) == 1 for c in r.new_nodeclaims)


def test_host_ports_are_respected():
    port = [{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}]
    cand = node("cand", [pod("a", cpu="100m", memory="100Mi", ports=port)])
    other = node("other", [pod("b", cpu="100m", memory="100Mi", ports=port)], cpu=8000, memory=32 * GI)
    r = simulate_removal([cand], others=[other], nodepools=pools())
    assert r.placements == {} and [c.pods for c in r.new_nodeclaims] == [["default/a"]]
    free = node("free", cpu=8000, memory=32 * GI)
    r = simulate_removal([cand], others=[other, free], nodepools=pools())
    assert r.placements == {"default/a": "free"} and not r.new_nodeclaims


def test_to_dict():
    r = simulate_removal([node("cand", [pod("a", cpu="1500m", memory="2Gi")])], others=[], nodepools=pools())
    d = r.to_dict()
    assert d["allRescheduled"] is True and d["rescheduled"] == ["default/a"]
    assert [n["pods"] for n in d["newNodeClaims"]] == [["default/a"]] and d["pricePerHour"] == round(r.price, 6)
