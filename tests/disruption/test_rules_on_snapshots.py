"""The disruption rules on snapshots built with tests/builders.py: the pure planner (``plan.plan_sweep``) with the
sweeps' methods, no moto, no API server, no clock (each test runs in milliseconds).  The world-harness tests in this
folder keep the end-to-end paths (recording, re-validation, execution, events)."""

from __future__ import annotations

import pytest

import builders
from builders import DAY, LONG_AGO, T0, claimed_node, iso, nodepool, pdb, pod
from karpenter_lambda.api import hashes
from karpenter_lambda.api import labels as L
from karpenter_lambda.disruption.drift import Drift
from karpenter_lambda.disruption.emptiness import Emptiness
from karpenter_lambda.disruption.expiration import Expiration
from karpenter_lambda.disruption.plan import SweepBudgets, plan_sweep
from karpenter_lambda.disruption.repack import Repack
from karpenter_lambda.disruption.underutilized import MultiNodeConsolidation, SingleNodeConsolidation

# the two sweeps' methods, in Karpenter's order (controllers/disrupt.py SWEEP_METHODS)
CONSOLIDATION = (Emptiness(), MultiNodeConsolidation(), SingleNodeConsolidation(), Repack())
DRIFT = (Expiration(), Drift())


def snapshot(*members, nodepools=None, **kw):
    """The builders' snapshot; its NodePool allows every node at once (as the world harness's) unless given."""
    return builders.snapshot(*members, nodepools=nodepools or [nodepool(budgets=[{"nodes": "100%"}])], **kw)


def sweep(snap, methods=CONSOLIDATION, inflight=None):
    return plan_sweep(snap, list(methods), SweepBudgets(snap, inflight or {}))


def decided(plan) -> list[tuple[str, list[str]]]:
    return [(c.reason, sorted(c.names)) for c in plan.commands]


def blocked(plan) -> dict[str, tuple[str, str]]:
    """NodeClaim -> (cause, reason) of its first block."""
    out: dict[str, tuple[str, str]] = {}
    for b in plan.blocked:
        out.setdefault(b.nodeclaim, (b.cause, b.reason))
    return out


def busy(name: str, n: int = 1, cpu: str = "500m", **claim_kw):
    """A node ``name`` with ``n`` pods of app ``<name>-app`` bound to it: ((NodeClaim, Node), pods)."""
    pair = claimed_node(name, **claim_kw)
    return pair, [pod(f"{name}-app-{i}", cpu=cpu, node=f"node-{name}") for i in range(n)]


# -- emptiness ----------------------------------------------------------------------------------------------------
def test_an_empty_node_is_removed_once_consolidate_after_has_passed():
    (b, pods) = busy("b")
    empty = claimed_node("e", instance_type="c5.xlarge")
    plan = sweep(snapshot(empty, b, pods=pods, nodepools=[nodepool(consolidate_after="120s")]))
    assert decided(plan) == [("Empty", ["e"])]
    assert plan.commands[0].savings_per_hour > 0 and plan.commands[0].replacements == []


def test_a_node_is_not_empty_before_consolidate_after_nor_with_never():
    recent = claimed_node("e", last_pod_event=T0 - 60)             # a pod left a minute ago
    assert decided(sweep(snapshot(recent, nodepools=[nodepool(consolidate_after="120s")]))) == []
    assert decided(sweep(snapshot(recent, nodepools=[nodepool(consolidate_after="30s")]))) == [("Empty", ["e"])]
    for np in (nodepool(consolidate_after="Never"), nodepool(policy="WhenEmpty", consolidate_after="Never")):
        assert decided(sweep(snapshot(claimed_node("e"), nodepools=[np]))) == []


def test_a_daemonset_only_node_is_empty_but_a_bare_pod_keeps_it():
    agent = pod("agent-x", owner="DaemonSet", node="node-e")
    assert decided(sweep(snapshot(claimed_node("e"), pods=[agent]))) == [("Empty", ["e"])]
    assert ("Empty", ["e"]) not in decided(sweep(snapshot(claimed_node("e"), pods=[pod("bare", owner=None, node="node-e")])))


def test_a_node_nominated_for_a_pending_pod_is_kept():
    late = pod("late")
    plan = sweep(snapshot(claimed_node("e"), pods=[late], reservations={late["metadata"]["uid"]: "e"}))
    assert decided(plan) == []
    assert blocked(plan)["e"] == ("would leave pods pending", "Empty")
    assert "nominated for pending pod default/late" in plan.blocked[0].message


def test_emptiness_comes_first_and_ends_the_sweep():
    (a, pa), (b, pb) = busy("a"), busy("b")
    plan = sweep(snapshot(a, b, claimed_node("e"), pods=pa + pb))
    assert decided(plan) == [("Empty", ["e"])]          # no consolidation of a/b in the same sweep


# -- consolidation: delete, single-node replace, multi-node replace -------------------------------------------------
def test_an_underused_node_is_deleted_when_its_pods_fit_elsewhere():
    (a, pa), (b, pb) = busy("a", instance_type="c5.large"), busy("b", instance_type="c5.large")
    plan = sweep(snapshot(a, b, pods=pa + pb))
    [(reason, names)] = decided(plan)
    assert reason == "Underutilized" and len(names) == 1
    cmd = plan.commands[0]
    assert cmd.replacements == [] and cmd.savings_per_hour > 0


def test_when_empty_never_consolidates_a_non_empty_node():
    (a, pa), (b, pb) = busy("a", instance_type="c5.large"), busy("b", instance_type="c5.large")
    assert decided(sweep(snapshot(a, b, pods=pa + pb, nodepools=[nodepool(policy="WhenEmpty")]))) == []


def test_a_single_expensive_node_is_replaced_by_a_cheaper_type():
    (x, px) = busy("x", instance_type="m5.2xlarge")
    plan = sweep(snapshot(x, pods=px))
    assert decided(plan) == [("Underutilized", ["x"])]
    (rep,) = plan.commands[0].replacements
    assert rep.instance_type != "m5.2xlarge" and rep.price < float(x[0].annotations[L.PRICE_ANNOTATION])


def test_three_one_pod_nodes_are_replaced_by_one():
    members, pods = [], []
    for name in ("a", "b", "c"):
        m, p = busy(name, instance_type="m5.2xlarge", zone="us-east-1a")
        members.append(m)
        pods += p
    plan = sweep(snapshot(*members, pods=pods))
    cmd = plan.commands[0]
    assert cmd.reason == "Underutilized" and sorted(cmd.names) == ["a", "b", "c"]
    (rep,) = cmd.replacements
    assert rep.price < 3 * float(members[0][0].annotations[L.PRICE_ANNOTATION]) and cmd.savings_per_hour > 0


def test_no_move_when_the_cheapest_type_that_fits_is_the_one_it_runs():
    (x, px) = busy("x", cpu="1500m", instance_type="c5.large")
    plan = sweep(snapshot(x, pods=px))
    assert decided(plan) == []
    assert blocked(plan)["x"] == ("no cheaper replacement", "Underutilized")


def test_a_move_that_would_break_required_anti_affinity_is_not_taken():
    anti = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "solo"}}, "topologyKey": L.HOSTNAME}]}}}
    members = [claimed_node(n, instance_type="c5.large") for n in ("a", "b")]
    pods = [pod(f"solo-{n}", cpu="250m", app="solo", node=f"node-{n}", **anti) for n in ("a", "b")]
    plan = sweep(snapshot(*members, pods=pods))
    assert decided(plan) == []
    assert {n: c for n, (c, _) in blocked(plan).items()} == {"a": "no cheaper replacement", "b": "no cheaper replacement"}
    for p in pods:                                                       # the same pods without the rule: one goes
        del p["spec"]["affinity"]
    assert [r for r, _ in decided(sweep(snapshot(*members, pods=pods)))] == ["Underutilized"]


def test_a_candidate_single_node_tried_says_why_not_that_multi_node_left_it_out_for_the_budget():
    """Budget 1: multi-node takes only the first candidate for its groups; single-node then tries each in turn and
    finds no move.  What a NodeClaim shows is single-node's finding, not "held by the candidate considered before"
    (that one was never disrupted)."""
    anti = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "solo"}}, "topologyKey": L.HOSTNAME}]}}}
    members = [claimed_node(n, instance_type="c5.large") for n in ("a", "b", "c")]
    pods = [pod(f"solo-{n}", cpu="250m", app="solo", node=f"node-{n}", **anti) for n in ("a", "b", "c")]
    plan = sweep(snapshot(*members, pods=pods, nodepools=[nodepool(budgets=[{"nodes": "1"}])]))
    assert decided(plan) == []
    assert {n: c for n, (c, _) in blocked(plan).items()} == {n: "no cheaper replacement" for n in "abc"}
    assert not any("considered before" in b.message for b in plan.blocked)
    # a NodePool whose budget is spent still says so
    plan = sweep(snapshot(*members, pods=pods, nodepools=[nodepool(budgets=[{"nodes": "1"}])]), inflight={"x": "default"})
    assert set(blocked(plan).values()) == {("budget", "Underutilized")}


# -- budgets ------------------------------------------------------------------------------------------------------
def test_a_zero_budget_blocks_with_an_explanation():
    plan = sweep(snapshot(claimed_node("e"), nodepools=[nodepool(budgets=[{"nodes": "0"}])]))
    assert decided(plan) == [] and blocked(plan) == {"e": ("budget", "Empty")}
    assert plan.blocked[0].message.startswith("budget Empty 0 of 0 left")


def test_thirty_percent_of_ten_empty_nodes_is_three_per_sweep():
    empties = [claimed_node(f"e{i}") for i in range(10)]
    plan = sweep(snapshot(*empties, nodepools=[nodepool(budgets=[{"nodes": "30%"}])]))
    assert [r for r, _ in decided(plan)] == ["Empty"] * 3
    assert sum(1 for c, _ in blocked(plan).values() if c == "budget") == 7


def test_budgets_per_reason_let_empty_go_and_hold_underutilized():
    (a, pa), (b, pb) = busy("a", instance_type="c5.large"), busy("b", instance_type="c5.large")
    np = nodepool(budgets=[{"nodes": "0", "reasons": ["Underutilized"]}, {"nodes": "100%"}])
    assert decided(sweep(snapshot(a, b, claimed_node("e"), pods=pa + pb, nodepools=[np]))) == [("Empty", ["e"])]
    plan = sweep(snapshot(a, b, pods=pa + pb, nodepools=[np]))
    assert decided(plan) == [] and ("budget", "Underutilized") in blocked(plan).values()


def test_nodes_in_flight_count_against_the_budget():
    empties = [claimed_node(f"e{i}") for i in range(4)]
    np = nodepool(budgets=[{"nodes": "2"}])
    assert len(sweep(snapshot(*empties, nodepools=[np])).commands) == 2
    plan = sweep(snapshot(*empties, nodepools=[np]), inflight={"e0": "default"})
    assert len(plan.commands) == 1 and "e0" not in {n for _, names in decided(plan) for n in names}


def test_a_zero_budget_inside_its_cron_window_only():
    window = [{"nodes": "0", "schedule": "0 0 * * *", "duration": "2h"}]   # T0 is 00:53 UTC
    assert decided(sweep(snapshot(claimed_node("e"), nodepools=[nodepool(budgets=window)]))) == []
    later = snapshot(claimed_node("e"), nodepools=[nodepool(budgets=window)], now=T0 + 3 * 3600)
    assert decided(sweep(later)) == [("Empty", ["e"])]


# -- blockers -------------------------------------------------------------------------------------------------------
def test_do_not_disrupt_on_a_pod_and_on_a_node_and_a_pdb_hold_consolidation():
    a = claimed_node("a", instance_type="c5.large")
    b = claimed_node("b", instance_type="c5.large")
    c = claimed_node("c", instance_type="c5.large", node_annotations={L.DO_NOT_DISRUPT: "true"})
    pods = [pod("keep-1", cpu="250m", node="node-a", annotations={L.DO_NOT_DISRUPT: "true"}),
            pod("guarded-1", cpu="250m", node="node-b"), pod("free-1", cpu="250m", node="node-c")]
    plan = sweep(snapshot(a, b, c, pods=pods, pdbs=[pdb("guard", app="guarded", maxUnavailable=0)]))
    assert decided(plan) == []
    assert {n: cause for n, (cause, _) in blocked(plan).items()} == {"a": "do-not-disrupt", "b": "PDB", "c": "do-not-disrupt"}


def test_a_do_not_disrupt_duration_blocks_only_until_it_lapses():
    p = pod("keep-1", node="node-e", owner="DaemonSet", created=T0 - 600, annotations={L.DO_NOT_DISRUPT: "30m"})
    plan = sweep(snapshot(claimed_node("e"), pods=[p]))
    assert decided(plan) == [] and blocked(plan)["e"][0] == "do-not-disrupt" and "(1200s left)" in plan.blocked[0].message
    assert decided(sweep(snapshot(claimed_node("e"), pods=[p], now=T0 + 1201))) == [("Empty", ["e"])]


# -- drift --------------------------------------------------------------------------------------------------------
def _stamped(name, np, **kw):
    """A node launched from ``np`` as it was: the NodePool hash stamped on its NodeClaim."""
    return claimed_node(name, annotations={L.NODEPOOL_HASH: hashes.nodepool_hash(np),
                                           L.NODEPOOL_HASH_VERSION: hashes.NODEPOOL_HASH_VERSION}, **kw)


def test_a_nodepool_template_change_drifts_and_a_busy_node_gets_a_replacement():
    old = nodepool()
    new = nodepool(labels=None, requirements=[{"key": L.ARCH, "operator": "In", "values": ["amd64"]},
                                               {"key": "team", "operator": "In", "values": ["a"]}])
    x, px = _stamped("x", old), [pod("web-1", node="node-x")]
    assert decided(sweep(snapshot(x, pods=px, nodepools=[old]), DRIFT)) == []
    plan = sweep(snapshot(x, pods=px, nodepools=[new]), DRIFT)
    assert decided(plan) == [("Drifted", ["x"])]
    assert plan.commands[0].detail in ("NodePoolDrifted", "RequirementsDrifted") and len(plan.commands[0].replacements) == 1


def test_requirement_drift_and_widening_a_list_never_drifts():
    on_demand = claimed_node("x")
    spot_only = nodepool(capacity_types=("spot",))
    plan = sweep(snapshot(on_demand, nodepools=[spot_only]), DRIFT)
    assert decided(plan) == [("Drifted", ["x"])] and plan.commands[0].detail == "RequirementsDrifted"
    wider = nodepool(capacity_types=("spot", "on-demand"))
    assert decided(sweep(snapshot(on_demand, nodepools=[wider]), DRIFT)) == []


def test_an_instance_type_gone_from_the_catalog_drifts():
    from builders import instance_types

    x = claimed_node("x", instance_type="m5.large")
    others = [t for t in instance_types() if t.name != "m5.large"]
    plan = sweep(snapshot(x, instance_types={"default": others}), DRIFT)
    assert decided(plan) == [("Drifted", ["x"])] and plan.commands[0].detail == "InstanceTypeNotFound"


def test_a_pdb_holds_a_drift_unless_the_nodeclaim_has_a_termination_grace_period():
    guard = pdb("guard", app="web", maxUnavailable=0)
    pods = [pod("web-1", node="node-x")]
    held = sweep(snapshot(claimed_node("x"), pods=pods, pdbs=[guard], nodepools=[nodepool(capacity_types=("spot",))]), DRIFT)
    assert decided(held) == [] and blocked(held) == {"x": ("PDB", "Drifted")}
    tgp = claimed_node("x", spec={"terminationGracePeriod": "1h"})
    plan = sweep(snapshot(tgp, pods=pods, pdbs=[guard], nodepools=[nodepool(capacity_types=("spot",))]), DRIFT)
    assert decided(plan) == [("Drifted", ["x"])]


# -- expiration -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("age_days, expires", [(29, False), (31, True)])
def test_expiration_is_forceful_and_not_held_by_budgets_or_blockers(age_days, expires):
    x = claimed_node("x", created=T0 - age_days * DAY)
    pods = [pod("keep-1", node="node-x", annotations={L.DO_NOT_DISRUPT: "true"})]
    np = nodepool(expire_after="720h", budgets=[{"nodes": "0"}])
    plan = sweep(snapshot(x, pods=pods, nodepools=[np]), DRIFT)
    assert decided(plan) == ([("Expired", ["x"])] if expires else [])
    if expires:
        assert plan.commands[0].forceful and "expireAfter 720h elapsed" in plan.commands[0].detail


def test_the_builders_make_consistent_objects():
    nc, node = claimed_node("a", instance_type="c5.xlarge", zone="us-east-1b", capacity_type="spot")
    snap = snapshot((nc, node), pods=[pod("web-1", node="node-a")])
    assert snap.node_of_nodeclaim("a") is node and snap.nodeclaim_of_node("node-a") is nc
    assert node["metadata"]["labels"][L.INSTANCE_TYPE] == "c5.xlarge" == nc.labels[L.INSTANCE_TYPE]
    assert nc.labels[L.ZONE] == "us-east-1b" and nc.labels[L.CAPACITY_TYPE] == "spot"
    assert float(nc.annotations[L.PRICE_ANNOTATION]) > 0 and nc.is_true("Initialized")
    assert [p["metadata"]["name"] for p in snap.pods_of_nodeclaim("a")] == ["web-1"]
    assert nc.status["lastPodEventTime"] == iso(LONG_AGO) and snap.now == T0
    assert pod("late")["status"]["phase"] == "Pending" and "nodeName" not in pod("late")["spec"]


def test_a_nodeclaim_in_a_reservation_that_no_longer_resolves_drifts():
    """Capacity reservations (issue 30 item 4): a reserved NodeClaim drifts when its reservation leaves the
    EC2NodeClass's resolved set; not while it is there, and not when the reservations could not be described."""
    from types import SimpleNamespace

    from karpenter_lambda.catalog.reservations import CapacityReservation

    labels = {L.CAPACITY_RESERVATION_ID: "cr-1", L.CAPACITY_RESERVATION_TYPE: "default"}
    x = claimed_node("x", capacity_type=L.CAPACITY_TYPE_RESERVED, labels=labels, price_per_hour=0.0)
    pool = nodepool(capacity_types=("reserved", "on-demand"))

    def plan_with(reservations, ready=True):
        snap = snapshot(x, nodepools=[pool])
        cond = SimpleNamespace(type="CapacityReservationsReady", status=ready)
        snap.resolved["default"] = SimpleNamespace(amis=[], subnets=[], security_group_ids=[], conditions=[cond],
                                                   capacity_reservations=reservations)
        return sweep(snap, DRIFT)

    cr1 = CapacityReservation(id="cr-1", instance_type="m5.large", zone="us-east-1a", available=0, total=1)
    assert decided(plan_with([cr1])) == []
    plan = plan_with([])
    assert decided(plan) == [("Drifted", ["x"])] and plan.commands[0].detail == "CapacityReservationDrift"
    assert decided(plan_with([], ready=False)) == []


def test_a_nodeclaim_in_a_capacity_block_ending_within_40_minutes_goes_as_expiration_does():
    """Capacity blocks (issue 30 item 4): karpenter-provider-aws deletes the NodeClaims of a block 40 minutes before
    it ends; here the drift sweep's expiration takes them (forceful, replacement first), not before."""
    from types import SimpleNamespace

    from karpenter_lambda.catalog.reservations import STATE_ACTIVE, STATE_EXPIRING, CapacityReservation

    labels = {L.CAPACITY_RESERVATION_ID: "cr-block", L.CAPACITY_RESERVATION_TYPE: "capacity-block"}
    x = claimed_node("x", capacity_type=L.CAPACITY_TYPE_RESERVED, labels=labels, price_per_hour=0.0)
    pool = nodepool(capacity_types=("reserved", "on-demand"))

    def plan_with(state):
        snap = snapshot(x, nodepools=[pool])
        block = CapacityReservation(id="cr-block", instance_type="m5.large", zone="us-east-1a",
                                    reservation_type="capacity-block", available=0, total=1, state=state)
        snap.resolved["default"] = SimpleNamespace(amis=[], subnets=[], security_group_ids=[], conditions=[],
                                                   capacity_reservations=[block])
        return sweep(snap, DRIFT)

    assert decided(plan_with(STATE_ACTIVE)) == []
    plan = plan_with(STATE_EXPIRING)
    assert decided(plan) == [("Expired", ["x"])] and "capacity block cr-block ends" in plan.commands[0].detail


def test_the_empty_replacement_of_a_command_in_flight_is_not_consolidated():
    """A replacement whose candidate is still there is waiting for that candidate's pods: not Empty, not a candidate
    (deleting it abandoned the command); once the candidate is gone it is an ordinary node."""
    lead = busy("old", n=1)
    rep = claimed_node("new", annotations={L.REPLACES_ANNOTATION: L.encode_replaces(["old"])})
    snap = snapshot(lead[0], rep, pods=lead[1])
    plan = sweep(snap, inflight={"old": "Underutilized"})   # the command is in flight: "old" is in the ledger
    assert all("new" not in names for _reason, names in decided(plan))
    assert [b.message for b in plan.blocked if b.nodeclaim == "new"] == ["replacement for NodeClaim old in flight"]


def test_the_kept_replacement_of_an_abandoned_command_is_an_ordinary_node():
    """A consolidation audit: a command abandoned at its last look ("1 more node(s) needed since the plan;
    replacements kept") left its replacement annotated; with "old" no longer in flight it was still blocked as "in
    flight", and the next sweep launched a second replacement beside the idle one.  It is consolidated as any node."""
    lead = busy("old", n=1)
    rep = claimed_node("new", annotations={L.REPLACES_ANNOTATION: L.encode_replaces(["old"])})
    plan = sweep(snapshot(lead[0], rep, pods=lead[1]))            # no ledger entry: the command is over
    assert ("Empty", ["new"]) in decided(plan)
    assert not [b for b in plan.blocked if b.nodeclaim == "new"]


def test_the_empty_replacement_of_a_node_still_draining_is_kept_for_its_pods():
    """Seen in a simulation: an expired node's drain waited for its terminationGracePeriod (a PDB allowed no
    eviction); its replacement, empty meanwhile, was removed as Empty after consolidateAfter, and the pod, evicted at
    the deadline, waited for a new node.  While the node it replaces still has pods to move, it is not Empty."""
    old, pods = busy("old", n=1)
    old[0].metadata["deletionTimestamp"] = iso(T0 - 600)                  # deleting: its drain is under way
    rep = claimed_node("new", annotations={L.REPLACES_ANNOTATION: L.encode_replaces(["old"])})
    plan = sweep(snapshot(old, rep, pods=pods))
    assert decided(plan) == []
    assert [b.message for b in plan.blocked if b.nodeclaim == "new"] == [
        "replacement for NodeClaim old, whose pods are still being drained"]
    assert decided(sweep(snapshot(old, rep))) == [("Empty", ["new"])]    # drained: an ordinary empty node
    alone = snapshot(claimed_node("new", annotations={L.REPLACES_ANNOTATION: L.encode_replaces(["old"])}))
    assert decided(sweep(alone)) == [("Empty", ["new"])]


def test_a_nodeclaim_not_launched_yet_never_drifts():
    """Only launched NodeClaims drift (Karpenter): one still launching has no labels to compare."""
    x = claimed_node("x")
    x[0].doc["status"]["conditions"] = [c for c in x[0].doc["status"]["conditions"] if c["type"] != "Launched"]
    spot_only = nodepool(capacity_types=("spot",))
    assert decided(sweep(snapshot(x, nodepools=[spot_only]), DRIFT)) == []


# -- minValues in consolidation's replacements --------------------------------------------------------------------
def _min_values_pool(n: int):
    return nodepool(budgets=[{"nodes": "100%"}], requirements=[
        {"key": L.ARCH, "operator": "In", "values": ["amd64"]},
        {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
        {"key": "karpenter.k8s.aws/instance-family", "operator": "Exists", "minValues": n}])


def test_a_replacement_whose_cheaper_types_offer_too_few_families_is_refused():
    """Karpenter filters a replacement's types by price and minValues together (every minValues, not only the
    instance type's): an m5.large whose only cheaper holder is c5.large (one family) is not replaced under
    ``instance-family minValues: 2``, and the reason names the key; with minValues 1 it is."""
    (m, pods) = busy("m", cpu="500m", instance_type="m5.large")
    plan = sweep(snapshot(m, pods=pods, nodepools=[_min_values_pool(2)]))
    assert decided(plan) == []
    (b,) = [b for b in plan.blocked if b.nodeclaim == "m"]
    assert (b.cause, b.message) == ("no cheaper replacement", "minValues 2 for karpenter.k8s.aws/instance-family not met "
                                                              "by the 1 cheaper instance types (1 values)")
    plan = sweep(snapshot(m, pods=pods, nodepools=[_min_values_pool(1)]))
    assert decided(plan) == [("Underutilized", ["m"])]
    assert [it.name for it in plan.commands[0].replacements[0].instance_types] == ["c5.large"]


def test_under_min_values_a_node_the_cheapest_packing_splits_in_two_is_replaced_by_one():
    """Three pods of 1.5 CPU on an m5.2xlarge: the provisioning solver's cheapest packing is two new nodes (a
    c5.xlarge and a c5.large), which consolidation may not make; one c5.2xlarge holds them and is cheaper.  That
    one-node retry used to be skipped whenever the NodePool had a minValues, leaving the node as it was forever."""
    (m, pods) = busy("m", n=3, cpu="1500m", instance_type="m5.2xlarge")
    plan = sweep(snapshot(m, pods=pods, nodepools=[_min_values_pool(1)]))
    assert decided(plan) == [("Underutilized", ["m"])]
    (replacement,) = plan.commands[0].replacements
    assert replacement.instance_type == "c5.2xlarge" and len(replacement.pods) == 3
