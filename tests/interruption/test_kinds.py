"""State changes, AWS Health scheduled changes, capacity reservation interruptions and rebalance recommendations."""

import json

import pytest

from karpenter_lambda.api import labels as wk
from karpenter_lambda.controllers.termination import DELETION_REASON_ANNOTATION
from karpenter_lambda.sim.nodes import set_node_ready

from .interruption_world import (capacity_reservation_interruption, health_scheduled_change, rebalance, spot_warning,
                                 state_change)

DISRUPTED = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}


def tainted(w, node_name) -> bool:
    node = w.server.store.get("nodes", node_name)
    return DISRUPTED in [{"key": t["key"], "effect": t["effect"]} for t in node["spec"].get("taints") or []]


def deleting_reason(w, name):
    nc = w.store.get("NodeClaim", name)
    return nc.annotations.get(DELETION_REASON_ANNOTATION) if nc.metadata.get("deletionTimestamp") else None


@pytest.mark.parametrize("state, reason", [("stopping", "InstanceStopped"), ("stopped", "InstanceStopped"),
                                           ("shutting-down", "InstanceTerminated")])
def test_stopping_states_replace_cordon_and_request_deletion(iw, state, reason):
    """The instance is going away: capacity for its pods launches at once (as Karpenter's provisioner counts the pods
    of a deleting node as pending), then the deletion and the taint; the same notice again launches nothing more."""
    w = iw.w
    (a,) = iw.nodes_with_pods([1])
    iid, name = a["instance"]["InstanceId"], a["nodeClaim"].name
    assert iw.deliver(state_change(iid, state, w.clock.isoformat())) == {"batchItemFailures": []}
    (d,) = iw.report.disrupted
    assert (d["nodeClaim"], d["reason"], len(d["replacements"])) == (name, reason, 1)
    replacement = w.store.get("NodeClaim", d["replacements"][0])
    assert replacement is not None and replacement.annotations.get("karpenter-lambda.io/replaces") == f'["{name}"]'
    assert deleting_reason(w, name) == reason and tainted(w, a["node"]["metadata"]["name"])
    assert len(w.instances()) == 2
    iw.deliver(state_change(iid, state, w.clock.isoformat()))   # redelivered: nothing twice
    assert iw.report.disrupted == [] and iw.report.errors == [] and len(w.instances()) == 2
    w.sweep()  # the termination flow finishes it
    assert w.store.get("NodeClaim", name) is None or w.store.get("NodeClaim", name).metadata.get("deletionTimestamp")


def test_terminated_removes_the_nodeclaim_at_once(iw):
    w = iw.w
    (a,) = iw.nodes_with_pods([2])
    iid, name = a["instance"]["InstanceId"], a["nodeClaim"].name
    w.ec2.terminate_instances(InstanceIds=[iid])
    assert iw.deliver(state_change(iid, "terminated", w.clock.isoformat())) == {"batchItemFailures": []}
    r = iw.report
    assert [d["reason"] for d in r.disrupted] == ["InstanceTerminated"]
    assert r.deleted == [{"nodeClaim": name, "reason": "InstanceTerminated"}]
    assert w.store.get("NodeClaim", name) is None
    assert w.server.store.get("nodes", a["node"]["metadata"]["name"]) is None
    totals, claims = w.env.claims.usage("spot")
    assert claims == {} and totals.get("cpu", 0) == 0
    # the same notice again: gone, dropped
    iw.deliver(state_change(iid, "terminated", w.clock.isoformat()))
    assert iw.report.disrupted == [] and iw.report.deleted == [] and iw.report.errors == []


@pytest.mark.parametrize("state", ["pending", "running"])
def test_other_states_are_kept_out_by_the_rule_and_acknowledged_without_a_lookup(iw, state):
    w = iw.w
    (a,) = iw.nodes_with_pods([1])
    iid, name = a["instance"]["InstanceId"], a["nodeClaim"].name
    # the state-change rule matches only the states acted on: every launch in the account no longer makes a message
    iw.put(state_change(iid, state, w.clock.isoformat()))
    assert iw.queue_depth() == 0
    # a queue fed otherwise: acknowledged and ignored before the cluster is read (no NodeClaim looked up)
    iw.send_raw(json.dumps(state_change(iid, state, w.clock.isoformat())))
    assert iw.invoke(iw.receive(expect=1)) == {"batchItemFailures": []}
    (ignored,) = iw.report.ignored
    assert iw.report.disrupted == [] and ignored["reason"] == f"instance state {state}: nothing to do"
    assert ignored["nodeClaim"] is None and iw.report.received == []
    assert deleting_reason(w, name) is None and not tainted(w, a["node"]["metadata"]["name"])
    assert iw.queue_depth() == 0


def test_health_scheduled_change_for_two_instances(iw):
    w = iw.w
    a, b, c = iw.nodes_with_pods([1, 1, 1], cpu="1500m")
    ids = [a["instance"]["InstanceId"], b["instance"]["InstanceId"]]
    assert iw.deliver(health_scheduled_change(ids, w.clock.isoformat())) == {"batchItemFailures": []}
    r = iw.report
    assert sorted(x["instanceId"] for x in r.received) == sorted(ids)
    assert sorted((d["nodeClaim"], d["reason"]) for d in r.disrupted) == \
        sorted([(a["nodeClaim"].name, "ScheduledChange"), (b["nodeClaim"].name, "ScheduledChange")])
    for x in (a, b):
        assert deleting_reason(w, x["nodeClaim"].name) == "ScheduledChange" and tainted(w, x["node"]["metadata"]["name"])
    assert deleting_reason(w, c["nodeClaim"].name) is None
    # capacity for the two nodes' pods launched at once (a scheduled change gives notice: no pod waits a launch)
    assert sum(len(d["replacements"]) for d in r.disrupted) >= 1 and len(w.instances()) > 3
    # a Health event of another category is acknowledged and ignored
    iw.deliver(health_scheduled_change([c["instance"]["InstanceId"]], w.clock.isoformat(), category="issue"))
    assert iw.report.disrupted == [] and iw.report.ignored[0]["kind"] == "NoOp"
    assert deleting_reason(w, c["nodeClaim"].name) is None


def test_capacity_reservation_interruption_marks_the_reservation_and_deletes(iw):
    w = iw.w
    (a,) = iw.nodes_with_pods([1])
    iid, name = a["instance"]["InstanceId"], a["nodeClaim"].name
    zone = a["nodeClaim"].labels[wk.ZONE]

    def reserved(obj):  # as a NodeClaim launched into a capacity reservation is labelled
        obj.metadata["labels"].update({wk.CAPACITY_TYPE: "reserved", wk.CAPACITY_RESERVATION_ID: "cr-0123456789abcdef0"})
        return obj

    w.store.update("NodeClaim", name, reserved)
    assert iw.deliver(capacity_reservation_interruption(iid, w.clock.isoformat())) == {"batchItemFailures": []}
    r = iw.report
    assert [(d["nodeClaim"], d["reason"]) for d in r.disrupted] == [(name, "CapacityReservationInterrupted")]
    assert ("cr-0123456789abcdef0", zone, "reserved") in w.env.unavailable.all()
    assert deleting_reason(w, name) == "CapacityReservationInterrupted" and tainted(w, a["node"]["metadata"]["name"])
    (d,) = r.disrupted
    assert len(d["replacements"]) == 1 and len(w.instances()) == 2   # its pod's capacity launched at once


def test_the_interruptions_metric_counts_events_about_our_nodes(iw):
    """The dashboard's "Interruptions" graph: events about one of our NodeClaims, not events about other instances."""
    w = iw.w
    (a,) = iw.nodes_with_pods([1])
    iid = a["instance"]["InstanceId"]
    assert iw.deliver(rebalance(iid, w.clock.isoformat())) == {"batchItemFailures": []}
    assert iw.report.metric_counts()["Interruptions"] == 1
    assert iw.deliver(rebalance("i-0000000000000dead", w.clock.isoformat())) == {"batchItemFailures": []}
    counts = iw.report.metric_counts()
    assert counts["Interruptions"] == 0 and counts["InterruptionMessagesReceived"] == 1


def test_rebalance_without_opt_in_is_only_recorded(iw):
    w = iw.w
    (a,) = iw.nodes_with_pods([1])
    iid, name = a["instance"]["InstanceId"], a["nodeClaim"].name
    assert iw.deliver(rebalance(iid, w.clock.isoformat())) == {"batchItemFailures": []}
    r = iw.report
    assert r.rebalance == [{"messageId": r.received[0]["messageId"], "instanceId": iid, "nodeClaim": name,
                            "nodePool": "spot", "replace": False, "optedIn": False}]
    assert r.metric_counts()["RebalanceRecommendations"] == 1
    assert r.disrupted == [] and r.unavailable == [] and "does not opt in" in r.ignored[0]["reason"]
    assert deleting_reason(w, name) is None and not tainted(w, a["node"]["metadata"]["name"])
    assert len(w.instances()) == 1 and w.env.unavailable.all() == set()


def test_rebalance_with_opt_in_replaces_first_then_deletes(iw_factory):
    iw = iw_factory(rebalance_replace=True)
    w = iw.w
    (a,) = iw.nodes_with_pods([2])
    iid, name = a["instance"]["InstanceId"], a["nodeClaim"].name
    assert iw.deliver(rebalance(iid, w.clock.isoformat())) == {"batchItemFailures": []}
    (d,) = iw.report.disrupted
    assert (d["nodeClaim"], d["reason"], len(d["replacements"])) == (name, "RebalanceRecommendation", 1)
    assert iw.report.rebalance[0]["replace"] is True
    assert deleting_reason(w, name) == "RebalanceRecommendation"
    assert w.store.get("NodeClaim", d["replacements"][0]) is not None and len(w.instances()) == 2
    assert w.env.unavailable.all() == set()  # a recommendation is not an interruption: nothing marked


def test_rebalance_replacement_respects_the_disruption_budget(iw_factory):
    iw = iw_factory(rebalance_replace=True, budgets='[{nodes: "1"}, {nodes: "0", reasons: [Underutilized]}]')
    w = iw.w
    a, b = iw.nodes_with_pods([1, 1], cpu="1500m")
    ids = [a["instance"]["InstanceId"], b["instance"]["InstanceId"]]
    assert iw.deliver(rebalance(ids[0], w.clock.isoformat()), rebalance(ids[1], w.clock.isoformat())) == \
        {"batchItemFailures": []}
    r = iw.report
    assert len(r.disrupted) == 1 and len(r.replacements) == 1  # budget nodes=1 (the Underutilized one does not apply)
    (blocked,) = [x for x in r.ignored if "disruption budget" in x["reason"]]
    assert {blocked["instanceId"], r.disrupted[0]["instanceId"]} == set(ids)
    assert sum(1 for x in (a, b) if deleting_reason(w, x["nodeClaim"].name)) == 1


def test_rebalance_blocked_by_a_zero_budget(iw_factory):
    iw = iw_factory(rebalance_replace=True, budgets='[{nodes: "0"}]')
    (a,) = iw.nodes_with_pods([1])
    iw.deliver(rebalance(a["instance"]["InstanceId"], iw.w.clock.isoformat()))
    assert iw.report.disrupted == [] and iw.report.rebalance[0]["replace"] is False
    assert len(iw.w.instances()) == 1 and deleting_reason(iw.w, a["nodeClaim"].name) is None


def test_terminated_notice_after_a_spot_deletion_finishes_it(iw):
    w = iw.w
    (a,) = iw.nodes_with_pods([1])
    iid, name = a["instance"]["InstanceId"], a["nodeClaim"].name
    iw.deliver(state_change(iid, "stopping", w.clock.isoformat()))
    w.ec2.terminate_instances(InstanceIds=[iid])
    set_node_ready(w.server, a["node"]["metadata"]["name"], False)
    iw.deliver(state_change(iid, "terminated", w.clock.isoformat()))
    r = iw.report
    assert r.disrupted == [] and r.deleted == [{"nodeClaim": name, "reason": "InstanceTerminated"}]
    assert w.store.get("NodeClaim", name) is None


@pytest.mark.parametrize("going", ["spot", "stopping"])
def test_a_held_scheduled_change_drains_at_once_when_the_instance_starts_going(iw, going):
    """A scheduled change's drain waits for its replacement (controllers/termination.HOLD_FOR_REPLACEMENTS); a spot
    warning or a stop for that instance ends the wait: the drain starts in the handler's invocation, replacement
    Initialized or not (the pods are evicted while the instance still runs, not lost with it)."""
    w = iw.w
    (a,) = iw.nodes_with_pods([2])
    iid, name, node = a["instance"]["InstanceId"], a["nodeClaim"].name, a["node"]["metadata"]["name"]
    iw.deliver(health_scheduled_change([iid], w.clock.isoformat()))
    report = w.sweep()                                   # the replacement has not joined: the drain is held
    assert [h["nodeClaim"] for h in report["held"]] == [name] and report["evicted"] == []
    on_node = {p["metadata"]["name"] for p in w.server.store.list("pods") if p["spec"].get("nodeName") == node}
    assert len(on_node) == 2
    event = spot_warning(iid, w.clock.isoformat()) if going == "spot" else state_change(iid, "stopping", w.clock.isoformat())
    assert iw.deliver(event) == {"batchItemFailures": []}
    assert iw.report.disrupted == [] and iw.report.errors == []       # already deleting: no second disruption
    term = w.store.get("NodeClaim", name).status["termination"]
    assert term.get("startedAt") and len(term.get("evicted") or {}) == 2   # both evicted in the invocation
    assert deleting_reason(w, name) == "ScheduledChange"
    assert w.sweep()["held"] == []                        # never held again once started


def test_a_scheduled_changes_start_is_its_drains_deadline(iw):
    """The change's start (AWS announces EC2 scheduled changes days ahead) becomes the NodeClaim's
    karpenter.sh/nodeclaim-termination-timestamp: its pods are gone by then, deleted if a PDB still holds them; a start
    already past sets none (a late notice is not a reason to skip the PDBs)."""
    from karpenter_lambda.api.times import to_epoch
    from karpenter_lambda.controllers.interruption_messages import parse_event

    w = iw.w
    a, b = iw.nodes_with_pods([1, 1], cpu="1500m")
    event = health_scheduled_change([a["instance"]["InstanceId"]], w.clock.isoformat(), notice_days=3)
    assert iw.deliver(event) == {"batchItemFailures": []}
    stamped = w.store.get("NodeClaim", a["nodeClaim"].name).annotations.get(wk.NODECLAIM_TERMINATION_TIMESTAMP_ANNOTATION)
    assert to_epoch(stamped) == parse_event(event).start == to_epoch(w.clock.isoformat()) + 3 * 86400
    late = health_scheduled_change([b["instance"]["InstanceId"]], w.clock.isoformat(), notice_days=-1)
    assert iw.deliver(late) == {"batchItemFailures": []}
    nc = w.store.get("NodeClaim", b["nodeClaim"].name)
    assert deleting_reason(w, nc.name) == "ScheduledChange"
    assert wk.NODECLAIM_TERMINATION_TIMESTAMP_ANNOTATION not in nc.annotations


def test_rebalance_replacement_is_held_by_a_do_not_disrupt_pod_and_holds_its_drain(iw_factory):
    """A rebalance recommendation is advice: its opt-in replacement is a voluntary disruption, so a do-not-disrupt pod
    holds it (no deletion that could never drain); and the deletion it does request waits for the replacement to
    initialize before evicting (termination.HOLD_FOR_REPLACEMENTS), as a scheduled change does."""
    from karpenter_lambda.controllers.termination import holds_for_replacements

    iw = iw_factory(rebalance_replace=True)
    w = iw.w
    a, b = iw.nodes_with_pods([1, 1], cpu="1500m")
    pod = next(p for p in w.server.store.list("pods") if (p.get("spec") or {}).get("nodeName") == a["node"]["metadata"]["name"])
    w.server.store.patch("pods", pod["metadata"]["name"], {"metadata": {"annotations": {
        "karpenter.sh/do-not-disrupt": "true"}}}, namespace="default")
    iw.deliver(rebalance(a["instance"]["InstanceId"], w.clock.isoformat()),
               rebalance(b["instance"]["InstanceId"], w.clock.isoformat()))
    r = iw.report
    assert [d["nodeClaim"] for d in r.disrupted] == [b["nodeClaim"].name]
    (held,) = [x for x in r.ignored if x["nodeClaim"] == a["nodeClaim"].name]
    assert "rebalance replacement blocked" in held["reason"] and "do-not-disrupt" in held["reason"]
    assert {x["nodeClaim"]: x["replace"] for x in r.rebalance} == {a["nodeClaim"].name: False, b["nodeClaim"].name: True}
    assert deleting_reason(w, a["nodeClaim"].name) is None
    assert holds_for_replacements(deleting_reason(w, b["nodeClaim"].name))
