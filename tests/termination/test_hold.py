"""A drain held for replacements launched ahead of it (controllers/termination.HOLD_FOR_REPLACEMENTS): the node is
tainted at once and nothing is evicted while the hold lasts; the terminationGracePeriod deadline and a drain already
started end it.  Which replacements hold a drain (controllers/lifecycle.waiting_replacements) on NodeClaim objects."""

from __future__ import annotations

from karpenter_lambda.api.labels import REPLACES_ANNOTATION, encode_replaces
from karpenter_lambda.api.objects import NodeClaim
from karpenter_lambda.api.times import format_time
from karpenter_lambda.controllers.disruption_exec import REPLACEMENT_TIMEOUT
from karpenter_lambda.controllers.lifecycle import replacements_of, waiting_replacements


def _hold(d, x, waiting):
    nc = d.w.store.get("NodeClaim", x["name"])
    node = d.server.store.get("nodes", x["node"])
    inst = d.cloud.describe([x["iid"]]).get(x["iid"])
    return d.terminator().finalize(nc, node, inst, None, wait_for=waiting)


def test_a_held_drain_taints_and_evicts_nothing_then_drains_when_released(make_world):
    d = make_world()
    x = d.node_with_pods(2)
    d.request(x, "ScheduledChange")
    for _ in range(3):
        assert _hold(d, x, ["default-rep"]) == "draining"
        d.w.clock.advance(60)
    node = d.server.store.get("nodes", x["node"])
    assert any(t["key"] == "karpenter.sh/disrupted" for t in node["spec"]["taints"])
    assert d.evictions() == [] and d.names_on(x["node"]) == {"app-0", "app-1"}
    assert d.status(x)["waitingFor"] == ["default-rep"] and not d.status(x).get("startedAt")
    kinds = [k for k, _m, _f in d.decisions]
    assert kinds.count("drain-held") == 1 and kinds.count("taint") == 1   # said once, not every sweep
    d.cloud.lag = 1
    assert _hold(d, x, []) == "terminating"          # the replacement is Initialized: drained and terminated
    assert sorted(d.evictions()) == ["app-0", "app-1"] and d.cloud.terminated == [x["iid"]]


def test_a_hold_ends_halfway_to_the_termination_grace_period_deadline(make_world):
    """The hold leaves the drain at least half the terminationGracePeriod: the pods are evicted, not deleted."""
    d = make_world(tgp="4m")
    x = d.node_with_pods(1)
    d.request(x, "ScheduledChange")
    assert _hold(d, x, ["default-rep"]) == "draining" and d.evictions() == []
    d.w.clock.advance(119)
    assert _hold(d, x, ["default-rep"]) == "draining" and d.evictions() == []
    d.w.clock.advance(1)                              # 2 of the 4 minutes gone
    d.cloud.lag = 1
    assert _hold(d, x, ["default-rep"]) == "terminating"
    assert d.evictions() == ["app-0"] and d.pod_deletes() == [] and d.cloud.terminated == [x["iid"]]


def test_a_drain_already_started_is_not_held_again(make_world):
    d = make_world()
    x = d.node_with_pods(1)
    d.pod("held", x["node"], annotations={"karpenter.sh/do-not-disrupt": "true"})
    d.request(x, "ScheduledChange")
    assert d.finalize(x) == "draining" and d.evictions() == ["app-0"]   # started, without a hold
    assert _hold(d, x, ["default-rep"]) == "draining"
    assert "drain-held" not in [k for k, _m, _f in d.decisions]


def _claim(name, *, replaces=(), initialized=False, created=0.0, deleting=False):
    meta = {"name": name, "creationTimestamp": format_time(created), "annotations": {}}
    if replaces:
        meta["annotations"][REPLACES_ANNOTATION] = encode_replaces(replaces)
    if deleting:
        meta["deletionTimestamp"] = format_time(created)
    status = {"conditions": [{"type": "Initialized", "status": "True" if initialized else "False"}]}
    return NodeClaim({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": meta, "spec": {}, "status": status})


def test_which_replacements_hold_a_drain():
    now = 10_000.0
    claims = [_claim("old"), _claim("a", replaces=["old"], created=now - 30),
              _claim("b", replaces=["old"], created=now - 30, initialized=True),
              _claim("c", replaces=["old"], created=now - REPLACEMENT_TIMEOUT - 1),
              _claim("d", replaces=["old"], created=now - 30, deleting=True),
              _claim("e", replaces=["other"], created=now - 30)]
    by_old = replacements_of(claims)
    assert sorted(r.name for r in by_old["old"]) == ["a", "b", "c", "d"] and [r.name for r in by_old["other"]] == ["e"]
    # only the young one not yet Initialized and not deleting
    assert waiting_replacements(by_old["old"], now) == ["a"]
    assert waiting_replacements(by_old["old"], now + REPLACEMENT_TIMEOUT) == []


def test_the_deletion_reasons_that_hold_a_drain():
    from karpenter_lambda.controllers.termination import USER_DELETED, holds_for_replacements

    assert holds_for_replacements("ScheduledChange") and holds_for_replacements(USER_DELETED)
    assert holds_for_replacements("NodePoolDeleted: NodePool batch was deleted")
    for going_now in ("SpotInterrupted", "InstanceStopped", "InstanceTerminated", "CapacityReservationInterrupted",
                      "Unhealthy: Ready False for 31m", "Drifted", None, ""):
        assert not holds_for_replacements(going_now), going_now
