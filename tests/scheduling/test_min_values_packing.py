"""minValues while packing and spreading (Strict policy): a NodeClaim never ends with types that miss a requirement's
minValues, whether pods of one class fill it until only a few large types hold them, or a topology spread pins it
to a zone where fewer values are offered; a spread still keeps its skew when a domain can take no NodeClaim (a
randomized differential audit found all three broken)."""

from __future__ import annotations

from collections import Counter

from karpenter_lambda.api import labels as L

from .helpers import catalog, itype, nodepool, pod, pods, run

ZONE_SPREAD = {"maxSkew": 1, "topologyKey": L.ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "web"}}}


def _families(plan) -> set:
    return {t.labels[L.INSTANCE_FAMILY] for t in plan.instance_types}


def _web(n, cpu="1", **spec):
    return pods(n, prefix="web", cpu=cpu, memory="1Gi", labels={"app": "web"}, **spec)


def _zones(res) -> Counter:
    return Counter(n.zone for n in res.nodeclaims for _ in n.pods)


def test_a_nodeclaim_stops_taking_pods_before_its_types_miss_min_values():
    # four families, t3 only up to 4 vCPU: a NodeClaim of more than 3 one-CPU pods keeps m5, c5, r5 alone
    types = [t for t in catalog() if t.labels[L.INSTANCE_FAMILY] in ("m5", "c5", "r5")]
    types += [itype("t3.large", 2, 8, 0.0832), itype("t3.xlarge", 4, 16, 0.1664)]
    np = nodepool(requirements=[{"key": L.INSTANCE_FAMILY, "operator": "Exists", "minValues": 4},
                                {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}])
    res = run(pods(7, cpu="1"), pools=[np], types=types)
    assert res.unschedulable == []
    assert sum(len(n.pods) for n in res.nodeclaims) == 7
    for n in res.nodeclaims:
        assert len(_families(n)) >= 4, (n.pods, _families(n))
        assert len(n.pods) <= 3


def test_a_spread_zone_with_too_few_families_is_passed_over_for_another_the_skew_allows():
    # p3 only in us-east-1c, g4 only in b and c: four families only in c, three in b, two in a
    types = [itype("m5.xlarge", 4, 16, 0.192), itype("c5.xlarge", 4, 8, 0.17),
             itype("g4.xlarge", 4, 16, 0.5, zones=("us-east-1b", "us-east-1c")),
             itype("p3.xlarge", 4, 16, 0.9, zones=("us-east-1c",))]
    np = nodepool(requirements=[{"key": L.INSTANCE_FAMILY, "operator": "Exists", "minValues": 3},
                                {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}])
    res = run(_web(2, topologySpreadConstraints=[ZONE_SPREAD]), pools=[np], types=types)
    # a (the first choice at 0 pods) has two families: the pods go to b and c, each NodeClaim with three or more
    assert res.unschedulable == []
    assert _zones(res) == Counter({"us-east-1b": 1, "us-east-1c": 1})
    assert all(len(_families(n)) >= 3 for n in res.nodeclaims)
    # minValues 4: only c can hold a NodeClaim; one pod there, the next would make the skew 2 over a, b, c
    np4 = nodepool(requirements=[{"key": L.INSTANCE_FAMILY, "operator": "Exists", "minValues": 4},
                                 {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}])
    res = run(_web(3, topologySpreadConstraints=[ZONE_SPREAD]), pools=[np4], types=types)
    assert _zones(res) == Counter({"us-east-1c": 1})
    assert all(len(_families(n)) >= 4 for n in res.nodeclaims)
    assert len(res.unschedulable) == 2
    assert all("minValues 4" in u.reason and "us-east-1a" in u.reason for u in res.unschedulable)


def test_zone_shares_keep_the_skew_when_a_nodepools_zone_cannot_meet_min_values():
    # p0 offers a and c; p1 every zone but its minValues cannot be met: b is a domain (Karpenter counts the
    # NodePools' zones) that never gets a pod, so a and c take at most maxSkew each
    p0 = nodepool("p0", requirements=[{"key": L.ZONE, "operator": "In", "values": ["us-east-1a", "us-east-1c"]},
                                      {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}])
    p1 = nodepool("p1", requirements=[{"key": L.INSTANCE_TYPE, "operator": "In", "values": ["t3.micro", "m5.large"],
                                       "minValues": 3}])
    spread = dict(ZONE_SPREAD, maxSkew=2)
    res = run(_web(30, cpu="100m", topologySpreadConstraints=[spread]), pools=[p0, p1])
    assert _zones(res) == Counter({"us-east-1a": 2, "us-east-1c": 2})
    assert len(res.unschedulable) == 26


def test_zone_shares_are_not_used_with_self_affinity_on_the_hostname():
    # all pods must share one node (affinity to themselves), the zone spread allows one pod per zone ahead of the
    # emptiest: one pod placed, the rest pending -- two on one node in one zone would be a skew of 2
    aff = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": L.HOSTNAME}]}}
    np = nodepool(requirements=[{"key": L.ZONE, "operator": "In", "values": ["us-east-1a", "us-east-1b"]},
                                {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}])
    res = run(_web(4, topologySpreadConstraints=[ZONE_SPREAD], affinity=aff), pools=[np])
    assert sum(_zones(res).values()) == 1
    assert len(res.unschedulable) == 3


def test_a_spread_node_sized_for_its_share_still_meets_min_values():
    # the share of a zone placed in bulk is cut where the types left would miss minValues
    types = [t for t in catalog() if t.labels[L.INSTANCE_FAMILY] in ("m5", "c5", "r5")]
    types += [itype("t3.large", 2, 8, 0.0832), itype("t3.xlarge", 4, 16, 0.1664)]
    np = nodepool(requirements=[{"key": L.INSTANCE_FAMILY, "operator": "Exists", "minValues": 4},
                                {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}])
    res = run(_web(18, topologySpreadConstraints=[ZONE_SPREAD]), pools=[np], types=types)
    assert res.unschedulable == []
    assert sorted(_zones(res).values()) == [6, 6, 6]
    assert all(len(_families(n)) >= 4 for n in res.nodeclaims)
