"""Emptiness through the real consolidation handler (moto + the local Kubernetes API + a virtual clock)."""

from karpenter_lambda.sim.world import make_pod


def _disrupted(out) -> list[str]:
    return [d["nodeClaim"] for d in out["consolidation"]["disrupted"]]


def test_empty_node_removed_after_consolidate_after_and_not_before(make_world):
    d = make_world(consolidate_after="120s")
    empty, busy = d.nodes_with_pods([0, 2])
    # the first sweep sees the pod set (the pod left just now); 120 s must pass from there
    assert _disrupted(d.tick(30, "consolidation")) == []            # t=30: first look
    assert _disrupted(d.tick(60, "consolidation")) == []            # t=90
    out = d.tick(55, "consolidation")                               # t=145: 115 s since the first look
    assert out["consolidation"]["proposed"] == [] and _disrupted(out) == []
    assert d.alive() == {empty["name"], busy["name"]}
    out = d.tick(10, "consolidation")           # t=155: 125 s: consolidatable, proposed
    assert [p["nodeClaim"] for p in out["consolidation"]["proposed"]] == [empty["name"]]
    assert _disrupted(out) == []                # re-validated >= 15 s later, never in the same invocation
    out = d.tick(30, "consolidation")
    assert _disrupted(out) == [empty["name"]]
    ev = out["consolidation"]["disrupted"][0]
    assert ev["reason"] == "Empty" and ev["replacements"] == [] and ev["savingsPerHour"] > 0
    assert ev["instanceType"] == empty["instance"]["InstanceType"] and ev["capacityType"] == "on-demand"
    d.tick(30, "consolidation")
    assert d.alive() == {busy["name"]} and d.nodeclaims() == {busy["name"]}
    assert d.state(empty["iid"]) in ("shutting-down", "terminated")
    assert d.state(busy["iid"]) == "running"
    assert d.w.server.store.get("nodes", empty["nodeName"]) is None


def test_a_pod_arriving_resets_consolidate_after(make_world):
    d = make_world(consolidate_after="120s")
    empty, busy = d.nodes_with_pods([0, 1])
    d.tick(30, "consolidation")
    d.tick(60, "consolidation")                  # t=90, 60 s since the first look
    # a pod lands on the empty node, then leaves again: the clock restarts from the sweep that saw each change
    (pod,) = d.w.add_pods([make_pod("visitor", tolerate=False, nodeName=empty["nodeName"])])
    d.w.server.store.patch("pods", "visitor", {"status": {"phase": "Running"}}, namespace="default", subresource="status")
    assert d.tick(45, "consolidation")["consolidation"]["proposed"] == []     # t=135: sees the visitor
    assert d.tick(30, "consolidation")["consolidation"]["proposed"] == []     # t=165: not empty
    d.w.server.store.delete("pods", "visitor", "default")
    d.tick(30, "consolidation")                                               # t=195: sees it gone
    assert d.tick(100, "consolidation")["consolidation"]["proposed"] == []    # t=295: 100 s < 120 s
    out = d.tick(30, "consolidation")                                         # t=325
    assert [p["nodeClaim"] for p in out["consolidation"]["proposed"]] == [empty["name"]]


def test_a_daemonset_only_node_is_empty(make_world):
    d = make_world(consolidate_after="0s")
    empty, busy = d.nodes_with_pods([0, 2])
    ds = {"apiVersion": "v1", "kind": "Pod",
          "metadata": {"name": "agent-x", "namespace": "default", "labels": {"app": "agent"},
                       "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "ds-1", "controller": True}]},
          "spec": {"nodeName": empty["nodeName"], "containers": [{"name": "c", "image": "agent"}]}}
    d.w.server.store.create("pods", ds, "default")
    d.tick(30, "consolidation")
    out = d.tick(30, "consolidation")
    assert _disrupted(out) == [empty["name"]]


def test_policy_never_and_consolidate_after_never_keep_empty_nodes(make_world):
    d = make_world(consolidate_after="Never")
    empty, busy = d.nodes_with_pods([0, 1])
    for _ in range(3):
        out = d.tick(60, "consolidation")
        assert out["consolidation"]["proposed"] == [] and _disrupted(out) == []
    assert d.alive() == {empty["name"], busy["name"]}


def test_a_node_nominated_for_a_pending_pod_is_kept(make_world):
    d = make_world(consolidate_after="0s")
    empty, busy = d.nodes_with_pods([0, 1])
    # the provisioner nominates a new pending pod to the empty node (it fits there): the node must stay
    (pod,) = d.w.add_pods([make_pod("late", tolerate=False)])
    d.w.provision(d.w.sqs_event([pod]))
    assert d.w.env.claims.reservations()          # a live nomination
    out = d.tick(30, "consolidation")["consolidation"]
    assert out["proposed"] == [] and out["disrupted"] == []
    assert any(b["nodeClaim"] == empty["name"] and "nominated" in b["message"] and b["cause"] == "would leave pods pending"
               for b in out["blocked"])


def test_a_nomination_after_the_proposal_cancels_it_on_revalidation(make_world):
    d = make_world(consolidate_after="0s")
    empty, busy = d.nodes_with_pods([0, 1])
    out = d.tick(30, "consolidation")["consolidation"]
    assert [p["nodeClaim"] for p in out["proposed"]] == [empty["name"]]
    (pod,) = d.w.add_pods([make_pod("late", tolerate=False)])
    d.w.provision(d.w.sqs_event([pod]))
    d.w.clock.advance(20)
    out = d.w.invoke("consolidation")
    assert out["disrupted"] == []
    assert [c["nodeClaim"] for c in out["cancelled"]] == [empty["name"]] and "nominated" in out["cancelled"][0]["why"]
    assert d.alive() == {empty["name"], busy["name"]}
    node = d.w.server.store.get("nodes", empty["nodeName"])
    assert not any(t["key"] == "karpenter.sh/disrupted" for t in node["spec"].get("taints") or [])
