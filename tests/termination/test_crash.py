"""A failure or crash between any two steps is finished by the next invocation, with no instance left running."""

import pytest


@pytest.mark.parametrize("step,method,path", [
    ("taint", "PATCH", r"/nodes/"),
    ("list pods", "GET", r"/api/v1/pods(\?|$)"),
    ("evict", "POST", r"/eviction$"),
    ("delete node", "DELETE", r"/nodes/"),
])
def test_a_failure_at_each_step_is_finished_by_the_next_call(make_world, step, method, path):
    d = make_world()
    x = d.node_with_pods(2)
    d.server.add_fault(status=403, times=1, method=method, path=path)
    d.request(x, reason=f"crash at {step}")
    outcomes, first_errors = [], None
    for _ in range(4):
        errors: list[str] = []
        outcomes.append(d.finalize(x, errors))
        first_errors = errors if first_errors is None else first_errors
        if outcomes[-1] == "deleted":
            break
        d.w.clock.advance(60)
    assert first_errors and outcomes[0] != "deleted", (step, outcomes)   # the fault hit the first call
    assert outcomes[-1] == "deleted", (step, outcomes)
    assert d.w.store.get("NodeClaim", x["name"]) is None
    assert d.server.store.get("nodes", x["node"]) is None
    assert d.running() == set() and d.cloud.terminated == [x["iid"]]
    assert sorted(d.evictions()) == ["app-0", "app-1"]


def test_a_crash_after_terminate_instances_before_the_record(make_world):
    """TerminateInstances went through but the invocation died before recording it: the next call sees the
    instance shutting down and does not call it again."""
    d = make_world()
    x = d.node_with_pods(1)
    d.request(x)
    t = d.terminator()
    nc = d.w.store.get("NodeClaim", x["name"])
    assert t._drain(nc, d.server.store.get("nodes", x["node"])) == "drained"
    d.w.ec2.terminate_instances(InstanceIds=[x["iid"]])       # the call that was made, never recorded
    assert "instanceTerminatedAt" not in d.status(x)
    assert d.finalize(x) == "deleted"
    assert d.cloud.terminated == [] and d.running() == set()


def test_a_crash_after_the_node_deletion(make_world):
    """The Node went, the record stayed: the next call removes the record (no node, instance gone)."""
    d = make_world()
    x = d.node_with_pods(1)
    d.cloud.lag = 1
    d.request(x)
    assert d.finalize(x) == "terminating"
    d.server.store.delete("nodes", x["node"])
    assert d.finalize(x) == "deleted"
    assert d.w.store.get("NodeClaim", x["name"]) is None and d.cloud.terminated == [x["iid"]]


def test_the_lifecycle_sweep_finishes_a_drain(make_world):
    """Through the real lifecycle handler: draining is reported until the PDB goes, then the NodeClaim is gone."""
    d = make_world()
    x = d.node_with_pods(1)
    d.pdb("hold", "app", max_unavailable=0)
    d.request(x)
    r = d.w.sweep()
    assert r["draining"] == [x["name"]] and r["evicted"] == []
    d.server.store.delete("poddisruptionbudgets", "hold", "default")
    d.w.clock.advance(60)
    r = d.w.sweep()
    assert [e["pod"] for e in r["evicted"]] == ["default/app-0"]
    d.w.clock.advance(60)
    d.w.sweep()
    assert d.w.store.get("NodeClaim", x["name"]) is None and d.running() == set()


def test_an_already_terminated_instance_skips_the_drain_once_its_node_is_not_ready(make_world):
    d = make_world()
    x = d.node_with_pods(2)
    d.w.ec2.terminate_instances(InstanceIds=[x["iid"]])
    d.not_ready(x)
    before = len(d.server.requests("PATCH", r"/nodes/"))
    d.request(x)
    assert d.finalize(x) == "deleted"
    assert d.evictions(ok_only=False) == [] and d.cloud.terminated == []
    assert d.server.store.get("nodes", x["node"]) is None and d.w.store.get("NodeClaim", x["name"]) is None
    # not even tainted: the one PATCH is the termination finalizer's removal (the Node goes with it)
    assert len(d.server.requests("PATCH", r"/nodes/")[before:]) == 1
    assert [dec for dec, _m, _f in d.decisions if dec == "taint"] == []


def test_a_terminated_instance_whose_node_is_still_ready_is_drained_until_the_node_turns_not_ready(make_world):
    """Karpenter's termination controller skips the drain only when the instance is gone AND the Node is not Ready: a
    Ready condition means a kubelet still reports, whatever EC2 says.  So the pods are evicted with their PDBs
    honoured, and no TerminateInstances; once the Node turns NotReady the next call deletes Node and record without
    waiting on the pods."""
    d = make_world()
    x = d.node_with_pods(2)
    d.pdb("hold", "app", max_unavailable=0)
    d.w.ec2.terminate_instances(InstanceIds=[x["iid"]])
    d.request(x)
    assert d.finalize(x) == "draining"
    assert d.evictions() == [] and len(d.evictions(ok_only=False)) >= 1     # tried, refused by the PDB (429)
    assert d.cloud.terminated == [] and d.names_on(x["node"]) == {"app-0", "app-1"}
    d.w.clock.advance(60)
    assert d.finalize(x) == "draining"                            # still Ready: the PDB is still honoured
    d.not_ready(x)
    assert d.finalize(x) == "deleted"
    assert d.server.store.get("nodes", x["node"]) is None and d.w.store.get("NodeClaim", x["name"]) is None
    assert d.cloud.terminated == [] and d.evictions() == []


def test_a_terminated_instance_whose_node_is_still_ready_has_its_pods_evicted(make_world):
    d = make_world()
    x = d.node_with_pods(2)
    d.w.ec2.terminate_instances(InstanceIds=[x["iid"]])
    d.request(x)
    assert d.finalize(x) == "deleted"
    assert sorted(d.evictions()) == ["app-0", "app-1"] and d.cloud.terminated == []
    assert d.server.store.get("nodes", x["node"]) is None and d.w.store.get("NodeClaim", x["name"]) is None


def test_a_registered_nodeclaim_whose_instance_ec2_does_not_know_skips_the_drain(make_world):
    """Missing from the caller's listing is not enough: the instance is asked for by id, and only NotFound (EC2 does
    not know the id) with a Node no longer Ready skips the drain (Karpenter: cloudProvider.Get says
    NodeClaimNotFound and the Ready condition is not True)."""
    d = make_world()
    x = d.node_with_pods(1)
    d.not_ready(x)
    d.request(x)
    d.cloud.describe = lambda ids: {}                  # InvalidInstanceID.NotFound for every id
    t = d.terminator()
    nc = d.w.store.get("NodeClaim", x["name"])
    assert t.finalize(nc, d.server.store.get("nodes", x["node"]), None) == "deleted"
    assert d.evictions(ok_only=False) == [] and d.cloud.terminated == []
