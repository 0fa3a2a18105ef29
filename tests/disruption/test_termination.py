"""The termination flow (drain) through the real lifecycle handler: eviction order, skipped pods, resumed drains,
and a failure at each step finished by the next invocation with no instance left running."""

import pytest

from karpenter_lambda.sim import nodes as simnodes
from karpenter_lambda.controllers.termination import Terminator
from karpenter_lambda.disruption.eviction import eviction_group, next_step


def _pod(d, name, node, *, owner="ReplicaSet", critical=False, annotations=None, tolerations=None, phase="Running"):
    body = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": name}, "annotations": annotations or {},
                         "ownerReferences": [{"apiVersion": "v1" if owner == "Node" else "apps/v1", "kind": owner,
                                              "name": f"{name}-owner", "uid": f"u-{name}", "controller": True}]},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]}}
    if critical:
        body["spec"]["priorityClassName"] = "system-cluster-critical"
    if tolerations:
        body["spec"]["tolerations"] = tolerations
    d.w.server.store.create("pods", body, "default")
    d.w.server.store.patch("pods", name, {"status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True"}]}},
                           namespace="default", subresource="status")


def _request_deletion(d, name, reason="test"):
    term = Terminator(d.w.store, d.w.env.kube, None)
    term.request(d.w.store.get("NodeClaim", name), reason)


def _names(d, node):
    return {p["metadata"]["name"] for p in d.pods_on(node)}


def test_eviction_order_and_skipped_pods(make_world):
    d = make_world(consolidate_after="Never")
    (a,) = d.nodes_with_pods([1])
    node = a["nodeName"]
    _pod(d, "ds", node, owner="DaemonSet")
    _pod(d, "crit", node, critical=True)
    _pod(d, "crit-ds", node, owner="DaemonSet", critical=True)
    _pod(d, "mirror", node, owner="Node", annotations={"kubernetes.io/config.mirror": "x"})
    _pod(d, "stays", node, tolerations=[{"key": "karpenter.sh/disrupted", "operator": "Exists", "effect": "NoSchedule"}])
    _pod(d, "done", node, phase="Succeeded")
    # a PDB holds the first group: nothing of a later group may go while it stands
    d.w.server.store.create("poddisruptionbudgets", {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "hold", "namespace": "default"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "app0"}}}}, "default")
    d.w.server.store.patch("pods", "app0-0", {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
                           namespace="default", subresource="status")
    _request_deletion(d, a["name"])
    for _ in range(2):
        r = d.w.sweep()
        assert r["draining"] == [a["name"]] and r["evicted"] == []
        assert {"app0-0", "ds", "crit", "crit-ds"} <= _names(d, node)
    n = d.w.server.store.get("nodes", node)
    assert any(t["key"] == "karpenter.sh/disrupted" and t["effect"] == "NoSchedule" for t in n["spec"]["taints"])
    assert n["metadata"]["labels"]["node.kubernetes.io/exclude-from-external-load-balancers"] == "true"
    d.w.server.store.delete("poddisruptionbudgets", "hold", "default")
    r = d.w.sweep()
    assert [e["pod"] for e in r["evicted"]] == ["default/app0-0", "default/ds", "default/crit", "default/crit-ds"]
    # mirror, tolerating and Succeeded pods were never evicted (the node's deletion takes them)
    evictions = d.w.server.requests("POST", r"/eviction$")
    assert not any(x in path for _m, path, _c in evictions for x in ("/mirror/", "/stays/", "/done/"))
    assert d.w.store.get("NodeClaim", a["name"]) is None and d.state(a["iid"]) in ("shutting-down", "terminated")


def test_a_drain_resumes_across_invocations_and_evicts_nothing_twice(make_world):
    d = make_world(consolidate_after="Never")
    (a,) = d.nodes_with_pods([3])
    pods = sorted(_names(d, a["nodeName"]))
    # the first invocation fails on the second eviction (as if the Lambda died there)
    d.w.server.add_fault(status=403, times=1, method="POST", path=rf"/pods/{pods[1]}/eviction$")
    _request_deletion(d, a["name"])
    r1 = d.w.sweep()
    assert r1["draining"] == [a["name"]]
    state = d.w.store.get("NodeClaim", a["name"]).status["termination"]
    assert len(state["evicted"]) == 1 and state["startedAt"]
    r2 = d.w.sweep()                      # a new invocation (new Terminator) continues from the stored state
    assert d.w.store.get("NodeClaim", a["name"]) is None
    evicted = [path for _m, path, code in d.w.server.requests("POST", r"/eviction$") if code < 300]
    assert sorted(p.split("/pods/")[1].split("/")[0] for p in evicted) == pods   # each pod exactly once
    assert {e["pod"] for e in r1["evicted"] + r2["evicted"]} == {f"default/{p}" for p in pods}


@pytest.mark.parametrize("step,method,path", [
    ("taint", "PATCH", r"/nodes/"),
    ("evict", "POST", r"/eviction$"),
    ("delete node", "DELETE", r"/nodes/"),
])
def test_a_failure_at_each_step_is_finished_by_the_next_sweep(make_world, step, method, path):
    d = make_world(consolidate_after="Never")
    (a,) = d.nodes_with_pods([1])
    d.w.server.add_fault(status=403, times=1, method=method, path=path)
    _request_deletion(d, a["name"], reason=f"crash at {step}")
    r = d.w.sweep()
    assert r["errors"], step
    for _ in range(3):
        d.w.clock.advance(60)
        d.w.sweep()
    assert d.w.store.get("NodeClaim", a["name"]) is None
    assert d.w.server.store.get("nodes", a["nodeName"]) is None
    assert d.running() == set()                        # no instance leaked
    assert d.pods_on(a["nodeName"]) == []


def test_a_terminated_instance_skips_the_drain(make_world):
    """Instance gone and Node NotReady (its kubelet stopped with it): nothing to drain (tests/termination has the
    Ready case, which is drained)."""
    d = make_world(consolidate_after="Never")
    (a,) = d.nodes_with_pods([2])
    d.w.ec2.terminate_instances(InstanceIds=[a["iid"]])
    simnodes.set_node_ready(d.w.server, a["nodeName"], False)
    _request_deletion(d, a["name"])
    r = d.w.sweep()
    assert r["evicted"] == [] and d.w.store.get("NodeClaim", a["name"]) is None


# -- the pure rules --------------------------------------------------------------------------------
def _p(name, *, owner="ReplicaSet", critical=False, terminating=False, grace=None, dnd=None):
    p = {"metadata": {"name": name, "namespace": "default", "uid": name, "annotations": {},
                      "ownerReferences": [{"kind": owner, "name": "o"}]}, "spec": {}, "status": {"phase": "Running"}}
    if critical:
        p["spec"]["priorityClassName"] = "system-node-critical"
    if terminating:
        p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if grace is not None:
        p["spec"]["terminationGracePeriodSeconds"] = grace
    if dnd:
        p["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] = dnd
    return p


def test_groups_and_steps():
    pods = [_p("a"), _p("b", owner="DaemonSet"), _p("c", critical=True), _p("d", owner="DaemonSet", critical=True)]
    assert [eviction_group(p) for p in pods] == [0, 1, 2, 3]
    step = next_step(pods, now=0, deadline=None)
    assert [p["metadata"]["name"] for p in step.evict] == ["a"] and step.group == 0
    # a terminating pod of group 0 is waited for: group 1 does not start
    step = next_step([_p("a", terminating=True)] + pods[1:], now=0, deadline=None)
    assert step.evict == [] and step.group == 0
    # do-not-disrupt holds until the deadline minus the pod's grace; then it is deleted
    held = [_p("x", dnd="true", grace=60)]
    assert next_step(held, now=100, deadline=1000).blocked == {"x": "do-not-disrupt"}
    assert [p["metadata"]["name"] for p in next_step(held, now=940, deadline=1000).delete] == ["x"]
    assert next_step(held, now=940, deadline=1000, deleted={"x"}).delete == []
    assert next_step([], now=0, deadline=None).done
