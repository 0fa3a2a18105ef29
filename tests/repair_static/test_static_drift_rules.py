"""Static drift's decisions (disruption/static_drift.py, Karpenter v1.14's StaticDrift) and the static counts around
a replacement in flight (disruption/static.py), on builders' snapshots: no pod question, one replacement from the
static NodePool's own template per drifted NodeClaim, within the Drifted budget and ``limits.nodes``, held by
do-not-disrupt / PDB blockers as an eventual method; the static controller neither launches for the NodeClaim being
replaced nor takes its replacement for an excess.  Milliseconds."""

from __future__ import annotations

import builders
from builders import claimed_node, nodeclaim, nodepool, pdb, pod
from karpenter_lambda.api import hashes
from karpenter_lambda.api import labels as L
from karpenter_lambda.api.objects import NodePool
from karpenter_lambda.controllers.static import StaticCapacity
from karpenter_lambda.disruption.candidates import build_candidates
from karpenter_lambda.disruption.context import SweepContext
from karpenter_lambda.disruption.drift import Drift
from karpenter_lambda.disruption.expiration import Expiration
from karpenter_lambda.disruption.plan import plan_sweep, revalidate
from karpenter_lambda.disruption.static import pending_disruption, plan_static, static_counts
from karpenter_lambda.disruption.static_drift import (
    BLOCK_ABOVE_REPLICAS,
    BLOCK_NODE_LIMIT,
    StaticDrift,
)

DRIFT_SWEEP = (Expiration(), StaticDrift(), Drift())   # controllers/disrupt.py SWEEP_METHODS["drift"]
STALE = {L.NODEPOOL_HASH: "stale", L.NODEPOOL_HASH_VERSION: hashes.NODEPOOL_HASH_VERSION}   # NodePoolDrifted


def static_pool(replicas: int = 2, *, budgets=None, nodes_limit: str | None = None, name: str = "static") -> NodePool:
    np = nodepool(name, cpu_limit=None, budgets=budgets)
    np.spec["replicas"] = replicas
    if nodes_limit is not None:
        np.spec["limits"] = {"nodes": nodes_limit}
    return np


def drifted(name: str, pool: str = "static", annotations: dict | None = None, **kw):
    return claimed_node(name, nodepool=pool, instance_type="c5.large",
                        annotations={**STALE, **(annotations or {})}, **kw)


def current(name: str, pool: str = "static", **kw):
    return claimed_node(name, nodepool=pool, instance_type="c5.large", **kw)


def replacement(name: str, replaces: str, pool: str = "static", **kw):
    return claimed_node(name, nodepool=pool, instance_type="c5.large",
                        annotations={L.REPLACES_ANNOTATION: L.encode_replaces([replaces])}, **kw)


def web(name: str, node: str, **kw) -> dict:
    return pod(name, cpu="1500m", node=node, app="web", **kw)


def snap(*members, pools, pods=(), pdbs=()):
    return builders.snapshot(*members, nodepools=list(pools), pods=list(pods), pdbs=list(pdbs))


def plan(s, inflight=None):
    return plan_sweep(s, list(DRIFT_SWEEP), SweepContext(s, inflight or {}))


def blocks(p) -> dict[str, str]:
    return {b.nodeclaim: b.cause for b in p.blocked}


def test_a_drifted_static_node_with_pods_is_replaced_from_its_template_with_no_pod_question():
    """The defect: Drift asked where the pods would go, and the solver leaves static NodePools out ("no NodePool")."""
    s = snap(drifted("static-a"), drifted("static-b"), pools=[static_pool(budgets=[{"nodes": "100%"}])],
             pods=[web("web-0", "node-static-a"), web("web-1", "node-static-b")])
    p = plan(s)
    assert p.blocked == []
    assert sorted(c.names[0] for c in p.commands) == ["static-a", "static-b"]
    for cmd in p.commands:
        assert cmd.reason == "Drifted" and not cmd.forceful and cmd.detail == "NodePoolDrifted"
        (r,) = cmd.replacements
        assert r.nodepool == "static" and r.pods == [] and r.instance_types[0].name == r.instance_type
        assert "replacement for drifted NodeClaim " + cmd.names[0] in r.reason
    cands, _ = build_candidates(s)
    assert not any(Drift().should_disrupt(c, s) for c in cands)       # Karpenter's Drift leaves them out
    assert all(StaticDrift().should_disrupt(c, s) for c in cands)


def test_with_a_dynamic_nodepool_the_replacement_is_still_a_static_node():
    s = snap(drifted("static-a"), current("static-b"), current("default-a", pool="default"),
             pools=[static_pool(), nodepool("default")], pods=[web("web-0", "node-static-a")])
    (cmd,) = plan(s).commands
    assert cmd.names == ["static-a"] and [r.nodepool for r in cmd.replacements] == ["static"]


def test_an_empty_drifted_static_node_is_replaced_first_not_deleted():
    s = snap(drifted("static-a"), current("static-b"), pools=[static_pool()])
    (cmd,) = plan(s).commands
    assert cmd.names == ["static-a"] and len(cmd.replacements) == 1


def test_the_drifted_budget_holds_the_rest_earliest_drift_first():
    s = snap(drifted("static-a"), drifted("static-b"), pools=[static_pool()])   # default 10% of 2: 1
    p = plan(s)
    assert [c.names for c in p.commands] == [["static-a"]] and blocks(p) == {"static-b": "budget"}
    assert blocks(plan(s, {"static-a": "static"})) == {"static-b": "budget"}    # in flight: counted against it


def test_do_not_disrupt_and_pdbs_hold_it_unless_a_termination_grace_period_lets_the_drain_wait():
    pool = static_pool(budgets=[{"nodes": "100%"}])
    dnd = {L.DO_NOT_DISRUPT: "true"}
    s = snap(drifted("static-a"), drifted("static-b"), pools=[pool],
             pods=[web("web-0", "node-static-a", annotations=dnd), pod("db-0", node="node-static-b", app="db")],
             pdbs=[pdb("db", app="db", maxUnavailable=0)])
    p = plan(s)
    assert p.commands == [] and blocks(p) == {"static-a": "do-not-disrupt", "static-b": "PDB"}
    tgp = {"terminationGracePeriod": "1h"}
    s = snap(drifted("static-a", spec=tgp), drifted("static-b", spec=tgp, node_annotations=dnd), pools=[pool],
             pods=[web("web-0", "node-static-a", annotations=dnd)])
    p = plan(s)
    assert [c.names for c in p.commands] == [["static-a"]]              # eventual: the drain waits for the pod
    assert blocks(p) == {"static-b": "do-not-disrupt"}                   # a do-not-disrupt Node always holds it


def test_no_new_replacement_while_the_nodepool_is_above_replicas():
    """Karpenter's ``running + pendingDisruption > replicas``: a replacement (or a scale down) in progress."""
    s = snap(drifted("static-a"), drifted("static-b"), replacement("static-r", "static-a"),
             pools=[static_pool(budgets=[{"nodes": "100%"}])])
    p = plan(s, {"static-a": "static"})
    assert p.commands == [] and blocks(p) == {"static-b": BLOCK_ABOVE_REPLICAS}


def test_limits_nodes_must_leave_room_for_the_replacement_beside_the_old_node():
    both = [drifted("static-a"), drifted("static-b")]
    p = plan(snap(*both, pools=[static_pool(budgets=[{"nodes": "100%"}], nodes_limit="2")]))
    assert p.commands == [] and blocks(p) == {"static-a": BLOCK_NODE_LIMIT, "static-b": BLOCK_NODE_LIMIT}
    p = plan(snap(*both, pools=[static_pool(budgets=[{"nodes": "100%"}], nodes_limit="3")]))
    assert [c.names for c in p.commands] == [["static-a"]] and blocks(p) == {"static-b": BLOCK_NODE_LIMIT}
    # a proposed static drift (not launched yet) holds its node of the limit
    a = drifted("static-a")
    a[0].status["conditions"].append({"type": "Drifted", "status": "True", "reason": "NodePoolDrifted"})
    s = snap(a, drifted("static-b"), pools=[static_pool(budgets=[{"nodes": "100%"}], nodes_limit="3")])
    assert blocks(plan(s, {"static-a": "static"})) == {"static-b": BLOCK_NODE_LIMIT}


def test_revalidation_makes_the_replacement_again_and_cancels_what_no_longer_holds():
    pool = static_pool(budgets=[{"nodes": "100%"}], nodes_limit="3")
    s = snap(drifted("static-a"), current("static-b"), pools=[pool], pods=[web("web-0", "node-static-a")])
    ctx = SweepContext(s, {"static-a": "static"})
    cmd, why = revalidate(s, StaticDrift(), ["static-a"], ctx)
    assert why == "" and [r.nodepool for r in cmd.replacements] == ["static"] and cmd.detail == "NodePoolDrifted"
    cmd, why = revalidate(s, Drift(), ["static-a"], ctx)                # the ordinary method no longer takes it
    assert cmd is None and "no longer drifted" in why
    # a retried step: its replacement already launched (found by name, not launched twice) needs no room
    s = snap(drifted("static-a"), current("static-b"), replacement("static-r", "static-a"), pools=[pool])
    cmd, why = revalidate(s, StaticDrift(), ["static-a"], SweepContext(s, {"static-a": "static"}))
    assert why == "" and len(cmd.replacements) == 1
    # replicas lowered meanwhile: a scale down comes first
    s = snap(drifted("static-a"), current("static-b"), pools=[static_pool(1, budgets=[{"nodes": "100%"}])])
    cmd, why = revalidate(s, StaticDrift(), ["static-a"], SweepContext(s, {"static-a": "static"}))
    assert cmd is None and "scaling down" in why


def test_the_static_controller_counts_the_nodeclaim_being_replaced_once():
    """X replaced by R (same NodePool, ``karpenter-lambda.io/replaces``): X + R + the other are 3 NodeClaims for 2
    replicas, but X is pending disruption -- nothing launched for it, R not taken for an excess; once X is deleting,
    R and the other are the 2."""
    pool = static_pool()
    members = (drifted("static-a"), current("static-b"), replacement("static-r", "static-a"))
    s = snap(*members, pools=[pool])
    claims = s.nodeclaims_of_nodepool("static")
    assert pending_disruption(claims) == {"static-a"} and static_counts(claims) == (3, 2)
    assert plan_static(s) == []
    assert StaticCapacity.off_count(s.nodepools, s.nodeclaims) == []
    s = snap(drifted("static-a", deleting=True), current("static-b"), replacement("static-r", "static-a"),
             pools=[pool])
    assert pending_disruption(s.nodeclaims_of_nodepool("static")) == set() and plan_static(s) == []
    # replicas lowered during the replacement: the excess is taken among the running ones, not the one being replaced
    s = snap(*members, pools=[static_pool(1)])
    (d,) = plan_static(s)
    assert d.launch == 0 and len(d.remove) == 1 and d.remove[0] in {"static-b", "static-r"} and d.replacing == 1
    # a replacement of another NodePool does not make a static NodeClaim pending
    s = snap(current("static-a"), current("static-b"), replacement("default-r", "static-a", pool="default"),
             pools=[pool, nodepool("default")])
    assert pending_disruption(s.nodeclaims_of_nodepool("static")) == set()
    # an unlaunched replacement holds its place too (the scale up does not launch beside it)
    s = snap(drifted("static-a"), current("static-b"),
             nodeclaim("static-r", nodepool="static", status={"providerID": None},
                       annotations={L.REPLACES_ANNOTATION: L.encode_replaces(["static-a"])}), pools=[pool])
    assert plan_static(s) == []
