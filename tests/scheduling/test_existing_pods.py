"""The existing nodes' pods summed once (scheduling/existing_pods.py): same answers as summing them in the solver,
and never a summary of other pods."""

from __future__ import annotations

import random

from karpenter_lambda.api import labels as L
from karpenter_lambda.scheduling import ExistingNode, NodePoolInput, SchedulingInput, solve
from karpenter_lambda.scheduling.existing_pods import facts_for, matches, summarize

from .helpers import catalog, nodepool


def _pod(name, app, cpu, mem, node=None, spread=False, anti=False, port=None):
    spec = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": f"{cpu}m", "memory": f"{mem}Mi"}}}]}
    if port:
        spec["containers"][0]["ports"] = [{"containerPort": port, "hostPort": port}]
    if spread:
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": L.ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                              "labelSelector": {"matchLabels": {"app": app}}}]
    if anti:
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": L.HOSTNAME}]}}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": name,
                                                            "labels": {"app": app}}, "spec": spec}


def _cluster(seed=3):
    r = random.Random(seed)
    nodes = []
    zones = ("us-east-1a", "us-east-1b", "us-east-1c")
    for i in range(12):
        name = f"n{i}"
        pods = [_pod(f"p{i}-{k}", f"app{r.randrange(5)}", r.choice([100, 250, 500]), r.choice([128, 512]), node=name,
                     spread=r.random() < 0.3, anti=r.random() < 0.2, port=8080 if r.random() < 0.1 else None)
                for k in range(r.randrange(1, 6))]
        nodes.append(ExistingNode(name=name, labels={L.ZONE: zones[i % 3], L.NODEPOOL: "default",
                                                     L.INSTANCE_TYPE: "m5.xlarge", L.CAPACITY_TYPE: "on-demand"},
                                  allocatable={"cpu": 3920, "memory": 14 * 2**30, "pods": 58}, pods=pods,
                                  nodepool="default", instance_type="m5.xlarge", zone=zones[i % 3],
                                  capacity_type="on-demand", price=0.192))
    pending = [_pod(f"new-{k}", f"app{k % 5}", 400, 256, spread=k % 2 == 0, anti=k % 7 == 0, port=8080 if k == 3 else None)
               for k in range(40)]
    return nodes, pending


def _answer(res):
    return (sorted((k, sorted(v)) for k, v in res.existing.items()),
            sorted((p.instance_type, p.zone, sorted(p.pods)) for p in res.nodeclaims),
            sorted((u.pod, u.reason) for u in res.unschedulable))


def test_summaries_give_the_solvers_own_answer():
    nodes, pending = _cluster()
    inp = lambda ns: SchedulingInput(pods=list(pending), nodepools=[NodePoolInput(nodepool(), catalog())],  # noqa: E731
                                     existing_nodes=ns)
    plain = solve(inp(nodes))
    cache: dict = {}
    summed = []
    for n in nodes:
        m = ExistingNode(**{k: getattr(n, k) for k in n.__dataclass_fields__ if k != "pod_facts"})
        m.pod_facts = facts_for(m.pods, cache)
        assert m.pod_facts is not None and matches(m.pod_facts, m.pods)
        summed.append(m)
    assert _answer(solve(inp(summed))) == _answer(plain)
    assert plain.existing, "the pending pods use the existing nodes' room (the case exercises their pods)"


def test_a_summary_of_other_pods_is_never_used():
    nodes, pending = _cluster()
    # node 0's summary claims node 0 is full; a summary made from other pod objects must be ignored
    full = _pod("hog", "hog", 3900, 13 * 1024, node="n0")
    stale = summarize([full])
    nodes[0].pod_facts = stale
    assert not matches(stale, nodes[0].pods)
    res = solve(SchedulingInput(pods=[_pod("one", "solo", 100, 64)], nodepools=[NodePoolInput(nodepool(), catalog())],
                                existing_nodes=[nodes[0]]))
    assert res.existing.get("n0") == ["default/one"], "the solver summed n0's real pods, not the stale summary"
    assert nodes[0].pod_facts is not stale


def test_cache_is_keyed_by_the_pod_objects_themselves():
    a = [_pod("a", "x", 100, 64, node="n"), _pod("b", "x", 200, 64, node="n")]
    cache: dict = {}
    first = facts_for(a, cache)
    assert first.used["cpu"] == 300 and facts_for(list(a), cache) is first
    copies = [dict(p) for p in a]   # equal content, other objects: summed again
    again = facts_for(copies, cache)
    assert again is not first and again.used == first.used
    assert summarize([{"metadata": {"name": "bad"}, "spec": {"containers": [{"resources": {"requests": {"cpu": "lots"}}}]}}]) is None
