"""Static NodePools' pure decisions (disruption/static.py) on builders' snapshots: how many to launch (limits.nodes
included), which NodeClaims a scale down removes first, and the NodeClaim a static NodePool launches.  Milliseconds."""

from __future__ import annotations

import builders
from builders import T0, claimed_node, nodeclaim, nodepool, pod
from karpenter_lambda.api.objects import NodePool
from karpenter_lambda.disruption.static import (
    is_static,
    plan_static,
    removal_order,
    replicas_of,
    static_nodeclaim_plan,
)


def static_pool(replicas: int, name: str = "static", nodes_limit: str | None = None) -> NodePool:
    np = nodepool(name, cpu_limit=None)
    np.spec["replicas"] = replicas
    if nodes_limit is not None:
        np.spec["limits"] = {"nodes": nodes_limit}
    return np


def members(n: int, pool: str = "static", **kw):
    return [claimed_node(f"{pool}-{i}", nodepool=pool, **kw) for i in range(n)]


def snap(*m, pools, pods=()):
    return builders.snapshot(*m, nodepools=pools, pods=list(pods))


def test_replicas_make_a_nodepool_static():
    assert replicas_of(static_pool(3)) == 3 and is_static(static_pool(0))
    assert replicas_of(nodepool()) is None and not is_static(nodepool())


def test_at_replicas_nothing_changes_and_dynamic_pools_are_ignored():
    pools = [static_pool(2), nodepool("default")]
    assert plan_static(snap(*members(2), *members(5, "default"), pools=pools)) == []


def test_scale_up_launches_the_missing_and_deleting_ones_do_not_count():
    s = snap(*members(1), claimed_node("static-gone", nodepool="static", deleting=True), pools=[static_pool(3)])
    (d,) = plan_static(s)
    assert (d.active, d.total, d.launch, d.remove, d.limited) == (1, 2, 2, [], None)


def test_limits_nodes_caps_the_scale_up_counting_deleting_nodeclaims():
    s = snap(*members(1), claimed_node("static-gone", nodepool="static", deleting=True),
             pools=[static_pool(5, nodes_limit="3")])
    (d,) = plan_static(s)
    assert d.launch == 1 and "limits.nodes 3 reached" in d.limited
    full = snap(*members(3), pools=[static_pool(5, nodes_limit="3")])
    (d,) = plan_static(full)
    assert d.launch == 0 and d.limited


def test_scale_down_removes_unlaunched_then_empty_then_cheapest_to_disrupt():
    busy = claimed_node("static-busy", nodepool="static")
    light = claimed_node("static-light", nodepool="static")
    empty = claimed_node("static-empty", nodepool="static")
    daemons = claimed_node("static-daemons", nodepool="static")
    unlaunched = nodeclaim("static-new", nodepool="static", status={"providerID": None})
    pods = [pod(f"busy-{i}", node="node-static-busy") for i in range(5)] + [pod("light-0", node="node-static-light")]
    pods.append(pod("ds-0", node="node-static-daemons", owner="DaemonSet"))
    s = snap(busy, light, empty, daemons, unlaunched, pods=pods, pools=[static_pool(2)])
    assert removal_order(s, s.nodepools["static"]) == ["static-new", "static-daemons", "static-empty", "static-light",
                                                        "static-busy"]
    (d,) = plan_static(s)
    assert d.remove == ["static-new", "static-daemons", "static-empty"]


def test_do_not_disrupt_pods_go_last_and_priority_annotation_first():
    protected = claimed_node("static-a", nodepool="static")
    plain = claimed_node("static-b", nodepool="static")
    preferred = claimed_node("static-c", nodepool="static",
                             annotations={"karpenter.sh/deprovisioning-priority": "10"})
    pods = [pod("a-0", node="node-static-a", annotations={"karpenter.sh/do-not-disrupt": "true"}),
            pod("b-0", node="node-static-b"),
            *[pod(f"c-{i}", node="node-static-c") for i in range(4)]]
    s = snap(protected, plain, preferred, pods=pods, pools=[static_pool(1)])
    assert removal_order(s, s.nodepools["static"]) == ["static-c", "static-b", "static-a"]


def test_an_empty_node_with_a_do_not_disrupt_daemon_pod_is_not_empty():
    a = claimed_node("static-a", nodepool="static")
    b = claimed_node("static-b", nodepool="static")
    pods = [pod("ds-a", node="node-static-a", owner="DaemonSet", annotations={"karpenter.sh/do-not-disrupt": "true"})]
    s = snap(a, b, pods=pods, pools=[static_pool(1)])
    assert removal_order(s, s.nodepools["static"])[0] == "static-b"


def test_the_static_nodeclaim_is_the_cheapest_type_its_requirements_allow():
    np = static_pool(3)
    plan = static_nodeclaim_plan(np, builders.instance_types(), "static-x")
    cheapest = min((o.price, it.name) for it in builders.instance_types() if it.labels.get("kubernetes.io/arch") == "amd64"
                   for o in it.offerings if o.available and o.capacity_type == "on-demand")
    assert (plan.price, plan.instance_type) == cheapest
    assert plan.pods == [] and plan.nodepool == "static" and plan.capacity_type == "on-demand"
    assert all(it.labels["kubernetes.io/arch"] == "amd64" for it in plan.instance_types)
    assert plan.instance_types[0].name == plan.instance_type
    assert static_nodeclaim_plan(np, [], "static-y") is None


def test_a_large_scale_down_removes_exactly_the_excess():
    m = members(100)
    s = snap(*m, pools=[static_pool(40)])
    (d,) = plan_static(s)
    assert len(d.remove) == 60 and d.launch == 0


def test_static_nodepools_are_never_consolidated():
    """Karpenter never consolidates a static NodePool (spec.replicas): its empty nodes are not Empty candidates."""
    import builders
    from builders import claimed_node, nodepool

    from karpenter_lambda.disruption.emptiness import Emptiness
    from karpenter_lambda.disruption.plan import SweepBudgets, plan_sweep

    dynamic = nodepool(budgets=[{"nodes": "100%"}])
    static = nodepool(budgets=[{"nodes": "100%"}])
    static.spec["replicas"] = 1
    for pool, expected in ((dynamic, ["default-a"]), (static, [])):
        snap = builders.snapshot(claimed_node("default-a"), nodepools=[pool])
        plan = plan_sweep(snap, [Emptiness()], SweepBudgets(snap, {}))
        assert sorted(n for c in plan.commands for n in c.names) == expected


def test_static_nodepools_get_no_pod_sized_nodeclaims_from_the_solver():
    """The solver's NodePools leave static ones out (provisioning and disruption replacements alike), saying why."""
    import builders
    from builders import nodepool, pod

    from karpenter_lambda.scheduling.inputs import scheduling_input

    static = nodepool(name="static")
    static.spec["replicas"] = 2
    snap = builders.snapshot(nodepools=[static, nodepool(name="dynamic")], pods=[pod("p")])
    inp, problems = scheduling_input(snap, [pod("p")])
    assert [x.nodepool.name for x in inp.nodepools] == ["dynamic"]
    assert problems == ["NodePool static is static (spec.replicas: 2): not provisioned for pods"]
