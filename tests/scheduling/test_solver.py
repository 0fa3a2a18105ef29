"""The scheduling simulation: every constraint kind with a case that fails without it."""

import pytest

from karpenter_lambda.api import labels as L
from karpenter_lambda.scheduling import (ExistingNode, NodeClaimPlan, NodePoolInput, Requirements, SchedulingError,
                                         SchedulingInput, SchedulingResult, Unschedulable, solve)

from .helpers import GI, MI, ZONES, catalog, itype, node_of, nodepool, pod, pods, run

ANY_CT = [{"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand", "spot"]}]


def spread(key, skew=1, when="DoNotSchedule", app="web", **kw):
    c = {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when, "labelSelector": {"matchLabels": {"app": app}}}
    c.update(kw)
    return c


def zone_of(res, key):
    n = node_of(res, key)
    return n.requirements.get(L.ZONE).any_value() if n else None


# --- basics / interface -----------------------------------------------------------------------------------
def test_interface_and_plan_fields():
    res = run(pods(10, cpu="1", memory="2Gi"))
    assert isinstance(res, SchedulingResult) and not res.unschedulable
    assert sum(len(n.pods) for n in res.nodeclaims) == 10
    n = res.nodeclaims[0]
    assert isinstance(n, NodeClaimPlan) and isinstance(n.requirements, Requirements)
    assert n.nodepool == "default" and n.name.startswith("default-")
    prices = [it.cheapest_offering(capacity_types=["on-demand"]).price for it in n.instance_types]
    assert prices == sorted(prices) and n.instance_types[0].name == n.instance_type
    assert n.zone in ZONES and n.capacity_type == "on-demand"
    assert n.requests["cpu"] >= len(n.pods) * 1000
    assert "cheapest compatible offering" in n.reason and n.instance_type in n.reason
    assert res.cost_per_hour == pytest.approx(sum(x.price for x in res.nodeclaims))
    # deterministic
    again = run(pods(10, cpu="1", memory="2Gi"))
    assert [x.name for x in again.nodeclaims] == [x.name for x in res.nodeclaims]
    d = res.to_dict()
    assert set(d) >= {"nodeClaims", "unschedulable", "costPerHour"}
    assert set(d["nodeClaims"][0]) >= {"name", "nodePool", "instanceTypes", "instanceType", "zone", "capacityType",
                                         "pricePerHour", "pods"}


def test_equivalent_pods_share_nodes_in_bulk():
    no_micro = [t for t in catalog() if t.name != "t3.micro"]
    res = run(pods(200, cpu="250m", memory="256Mi", owner="rs1", labels={"app": "x"}), types=no_micro)
    assert not res.unschedulable
    assert sum(len(n.pods) for n in res.nodeclaims) == 200
    assert len(res.nodeclaims) <= 10  # packed, not a node per pod


def test_bad_input_errors():
    with pytest.raises(SchedulingError):
        solve("nope")
    with pytest.raises(SchedulingError) as e:
        solve(SchedulingInput(pods=["x"]))
    assert "pods[0]" in str(e.value)
    bad = pod("bad", cpu="lots")
    res = run([bad])
    assert res.unschedulable[0].pod == "default/bad" and "invalid pod" in res.unschedulable[0].reason


def test_daemonset_pods_ignored():
    p = pod("ds-pod")
    p["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "x", "uid": "u"}]
    res = run([p])
    assert not res.nodeclaims and not res.unschedulable


# --- node selection ------------------------------------------------------------------------------------------
def test_node_selector():
    res = run([pod("a", nodeSelector={L.ARCH: "amd64"})])
    assert res.nodeclaims[0].instance_types[0].labels[L.ARCH] == "amd64"
    # without the selector the cheaper arm64 types win
    res2 = run([pod("a")])
    assert res2.nodeclaims[0].instance_types[0].labels[L.ARCH] == "arm64"
    assert all(it.labels[L.ARCH] == "amd64" for it in res.nodeclaims[0].instance_types)


def test_node_selector_custom_label_needs_nodepool_label():
    p = pod("a", nodeSelector={"team": "ml"})
    res = run([p])
    assert res.unschedulable and "team does not have known values" in res.unschedulable[0].reason
    res = run([pod("a", nodeSelector={"team": "ml"})], pools=[nodepool(labels={"team": "ml"})])
    assert not res.unschedulable and res.nodeclaims[0].labels["team"] == "ml"


def test_required_node_affinity_ored_terms():
    aff = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": L.INSTANCE_FAMILY, "operator": "In", "values": ["p9"]}]},  # impossible
        {"matchExpressions": [{"key": L.INSTANCE_FAMILY, "operator": "In", "values": ["r5"]}]},
    ]}}}
    res = run([pod("a", affinity=aff)])
    assert not res.unschedulable
    assert res.nodeclaims[0].instance_type.startswith("r5.")


def test_preferred_node_affinity_then_relaxed():
    pref = lambda fam: {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"matchExpressions": [{"key": L.INSTANCE_FAMILY, "operator": "In", "values": [fam]}]}}]}}
    res = run([pod("a", affinity=pref("m5"))])
    assert res.nodeclaims[0].instance_type.startswith("m5.")
    res = run([pod("a", affinity=pref("nope"))])  # cannot be met: relaxed, still scheduled
    assert not res.unschedulable and res.nodeclaims


def test_gt_lt_requirements():
    aff = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": L.INSTANCE_CPU, "operator": "Gt", "values": ["8"]},
                              {"key": L.INSTANCE_CPU, "operator": "Lt", "values": ["32"]}]}]}}}
    res = run([pod("a", affinity=aff)])
    assert all(8 < int(it.labels[L.INSTANCE_CPU]) < 32 for it in res.nodeclaims[0].instance_types)


# --- taints ---------------------------------------------------------------------------------------------------
def test_taints_and_tolerations_and_startup_taints():
    taint = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}
    pool = nodepool("ml", taints=[taint], startup_taints=[{"key": "init", "effect": "NoSchedule"}])
    res = run([pod("a")], pools=[pool])
    assert res.unschedulable[0].reason == "NodePool ml: taint dedicated=ml:NoSchedule not tolerated"
    tol = [{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]
    res = run([pod("a", tolerations=tol)], pools=[pool])
    assert not res.unschedulable  # startup taint does not block
    assert res.nodeclaims[0].taints == [taint] and res.nodeclaims[0].startup_taints


def test_prefer_no_schedule_relaxed_last():
    pool = nodepool("soft", taints=[{"key": "soft", "effect": "PreferNoSchedule"}])
    res = run([pod("a")], pools=[pool])
    assert not res.unschedulable and res.nodeclaims[0].nodepool == "soft"


# --- topology spread -------------------------------------------------------------------------------------------
def test_zone_spread_do_not_schedule():
    ps = pods(6, labels={"app": "web"}, topologySpreadConstraints=[spread(L.ZONE)])
    res = run(ps)
    zones = [zone_of(res, f"default/w-{i}") for i in range(6)]
    assert sorted(zones) == sorted(ZONES * 2)
    # without the constraint they share one node
    res2 = run(pods(6, labels={"app": "web"}))
    assert len(res2.nodeclaims) == 1


def test_zone_spread_respects_existing_counts_and_label_selector():
    existing = [ExistingNode(name="n1", labels={L.ZONE: "us-east-1a"}, allocatable={"cpu": 1000, "memory": GI, "pods": 10},
                             pods=[pod(f"old{i}", cpu="100m", memory="10Mi", labels={"app": "web"}) for i in range(2)])]
    res = run(pods(2, labels={"app": "web"}, topologySpreadConstraints=[spread(L.ZONE)]), existing_nodes=existing)
    assert {zone_of(res, "default/w-0"), zone_of(res, "default/w-1")} == {"us-east-1b", "us-east-1c"}
    # pods of another app are not counted by the selector
    res = run(pods(2, labels={"app": "api"}, topologySpreadConstraints=[spread(L.ZONE, app="api")]), existing_nodes=existing)
    assert zone_of(res, "default/w-0") != zone_of(res, "default/w-1")


def test_hostname_spread_max_skew():
    res = run(pods(4, cpu="100m", memory="64Mi", labels={"app": "web"}, topologySpreadConstraints=[spread(L.HOSTNAME)]))
    assert len(res.nodeclaims) == 4
    res = run(pods(4, cpu="100m", memory="64Mi", labels={"app": "web"}, topologySpreadConstraints=[spread(L.HOSTNAME, skew=2)]))
    assert len(res.nodeclaims) == 2


def test_capacity_type_spread():
    res = run(pods(4, labels={"app": "web"}, topologySpreadConstraints=[spread(L.CAPACITY_TYPE)]), pools=[nodepool(requirements=ANY_CT)])
    cts = sorted(n.capacity_type for n in res.nodeclaims for _ in n.pods)
    assert cts == ["on-demand", "on-demand", "spot", "spot"]


def test_min_domains():
    # two zones only in the NodePool, minDomains 3: the global minimum counts as 0, so at most maxSkew per zone
    pool = nodepool(requirements=[{"key": L.ZONE, "operator": "In", "values": ["us-east-1a", "us-east-1b"]}] + [
        {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}])
    res = run(pods(4, labels={"app": "web"}, topologySpreadConstraints=[spread(L.ZONE, minDomains=3)]), pools=[pool])
    assert len(res.unschedulable) == 2
    res = run(pods(4, labels={"app": "web"}, topologySpreadConstraints=[spread(L.ZONE)]), pools=[pool])
    assert not res.unschedulable


def test_schedule_anyway_is_relaxed():
    pool = nodepool(requirements=[{"key": L.ZONE, "operator": "In", "values": ["us-east-1a"]}] + [
        {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}])
    existing = [ExistingNode(name="n1", labels={L.ZONE: "us-east-1b"}, allocatable={"cpu": 100, "memory": GI, "pods": 10},
                             pods=[])]
    hard = run(pods(3, labels={"app": "web"}, topologySpreadConstraints=[spread(L.ZONE)]), pools=[pool], existing_nodes=existing)
    assert len(hard.unschedulable) == 2  # zone b is a domain (existing node) but full: only one pod fits zone a
    soft = run(pods(3, labels={"app": "web"}, topologySpreadConstraints=[spread(L.ZONE, when="ScheduleAnyway")]),
               pools=[pool], existing_nodes=existing)
    assert not soft.unschedulable


def test_match_label_keys():
    a = pods(3, prefix="a", cpu="100m", memory="64Mi", labels={"app": "web", "rev": "1"},
             topologySpreadConstraints=[spread(L.HOSTNAME, matchLabelKeys=["rev"])])
    b = pods(3, prefix="b", cpu="100m", memory="64Mi", labels={"app": "web", "rev": "2"},
             topologySpreadConstraints=[spread(L.HOSTNAME, matchLabelKeys=["rev"])])
    res = run(a + b)
    assert len(res.nodeclaims) == 3  # each revision spreads separately; revisions may share nodes
    res = run(pods(6, cpu="100m", memory="64Mi", labels={"app": "web"}, topologySpreadConstraints=[spread(L.HOSTNAME)]))
    assert len(res.nodeclaims) == 6


# --- pod affinity / anti-affinity -----------------------------------------------------------------------------------
def term(key, app):
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}


def test_required_pod_affinity_hostname_and_zone():
    db = pod("db", labels={"app": "db"}, nodeSelector={L.ZONE: "us-east-1b"})
    web = pod("web", cpu="100m", affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(L.HOSTNAME, "db")]}})
    res = run([db, web])
    assert node_of(res, "default/web") is node_of(res, "default/db")
    api = pod("api", cpu="8", memory="16Gi",
              affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(L.ZONE, "db")]}})
    res = run([db, api])
    assert zone_of(res, "default/api") == "us-east-1b"
    alone = run([pod("web", affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(L.HOSTNAME, "db")]}})])
    assert alone.unschedulable and "pod affinity" in alone.unschedulable[0].reason


def test_required_anti_affinity_hostname():
    ps = pods(3, cpu="100m", memory="64Mi", labels={"app": "nginx"},
              affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(L.HOSTNAME, "nginx")]}})
    res = run(ps)
    assert len(res.nodeclaims) == 3


def test_anti_affinity_zone_and_inverse():
    ps = pods(4, cpu="100m", memory="64Mi", labels={"app": "nginx"},
              affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(L.ZONE, "nginx")]}})
    res = run(ps)
    assert len(res.unschedulable) == 1  # three zones only
    # an existing pod's anti-affinity keeps matching pods away from its node
    owner = pod("guard", labels={"app": "guard"},
                affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(L.HOSTNAME, "web")]}})
    ex = [ExistingNode(name="n1", labels={L.ZONE: "us-east-1a"}, allocatable={"cpu": 8000, "memory": 16 * GI, "pods": 50}, pods=[owner])]
    res = run([pod("w", labels={"app": "web"})], existing_nodes=ex)
    assert res.nodeclaims and "n1" not in res.existing
    res = run([pod("w", labels={"app": "other"})], existing_nodes=ex)
    assert res.existing == {"n1": ["default/w"]}


def test_preferred_anti_affinity_relaxed():
    ps = pods(4, cpu="100m", memory="64Mi", labels={"app": "x"}, affinity={"podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "podAffinityTerm": term(L.ZONE, "x")}]}})
    res = run(ps)
    assert not res.unschedulable


def test_preferred_pod_affinity_honoured():
    db = pod("db", labels={"app": "db"})
    web = pod("web", cpu="100m", affinity={"podAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "podAffinityTerm": term(L.HOSTNAME, "db")}]}})
    res = run([db, web])
    assert node_of(res, "default/web") is node_of(res, "default/db")


# --- host ports -------------------------------------------------------------------------------------------------
def test_host_ports():
    ps = pods(3, cpu="100m", memory="64Mi", ports=[{"containerPort": 80, "hostPort": 8080}])
    assert len(run(ps).nodeclaims) == 3
    assert len(run(pods(3, cpu="100m", memory="64Mi", ports=[{"containerPort": 80}])).nodeclaims) == 1


# --- daemonsets, existing and in-flight capacity -------------------------------------------------------------------------
def daemonset(cpu, tolerations=None, node_selector=None):
    spec = {"containers": [{"name": "d", "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}]}
    if tolerations:
        spec["tolerations"] = tolerations
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds"}, "spec": {"template": {"spec": spec}}}


def test_daemonset_overhead_per_nodepool():
    one = [itype("m5.large", 2, 8, 0.096)]
    p = pod("a", cpu="1500m", memory="1Gi")
    assert not run([p], types=one).unschedulable
    res = run([pod("a", cpu="1500m", memory="1Gi")], types=one, daemonsets=[daemonset("500m")])
    assert res.unschedulable and "daemonset overhead" in res.unschedulable[0].reason
    # a DaemonSet that does not tolerate the NodePool's taint adds no overhead there
    pool = nodepool("t", taints=[{"key": "x", "effect": "NoSchedule"}])
    tol = [{"key": "x", "operator": "Exists"}]
    res = run([pod("a", cpu="1500m", memory="1Gi", tolerations=tol)], pools=[pool], types=one, daemonsets=[daemonset("500m")])
    assert not res.unschedulable
    # nor one whose nodeSelector does not match the NodePool's requirements
    amd = nodepool(requirements=[{"key": L.ARCH, "operator": "In", "values": ["amd64"]}])
    res = run([pod("a", cpu="1500m", memory="1Gi")], pools=[amd], types=one,
              daemonsets=[daemonset("500m", node_selector={L.ARCH: "arm64"})])
    assert not res.unschedulable
    res = run([pod("b", cpu="1")], daemonsets=[daemonset("250m")])
    assert res.nodeclaims[0].requests["cpu"] == 1250


def test_existing_and_in_flight_capacity_used_first():
    ex = [ExistingNode(name="node-1", labels={L.ZONE: "us-east-1a"}, allocatable={"cpu": 2000, "memory": 4 * GI, "pods": 10},
                       pods=[pod("old", cpu="1", memory="1Gi")]),
          ExistingNode(name="claim-1", in_flight=True, nodepool="default", instance_type="m5.large",
                       allocatable={"cpu": 1900, "memory": 7 * GI, "pods": 29}, pods=[])]
    res = run(pods(3, cpu="900m", memory="1Gi"), existing_nodes=ex)
    assert res.existing == {"node-1": ["default/w-0"], "claim-1": ["default/w-1", "default/w-2"]}
    assert not res.nodeclaims and res.cost_per_hour == 0
    res = run(pods(4, cpu="900m", memory="1Gi"), existing_nodes=ex)
    assert len(res.nodeclaims) == 1 and res.nodeclaims[0].pods == ["default/w-3"]


def test_existing_node_taints_and_labels_respected():
    ex = [ExistingNode(name="n", labels={L.ARCH: "amd64"}, taints=[{"key": "k", "effect": "NoSchedule"}],
                       allocatable={"cpu": 4000, "memory": 8 * GI, "pods": 10})]
    res = run([pod("a")], existing_nodes=ex)
    assert not res.existing and res.nodeclaims
    ex[0].taints = []
    res = run([pod("a", nodeSelector={L.ARCH: "arm64"})], existing_nodes=ex)
    assert not res.existing


# --- NodePools: weight, limits ---------------------------------------------------------------------------------------
def test_nodepool_weight_order():
    pools = [nodepool("cheap"), nodepool("preferred", weight=50, requirements=[
        {"key": L.INSTANCE_FAMILY, "operator": "In", "values": ["m5"]}, {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}])]
    res = run([pod("a")], pools=pools)
    assert res.nodeclaims[0].nodepool == "preferred" and res.nodeclaims[0].instance_type.startswith("m5.")
    res = run([pod("a", nodeSelector={L.ARCH: "arm64"})], pools=pools)
    assert res.nodeclaims[0].nodepool == "cheap"


@pytest.mark.parametrize("limits,usage,msg", [
    ({"cpu": "4"}, {}, None),
    ({"cpu": "100"}, {"cpu": 100000}, "NodePool default: limits cpu 100 reached"),
    ({"memory": "8Gi"}, {"memory": 8 * GI}, "NodePool default: limits memory 8Gi reached"),
    ({"nodes": "1"}, {"nodes": 1}, "NodePool default: limits nodes 1 reached"),
    ({"nvidia.com/gpu": "0"}, {}, None),
])
def test_limits(limits, usage, msg):
    res = run([pod("a", cpu="1")], pools=[nodepool(limits=limits)], nodepool_usage={"default": usage})
    if msg:
        assert res.unschedulable[0].reason == msg
    else:
        assert not res.unschedulable
        cap = res.nodeclaims[0].instance_types
        if "cpu" in limits:
            assert all(it.capacity["cpu"] <= 4000 for it in cap)


def test_limits_cap_number_of_nodes():
    res = run(pods(3, cpu="100m", labels={"app": "w"}, topologySpreadConstraints=[spread(L.HOSTNAME, app="w")]),
              pools=[nodepool(limits={"nodes": "2"})])
    assert len(res.nodeclaims) == 2 and len(res.unschedulable) == 1
    assert "limits nodes 2 reached" in res.unschedulable[0].reason


def test_limit_any_resource_gpu():
    gpu_pod = pod("g", cpu="1", memory="4Gi", resources={"nvidia.com/gpu": 1})
    res = run([gpu_pod], pools=[nodepool(limits={"nvidia.com/gpu": "0"})])
    assert "limits nvidia.com/gpu" in res.unschedulable[0].reason


# --- instance type choice -------------------------------------------------------------------------------------------
def test_gpu_and_metal_avoided_unless_needed():
    res = run([pod("a", cpu="2", memory="8Gi")])
    names = [it.name for it in res.nodeclaims[0].instance_types]
    assert not any(n.startswith("g") or "metal" in n for n in names)
    res = run([pod("g", cpu="1", memory="4Gi", resources={"nvidia.com/gpu": 1})])
    assert res.nodeclaims[0].instance_type == "g4dn.xlarge"
    # nothing but GPU types fit a huge pod: they are used
    res = run([pod("big", cpu="40", memory="100Gi")])
    assert res.nodeclaims[0].instance_type in ("g4dn.12xlarge", "m5.metal")


def test_gpu_explanation_with_arch():
    res = run([pod("g", resources={"nvidia.com/gpu": 8}, nodeSelector={L.ARCH: "arm64"})], pools=[nodepool("gpu")])
    # no DaemonSet: no "(+ daemonset overhead)"
    assert res.unschedulable[0].reason == "no instance type in NodePool gpu has nvidia.com/gpu=8 (at most 1) with kubernetes.io/arch=arm64"


def test_spot_when_allowed_and_cheaper():
    res = run([pod("a")], pools=[nodepool(requirements=ANY_CT)])
    assert res.nodeclaims[0].capacity_type == "spot"
    assert run([pod("a")]).nodeclaims[0].capacity_type == "on-demand"
    # spot offered nowhere cheaper: on-demand
    types = [itype("m5.large", 2, 8, 0.096, spot=1.5)]
    assert run([pod("a")], pools=[nodepool(requirements=ANY_CT)], types=types).nodeclaims[0].capacity_type == "on-demand"


def test_at_most_60_instance_types():
    many = [itype(f"m{g}.{s}", v, v * 4, v * 0.05 + g * 0.001) for g in range(5, 25) for s, v in
            (("large", 2), ("xlarge", 4), ("2xlarge", 8), ("4xlarge", 16))]
    res = run([pod("a", cpu="100m")], types=many)
    assert len(res.nodeclaims[0].instance_types) == 60
    res = solve(SchedulingInput(pods=[pod("a", cpu="100m")], nodepools=[NodePoolInput(nodepool(), many)], max_instance_types=5))
    assert len(res.nodeclaims[0].instance_types) == 5


def test_min_values():
    req = [{"key": L.INSTANCE_FAMILY, "operator": "Exists", "minValues": 3}, {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}]
    res = run([pod("a")], pools=[nodepool(requirements=req)])
    fams = {it.labels[L.INSTANCE_FAMILY] for it in res.nodeclaims[0].instance_types}
    assert len(fams) >= 3
    # minValues kept under truncation
    many = [itype(f"m5.s{i}", 2, 8, 0.01 + i * 0.001) for i in range(70)] + [itype("c5.large", 2, 4, 1.0), itype("r5.large", 2, 16, 1.1)]
    res = solve(SchedulingInput(pods=[pod("a")], nodepools=[NodePoolInput(nodepool(requirements=req), many)]))
    assert len(res.nodeclaims[0].instance_types) == 60
    assert {it.labels[L.INSTANCE_FAMILY] for it in res.nodeclaims[0].instance_types} == {"m5", "c5", "r5"}
    # not enough families left: unschedulable with the reason
    req5 = [{"key": L.INSTANCE_FAMILY, "operator": "In", "values": ["m5", "c5", "r5"], "minValues": 3}]
    res = run([pod("a", cpu="20", memory="100Gi")], pools=[nodepool(requirements=req5)])
    assert res.unschedulable and "minValues 3" in res.unschedulable[0].reason


def test_relaxation_order_required_term_first():
    # first ORed term impossible, preferred affinity also impossible: the required term goes first (one step),
    # and the pod lands on the second term's family
    aff = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": L.INSTANCE_FAMILY, "operator": "In", "values": ["zz9"]}]},
            {"matchExpressions": [{"key": L.INSTANCE_FAMILY, "operator": "In", "values": ["c5", "m5"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [{"key": L.INSTANCE_FAMILY, "operator": "In", "values": ["m5"]}]}}]}}
    res = run([pod("a", affinity=aff)])
    assert res.nodeclaims[0].instance_type.startswith("m5.")  # preference still honoured after the term was dropped


def test_explanations_join_nodepools():
    pools = [nodepool("a", taints=[{"key": "x", "value": "y", "effect": "NoSchedule"}]),
             nodepool("b", limits={"cpu": "0"})]
    res = run([pod("p")], pools=pools)
    r = res.unschedulable[0].reason
    assert "NodePool a: taint x=y:NoSchedule not tolerated" in r and "NodePool b: limits cpu 0 reached" in r
    res = run([pod("p")], pools=[])
    assert res.unschedulable[0].reason == "no NodePool"
