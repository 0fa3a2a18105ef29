"""The public pieces of the split scheduler (issue 22): predicates, NodeClaim templates, existing nodes' can_add,
the topology tracker, preference relaxation and Requirements.without."""

from __future__ import annotations

from karpenter_lambda.api import labels as L
from karpenter_lambda.scheduling import predicates as P
from karpenter_lambda.scheduling.existing import build_existing_nodes, can_add
from karpenter_lambda.scheduling.model import INF, ExistingNode, NodePoolInput, fit_count
from karpenter_lambda.scheduling.nodeclaim import NodeClaimTemplate, describe, truncate
from karpenter_lambda.scheduling.podfacts import build_classes
from karpenter_lambda.scheduling.preferences import relax
from karpenter_lambda.scheduling.requirements import Requirement, Requirements
from karpenter_lambda.scheduling.taints import untolerated_hard
from karpenter_lambda.scheduling.tracker import TopologyTracker

from .helpers import GI, catalog, nodepool, pod


def _classes(pods):
    unsched = []
    classes = build_classes(pods, dict, unsched)
    for c in classes:
        c.vec = tuple(c.req.get(r, 0) for r in ("cpu", "memory", "pods"))
    return classes, unsched


# ------------------------------------------------------------------------------------------------- predicates
def test_node_affinity_matches_on_a_concrete_node():
    p = pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "size", "operator": "Gt", "values": ["4"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n9"]}]}]}}})
    assert P.node_affinity_matches(p, {"size": "8"}, "n1")
    assert not P.node_affinity_matches(p, {"size": "4"}, "n1")
    assert not P.node_affinity_matches(p, {"size": "x"}, "n1")      # Gt on a non-integer value: no match
    assert P.node_affinity_matches(p, {}, "n9")                      # the second term, by name
    empty = pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}}})
    assert not P.node_affinity_matches(empty, {"a": "b"}, "n1")      # an empty term matches nothing
    assert P.node_affinity_matches(pod(), {}, "n1")                  # no affinity: every node


def test_node_selector_and_labels_match():
    spec = {"nodeSelector": {"team": "a"}}
    assert P.node_selector_matches(spec, {"team": "a", "x": "y"})
    assert not P.node_selector_matches(spec, {"team": "b"})
    reqs = P.node_terms(pod(nodeSelector={"team": "a"}))[0]
    assert P.labels_match(reqs, {"team": "a"}) is None
    assert P.labels_match(reqs, {}) == "node has no label team"
    assert "does not satisfy" in P.labels_match(reqs, {"team": "b"})
    notin = Requirements([Requirement.new("team", "NotIn", ["b"])])
    assert P.labels_match(notin, {}) is None


def test_host_ports_and_conflicts():
    spec = {"containers": [{"ports": [{"hostPort": 80}, {"hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"}]}]}
    ports = P.host_ports(spec)
    assert ports == {("0.0.0.0", "TCP", 80), ("10.0.0.1", "UDP", 53)}
    assert P.ports_conflict(ports, {("10.0.0.2", "TCP", 80)}) == ("10.0.0.2", "TCP", 80)   # 0.0.0.0 clashes with any IP
    assert P.ports_conflict(ports, {("10.0.0.2", "UDP", 53)}) is None                      # other IP, both given


def test_untolerated_hard_ignores_prefer_no_schedule():
    taints = [{"key": "a", "effect": "PreferNoSchedule"}, {"key": "b", "value": "1", "effect": "NoExecute"}]
    assert untolerated_hard([], taints) == taints[1]
    assert untolerated_hard([{"key": "b", "operator": "Exists"}], taints) is None
    assert P.tolerates_taint([{"operator": "Exists"}], taints[0])


def test_affinity_term_and_label_selector_matching():
    q = pod(ns="web", labels={"app": "x", "tier": "1"})
    term = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": L.ZONE}
    assert P.affinity_term_matches(term, "web", q)
    assert not P.affinity_term_matches(term, "other", q)                     # the owner's namespace by default
    assert P.affinity_term_matches({**term, "namespaces": ["web"]}, "other", q)
    assert P.affinity_term_matches({**term, "namespaceSelector": {"matchLabels": {"k": "v"}}}, "other", q)
    assert not P.affinity_term_matches({"topologyKey": L.ZONE}, "web", q)    # no labelSelector: nothing
    assert P.label_selector_matches({"matchLabels": {"app": "x"}}, {"app": "x", "v": "2"}, {"v": "2"})
    assert not P.label_selector_matches({"matchLabels": {"app": "x"}}, {"app": "x", "v": "3"}, {"v": "2"})
    assert not P.label_selector_matches({"matchExpressions": [{"key": "a", "operator": "Bogus"}]}, {"a": "1"})
    # the solver's namespaces for the same terms: a non-empty namespaceSelector is not "every namespace" there
    assert P.term_namespaces({"namespaceSelector": {"matchLabels": {"k": "v"}}}, "web") == frozenset(["web"])
    assert P.term_namespaces({"namespaceSelector": {}}, "web") is None


# ----------------------------------------------------------------------------------------- NodeClaim templates
def test_template_offers_holding_cheapest_first():
    npi = NodePoolInput(nodepool(), catalog())
    t = NodeClaimTemplate.for_nodepool(npi)
    offers = t.offers_holding({"cpu": 3000, "memory": 4 * GI, "pods": 1})
    assert offers, "some type holds 3 cpu"
    prices = [(o.price, o.instance_type.name) for o in offers]
    assert prices == sorted(prices)
    assert all(o.offering.capacity_type == "on-demand" for o in offers)          # the NodePool's requirement
    assert all(o.instance_type.allocatable["cpu"] >= 3000 for o in offers)
    assert offers[0].labels[L.NODEPOOL] == "default" and offers[0].labels[L.ZONE] == offers[0].offering.zone
    zone_b = Requirements([Requirement.new(L.ZONE, "In", ["us-east-1b"]), Requirement.new(L.ARCH, "In", ["arm64"])])
    arm = t.offers_holding({"cpu": 3000}, zone_b)
    assert arm and all(o.offering.zone == "us-east-1b" and o.labels[L.ARCH] == "arm64" for o in arm)
    cheap = t.offers_holding({"cpu": 3000}, below=offers[0].price + 1e-9)
    assert [o.price for o in cheap] == [o.price for o in offers if o.price < offers[0].price + 1e-9]
    assert t.offers_holding({"cpu": 10_000_000}) == []


def test_template_daemonset_overhead_counts_against_allocatable():
    ds = {"spec": {"template": {"spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}}}}
    npi = NodePoolInput(nodepool(), catalog())
    bare = NodeClaimTemplate.for_nodepool(npi).offers_holding({"cpu": 3000})
    loaded = NodeClaimTemplate.for_nodepool(npi, [ds]).offers_holding({"cpu": 3000})
    assert loaded and all(o.instance_type.allocatable["cpu"] - 1000 >= 3000 for o in loaded)
    assert len(loaded) < len(bare)


def test_template_fitting_drops_exotic_types_unless_wanted():
    npi = NodePoolInput(nodepool(), catalog())
    t = NodeClaimTemplate(npi, ["cpu", "memory", "pods"], [], None)
    plain, _, _ = t.fitting(t.reqs, (1000, GI, 1), False)
    anyt, _, _ = t.fitting(t.reqs, (1000, GI, 1), True)
    assert plain and not any(x.exotic for x in plain)
    assert any(x.exotic for x in anyt)
    assert t.min_values_error(t.reqs, (1000, GI, 1)) is None


def test_truncate_keeps_min_values_and_describe():
    npi = NodePoolInput(nodepool(requirements=[{"key": L.INSTANCE_FAMILY, "operator": "Exists", "minValues": 3}]), catalog())
    t = NodeClaimTemplate.for_nodepool(npi)
    kept = truncate(t.types, t.reqs, 3)
    assert len(kept) == 3 and len({x.it.labels[L.INSTANCE_FAMILY] for x in kept}) == 3
    assert describe(Requirements([Requirement.new(L.ARCH, "In", ["arm64"])])) == f"{L.ARCH}=arm64"


# ------------------------------------------------------------------------------------------- existing, relax
def test_can_add_is_the_same_for_existing_and_in_flight_nodes():
    taint = {"key": "gpu", "effect": "NoSchedule"}
    ens = [ExistingNode("n1", labels={"team": "a"}, taints=[taint], allocatable={"cpu": "4", "memory": "8Gi", "pods": 10}),
           ExistingNode("n2", labels={"team": "a"}, taints=[taint], allocatable={"cpu": "4", "memory": "8Gi", "pods": 10},
                        in_flight=True)]
    nodes = build_existing_nodes(ens, ["cpu", "memory", "pods"], {"cpu": 0, "memory": 1, "pods": 2}, {})
    assert [n.labels[L.HOSTNAME] for n in nodes] == ["n1", "n2"] and nodes[0].cap == (4000, 8 * GI, 10)
    (plain,), _ = _classes([pod("a", nodeSelector={"team": "a"})])
    (tol,), _ = _classes([pod("b", nodeSelector={"team": "a"}, tolerations=[{"key": "gpu", "operator": "Exists"}])])
    (other,), _ = _classes([pod("c", nodeSelector={"team": "b"}, tolerations=[{"key": "gpu", "operator": "Exists"}])])
    assert [can_add(n, plain) for n in nodes] == [False, False]
    assert [can_add(n, tol) for n in nodes] == [True, True]
    assert [can_add(n, other) for n in nodes] == [False, False]


def test_relax_in_karpenters_order():
    na = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "t", "operator": "In", "values": ["1"]}]},
        {"matchExpressions": [{"key": "t", "operator": "In", "values": ["2"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "preference": {"matchExpressions": [{"key": "p", "operator": "In", "values": ["x"]}]}}]}
    term = {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": L.ZONE}
    p = pod(labels={"app": "a"}, affinity={
        "nodeAffinity": na,
        "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": term}]},
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": term}]}},
        topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": L.ZONE, "whenUnsatisfiable": "ScheduleAnyway",
                                    "labelSelector": {"matchLabels": {"app": "a"}}}])
    (c,), _ = _classes([p])
    steps = []
    while (s := relax(c)) is not None:
        steps.append(s)
    assert steps == ["required node affinity term dropped", "preferred pod affinity dropped",
                     "preferred pod anti-affinity dropped", "preferred node affinity dropped",
                     "ScheduleAnyway topology spread dropped", "PreferNoSchedule taints tolerated"]


def test_tracker_counts_existing_pods_per_domain():
    q = pod("q", labels={"app": "a"})
    ens = [ExistingNode("n1", labels={L.ZONE: "z1"}, allocatable={"cpu": "4", "memory": "8Gi", "pods": 10}, pods=[q, q]),
           ExistingNode("n2", labels={L.ZONE: "z2"}, allocatable={"cpu": "4", "memory": "8Gi", "pods": 10})]
    nodes = build_existing_nodes(ens, ["cpu", "memory", "pods"], {"cpu": 0, "memory": 1, "pods": 2}, {})
    spread = pod("s", labels={"app": "a"}, topologySpreadConstraints=[
        {"maxSkew": 1, "topologyKey": L.ZONE, "labelSelector": {"matchLabels": {"app": "a"}}}])
    (c,), _ = _classes([spread])
    tr = TopologyTracker([], nodes, [c])
    (g,) = [g for g in tr.group_list]
    assert g.counts == {"z1": 2} and not c.simple and c.member == [g]
    allow, chosen = tr.check(c, nodes[1], False)   # z2 has 0, the minimum: allowed, up to maxSkew + min - count
    assert chosen == {L.ZONE: "z2"} and allow == 1
    assert tr.check(c, nodes[0], False)[0] == 0 and "topology spread" in tr.why
    tr.record(c, nodes[1], 1)
    assert g.counts == {"z1": 2, "z2": 1}


def test_requirements_without_and_fit_count():
    r = Requirements([Requirement.new("a", "In", ["1"]), Requirement.new("b", "In", ["2"])])
    w = r.without("a", "zz")
    assert list(w.keys()) == ["b"] and list(r.keys()) == ["a", "b"]   # a copy; the original unchanged
    assert fit_count((1000, GI, 1), (4000, 8 * GI, 10), (0, 0, 0)) == 4
    assert fit_count((0, 0, 0), (1, 1, 1), (0, 0, 0)) == INF
