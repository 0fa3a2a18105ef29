"""Replacement before drain, always (issue 28 item 4), in the pure layer: on snapshots from tests/builders.py, every
drift and expiration command carries the replacements its pods need -- the pods that have no other place -- and a
pod is never counted on room that is already spoken for.  No moto, no API server: milliseconds each.

The executor's side (launch, wait for Initialized, the last look before the drain, failures un-taint and keep the
node) is in ``test_replacement_first_exec.py``; the end-to-end run in ``tests/sim/test_drift_replacement_first.py``.
"""

from __future__ import annotations

import builders
from builders import DAY, T0, claimed_node, nodepool, pod
from karpenter_lambda.api import hashes
from karpenter_lambda.api import labels as L
from karpenter_lambda.api.kube import pod_key
from karpenter_lambda.disruption.candidates import make_candidate
from karpenter_lambda.disruption.consolidation import Applied
from karpenter_lambda.disruption.context import SnapshotCaches, SweepContext
from karpenter_lambda.disruption.drift import Drift
from karpenter_lambda.disruption.expiration import Expiration
from karpenter_lambda.disruption.plan import plan_sweep, revalidate
from karpenter_lambda.disruption.replace import leaving_of, removal_plan

DRIFT = (Expiration(), Drift())
BIG = "1200m"   # on a c5.large (1930m allocatable) one such pod fills the node: a node has room for one or none

OLD = nodepool(budgets=[{"nodes": "100%"}])                                   # what the drifted nodes were launched from
NEW = nodepool(budgets=[{"nodes": "100%"}], termination_grace_period="2h")   # the NodePool today: its hash changed


def drifted(name: str, np=OLD, **kw):
    """A node launched from ``np`` (its hash stamped): drifted once the snapshot's NodePool differs."""
    return claimed_node(name, instance_type="c5.large", annotations={
        L.NODEPOOL_HASH: hashes.nodepool_hash(np), L.NODEPOOL_HASH_VERSION: hashes.NODEPOOL_HASH_VERSION,
        **kw.pop("annotations", {})}, **kw)


def plain(name: str, **kw):
    """A node that does not drift (no hash stamped)."""
    return claimed_node(name, instance_type="c5.large", **kw)


def db(name: str, node: str) -> dict:
    """A StatefulSet pod with required anti-affinity on the hostname: one per node."""
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": L.HOSTNAME}]}}
    return pod(name, node=node, app="db", owner="StatefulSet", affinity=anti)


def big(name: str, node: str | None = None) -> dict:
    return pod(name, cpu=BIG, node=node)


def snapshot(*members, nodepools=(NEW,), **kw):
    return builders.snapshot(*members, nodepools=list(nodepools), **kw)


def plan(snap, inflight=None):
    return plan_sweep(snap, list(DRIFT), SweepContext(snap, inflight or {}))


def replacements(p) -> dict[str, int]:
    """NodeClaim -> how many replacements its command launches."""
    return {n: len(c.replacements) for c in p.commands for n in c.names}


# -- drift: a replacement of another command is not room ----------------------------------------------------------
def test_a_replacement_in_flight_holds_the_pods_of_the_node_it_replaces():
    """The issue's case: db-0's node is being replaced (in flight, its replacement Initialized and still empty);
    db-1's node drifts.  db-1 must get its own replacement: the empty one is db-0's (its anti-affinity too)."""
    rep = plain("r", annotations={L.REPLACES_ANNOTATION: L.encode_replaces(["a"])})
    members = (drifted("a"), drifted("b"), rep)
    pods = [db("db-0", "node-a"), db("db-1", "node-b")]
    p = plan(snapshot(*members, pods=pods), inflight={"a": "default"})
    assert replacements(p) == {"b": 1}
    # the same empty node replacing nothing, db-0's node staying: it is db-1's room, no replacement
    p = plan(snapshot(plain("a"), drifted("b"), plain("r"), pods=pods))
    assert replacements(p) == {"b": 0}


# -- drift: pods of nodes already leaving are placed first ---------------------------------------------------------
def test_the_pods_of_a_deleting_node_take_the_free_room_before_a_drifted_nodes_pods():
    x = plain("x")                                       # room for one big pod
    leaving = plain("d", deleting=True)                  # being deleted (interruption, by hand, expiration ...)
    pods = [big("web-1", "node-d"), big("app-1", "node-b")]
    p = plan(snapshot(x, leaving, drifted("b"), pods=pods))
    assert replacements(p) == {"b": 1}
    # nothing else leaving: the room on x is the drifted pod's, no replacement
    p = plan(snapshot(x, plain("d"), drifted("b"), pods=pods))
    assert replacements(p) == {"b": 0}


def test_the_pods_of_a_delete_only_command_in_flight_take_the_free_room_first():
    x = plain("x")
    pods = [big("web-1", "node-d"), big("app-1", "node-b")]
    p = plan(snapshot(x, plain("d"), drifted("b"), pods=pods), inflight={"d": "default"})
    assert replacements(p) == {"b": 1}


def test_pods_counted_on_a_candidate_by_an_earlier_command_move_with_it():
    """The only free room for the leaving node's pod is on the drifted node itself: both pods need new room."""
    b = claimed_node("b", instance_type="c5.xlarge", annotations={
        L.NODEPOOL_HASH: hashes.nodepool_hash(OLD), L.NODEPOOL_HASH_VERSION: hashes.NODEPOOL_HASH_VERSION})
    pods = [big("web-1", "node-d"), big("app-1", "node-b")]
    snap = snapshot(b, plain("d", deleting=True), pods=pods)
    (cmd,) = plan(snap).commands
    placed = {k for r in cmd.replacements for k in r.pods}
    assert placed == {"default/app-1", "default/web-1"}


# -- drift: the commands of one sweep -----------------------------------------------------------------------------
def test_an_empty_drifted_node_removed_in_the_same_sweep_is_not_room():
    p = plan(snapshot(drifted("e"), drifted("b"), pods=[big("app-1", "node-b")]))
    assert replacements(p) == {"e": 0, "b": 1}


def test_two_nodepools_drifting_in_one_sweep_do_not_count_the_same_room():
    old2, new2 = (nodepool("p2", budgets=[{"nodes": "100%"}], termination_grace_period=t) for t in (None, "2h"))
    pods = [big("app-1", "node-a"), big("other-1", "node-b")]
    members = (plain("x"), drifted("a"), drifted("b", np=old2, nodepool="p2"))
    p = plan(snapshot(*members, pods=pods, nodepools=(NEW, new2)))
    assert sorted(replacements(p).values()) == [0, 1]    # one of them takes x, the other gets a node


# -- expiration: forceful, but the replacement first --------------------------------------------------------------
def expired(name: str, **kw):
    return claimed_node(name, instance_type="c5.large", created=T0 - 31 * DAY, **kw)


EXPIRING = nodepool(expire_after="720h", budgets=[{"nodes": "0"}])


def test_an_expired_node_whose_pod_has_no_other_place_gets_a_replacement():
    p = plan(snapshot(expired("x"), pods=[big("app-1", "node-x")], nodepools=(EXPIRING,)))
    (cmd,) = p.commands
    assert cmd.reason == "Expired" and cmd.forceful and len(cmd.replacements) == 1
    assert cmd.replacements[0].pods == ["default/app-1"] and "expireAfter 720h elapsed" in cmd.detail


def test_an_expired_node_whose_pods_fit_elsewhere_or_that_is_empty_needs_none():
    p = plan(snapshot(expired("x"), plain("y"), pods=[big("app-1", "node-x")], nodepools=(EXPIRING,)))
    assert replacements(p) == {"x": 0}
    assert replacements(plan(snapshot(expired("x"), nodepools=(EXPIRING,)))) == {"x": 0}


def test_expired_nodes_of_one_sweep_are_not_each_others_room():
    pods = [big("app-1", "node-x1"), big("app-2", "node-x2")]
    x1 = claimed_node("x1", instance_type="c5.xlarge", created=T0 - 32 * DAY)    # room for one more big pod
    x2 = claimed_node("x2", instance_type="c5.xlarge", created=T0 - 31 * DAY)
    p = plan(snapshot(x1, x2, pods=pods, nodepools=(EXPIRING,)))
    assert [c.names for c in p.commands] == [["x1"], ["x2"]]     # oldest first
    placed = sorted(k for c in p.commands for r in c.replacements for k in r.pods)
    assert "default/app-1" in placed and "default/app-2" in placed


def test_a_node_still_coming_up_is_no_place_for_an_expired_nodes_pods():
    coming = claimed_node("u", instance_type="c5.large", initialized=False)
    p = plan(snapshot(expired("x"), coming, pods=[big("app-1", "node-x")], nodepools=(EXPIRING,)))
    assert replacements(p) == {"x": 1}


def test_a_pod_no_node_can_take_does_not_hold_an_expiration():
    huge = pod("huge-1", cpu="64", node="node-x")
    (cmd,) = plan(snapshot(expired("x"), pods=[huge], nodepools=(EXPIRING,))).commands
    assert cmd.reason == "Expired" and cmd.replacements == [] and "pod default/huge-1 has no place" in cmd.detail


def test_expiration_is_never_cancelled_on_its_second_look_and_gets_its_replacements_again():
    snap = snapshot(expired("x"), pods=[big("app-1", "node-x")], nodepools=(EXPIRING,))
    cmd, why = revalidate(snap, Expiration(), ["x"], SweepContext(snap, {"x": "default"}))
    assert why == "" and cmd.forceful and [r.pods for r in cmd.replacements] == [["default/app-1"]]


# -- the order of commands in flight ------------------------------------------------------------------------------
def test_a_command_planned_later_gives_priority_to_the_earlier_ones_only():
    """The executor's second look at b: the older command in flight (a) places its pods first; the younger one (c),
    planned around b, is left out of the room without taking it."""
    pods = [big("a-1", "node-a"), big("c-1", "node-c"), big("b-1", "node-b")]
    snap = snapshot(plain("x"), plain("a"), plain("c"), drifted("b"), pods=pods)
    inflight = {"a": "default", "c": "default", "b": "default"}
    b = make_candidate(snap, snap.nodeclaims["b"], snap.node_of_nodeclaim("b"), NEW)
    older = SweepContext(snap, inflight, leaving={"a"})
    assert leaving_of(snap, older) == {"a"}
    result, _ = removal_plan(snap, [b], older)
    assert len(result.new_nodeclaims) == 1                     # x is a's
    younger = SweepContext(snap, inflight, leaving=set())
    result, _ = removal_plan(snap, [b], younger)
    assert result.new_nodeclaims == [] and result.placements["default/b-1"] == "node-x"


def test_the_placements_of_leaving_pods_follow_a_consolidation_carried_out():
    p = big("w-1", "node-d")
    key = pod_key(p)
    caches = SnapshotCaches(leaving={(frozenset({"d"}), frozenset()): {key: ("node-g", p)},
                                     (frozenset({"e"}), frozenset()): {"default/v-1": ("node-g", p)}})
    applied = Applied(snapshot(), gone_nodes={"node-g"}, gone_claims={"g"}, touched={"node-y"}, moved={key: "node-y"})
    after = caches.derive(snapshot(), applied)
    (where, moved), = after.leaving[(frozenset({"d"}), frozenset())].values()
    assert where == "node-y" and moved["spec"]["nodeName"] == "node-y"
    assert (frozenset({"e"}), frozenset()) not in after.leaving     # nowhere known: asked again on the new snapshot
