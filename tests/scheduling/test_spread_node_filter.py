"""Topology spread counts only the pods on nodes that pass the constraint's node filter (Karpenter's
TopologyNodeFilter, the kube-scheduler's nodeAffinityPolicy / nodeTaintsPolicy): with nodeAffinityPolicy Honor (the
default) a node must match the owning pod's nodeSelector and required node affinity, with nodeTaintsPolicy Honor its
taints must be tolerated; groups with different filters are different groups.  Pure: the solver only."""

from __future__ import annotations

from collections import Counter

from karpenter_lambda.api import labels as L
from karpenter_lambda.scheduling import ExistingNode
from karpenter_lambda.scheduling.podfacts import build_classes
from karpenter_lambda.scheduling.topology import pod_constraints
from karpenter_lambda.scheduling.tracker import TopologyTracker

from .helpers import nodepool, pod, run

BOTH = [{"key": L.CAPACITY_TYPE, "operator": "In", "values": ["spot", "on-demand"]}]


def _spread(app, **extra):
    return [{"maxSkew": 1, "topologyKey": L.ZONE, "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": {"matchLabels": {"app": app}}, **extra}]


def _existing(app, zone="us-east-1a", capacity="on-demand", taints=None, n=3, name="old"):
    pods = [pod(f"{name}-{i}", cpu="100m", memory="128Mi", labels={"app": app}, nodeName=name) for i in range(n)]
    return ExistingNode(name=name, labels={L.ZONE: zone, L.NODEPOOL: "default", L.INSTANCE_TYPE: "m5.xlarge",
                                           L.CAPACITY_TYPE: capacity, L.HOSTNAME: name},
                        taints=list(taints or []), allocatable={"cpu": 3920, "memory": 14 * 2**30, "pods": 58},
                        pods=pods, nodepool="default", instance_type="m5.xlarge", zone=zone, capacity_type=capacity,
                        price=0.192)


def _zones(res, prefix):
    """Zones the new pods named ``prefix-*`` went to (new NodeClaims only), as a Counter."""
    out = Counter()
    for n in res.nodeclaims:
        for k in n.pods:
            if k.split("/")[-1].startswith(prefix):
                out[n.zone] += 1
    return out


def _new(app, count, prefix, **spec):
    return [pod(f"{prefix}-{i}", cpu="2", memory="2Gi", labels={"app": app}, **spec) for i in range(count)]


def test_nodes_outside_the_node_selector_do_not_count():
    # an on-demand node in us-east-1a holds 3 pods app=sp2; the new pods ask for spot: the on-demand node is not
    # one of theirs (nodeAffinityPolicy Honor), so the spot zones start even and get one pod each
    new = _new("sp2", 3, "sp", topologySpreadConstraints=_spread("sp2"),
               nodeSelector={L.CAPACITY_TYPE: "spot"})
    res = run(new, pools=[nodepool(requirements=BOTH)], existing_nodes=[_existing("sp2")])
    assert not res.unschedulable
    assert _zones(res, "sp") == Counter({"us-east-1a": 1, "us-east-1b": 1, "us-east-1c": 1})


def test_node_affinity_policy_ignore_counts_every_node():
    new = _new("sp2", 3, "sp", topologySpreadConstraints=_spread("sp2", nodeAffinityPolicy="Ignore"),
               nodeSelector={L.CAPACITY_TYPE: "spot"})
    res = run(new, pools=[nodepool(requirements=BOTH)], existing_nodes=[_existing("sp2")])
    assert not res.unschedulable
    # 1a holds 3 already (counted): the pods go to 1b and 1c, 1b taking the third
    assert _zones(res, "sp") == Counter({"us-east-1b": 2, "us-east-1c": 1})


def test_node_policies_are_parsed_and_key_the_group():
    spot = {L.CAPACITY_TYPE: "spot"}
    honor = pod("h", labels={"app": "a"}, nodeSelector=spot, topologySpreadConstraints=_spread("a"))
    ignore = pod("i", labels={"app": "a"}, nodeSelector=spot,
                 topologySpreadConstraints=_spread("a", nodeAffinityPolicy="Ignore"))
    taints = pod("t", labels={"app": "a"}, topologySpreadConstraints=_spread("a", nodeTaintsPolicy="Honor"))
    plain = pod("p", labels={"app": "a"}, topologySpreadConstraints=_spread("a", nodeAffinityPolicy="Ignore"))
    (ch, _, _), = pod_constraints(honor)
    (ci, _, _), = pod_constraints(ignore)
    assert ch.node_affinity_honor and not ci.node_affinity_honor
    classes = build_classes([honor, ignore, taints, plain], dict, [])
    tracker = TopologyTracker([], [], classes)
    by_name = {c.pods[0]["metadata"]["name"]: tracker.groups[c.cons[0][0].group_key] for c in classes}
    # honor: filtered by its node selector; ignore and plain: every node (one group); taints: by its tolerations
    assert by_name["h"].filter is not None and by_name["h"].filter.tolerations is None
    assert by_name["i"] is by_name["p"] and by_name["i"].filter is None
    assert by_name["t"].filter is not None and by_name["t"].filter.terms is None
    assert len({id(g) for g in by_name.values()}) == 3
    # every class is a member of every group (same selector)
    assert all(len(c.member) == 3 for c in classes)


def test_node_taints_policy_honor_skips_untolerated_nodes():
    taint = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}
    old = _existing("tp", taints=[taint])
    honor = _new("tp", 3, "th", topologySpreadConstraints=_spread("tp", nodeTaintsPolicy="Honor"))
    res = run(honor, pools=[nodepool()], existing_nodes=[old])
    assert not res.unschedulable
    assert _zones(res, "th") == Counter({"us-east-1a": 1, "us-east-1b": 1, "us-east-1c": 1})
    # nodeTaintsPolicy Ignore (the default): the tainted node's pods count
    ignore = _new("tp", 3, "ti", topologySpreadConstraints=_spread("tp"))
    res = run(ignore, pools=[nodepool()], existing_nodes=[_existing("tp", taints=[taint])])
    assert not res.unschedulable
    assert _zones(res, "ti") == Counter({"us-east-1b": 2, "us-east-1c": 1})


def test_a_class_without_node_selector_counts_every_node():
    new = _new("ns", 3, "nn", topologySpreadConstraints=_spread("ns"))
    res = run(new, pools=[nodepool(requirements=BOTH)], existing_nodes=[_existing("ns")])
    assert not res.unschedulable
    assert _zones(res, "nn") == Counter({"us-east-1b": 2, "us-east-1c": 1})


def test_pods_placed_on_planned_nodes_count_only_where_the_filter_matches():
    # class A (on-demand, pinned to 1a) goes first (bigger); class B (spot) shares its labels and spread selector:
    # A's on-demand NodeClaims do not pass B's filter (spot), so B spreads evenly over the spot zones
    a = [pod(f"od-{i}", cpu="3", memory="2Gi", labels={"app": "mix"}, topologySpreadConstraints=_spread("mix"),
             nodeSelector={L.CAPACITY_TYPE: "on-demand", L.ZONE: "us-east-1a"}) for i in range(3)]
    b = _new("mix", 3, "sp", topologySpreadConstraints=_spread("mix"), nodeSelector={L.CAPACITY_TYPE: "spot"})
    res = run(a + b, pools=[nodepool(requirements=BOTH)])
    assert not res.unschedulable
    assert _zones(res, "od") == Counter({"us-east-1a": 3})
    assert _zones(res, "sp") == Counter({"us-east-1a": 1, "us-east-1b": 1, "us-east-1c": 1})


def test_node_affinity_policy_ignore_takes_every_nodes_domain():
    # an on-demand node in us-east-1d (no NodePool offers it) with no matching pod: with Honor it is not one of the
    # spot pods' domains; with Ignore its zone is, at count 0, so the minimum stays 0 and each zone takes one pod
    # (as the kube-scheduler counts it with Ignore)
    other = _existing("unrelated", zone="us-east-1d", name="d")
    honor = _new("ig", 4, "ho", topologySpreadConstraints=_spread("ig"), nodeSelector={L.CAPACITY_TYPE: "spot"})
    res = run(honor, pools=[nodepool(requirements=BOTH)], existing_nodes=[other])
    assert not res.unschedulable and sum(_zones(res, "ho").values()) == 4
    ignore = _new("ig", 4, "ig", topologySpreadConstraints=_spread("ig", nodeAffinityPolicy="Ignore"),
                  nodeSelector={L.CAPACITY_TYPE: "spot"})
    other = _existing("unrelated", zone="us-east-1d", name="d")
    res = run(ignore, pools=[nodepool(requirements=BOTH)], existing_nodes=[other])
    assert _zones(res, "ig") == Counter({"us-east-1a": 1, "us-east-1b": 1, "us-east-1c": 1})
    assert len(res.unschedulable) == 1
