"""Balanced consolidation (issue 30 item 1) on small snapshots: the score, and a NodePool that keeps a node whose
move saves 2% of its price and removes one whose move saves 40% (pure: tests/builders.py, milliseconds)."""

from __future__ import annotations

import math

import pytest

import builders
from builders import ZONES, claimed_node, nodepool, pod
from karpenter_lambda.api import labels as L
from karpenter_lambda.disruption.balanced import (BALANCED_K, BLOCK_BALANCED, Totals, node_disruption,
                                                  nodepool_totals, score_candidates, score_move)
from karpenter_lambda.disruption.candidates import build_candidates
from karpenter_lambda.disruption.consolidation import consolidation_option
from karpenter_lambda.disruption.emptiness import Emptiness
from karpenter_lambda.disruption.plan import SweepBudgets, plan_sweep
from karpenter_lambda.disruption.repack import Repack
from karpenter_lambda.disruption.underutilized import MultiNodeConsolidation, SingleNodeConsolidation

CONSOLIDATION = (Emptiness(), MultiNodeConsolidation(), SingleNodeConsolidation(), Repack())
DND = {L.DO_NOT_DISRUPT: "true"}


# -- the score ------------------------------------------------------------------------------------------------------
def test_the_score_is_the_savings_share_over_the_disruption_share():
    # the RFC's examples: a NodePool of $58.08/day and 80 pods (disruption 80 + 10 nodes)
    totals = Totals(price=58.08, disruption=90.0)
    oversized = score_move("p", 7.26, 4.0, totals)            # 3 pods + the node's base
    assert oversized.approved and oversized.score == pytest.approx((7.26 / 58.08) / (4 / 90))
    marginal = score_move("p", 2.42, 9.0, totals)             # 8 pods: saves 4.2% for 10% of the disruption
    assert not marginal.approved and marginal.score == pytest.approx(0.4167, abs=1e-3)
    assert marginal.threshold == 1 / BALANCED_K == 0.5
    # a uniform NodePool: a replace saving exactly half a node's price is the boundary at k = 2
    assert score_move("p", 0.5, 1.0, Totals(price=10.0, disruption=10.0)).approved
    assert not score_move("p", 0.49, 1.0, Totals(price=10.0, disruption=10.0)).approved
    # no savings (a same-price replace) is never approved; no disruption at all is
    assert not score_move("p", 0.0, 1.0, Totals(10.0, 10.0)).approved
    assert math.isinf(score_move("p", 1.0, 0.0, Totals(10.0, 10.0)).score)
    assert "score 0.42 < 0.50" in marginal.text() and "4.2% of NodePool p's price" in marginal.text()


def test_a_nodes_disruption_counts_a_base_and_the_pods_eviction_costs_never_below_zero():
    plain = [pod(f"w-{i}", node="n") for i in range(3)]
    assert node_disruption([]) == 1.0 and node_disruption(plain) == 4.0
    precious = pod("model", node="n", annotations={"controller.kubernetes.io/pod-deletion-cost": str(2 ** 31 - 1)})
    assert node_disruption([precious]) == 1.0 + 10.0                      # clamped at 10
    cheap = pod("scratch", node="n", priority=-(2 ** 30))
    assert node_disruption([cheap]) == 1.0                                # max(0, -10)
    agent = pod("agent", node="n", owner="DaemonSet")
    assert node_disruption([agent]) == 1.0                                # not reschedulable: not evicted for a move


def test_a_move_over_two_nodepools_is_scored_per_balanced_nodepool_on_its_share_of_the_savings():
    a = claimed_node("a", instance_type="m5.xlarge", nodepool="bal")
    b = claimed_node("b", instance_type="m5.xlarge", nodepool="other")
    snap = builders.snapshot(a, b, nodepools=[nodepool("bal", policy="Balanced"), nodepool("other")])
    cands, _ = build_candidates(snap)
    totals = nodepool_totals(snap)
    assert set(totals) == {"bal"} and totals["bal"].disruption == 1.0
    s = score_candidates(cands, 0.2, totals)
    assert s.nodepool == "bal" and s.savings == pytest.approx(0.1)      # half the savings: half the price
    assert score_candidates([c for c in cands if c.name == "b"], 0.2, totals) is None   # not Balanced: no score


# -- a Balanced NodePool keeps the 2% move and takes the 40% one ----------------------------------------------------
def _pool(policy: str = "Balanced"):
    """h: an m5.2xlarge held by a do-not-disrupt pod (6 CPUs), in zone a; b: an m5.2xlarge left with one small pod,
    zone a; a: an m5.xlarge whose one pod (3 CPUs) must stay in zone b.  b's pod fits on h (deleting b saves 40% of
    the NodePool's price); a's pod fits nowhere but on a new node in zone b, the cheapest a c5.xlarge (saves 2.3%)."""
    h = claimed_node("h", instance_type="m5.2xlarge", zone=ZONES[0])
    b = claimed_node("b", instance_type="m5.2xlarge", zone=ZONES[0])
    a = claimed_node("a", instance_type="m5.xlarge", zone=ZONES[1])
    pods = [pod("hold-0", cpu="6", node="node-h", annotations=DND), pod("batch-0", cpu="500m", node="node-b"),
            pod("zonal-0", cpu="3", node="node-a", nodeSelector={L.ZONE: ZONES[1]})]
    np = nodepool(policy=policy, budgets=[{"nodes": "1"}])
    return builders.snapshot(h, b, a, pods=pods, nodepools=[np]), pods


def _option(snap, name):
    cands, _ = build_candidates(snap)
    return consolidation_option(snap, [c for c in cands if c.name == name])


def test_the_40_percent_move_is_approved_and_the_2_percent_move_rejected():
    snap, _ = _pool()
    price = sum(builders.price(t) for t in ("m5.2xlarge", "m5.2xlarge", "m5.xlarge"))
    b = _option(snap, "b")
    assert b.valid and b.action == "delete" and b.score.approved
    assert b.score.savings_fraction == pytest.approx(builders.price("m5.2xlarge") / price) == pytest.approx(0.4)
    a = _option(snap, "a")
    assert a.action == "replace" and a.replacement.instance_type == "c5.xlarge"
    assert a.score.savings_fraction == pytest.approx(
        (builders.price("m5.xlarge") - builders.price("c5.xlarge")) / price) == pytest.approx(0.023, abs=1e-3)
    assert not a.valid and not a.score.approved and a.score.score < 0.1
    assert a.reason.startswith("balanced: score 0.0") and "< 0.50" in a.reason
    # the same move in a WhenEmptyOrUnderutilized NodePool: any saving goes
    plain, _ = _pool("WhenEmptyOrUnderutilized")
    a = _option(plain, "a")
    assert a.valid and a.score is None and a.replacement.instance_type == "c5.xlarge"


def test_a_balanced_nodepool_removes_the_40_percent_node_and_keeps_the_2_percent_one():
    snap, pods = _pool()
    first = plan_sweep(snap, list(CONSOLIDATION), SweepBudgets(snap, {}))
    assert [(c.reason, c.names) for c in first.commands] == [("Underutilized", ["b"])]
    cmd = first.commands[0]
    assert cmd.score.approved and cmd.replacements == [] and "balanced score" in cmd.detail
    # the next sweep, b gone and its pod on h: a's only move is the 2% replace, rejected with its score
    h = claimed_node("h", instance_type="m5.2xlarge", zone=ZONES[0])
    a = claimed_node("a", instance_type="m5.xlarge", zone=ZONES[1])
    moved = [pods[0], {**pods[1], "spec": {**pods[1]["spec"], "nodeName": "node-h"}}, pods[2]]
    after = builders.snapshot(h, a, pods=moved, nodepools=list(snap.nodepools.values()))
    second = plan_sweep(after, list(CONSOLIDATION), SweepBudgets(after, {}))
    assert second.commands == []
    why = next(b for b in second.blocked if b.nodeclaim == "a")
    assert why.cause == BLOCK_BALANCED and why.reason == "Underutilized"
    assert why.score is not None and not why.score.approved and why.score.savings_fraction < 0.05
    assert "< 0.50" in why.message and "saves" in why.message


def test_single_node_skips_the_simulation_when_even_a_delete_scores_too_low():
    # a: 3 pods with the highest deletion cost on a small node; h: a big cheap-to-disrupt node with room
    h = claimed_node("h", instance_type="m5.2xlarge")
    a = claimed_node("a", instance_type="m5.large")
    precious = {"controller.kubernetes.io/pod-deletion-cost": str(2 ** 31 - 1)}
    pods = [pod(f"model-{i}", cpu="100m", node="node-a", annotations=precious) for i in range(3)]
    pods += [pod(f"web-{i}", cpu="100m", node="node-h", annotations=DND) for i in range(2)]
    snap = builders.snapshot(h, a, pods=pods, nodepools=[nodepool(policy="Balanced", budgets=[{"nodes": "100%"}])])
    ctx = SweepBudgets(snap, {})
    plan = plan_sweep(snap, [SingleNodeConsolidation()], ctx)
    assert plan.commands == [] and ctx.evaluations == 0
    why = next(b for b in plan.blocked if b.nodeclaim == "a")
    assert why.cause == BLOCK_BALANCED and "even a delete would have score" in why.message


def test_an_empty_node_of_a_balanced_nodepool_is_removed_with_its_score_shown():
    busy = claimed_node("b", instance_type="m5.xlarge")
    empty = claimed_node("e", instance_type="m5.large")
    snap = builders.snapshot(busy, empty, pods=[pod("w-0", node="node-b", annotations=DND)],
                             nodepools=[nodepool(policy="Balanced", budgets=[{"nodes": "100%"}])])
    plan = plan_sweep(snap, list(CONSOLIDATION), SweepBudgets(snap, {}))
    assert [(c.reason, c.names) for c in plan.commands] == [("Empty", ["e"])]
    assert plan.commands[0].score.approved and "balanced score" in plan.commands[0].detail


def test_an_empty_node_is_never_taken_by_consolidation_past_an_empty_budget_of_zero():
    """Karpenter's consolidation skips empty nodes (they are Emptiness's, under the Empty budget): with Empty at 0,
    the empty nodes stay, and only the busy node is consolidated (its pod moves to the node held by do-not-disrupt)."""
    hold = claimed_node("h", instance_type="m5.2xlarge")
    busy = claimed_node("b", instance_type="m5.xlarge")
    e1, e2 = claimed_node("e1", instance_type="m5.large"), claimed_node("e2", instance_type="m5.large")
    pods = [pod("w-0", cpu="500m", node="node-h", annotations=DND), pod("w-1", cpu="500m", node="node-b")]
    budgets = [{"nodes": "0", "reasons": ["Empty"]}, {"nodes": "100%"}]
    for policy in ("WhenEmptyOrUnderutilized", "Balanced"):
        snap = builders.snapshot(hold, busy, e1, e2, pods=pods, nodepools=[nodepool(policy=policy, budgets=budgets)])
        plan = plan_sweep(snap, list(CONSOLIDATION), SweepBudgets(snap, {}))
        taken = sorted(n for c in plan.commands for n in c.names)
        assert taken == ["b"], (policy, [(c.reason, c.names) for c in plan.commands])
        assert {b.nodeclaim for b in plan.blocked if b.reason == "Empty" and b.cause == "budget"} == {"e1", "e2"}
