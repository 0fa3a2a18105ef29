"""Zone topology spread packs like Karpenter: a zone's share of a spread class on a few NodeClaims, not a node per pod."""

from __future__ import annotations

import pytest

from karpenter_lambda.api import labels as L
from karpenter_lambda.scheduling import ExistingNode
from karpenter_lambda.scheduling.spread import SpreadRule, domain_shares

from .helpers import GI, catalog, nodepool, pod, run

ZONES3 = ["us-east-1a", "us-east-1b", "us-east-1c"]


def tsc(key, skew=1, when="DoNotSchedule", app="web"):
    return {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when, "labelSelector": {"matchLabels": {"app": app}}}


def deployment(n, cpu="500m", memory="1Gi", spread=(), app="web", prefix="w"):
    extra = {"topologySpreadConstraints": list(spread)} if spread else {}
    return [pod(f"{prefix}-{i}", cpu=cpu, memory=memory, labels={"app": app}, **extra) for i in range(n)]


def daemonset(cpu="100m", memory="180Mi"):
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds", "namespace": "kube-system"},
            "spec": {"selector": {"matchLabels": {"app": "ds"}}, "template": {"metadata": {"labels": {"app": "ds"}}, "spec": {
                "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}}}


def zone_counts(res, prefix="default/w-"):
    out = {}
    for n in res.nodeclaims:
        k = sum(1 for p in n.pods if p.startswith(prefix))
        if k:
            out[n.zone] = out.get(n.zone, 0) + k
    return out


# ---------------------------------------------------------------------------------------------- domain_shares (pure)
def test_shares_balance_from_empty_counts():
    shares = domain_shares(60, ZONES3, [SpreadRule({}, 1, set(ZONES3))])
    assert shares == {"us-east-1a": 20, "us-east-1b": 20, "us-east-1c": 20}


def test_shares_fill_the_emptiest_domain_first():
    shares = domain_shares(5, ZONES3, [SpreadRule({"us-east-1a": 4, "us-east-1b": 1}, 1, set(ZONES3))])
    assert shares == {"us-east-1a": 0, "us-east-1b": 2, "us-east-1c": 3}


def test_shares_stop_when_a_domain_that_cannot_host_holds_the_minimum():
    # us-east-1c is eligible (it keeps the minimum at 0) but cannot host: only maxSkew pods per other zone
    shares = domain_shares(10, ["us-east-1a", "us-east-1b"], [SpreadRule({}, 2, set(ZONES3))])
    assert shares == {"us-east-1a": 2, "us-east-1b": 2}


def test_shares_of_a_class_its_selector_does_not_match_all_go_to_the_lowest_domain():
    shares = domain_shares(7, ZONES3, [SpreadRule({"us-east-1a": 3, "us-east-1b": 3}, 1, set(ZONES3), member=False)])
    assert shares == {"us-east-1a": 0, "us-east-1b": 0, "us-east-1c": 7}


def test_min_domains_unmet_keeps_minimum_at_zero():
    shares = domain_shares(9, ZONES3, [SpreadRule({}, 2, set(ZONES3), min_domains=4)])
    assert shares == {"us-east-1a": 2, "us-east-1b": 2, "us-east-1c": 2}


# ---------------------------------------------------------------------------------------------- the solver
def test_sixty_spread_replicas_land_on_a_few_nodeclaims_per_zone():
    res = run(deployment(60, spread=[tsc(L.ZONE)]), daemonsets=[daemonset()])
    assert not res.unschedulable
    assert zone_counts(res) == {"us-east-1a": 20, "us-east-1b": 20, "us-east-1c": 20}
    assert len(res.nodeclaims) <= 9  # was 60: one node per pod
    for n in res.nodeclaims:
        assert n.requirements.get(L.ZONE).values == {n.zone}  # each NodeClaim pinned to the zone its pods count in


@pytest.mark.parametrize("when", ["DoNotSchedule", "ScheduleAnyway"])
@pytest.mark.parametrize("skew", [1, 2])
@pytest.mark.parametrize("with_ds", [True, False])
@pytest.mark.parametrize("size", [("500m", "1Gi"), ("1", "4Gi"), ("2", "2Gi")])
@pytest.mark.parametrize("replicas", [30, 60, 150])
def test_spread_costs_within_fifteen_percent_of_the_same_workload_unspread(when, skew, with_ds, size, replicas):
    ds = [daemonset()] if with_ds else []
    plain = run(deployment(replicas, *size), daemonsets=ds)
    spread = run(deployment(replicas, *size, spread=[tsc(L.ZONE, skew, when)]), daemonsets=ds)
    assert not spread.unschedulable
    zones = zone_counts(spread)
    assert len(zones) == 3 and max(zones.values()) - min(zones.values()) <= skew
    assert spread.cost_per_hour <= 1.15 * plain.cost_per_hour, (spread.cost_per_hour, plain.cost_per_hour)


@pytest.mark.parametrize("with_ds", [True, False])
@pytest.mark.parametrize("host_skew", [4, 12])
def test_zone_and_hostname_spread(with_ds, host_skew):
    """Hostname spread caps a node at maxSkew pods of the class (Karpenter's hostname minimum is 0): the zone spread
    on top of it costs at most 15% more than the hostname spread alone, and both constraints hold."""
    ds = [daemonset()] if with_ds else []
    host_only = run(deployment(60, spread=[tsc(L.HOSTNAME, host_skew)]), daemonsets=ds)
    both = run(deployment(60, spread=[tsc(L.ZONE), tsc(L.HOSTNAME, host_skew)]), daemonsets=ds)
    assert not both.unschedulable
    zones = zone_counts(both)
    assert max(zones.values()) - min(zones.values()) <= 1
    assert all(len(n.pods) <= host_skew for n in both.nodeclaims)
    assert both.cost_per_hour <= 1.15 * host_only.cost_per_hour, (both.cost_per_hour, host_only.cost_per_hour)


def test_spread_with_pod_anti_affinity_on_zone_still_one_per_zone():
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": L.ZONE}]}}
    res = run([pod(f"w-{i}", labels={"app": "web"}, affinity=anti, topologySpreadConstraints=[tsc(L.ZONE)])
               for i in range(4)])
    assert len(res.unschedulable) == 1
    assert sorted(zone_counts(res).values()) == [1, 1, 1]


def test_spread_counts_existing_pods_and_fills_the_emptier_zones():
    existing = ExistingNode("n1", labels={L.ZONE: "us-east-1a", L.HOSTNAME: "n1"},
                            allocatable={"cpu": "1", "memory": "1Gi", "pods": "110"},
                            pods=deployment(6, cpu="100m", memory="100Mi", prefix="old"), zone="us-east-1a")
    res = run(deployment(30, spread=[tsc(L.ZONE)]), existing_nodes=[existing])
    zones = zone_counts(res)
    zones["us-east-1a"] = zones.get("us-east-1a", 0) + 6
    assert sum(zones.values()) == 36 and max(zones.values()) - min(zones.values()) <= 1


def test_spread_pods_share_nodes_with_other_classes():
    web = deployment(30, spread=[tsc(L.ZONE)])
    batch = [pod(f"b-{i}", cpu="250m", memory="256Mi") for i in range(30)]
    both = run(web + batch)
    alone = run(web)
    # the unconstrained pods fill the spread NodeClaims' room instead of opening nodes of their own at full price
    assert both.cost_per_hour <= alone.cost_per_hour + run(batch).cost_per_hour


def test_a_zone_without_capacity_leaves_the_others_at_max_skew():
    # us-east-1c offers only m5.large, too small for the pod: the zone is eligible (the NodePool's types offer it)
    # and keeps the minimum at 0, so the other zones take maxSkew pods each and the rest stay pending
    types = [t for t in catalog() if t.name in ("m5.large", "m5.xlarge")]
    for t in types:
        if t.name == "m5.xlarge":
            t.offerings = [o for o in t.offerings if o.zone != "us-east-1c"]
    res = run(deployment(10, cpu="3", memory="1Gi", spread=[tsc(L.ZONE, 2)]), types=types)
    zones = zone_counts(res)
    assert zones == {"us-east-1a": 2, "us-east-1b": 2}
    assert len(res.unschedulable) == 6
    assert "us-east-1c" in res.unschedulable[0].reason  # the zone that holds the minimum and cannot host


def test_node_limits_fall_back_to_pod_by_pod_and_stay_balanced():
    res = run(deployment(30, spread=[tsc(L.ZONE)]), pools=[nodepool(limits={"cpu": "12"})])
    zones = zone_counts(res)
    assert max(zones.values()) - min(zones.values()) <= 1
    assert sum(n.instance_types[0].capacity["cpu"] for n in res.nodeclaims) <= 12 * 1000 or res.unschedulable
    assert GI  # helpers' units in use


# ---------------------------------------------------------------------------------------------- consolidation's second look
def test_a_removal_whose_result_breaks_zone_spread_is_refused():
    """``simulate_removal`` re-checks the moved pods' required spread on the solver's answer: a result that stacks
    them in one zone (what a node-per-pod or zone-blind answer would do) marks them unschedulable."""
    from karpenter_lambda.scheduling import SchedulingResult
    from karpenter_lambda.scheduling.reschedule import _spread_recheck

    def node(name, zone, n):
        ps = [dict(p, spec=dict(p["spec"], nodeName=name)) for p in deployment(n, spread=[tsc(L.ZONE)], prefix=name)]
        return ExistingNode(name, labels={L.ZONE: zone, L.HOSTNAME: name}, allocatable={"cpu": "8", "memory": "32Gi",
                            "pods": "110"}, pods=ps, zone=zone)
    a, b, c = node("a", "us-east-1a", 2), node("b", "us-east-1b", 2), node("c", "us-east-1c", 2)
    moved = c.pods
    stacked = SchedulingResult(existing={"a": [f"default/{p['metadata']['name']}" for p in moved]})
    why = _spread_recheck([c], [a, b], moved, stacked)
    assert why and "skew 2 after the move, 0 before" in next(iter(why.values()))   # 1c has no node left
    # the same move is fine when the pods are shared between the other zones within maxSkew ... and the solver's own
    # answer (simulate_removal) never trips the check
    from karpenter_lambda.scheduling import NodePoolInput
    from karpenter_lambda.scheduling.reschedule import simulate_removal
    res = simulate_removal([c], others=[a, b], nodepools=[NodePoolInput(nodepool(), catalog())])
    assert res.all_rescheduled, res.unschedulable


def test_the_second_look_counts_only_the_nodes_the_spread_filters_in():
    """The re-check counts as the solver does (topology.node_filter): a pod requiring spot by node affinity (not only a
    nodeSelector) does not count an on-demand node's zone as a domain, so moving the spot pods of 1c to 1a and 1b is
    no skew (counted over every node, 1c would hold 0 after the move: skew 2)."""
    from karpenter_lambda.scheduling import SchedulingResult
    from karpenter_lambda.scheduling.reschedule import _spread_recheck

    spot = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": L.CAPACITY_TYPE, "operator": "In", "values": ["spot"]}]}]}}}}

    def node(name, zone, n, ct):
        ps = [dict(p, spec=dict(p["spec"], nodeName=name, **spot)) for p in deployment(n, spread=[tsc(L.ZONE)],
                                                                                        prefix=name)]
        return ExistingNode(name, labels={L.ZONE: zone, L.HOSTNAME: name, L.CAPACITY_TYPE: ct},
                            allocatable={"cpu": "8", "memory": "32Gi", "pods": "110"}, pods=ps, zone=zone)
    a, b, c = node("a", "us-east-1a", 1, "spot"), node("b", "us-east-1b", 1, "spot"), node("c", "us-east-1c", 2, "spot")
    od = node("od", "us-east-1c", 0, "on-demand")   # zone 1c keeps an on-demand node: not a domain of the spread
    moved = c.pods
    spread_out = SchedulingResult(existing={"a": [f"default/{moved[0]['metadata']['name']}"],
                                            "b": [f"default/{moved[1]['metadata']['name']}"]})
    assert _spread_recheck([c], [a, b, od], moved, spread_out) == {}


# ---------------------------------------------------------------------------------------------- many spread classes
def test_the_zone_shares_of_several_deployments_share_their_zones_nodeclaims():
    """Four Deployments of 12 replicas, each spread over the zones (maxSkew 1, on its own app label), of four request
    shapes: each zone's nodes take the four Deployments' shares together (place_spread_batch), so a NodeClaim holds
    pods of several Deployments, every Deployment keeps its skew, and no more NodeClaims are made than the
    Deployments' shares placed apart would make."""
    shapes = [("500m", "1Gi"), ("1", "2Gi"), ("250m", "3Gi"), ("2", "1Gi")]
    pods = []
    for j, (cpu, mem) in enumerate(shapes):
        pods += deployment(12, cpu=cpu, memory=mem, spread=[tsc(L.ZONE, app=f"d{j}")], app=f"d{j}", prefix=f"d{j}")
    res = run(pods, daemonsets=[daemonset()])
    assert not res.unschedulable
    for j in range(len(shapes)):
        counts = zone_counts(res, prefix=f"default/d{j}-")
        assert sorted(counts.values()) == [4, 4, 4], (j, counts)
    mixed = [n for n in res.nodeclaims if len({p.split("/")[1].split("-")[0] for p in n.pods}) > 1]
    assert mixed, [(n.zone, n.pods) for n in res.nodeclaims]
    # one NodeClaim per zone holds the four shares (each share packed on nodes of its own made 12, $2.01/h)
    assert len(res.nodeclaims) == len(ZONES3), [(n.zone, n.instance_type, n.pods) for n in res.nodeclaims]
    cost_apart = 0.0
    for j, (cpu, mem) in enumerate(shapes):   # each Deployment solved alone
        alone = run(deployment(12, cpu=cpu, memory=mem, spread=[tsc(L.ZONE, app=f"d{j}")], app=f"d{j}", prefix=f"d{j}"),
                    daemonsets=[daemonset()])
        cost_apart += alone.cost_per_hour
    assert res.cost_per_hour < cost_apart

