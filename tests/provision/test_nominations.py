"""A nomination protects a pod only while its NodeClaim is in flight and still has room for it.

The kube-scheduler binds pods in its own order, not the plan's: the node planned for some pods can fill up
with others.  Karpenter holds a nomination only briefly and schedules against the nodes' real usage once they
exist; so do we (scheduling/inputs.held_reservations).  The no-duplicate-launch guarantee stays: a redelivered
message for a pod whose in-flight NodeClaim still has room launches nothing.
"""

import json

from karpenter_lambda.api.snapshot import ClusterSnapshot
from karpenter_lambda.api.objects import NodeClaim
from karpenter_lambda.scheduling.inputs import held_reservations
from karpenter_lambda.sim.world import make_pod


def _fill(world, node_name: str, prefix: str, count: int, cpu: str) -> None:
    """Pods the kube-scheduler bound to ``node_name`` before the nominated ones."""
    for p in world.add_pods([make_pod(f"{prefix}-{i}", cpu=cpu, memory="128Mi", owner=prefix) for i in range(count)]):
        world.server.store.bind("default", p["metadata"]["name"], node_name)


def _launch_for(world, pods):
    assert world.provision(world.sqs_event(pods)) == {"batchItemFailures": []}
    return world.store.list("NodeClaim")


def _alloc_cpu_m(node) -> int:
    from karpenter_lambda.api.kube import node_allocatable

    return node_allocatable(node)["cpu"]


def test_initialized_full_node_releases_its_nominations_and_a_new_node_is_launched(world):
    pods = world.add_pods([make_pod(f"web-{i}", cpu="1", memory="1Gi") for i in range(2)])
    (claim,) = _launch_for(world, pods)
    (node,) = world.join_all()
    world.sweep()
    assert world.store.get("NodeClaim", claim.name).is_true("Initialized")
    # the kube-scheduler filled the node with other pods before binding web-0/1
    _fill(world, node["metadata"]["name"], "spread", 1, cpu=f"{_alloc_cpu_m(node) - 600}m")

    report_before = len(world.instances())
    claims = _launch_for(world, pods)  # the watcher's resync re-sends the still-pending pods
    assert len(world.instances()) == report_before + 1, "pods nominated to a full, initialized node waited forever"
    new = [c for c in claims if c.name != claim.name]
    assert len(new) == 1
    assert sorted(json.loads(new[0].annotations["karpenter-lambda.io/nominated-pods"])) == ["default/web-0", "default/web-1"]
    # the nominations moved to the new NodeClaim; a redelivery launches nothing more
    assert set(world.env.claims.reservations().values()) == {new[0].name}
    _launch_for(world, pods)
    assert len(world.instances()) == report_before + 1


def test_in_flight_node_keeps_the_pods_it_has_room_for_and_releases_the_rest(world):
    pods = world.add_pods([make_pod(f"api-{i}", cpu="1", memory="1Gi", owner="api") for i in range(2)])
    (claim,) = _launch_for(world, pods)
    (node,) = world.join_all(ready=False)
    world.sweep()  # Registered, not Initialized: still in flight
    nc = world.store.get("NodeClaim", claim.name)
    assert nc.is_true("Registered") and not nc.is_true("Initialized")
    # room left for exactly one of the two nominated pods
    _fill(world, node["metadata"]["name"], "other", 1, cpu=f"{_alloc_cpu_m(node) - 1500}m")

    before = len(world.instances())
    claims = _launch_for(world, pods)
    assert len(world.instances()) == before + 1
    new = [c for c in claims if c.name != claim.name]
    assert len(new) == 1
    holders = world.env.claims.reservations()
    assert sorted(holders.values()) == sorted([claim.name, new[0].name]), "one pod stays nominated, one moves"


def test_redelivery_to_an_in_flight_node_with_room_launches_nothing(world):
    pods = world.add_pods([make_pod(f"db-{i}", cpu="500m", memory="512Mi", owner="db") for i in range(2)])
    _launch_for(world, pods)
    for _ in range(2):
        _launch_for(world, pods)
    assert len(world.instances()) == 1
    world.join_all(ready=False)
    world.sweep()
    _launch_for(world, pods)
    assert len(world.instances()) == 1


def _snap_with(initialized: bool, bound_cpu: str) -> ClusterSnapshot:
    nc = NodeClaim({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                    "metadata": {"name": "nc-1", "annotations": {"karpenter-lambda.io/nominated-pod-uids": '["u1", "u2"]'}},
                    "spec": {}, "status": {"providerID": "aws:///z/i-1", "nodeName": "n1", "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"},
                                           "conditions": [{"type": "Initialized", "status": "True" if initialized else "False"}]}})
    node = {"metadata": {"name": "n1"}, "spec": {"providerID": "aws:///z/i-1"},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"}}}

    def pod(name, uid, cpu, node_name=None):
        return {"metadata": {"name": name, "namespace": "default", "uid": uid},
                "spec": {"nodeName": node_name, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}

    pods = [pod("a", "u1", "1"), pod("b", "u2", "1"), pod("x", "ux", bound_cpu, "n1")]
    return ClusterSnapshot(now=0, nodeclaims={"nc-1": nc}, nodes=[node], pods=pods, reservations={"u1": "nc-1", "u2": "nc-1"})


def test_held_reservations_pure():
    assert held_reservations(_snap_with(False, "100m")) == {"u1": "nc-1"}            # room for one more 1-CPU pod
    assert held_reservations(_snap_with(False, "1m")) == {"u1": "nc-1"}
    assert held_reservations(_snap_with(False, "2")) == {}                           # full
    assert held_reservations(_snap_with(True, "1m")) == {}                           # initialized: real usage rules
    snap = _snap_with(False, "1m")
    snap.pods = [p for p in snap.pods if p["metadata"]["name"] != "x"]
    assert held_reservations(snap) == {"u1": "nc-1", "u2": "nc-1"}
