"""NodeClaim templates kept across solves (scheduling/template_cache.py): a warm solve decides as a cold one."""

from karpenter_lambda.api import labels as L
from karpenter_lambda.catalog.types import InstanceType, Offering
from karpenter_lambda.scheduling import NodePoolInput, SchedulingInput, solve, template_cache
from karpenter_lambda.scheduling.nodeclaim import NodeClaimTemplate

from .helpers import catalog, nodepool, pod, pods


def _plans(res):
    return ([(n.nodepool, n.instance_type, n.zone, sorted(n.pods), [t.name for t in n.instance_types])
             for n in res.nodeclaims], [(u.pod, u.reason) for u in res.unschedulable])


def _solve(types, pools, pod_list, **kw):
    return solve(SchedulingInput(pods=pod_list, nodepools=[NodePoolInput(p, types) for p in pools], **kw))


def test_warm_solves_decide_as_cold_ones():
    types = catalog()
    spread = [{"maxSkew": 1, "topologyKey": L.ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "web"}}}]
    work = (pods(6, prefix="web", cpu="500m", labels={"app": "web"}, topologySpreadConstraints=spread)
            + pods(5, prefix="api", cpu="2", memory="4Gi"))
    template_cache.clear()
    cold = _plans(_solve(types, [nodepool()], work))
    warm = [_plans(_solve(types, [nodepool()], work)) for _ in range(2)]
    assert warm == [cold, cold] and cold[0]
    assert len(template_cache._TEMPLATES) == 1   # one template, built once, for three solves


def test_limits_are_per_solve():
    """``remaining`` is the one state a solve changes: one solve's launches do not count against the next."""
    types = catalog()
    template_cache.clear()
    limited = nodepool(limits={"cpu": "4"})
    first = _solve(types, [limited], [pod("a", cpu="1")], nodepool_usage={"default": {}})
    assert not first.unschedulable
    full = _solve(types, [limited], [pod("a", cpu="1")], nodepool_usage={"default": {"cpu": 4000}})
    assert full.unschedulable[0].reason == "NodePool default: limits cpu 4 reached"
    again = _solve(types, [limited], [pod("a", cpu="1")], nodepool_usage={"default": {}})
    assert _plans(again) == _plans(first)


def test_a_changed_input_builds_a_new_template():
    types = catalog()
    template_cache.clear()
    base = _solve(types, [nodepool()], [pod("b", cpu="1")])
    # a DaemonSet's overhead
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds"}, "spec": {"template": {"spec": {
        "containers": [{"name": "d", "resources": {"requests": {"cpu": "250m", "memory": "100Mi"}}}]}}}}
    with_ds = _solve(types, [nodepool()], [pod("b", cpu="1")], daemonsets=[ds])
    assert with_ds.nodeclaims[0].requests["cpu"] == base.nodeclaims[0].requests["cpu"] + 250
    # the NodePool's spec (same name)
    amd = nodepool(requirements=[{"key": L.ARCH, "operator": "In", "values": ["amd64"]},
                                 {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}])
    assert _solve(types, [amd], [pod("b", cpu="1")]).nodeclaims[0].instance_type != base.nodeclaims[0].instance_type
    # the catalog: the cheapest type's offerings repriced, in new objects
    cheapest = base.nodeclaims[0].instance_type
    repriced = [InstanceType(name=t.name, labels=t.labels, capacity=t.capacity, overhead=t.overhead,
                             offerings=[Offering(o.zone, o.capacity_type, o.price * 10) for o in t.offerings])
                if t.name == cheapest else t for t in types]
    assert _solve(repriced, [nodepool()], [pod("b", cpu="1")]).nodeclaims[0].instance_type != cheapest
    assert _plans(_solve(types, [nodepool()], [pod("b", cpu="1")])) == _plans(base)


def test_with_usage_copies_only_what_a_solve_changes():
    types = catalog()
    tpl = NodeClaimTemplate(NodePoolInput(nodepool(limits={"cpu": "8"}), types), ["cpu", "memory", "pods"], [], None)
    a, b = tpl.with_usage(tpl.np, {"cpu": 2000}), tpl.with_usage(tpl.np, None)
    a.remaining["cpu"] -= 1000
    assert (a.remaining, b.remaining, tpl.remaining) == ({"cpu": 5000}, {"cpu": 8000}, {"cpu": 8000})
    assert a.types is tpl.types and a.fit_cache is tpl.fit_cache
