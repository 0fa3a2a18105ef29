"""The sweep context (issue 22), on snapshots built in memory: the one allowance rule as the sweeps, the ledger and
interruption count it, SweepContext.derive, the named caches, and a method deciding within the budget. Milliseconds,
no world."""

from datetime import datetime, timezone

from karpenter_lambda.api.budgets import allowance
from karpenter_lambda.api.objects import NodeClaim, NodePool
from karpenter_lambda.api.snapshot import ClusterSnapshot
from karpenter_lambda.disruption.budgets import count_nodes, nodepool_allowance, reservation_limit
from karpenter_lambda.disruption.candidates import build_candidates, graceful_blockers
from karpenter_lambda.disruption.consolidation import apply_option, window_nodes
from karpenter_lambda.disruption.context import SnapshotCaches, SweepContext
from karpenter_lambda.disruption.emptiness import Emptiness
from karpenter_lambda.disruption.pdb import pdb_index
from karpenter_lambda.disruption.plan import SweepBudgets
from karpenter_lambda.disruption.types import Option

NOW = datetime(2026, 6, 1, 10, 0, tzinfo=timezone.utc).timestamp()
EARLIER = "2026-06-01T08:00:00Z"


def nodepool(name="p", budgets=None, policy="WhenEmpty", after="0s") -> NodePool:
    disruption = {"consolidationPolicy": policy, "consolidateAfter": after}
    if budgets is not None:
        disruption["budgets"] = budgets
    return NodePool({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
                     "spec": {"disruption": disruption, "template": {"spec": {"requirements": []}}}})


def nodeclaim(name, pool="p", price=0.1, deleting=False) -> NodeClaim:
    meta = {"name": name, "creationTimestamp": EARLIER,
            "labels": {"karpenter.sh/nodepool": pool, "node.kubernetes.io/instance-type": "m5.large",
                       "topology.kubernetes.io/zone": "us-east-1a", "karpenter.sh/capacity-type": "on-demand"},
            "annotations": {"karpenter-lambda.io/price-per-hour": str(price)}}
    if deleting:
        meta["deletionTimestamp"] = EARLIER
    return NodeClaim({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": meta, "spec": {},
                      "status": {"providerID": f"aws:///us-east-1a/i-{name}", "nodeName": f"n-{name}",
                                 "conditions": [{"type": "Initialized", "status": "True",
                                                 "lastTransitionTime": EARLIER}]}})


def node(name, ready=True) -> dict:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"n-{name}", "labels": {"karpenter.sh/nodepool": "p"}},
            "spec": {"providerID": f"aws:///us-east-1a/i-{name}"},
            "status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pod(name, on=None, labels=None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"u-{name}", "labels": labels or {},
                         "creationTimestamp": EARLIER, "ownerReferences": [{"kind": "ReplicaSet", "name": "rs"}]},
            "spec": {"nodeName": f"n-{on}" if on else None,
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def snapshot(names=("a", "b", "c", "d"), budgets=None, not_ready=(), deleting=(), pods=(), pdbs=()) -> ClusterSnapshot:
    return ClusterSnapshot(now=NOW, nodepools={"p": nodepool(budgets=budgets)},
                           nodeclaims={n: nodeclaim(n, deleting=n in deleting) for n in names},
                           nodes=[node(n, ready=n not in not_ready) for n in names], pods=list(pods), pdbs=list(pdbs))


def test_the_sweeps_count_not_ready_deleting_and_recorded_nodes_against_the_budget():
    snap = snapshot(names=("a", "b", "c", "d", "e", "f", "g", "h", "i", "j"), budgets=[{"nodes": "30%"}],
                    not_ready=("a",), deleting=("b",))
    count = count_nodes(snap, "p", recorded={"c"})
    assert (count.total, count.external, count.recorded, count.disrupting) == (10, 2, 1, 3)
    ctx = SweepContext(snap, {"c": "p"})
    a = ctx.budgets.allowance("p", "Empty")
    assert (a.limit, a.disrupting, a.allowed) == (3, 3, 0)
    assert a == allowance(snap.nodepools["p"].budgets, "Empty", total_nodes=10, disrupting=3, now=NOW, nodepool="p")
    assert not ctx.budgets.available("p", "Empty")
    assert ctx.exclude == {"c"}


def test_the_ledger_condition_is_the_same_rule_as_one_more_allowed():
    snap = snapshot(names=tuple("abcdefghij"), budgets=[{"nodes": "40%"}], not_ready=("a",))
    for recorded in range(0, 6):
        names = set("bcdefg"[:recorded])
        a, count = nodepool_allowance(snap, "p", "Drifted", names)
        assert (recorded <= reservation_limit(a, count)) == (a.allowed >= 1), recorded
    a, count = nodepool_allowance(snapshot(budgets=[]), "p", "Drifted")
    assert a.limit is None and reservation_limit(a, count) is None


def test_taking_the_budget_holds_later_candidates():
    snap = snapshot(budgets=[{"nodes": "2"}])
    ctx = SweepBudgets(snap, {})   # the former name is the context
    assert isinstance(ctx, SweepContext) and ctx.left("p", "Empty") == 2
    ctx.take("p", "Empty")
    assert ctx.budgets.left("p", "Empty") == 1 and ctx.budgets.taken == {"p": 1}


def test_emptiness_removes_empty_nodes_within_the_budget_and_says_why_the_others_stay():
    snap = snapshot(budgets=[{"nodes": "2"}], pods=[pod("web", on="d")])
    ctx = SweepContext(snap)
    method = Emptiness()
    cands, _ = build_candidates(snap)
    eligible = [c for c in cands if method.should_disrupt(c, snap)]
    assert sorted(c.name for c in eligible) == ["a", "b", "c"]   # d runs a pod
    cmds, blocked = method.compute_commands(ctx, eligible, snap)
    assert [c.names for c in cmds] == [["a"], ["b"]]
    assert [(b.nodeclaim, b.cause) for b in blocked] == [("c", "budget")]
    assert blocked[0].message == 'budget Empty 0 of 2 left (budgets[0] nodes="2")'


def test_the_pdb_index_is_computed_once_per_snapshot_and_kept_in_the_context():
    pdb = {"metadata": {"name": "web", "namespace": "default"},
           "spec": {"selector": {"matchLabels": {"app": "web"}}, "maxUnavailable": 0}}
    snap = snapshot(pods=[pod("w1", on="a", labels={"app": "web"})], pdbs=[pdb])
    ctx = SweepContext(snap)
    assert ctx.caches.pdb_index is None
    (a,) = [c for c in build_candidates(snap)[0] if c.name == "a"]
    why = graceful_blockers(a, snap, ctx=ctx)
    assert why == [("PDB", "PDB default/web allows no eviction of pod default/w1")]
    index = ctx.caches.pdb_index
    assert index is not None and [(p["metadata"]["name"], allowed) for p, _ns, _sel, allowed in index] == [("web", 0)]
    graceful_blockers(a, snap, ctx=ctx)
    assert ctx.caches.pdb_index is index                     # not recomputed
    assert ctx.caches_for(apply_option(snap, Option([]))) is not ctx.caches   # another snapshot: fresh caches
    fresh = pdb_index(snap)                                  # without caches: the same answer, not kept
    assert fresh is not index and [(p, ns, a) for p, ns, _sel, a in fresh] == [(p, ns, a) for p, ns, _sel, a in index]


def test_derive_carries_out_an_option_and_keeps_what_still_holds():
    snap = snapshot(pods=[pod("w1", on="a"), pod("w2", on="b")])
    ctx = SweepContext(snap)
    window_nodes(snap, ctx)
    pdb_index(snap, ctx.caches)
    assert set(ctx.caches.window) == {"n-a", "n-b", "n-c", "n-d"}
    (a,) = [c for c in build_candidates(snap)[0] if c.name == "a"]
    ctx.take("p", "Underutilized")
    ctx.count_evaluation()
    opt = Option([a], placements={"default/w1": "n-c"})   # delete a: its pod goes to c

    after = ctx.derive(opt)
    assert "a" not in after.snapshot.nodeclaims and "a" in snap.nodeclaims          # the original is untouched
    assert {(p["metadata"]["name"], p["spec"]["nodeName"]) for p in after.snapshot.pods} == \
        {("w1", "n-c"), ("w2", "n-b")}
    # the same sweep: budgets, counters, memo and exclusions are shared
    assert after.budgets is ctx.budgets and after.counters is ctx.counters and after.memo is ctx.memo
    assert after.evaluations == 1 and after.budgets.taken == {"p": 1}
    # the caches: the PDB index carried; windows of the gone node (a) and of the node that received a pod (c) dropped
    assert after.caches.pdb_index is ctx.caches.pdb_index
    assert set(after.caches.window) == {"n-b", "n-d"}
    assert after.caches is not ctx.caches and set(ctx.caches.window) == {"n-a", "n-b", "n-c", "n-d"}


def test_snapshot_caches_derive_drops_verdicts_of_gone_and_touched_nodes():
    snap = snapshot()
    caches = SnapshotCaches(window={"n-a": False, "n-b": True}, consolidatable={"a": (), "b": (), "c": None},
                            pdb_index=[])
    (a,) = [c for c in build_candidates(snap)[0] if c.name == "a"]
    ctx = SweepContext(snap, caches=caches)
    after = ctx.derive(Option([a], placements={}))
    assert after.caches.consolidatable == {"b": (), "c": None}
    assert after.caches.window == {"n-b": True} and after.caches.pdb_index == []
