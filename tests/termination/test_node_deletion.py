"""``kubectl delete node`` as in Karpenter: the Node carries the ``karpenter.sh/termination`` finalizer from its
registration, so the deletion only marks it deleting; the lifecycle sweep deletes its NodeClaim, the drain evicts its
pods through their PodDisruptionBudgets (the terminationGracePeriod still applies), the instance is terminated, and
only then is the finalizer removed and the Node gone.  Through the real lifecycle handler, moto and the local API
server (which keeps a deleting object while it has finalizers)."""

from __future__ import annotations

from karpenter_lambda.api.labels import TERMINATION_FINALIZER
from karpenter_lambda.api.times import format_time

from termination.conftest import held_nodes


def _finalizers(d, node: str) -> list[str]:
    return ((d.server.store.get("nodes", node) or {}).get("metadata") or {}).get("finalizers") or []


def _running(d, iid: str) -> bool:
    return d.state(iid) in ("pending", "running")


def _join_replacements(d) -> None:
    """The kubelets of the instances launched ahead register Ready (the drain waits for them)."""
    d.w.join_all(ready=True)


def test_registration_puts_the_finalizer_on_the_node(make_world):
    d = make_world()
    x = d.node_with_pods(1)
    assert _finalizers(d, x["node"]) == [TERMINATION_FINALIZER]
    patches = len(d.server.requests("PATCH", r"/nodes/"))
    d.w.clock.advance(60)
    d.w.sweep()
    assert _finalizers(d, x["node"]) == [TERMINATION_FINALIZER]
    assert len(d.server.requests("PATCH", r"/nodes/")) == patches        # idempotent: nothing written again


def test_a_node_registered_before_the_finalizer_gets_it_on_the_next_sweep(make_world):
    """Nodes registered by an earlier version have no finalizer: the next sweep adds it, keeping other finalizers."""
    d = make_world()
    x = d.node_with_pods(1)
    d.server.store.patch("nodes", x["node"], {"metadata": {"finalizers": ["example.com/keep"]}}, patch_type="merge")
    d.w.clock.advance(60)
    d.w.sweep()
    assert _finalizers(d, x["node"]) == ["example.com/keep", TERMINATION_FINALIZER]


def test_kubectl_delete_node_drains_through_the_pdb_terminates_then_releases_the_node(make_world):
    d = make_world()
    x = d.node_with_pods(2)
    d.pdb("hold", "app", max_unavailable=0)
    d.server.store.delete("nodes", x["node"])                            # kubectl delete node
    node = d.server.store.get("nodes", x["node"])
    assert node is not None and node["metadata"]["deletionTimestamp"]    # held by the finalizer
    assert d.names_on(x["node"]) == {"app-0", "app-1"}                   # pods not garbage-collected

    # the sweep deletes the NodeClaim (as Karpenter's termination controller) and launches capacity for its pods
    r = d.w.sweep()
    nc = d.w.store.get("NodeClaim", x["name"])
    assert nc.metadata.get("deletionTimestamp")
    assert nc.annotations["karpenter-lambda.io/deletion-reason"] == f"NodeDeleted: node {x['node']} was deleted"
    assert [a["nodeClaim"] for a in r["launched_ahead"]] == [x["name"]]
    assert r["deleted"] == [] and _running(d, x["iid"])
    _join_replacements(d)

    # the replacement is Initialized: the drain starts, the PDB refuses both evictions, nothing else happens
    for _ in range(3):
        d.w.clock.advance(60)
        r = d.w.sweep()
        assert r["draining"] == [x["name"]] and r["evicted"] == [], r
        assert d.names_on(x["node"]) == {"app-0", "app-1"}
        assert _running(d, x["iid"]) and _finalizers(d, x["node"]) == [TERMINATION_FINALIZER]
    assert len(d.evictions(ok_only=False)) >= 2 and d.evictions() == []
    assert set(d.status(x)["blocked"].values()) == {"PDB default/hold (429)"}

    # the PDB allows it: evicted, drained, instance terminated, then the finalizer removed and the Node gone
    d.server.store.delete("poddisruptionbudgets", "hold", "default")
    d.w.clock.advance(60)
    r = d.w.sweep()
    assert sorted(e["pod"] for e in r["evicted"]) == ["default/app-0", "default/app-1"]
    assert sorted(d.evictions()) == ["app-0", "app-1"]
    assert r["deleted"] == [{"nodeClaim": x["name"], "reason": f"NodeDeleted: node {x['node']} was deleted"}]
    assert d.state(x["iid"]) == "terminated"
    assert d.server.store.get("nodes", x["node"]) is None and d.w.store.get("NodeClaim", x["name"]) is None
    # the order: the instance was terminated before the Node went (its finalizer removed last)
    logs = d.w.logs.getvalue()
    assert logs.index(f"terminating instance {x['iid']}") < logs.index(f"deleted node {x['node']}")


def test_kubectl_delete_node_honours_the_termination_grace_period(make_world):
    """A PDB that never allows the eviction holds the Node only until the NodeClaim's terminationGracePeriod: then
    the pods are deleted, the instance terminated and the Node released."""
    d = make_world(tgp="5m")
    x = d.node_with_pods(1)
    d.pdb("hold", "app", max_unavailable=0)
    d.server.store.delete("nodes", x["node"])
    d.w.sweep()
    _join_replacements(d)
    gone_at = None
    for minute in range(1, 9):
        d.w.clock.advance(60)
        d.w.sweep()
        if d.server.store.get("nodes", x["node"]) is None:
            gone_at = minute
            break
        assert _finalizers(d, x["node"]) == [TERMINATION_FINALIZER]
    assert gone_at is not None and 3 <= gone_at <= 6, gone_at            # about 5 minutes after the deletion
    assert d.evictions() == [] and d.pod_deletes() == ["app-0"]         # never evicted: deleted at the deadline
    assert d.state(x["iid"]) == "terminated" and d.w.store.get("NodeClaim", x["name"]) is None


def test_a_deleting_node_whose_nodeclaim_is_gone_is_drained_and_released(make_world):
    """An orphan: the NodeClaim record went some other way while the Node kept the finalizer.  As Karpenter's
    termination controller without a NodeClaim: drained (evictions), then the finalizer removed; the instance no
    NodeClaim names is terminated by the orphan garbage collection."""
    d = make_world()
    x = d.node_with_pods(1)
    d.w.store.delete("NodeClaim", x["name"])
    d.server.store.delete("nodes", x["node"])
    d.w.clock.advance(60)
    r = d.w.sweep()
    assert [e["pod"] for e in r["evicted"]] == ["default/app-0"]
    assert d.server.store.get("nodes", x["node"]) is None
    assert d.state(x["iid"]) in ("shutting-down", "terminated")        # orphan instance GC


def test_an_orphan_deleting_node_whose_pdb_blocks_is_released_once_its_instance_is_gone(make_world):
    d = make_world()
    x = d.node_with_pods(1)
    d.pdb("hold", "app", max_unavailable=0)
    d.w.store.delete("NodeClaim", x["name"])
    d.server.store.delete("nodes", x["node"])
    d.w.clock.advance(60)
    d.w.sweep()
    node = d.server.store.get("nodes", x["node"])
    assert node is not None and _finalizers(d, x["node"]) == [TERMINATION_FINALIZER]   # Ready: the PDB holds it
    assert any(t["key"] == "karpenter.sh/disrupted" for t in node["spec"]["taints"])
    assert d.state(x["iid"]) in ("shutting-down", "terminated")
    d.not_ready(x)                                                       # its kubelet went with the instance
    d.w.clock.advance(60)
    d.w.sweep()
    assert d.server.store.get("nodes", x["node"]) is None and d.evictions() == []


def test_a_deleting_node_of_an_instance_that_is_not_ours_is_left_alone(make_world):
    """Upstream Karpenter's Nodes carry the same finalizer (a migration runs both): a deleting Node with it, no
    NodeClaim of ours and an instance without our owner tag is its business."""
    d = make_world()
    d.node_with_pods(1)
    ami = d.w.ec2.describe_instances()["Reservations"][0]["Instances"][0]["ImageId"]
    iid = d.w.ec2.run_instances(ImageId=ami, InstanceType="m5.large", MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
    d.server.store.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": "theirs", "finalizers": [TERMINATION_FINALIZER], "labels": {"karpenter.sh/nodepool": "general"}},
        "spec": {"providerID": f"aws:///us-east-1a/{iid}"},
        "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": format_time(d.w.clock.now())}]}})
    d.server.store.delete("nodes", "theirs")
    d.w.clock.advance(60)
    d.w.sweep()
    assert _finalizers(d, "theirs") == [TERMINATION_FINALIZER] and d.state(iid) == "running"
    d.server.store.patch("nodes", "theirs", {"metadata": {"finalizers": None}}, patch_type="merge")   # its owner's
    assert held_nodes(d.w) == []


def test_a_failed_finalizer_removal_keeps_the_record_and_the_next_call_finishes(make_world):
    """The Node was deleted but its finalizer not removed (an API error, or a crash in between): the record stays
    (it names the Node), and the next call removes the finalizer, then the record."""
    d = make_world()
    x = d.node_with_pods(1)
    d.cloud.lag = 1                                                      # EC2 reports it running once more
    d.request(x)
    assert d.finalize(x) == "terminating"                                # drained, TerminateInstances called
    d.server.add_fault(status=403, times=1, method="PATCH", path=r"/nodes/")
    errors: list[str] = []
    assert d.finalize(x, errors) == "terminating"
    assert any(f"remove finalizer {TERMINATION_FINALIZER}" in e for e in errors), errors
    node = d.server.store.get("nodes", x["node"])
    assert node["metadata"]["deletionTimestamp"] and _finalizers(d, x["node"]) == [TERMINATION_FINALIZER]
    assert d.w.store.get("NodeClaim", x["name"]) is not None
    assert d.finalize(x) == "deleted"
    assert d.server.store.get("nodes", x["node"]) is None and d.w.store.get("NodeClaim", x["name"]) is None
    assert d.cloud.terminated == [x["iid"]]
