"""A pod a LATER round nominates to an in-flight NodeClaim uses up its room (docs/provisioning.md, "Nominations").

The round that launches a NodeClaim reserves its pods (``LaunchClaims.commit``).  A later round that places a
pending pod in the room an in-flight NodeClaim has left reserves it for that NodeClaim too
(``LaunchClaims.nominate``, the same condition), so every later round counts it against that room
(``scheduling/inputs.held_reservations``, in nomination order).  Before, such a pod was not recorded anywhere: each
pod arriving alone was offered the same room again, and any number of them were nominated to one booting node.
"""

import json

import boto3
import builders as B
import pytest
from moto import mock_aws

from karpenter_lambda.adapters.store.claims import LaunchClaims
from karpenter_lambda.api import labels as L
from karpenter_lambda.api.kube import node_allocatable
from karpenter_lambda.api.quantity import parse_resource_list
from karpenter_lambda.scheduling import solve
from karpenter_lambda.scheduling.inputs import held_reservations, in_flight_nodeclaim, scheduling_input
from karpenter_lambda.sim.world import make_pod

TABLE = "state-later-nominations"


# -- the pure part: held_reservations counts every nomination, in the order they were made --------------------------
def _in_flight(name: str = "default-x", launched_for: tuple = ("uid-default-a",), **kw):
    """A launched NodeClaim whose node has not joined yet (an m5.large of the builders' catalog)."""
    a = B.instance_type("m5.large").allocatable
    alloc = {"cpu": f"{a['cpu']}m", "memory": str(a["memory"]), "pods": str(a["pods"])}
    return B.nodeclaim(name, initialized=False,
                       annotations={L.NOMINATED_UIDS_ANNOTATION: json.dumps(list(launched_for))},
                       status={"nodeName": None, "allocatable": alloc,
                               "conditions": [{"type": "Launched", "status": "True"}]}, **kw)


def _room_after_a() -> int:
    return B.instance_type("m5.large").allocatable["cpu"] - 1000


def test_later_nominations_count_against_the_room_in_the_order_they_were_made():
    room = _room_after_a()
    a = B.pod("a", cpu="1")
    zz = B.pod("zz", cpu=f"{room - 200}m")   # nominated first by a later round
    bb = B.pod("bb", cpu="300m")             # nominated after zz: no room left for it
    x = _in_flight()
    reservations = {"uid-default-a": x.name, "uid-default-zz": x.name, "uid-default-bb": x.name}
    snap = B.snapshot(x, pods=[a, zz, bb], reservations=reservations)
    # nomination order (a: launch; zz, then bb), not uid order (bb < zz would have kept bb and dropped zz)
    assert held_reservations(snap) == {"uid-default-a": x.name, "uid-default-zz": x.name}

    # the pod left over is solved against the room as it is: X is full with a and zz, so a new NodeClaim
    held = held_reservations(snap)
    inp, _ = scheduling_input(snap, [bb], held=held)
    result = solve(inp)
    assert not result.existing.get(x.name), result.existing
    assert [p for plan in result.nodeclaims for p in plan.pods] == ["default/bb"]


def test_a_pod_nominated_by_a_later_round_is_held_while_there_is_room():
    room = _room_after_a()
    a, b = B.pod("a", cpu="1"), B.pod("b", cpu=f"{room - 30}m")
    x = _in_flight()
    snap = B.snapshot(x, pods=[a, b], reservations={"uid-default-a": x.name, "uid-default-b": x.name})
    assert held_reservations(snap) == {"uid-default-a": x.name, "uid-default-b": x.name}
    # and the next pod sees no room on X: a and b are its pods
    c = B.pod("c", cpu=f"{room - 30}m")
    snap = B.snapshot(x, pods=[a, b, c], reservations={"uid-default-a": x.name, "uid-default-b": x.name})
    inp, _ = scheduling_input(snap, [c], held=held_reservations(snap))
    result = solve(inp)
    assert not result.existing.get(x.name)
    assert [p for plan in result.nodeclaims for p in plan.pods] == ["default/c"]


def test_in_flight_nodeclaim_of_a_solver_node_name():
    unregistered = _in_flight("default-u")
    registered, node = B.claimed_node("default-r", initialized=False)
    initialized, node_i = B.claimed_node("default-i")
    deleting = _in_flight("default-d", deleting=True)
    plain = B.node("plain")
    snap = B.snapshot(unregistered, (registered, node), (initialized, node_i), deleting, plain)
    assert in_flight_nodeclaim(snap, "default-u") is unregistered
    assert in_flight_nodeclaim(snap, node["metadata"]["name"]) is registered
    assert in_flight_nodeclaim(snap, node_i["metadata"]["name"]) is None
    assert in_flight_nodeclaim(snap, "default-d") is None
    assert in_flight_nodeclaim(snap, "plain") is None


# -- the record: LaunchClaims.nominate ------------------------------------------------------------------------------
@pytest.fixture
def ddb():
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(TableName=TABLE, BillingMode="PAY_PER_REQUEST",
                            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                                  {"AttributeName": "sk", "AttributeType": "S"}],
                            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                                       {"AttributeName": "sk", "KeyType": "RANGE"}])
        yield client


def test_nominate_reserves_the_pods_in_order_and_release_deletes_them(ddb):
    now = [1000.0]
    c = LaunchClaims(ddb, "c1", TABLE, clock=lambda: now[0])
    assert c.commit("default", "x", {"cpu": 2000, "nodes": 1}, {}, ["u-a"]).ok
    now[0] += 10
    assert c.nominate("default", "x", ["u-zz"]) == []
    now[0] += 2
    assert c.nominate("default", "x", ["u-bb"]) == []
    assert list(c.reservations().items()) == [("u-a", "x"), ("u-zz", "x"), ("u-bb", "x")]
    _totals, claims = c.usage("default")
    assert claims["x"]["pods"] == ["u-a", "u-zz", "u-bb"]
    assert claims["x"]["resources"] == {"cpu": 2000, "nodes": 1}   # nominations claim no usage
    c.adjust("default", "x", {"cpu": 2000, "nodes": 1})              # the claim's rev moved on: still consistent
    assert c.release("default", "x")
    assert c.reservations() == {}


def test_nominate_refuses_a_pod_another_nodeclaim_holds_unless_its_nomination_no_longer_holds(ddb):
    c = LaunchClaims(ddb, "c1", TABLE, clock=lambda: 1000.0)
    assert c.commit("default", "x", {"cpu": 2000}, {}, ["u-a"]).ok
    assert c.commit("default", "y", {"cpu": 2000}, {}, ["u-b"]).ok
    # a concurrent invocation reserved u-b for y: x does not take it
    assert c.nominate("default", "x", ["u-c", "u-b"]) == ["u-b"]
    assert c.reservations() == {"u-a": "x", "u-b": "y", "u-c": "x"}
    # y's nomination no longer holds (its node filled up): the round names it as taken over
    assert c.nominate("default", "x", ["u-b"], takeover={"u-b": "y"}) == []
    assert c.reservations()["u-b"] == "x"
    # a NodeClaim without a claim item (an older layout): the reservations alone
    assert c.nominate("default", "gone", ["u-d"]) == []
    assert c.reservations()["u-d"] == "gone"


def test_nominate_many_pods_in_chunks(ddb):
    c = LaunchClaims(ddb, "c1", TABLE, clock=lambda: 1000.0)
    assert c.commit("default", "x", {"cpu": 2000}, {}, ["u-a"]).ok
    assert c.commit("default", "y", {"cpu": 2000}, {}, ["u-150"]).ok
    uids = [f"u-{i:03d}" for i in range(250)]
    assert c.nominate("default", "x", uids) == ["u-150"]
    res = c.reservations()
    assert sum(1 for v in res.values() if v == "x") == 1 + 249
    _totals, claims = c.usage("default")
    assert len(claims["x"]["pods"]) == 250 and "u-150" not in claims["x"]["pods"]


# -- end to end on the real handlers (moto + the local Kubernetes API) ----------------------------------------------
def _provision(world, pods):
    assert world.provision(world.sqs_event(pods)) == {"batchItemFailures": []}
    return {nc.name: nc for nc in world.store.list("NodeClaim")}


def test_pods_arriving_one_at_a_time_fill_an_in_flight_node_then_launch_a_new_one(world):
    (a,) = world.add_pods([make_pod("a", cpu="1", memory="128Mi", owner="a")])
    (x,) = _provision(world, [a]).values()
    alloc = parse_resource_list(x.status["allocatable"])["cpu"]
    size = (alloc - 1000) * 3 // 4          # one fits next to a, two do not
    (b,) = world.add_pods([make_pod("b", cpu=f"{size}m", memory="128Mi", owner="b")])
    assert list(_provision(world, [b])) == [x.name], "b fits the room X has left: nothing launched"
    assert world.env.claims.reservations() == {a["metadata"]["uid"]: x.name, b["metadata"]["uid"]: x.name}

    (c,) = world.add_pods([make_pod("c", cpu=f"{size}m", memory="128Mi", owner="c")])
    claims = _provision(world, [c])
    assert len(claims) == 2, "c was offered the room b already took"
    (y,) = (nc for name, nc in claims.items() if name != x.name)
    assert json.loads(y.annotations[L.NOMINATED_PODS_ANNOTATION]) == ["default/c"]
    assert world.env.claims.reservations()[c["metadata"]["uid"]] == y.name

    # redeliveries launch nothing: b and c are held by their in-flight NodeClaims
    before = len(world.instances())
    assert len(_provision(world, [a, b, c])) == 2
    assert len(world.instances()) == before
    assert "pod default/b skipped: nominated to in-flight NodeClaim " + x.name in world.logs.getvalue()


def test_a_later_nomination_moves_to_a_new_nodeclaim_when_the_node_fills_up(world):
    (a,) = world.add_pods([make_pod("a", cpu="1", memory="128Mi", owner="a")])
    (x,) = _provision(world, [a]).values()
    alloc = parse_resource_list(x.status["allocatable"])["cpu"]
    (b,) = world.add_pods([make_pod("b", cpu=f"{(alloc - 1000) // 2}m", memory="128Mi", owner="b")])
    _provision(world, [b])
    assert world.env.claims.reservations()[b["metadata"]["uid"]] == x.name
    (node,) = world.join_all(ready=False)
    world.sweep()   # registered, not initialized: still in flight
    # the kube-scheduler bound another pod there first: room for a only
    (other,) = world.add_pods([make_pod("other", cpu=f"{node_allocatable(node)['cpu'] - 1000 - 10}m",
                                        memory="128Mi", owner="other")])
    world.server.store.bind("default", "other", node["metadata"]["name"])

    claims = _provision(world, [b])   # the watcher's resync
    assert len(claims) == 2
    (y,) = (nc for name, nc in claims.items() if name != x.name)
    assert world.env.claims.reservations()[b["metadata"]["uid"]] == y.name, "b's reservation moved to the new one"


def test_a_pod_a_concurrent_invocation_reserved_meanwhile_is_left_to_it(world):
    """Between this round's snapshot and its nomination, a concurrent invocation reserved b for its own NodeClaim:
    the nomination's condition refuses it, b is skipped, nothing is launched for it here."""
    from karpenter_lambda.cloudprovider import AWSCloudProvider
    from karpenter_lambda.controllers.provision import Provisioner
    from karpenter_lambda.scheduling import solve as real_solve

    (a,) = world.add_pods([make_pod("a", cpu="1", memory="128Mi", owner="a")])
    (x,) = _provision(world, [a]).values()
    (b,) = world.add_pods([make_pod("b", cpu="100m", memory="128Mi", owner="b")])
    uid_b = b["metadata"]["uid"]

    def racing_solve(inp, **kw):
        result = real_solve(inp, **kw)
        assert result.existing.get(x.name) == ["default/b"]
        assert world.env.claims.commit("default", "default-concurrent", {"cpu": 2000, "nodes": 1}, {}, [uid_b]).ok
        return result

    p = Provisioner(world.store, world.env.kube, AWSCloudProvider.from_environment(world.env), world.env.claims,
                    world.clock, solver=racing_solve)
    report = p.provision([b])
    assert report.skipped == [{"pod": "default/b", "reason": "nominated by a concurrent provisioner"}]
    assert report.existing == {} and report.launched == []
    assert world.env.claims.reservations()[uid_b] == "default-concurrent"
