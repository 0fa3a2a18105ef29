"""Karpenter semantics found missing in an audit of the solver; each case fails without its fix."""

import re

import pytest

from karpenter_lambda.api import labels as L
from karpenter_lambda.scheduling import ExistingNode, SchedulingError

from .helpers import GI, catalog, itype, node_of, nodepool, pod, pods, run


def daemonset(cpu="500m", tolerations=None, ports=None):
    ctr = {"name": "d", "resources": {"requests": {"cpu": cpu, "memory": "100Mi"}}}
    if ports:
        ctr["ports"] = ports
    spec = {"containers": [ctr]}
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds"}, "spec": {"template": {"spec": spec}}}


def test_metal_sizes_with_a_suffix_are_exotic():
    # AWS sizes metal-24xl / metal-48xl are metal too (Karpenter: size contains "metal")
    types = catalog() + [itype("c7i.metal-24xl", 96, 192, 0.01, extra_labels={L.INSTANCE_SIZE: "metal-24xl"})]
    res = run([pod("a", cpu="1", memory="1Gi")], types=types)
    names = [it.name for it in res.nodeclaims[0].instance_types]
    assert "c7i.metal-24xl" not in names and res.nodeclaims[0].instance_type != "c7i.metal-24xl"
    # still used when nothing else holds the pod
    res = run([pod("big", cpu="90", memory="100Gi")], types=types)
    assert not res.unschedulable and res.nodeclaims[0].instance_type in ("c7i.metal-24xl", "m5.metal")


def test_daemonset_overhead_ignores_prefer_no_schedule_taints():
    # a daemon pod does not respect PreferNoSchedule: its requests still count on that NodePool's nodes
    pool = nodepool(taints=[{"key": "soft", "value": "x", "effect": "PreferNoSchedule"}])
    res = run([pod("a", cpu="1")], pools=[pool], daemonsets=[daemonset("250m")])
    assert res.nodeclaims[0].requests["cpu"] == 1250
    # a NoSchedule taint it does not tolerate still keeps it off
    pool = nodepool(taints=[{"key": "hard", "effect": "NoSchedule"}])
    res = run([pod("a", cpu="1", tolerations=[{"key": "hard", "operator": "Exists"}])], pools=[pool],
              daemonsets=[daemonset("250m")])
    assert res.nodeclaims[0].requests["cpu"] == 1000


def test_limits_no_option_counts_more_than_the_nodeclaim_was_charged():
    # the provisioner (like Karpenter) reserves each NodeClaim's largest option against the limits: the sum of
    # those over the plan must stay within the limit, or a planned NodeClaim is refused at launch
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": L.HOSTNAME, "labelSelector": {"matchLabels": {"app": "a"}}}]}}
    res = run(pods(5, cpu="1", memory="1Gi", labels={"app": "a"}, affinity=anti), pools=[nodepool(limits={"cpu": "8"})])
    assert len(res.nodeclaims) == 4 and len(res.unschedulable) == 1  # 4 nodes of 2 vCPU
    reserved = sum(max(it.capacity["cpu"] for it in n.instance_types) for n in res.nodeclaims)
    assert reserved <= 8000
    for n in res.nodeclaims:
        assert n.instance_type in [it.name for it in n.instance_types]
    res = run(pods(3, cpu="3", memory="20Gi"), pools=[nodepool(limits={"memory": "70Gi"})])
    reserved = sum(max(it.capacity["memory"] for it in n.instance_types) for n in res.nodeclaims)
    assert reserved <= 70 * GI


def test_daemonset_host_port_blocks_pods_wanting_the_same_port():
    ds = daemonset("100m", tolerations=[{"operator": "Exists"}], ports=[{"containerPort": 9100, "hostPort": 9100}])
    same = pod("same", cpu="100m", ports=[{"containerPort": 9100, "hostPort": 9100}])
    other = pod("other", cpu="100m", ports=[{"containerPort": 80, "hostPort": 8080}])
    res = run([same, other], daemonsets=[ds])
    assert [u.pod for u in res.unschedulable] == ["default/same"]
    assert "host port 9100/TCP" in res.unschedulable[0].reason and "DaemonSet" in res.unschedulable[0].reason
    assert node_of(res, "default/other") is not None


def test_host_port_on_unspecified_ip_conflicts_with_a_specific_ip():
    a = pod("a", cpu="100m", ports=[{"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.1"}])
    b = pod("b", cpu="100m", ports=[{"containerPort": 80, "hostPort": 8080}])
    res = run([a, b])
    assert node_of(res, "default/a") is not node_of(res, "default/b")
    c = pod("c", cpu="100m", ports=[{"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.2"}])
    res = run([a, c])
    assert node_of(res, "default/a") is node_of(res, "default/c")


def test_bad_host_port_is_an_invalid_pod_not_a_crash():
    bad = pod("bad", cpu="100m", ports=[{"containerPort": 80, "hostPort": "http"}])
    res = run([bad, pod("ok", cpu="100m")])
    assert [u.pod for u in res.unschedulable] == ["default/bad"]
    assert "invalid pod" in res.unschedulable[0].reason and "hostPort" in res.unschedulable[0].reason
    assert node_of(res, "default/ok") is not None


def test_preferred_pod_affinity_to_a_larger_pod_of_the_same_round():
    # queue order is cpu desc: the db pod is placed first, the small web pods then join its node
    db = pod("db", cpu="1", memory="1Gi", labels={"app": "db"})
    pref = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "podAffinityTerm": {
        "topologyKey": L.HOSTNAME, "labelSelector": {"matchLabels": {"app": "db"}}}}]}}
    web = pods(2, prefix="web", cpu="100m", memory="100Mi", labels={"app": "web"}, affinity=pref)
    res = run([db] + web)
    assert node_of(res, "default/web-0") is node_of(res, "default/db") is node_of(res, "default/web-1")


def test_preferred_pod_anti_affinity_to_a_larger_pod_of_the_same_round():
    db = pod("db", cpu="1", memory="1Gi", labels={"app": "db"})
    anti = {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 50, "podAffinityTerm": {
        "topologyKey": L.HOSTNAME, "labelSelector": {"matchLabels": {"app": "db"}}}}]}}
    web = pod("web", cpu="100m", memory="100Mi", labels={"app": "web"}, affinity=anti)
    res = run([db, web])
    assert node_of(res, "default/web") is not node_of(res, "default/db")


def test_existing_node_bad_allocatable_names_the_field():
    ex = ExistingNode(name="n1", allocatable={"cpu": "lots"})
    with pytest.raises(SchedulingError, match=r"existing_nodes\[0\] \(n1\): allocatable.cpu"):
        run([pod("a")], existing_nodes=[ex])


def _with_zone_ids(types):
    from karpenter_lambda.catalog.types import Offering
    ids = {"us-east-1a": "use1-az6", "us-east-1b": "use1-az1", "us-east-1c": "use1-az2"}
    for t in types:
        t.offerings = [Offering(o.zone, o.capacity_type, o.price, zone_id=ids[o.zone]) for o in t.offerings]
    return types


def test_zone_id_requirement_picks_that_zone():
    types = _with_zone_ids(catalog())
    p = pod("a", cpu="1", nodeSelector={L.ZONE_ID: "use1-az1"})
    res = run([p], types=types)
    assert not res.unschedulable and res.nodeclaims[0].zone == "us-east-1b"
    # with a zone spread the domains follow the zone id too
    spread = [{"maxSkew": 1, "topologyKey": L.ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "z"}}}]
    ps = pods(3, cpu="1", labels={"app": "z"}, topologySpreadConstraints=spread, nodeSelector={L.ZONE_ID: "use1-az2"})
    res = run(ps, types=types)
    assert not res.unschedulable and {n.zone for n in res.nodeclaims} == {"us-east-1c"}
    res = run([pod("b", cpu="1", nodeSelector={L.ZONE_ID: "use1-az9"})], types=types)
    assert res.unschedulable and not res.nodeclaims


def test_hostname_selector_only_matches_existing_nodes():
    p = pod("pinned", cpu="1", nodeSelector={L.HOSTNAME: "node-7"})
    res = run([p])
    assert [u.pod for u in res.unschedulable] == ["default/pinned"]
    assert "kubernetes.io/hostname In [node-7]" in res.unschedulable[0].reason
    node = ExistingNode(name="node-7", labels={L.HOSTNAME: "node-7"}, allocatable={"cpu": 4000, "memory": 8 * GI, "pods": 10})
    res = run([pod("pinned", cpu="1", nodeSelector={L.HOSTNAME: "node-7"})], existing_nodes=[node])
    assert res.existing == {"node-7": ["default/pinned"]} and not res.nodeclaims
    # NotIn a hostname is fine on a new node
    res = run([pod("free", cpu="1", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": L.HOSTNAME, "operator": "NotIn", "values": ["node-7"]}]}]}}})])
    assert not res.unschedulable


def test_zone_spread_node_taints_policy_and_explanation():
    zone = {"key": L.ZONE, "operator": "In"}
    general = nodepool("general", requirements=[dict(zone, values=["us-east-1a", "us-east-1b"])])
    tainted = nodepool("tainted", requirements=[dict(zone, values=["us-east-1c"])],
                       taints=[{"key": "batch", "value": "x", "effect": "NoSchedule"}])

    def spread_pods(**policy):
        tsc = dict({"maxSkew": 1, "topologyKey": L.ZONE, "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "s"}}}, **policy)
        return pods(4, cpu="1", labels={"app": "s"}, topologySpreadConstraints=[tsc])

    # nodeTaintsPolicy Ignore (default, as Karpenter): us-east-1c counts though only a NodePool the pods do not
    # tolerate offers it, so it stays at 0 and caps the other zones at 1
    res = run(spread_pods(), pools=[general, tainted])
    assert sum(len(n.pods) for n in res.nodeclaims) == 2 and len(res.unschedulable) == 2
    reason = res.unschedulable[0].reason
    assert "NodePool tainted: taint batch=x:NoSchedule not tolerated" in reason
    assert "us-east-1c=0" in reason and "us-east-1a=1" in reason
    # Honor: only domains of NodePools whose taints the pods tolerate
    res = run(spread_pods(nodeTaintsPolicy="Honor"), pools=[general, tainted])
    assert not res.unschedulable
    assert sorted(n.zone for n in res.nodeclaims for _ in n.pods) == ["us-east-1a"] * 2 + ["us-east-1b"] * 2


def test_ored_node_affinity_terms_all_failing_are_each_explained():
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": L.INSTANCE_TYPE, "operator": "In", "values": ["p5.48xlarge"]}]},
        {"matchExpressions": [{"key": L.ARCH, "operator": "In", "values": ["s390x"]}]},
    ]}}}
    res = run([pod("picky", affinity=affinity)], [nodepool()], catalog())
    (u,) = res.unschedulable
    assert u.reason.startswith("none of the 2 required node affinity terms can be met: ")
    assert "term 0:" in u.reason and "p5.48xlarge" in u.reason
    assert "term 1:" in u.reason and "s390x" in u.reason


def test_ored_node_affinity_second_term_is_used_when_the_first_fails():
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": L.ARCH, "operator": "In", "values": ["s390x"]}]},
        {"matchExpressions": [{"key": L.ARCH, "operator": "In", "values": ["arm64"]}]},
    ]}}}
    res = run([pod("ok", affinity=affinity)], [nodepool()], catalog())
    assert not res.unschedulable
    (claim,) = res.nodeclaims
    assert all(it.labels[L.ARCH] == "arm64" for it in claim.instance_types)


def _charged(plan, key):
    return max(it.capacity.get(key, 0) for it in plan.instance_types)

def test_binding_limits_still_hold():
    work = pods(12, prefix="web", cpu="1", memory="1Gi", owner="web")
    res = run(work, [nodepool(limits={"cpu": "8"})], catalog())
    assert sum(_charged(p, "cpu") for p in res.nodeclaims) <= 8_000
    assert res.unschedulable and all("limits cpu" in u.reason for u in res.unschedulable)


def _anti(key):
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": key, "labelSelector": {"matchLabels": {"app": "z"}}}]}}


def test_a_zone_anti_affinity_refusal_names_where_the_matching_pods_already_are():
    res = run(pods(4, prefix="z", labels={"app": "z"}, cpu="100m", affinity=_anti(L.ZONE)))
    assert len(res.nodeclaims) == 3 and len(res.unschedulable) == 1
    zones = sorted(n.zone for n in res.nodeclaims)
    why = res.unschedulable[0].reason
    assert why.startswith(f"NodePool default: pod anti-affinity {L.ZONE} selector app=z (matching pods in: "
                          + " ".join(f"{z}=1" for z in zones) + "; this node can be in "), why


def test_the_refusal_names_the_constraint_that_refused_not_a_spread_that_allowed():
    # with a zone spread beside the anti-affinity, the spread (counts 0, 0, 0: it allows every zone) is not named
    spread = [{"maxSkew": 1, "topologyKey": L.ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "z"}}}]
    res = run(pods(4, prefix="z", labels={"app": "z"}, cpu="100m", affinity=_anti(L.ZONE),
                   topologySpreadConstraints=spread))
    assert len(res.nodeclaims) == 3 and len(res.unschedulable) == 1
    why = res.unschedulable[0].reason
    assert f"pod anti-affinity {L.ZONE} selector app=z (matching pods in: " in why and "pods per domain" not in why, why


def test_a_pod_affinity_to_pods_that_do_not_exist_says_so():
    aff = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": L.HOSTNAME, "labelSelector": {"matchLabels": {"app": "nobody"}}}]}}
    res = run([pod("lonely", labels={"app": "lonely"}, affinity=aff)])
    assert res.unschedulable[0].reason == (f"NodePool default: pod affinity {L.HOSTNAME} selector app=nobody "
                                           "(no pod matches the selector, and this pod does not match it itself)")
    # a pod matching its own selector may start the group: placed
    res = run([pod("first", labels={"app": "nobody"}, affinity=aff)])
    assert res.unschedulable == [] and len(res.nodeclaims) == 1


def test_a_request_no_type_holds_says_the_most_any_type_leaves():
    res = run([pod("huge", cpu="1", memory="5000Gi")])
    why = res.unschedulable[0].reason
    m = re.search(r"has memory=5000Gi \(at most (\d+)Gi\)$", why)   # no DaemonSet: no "+ daemonset overhead"
    assert m and 300 <= int(m.group(1)) < 384, why    # the catalog's largest, m5.metal, has 384 GiB
    res = run([pod("w", resources={"example.com/widget": "1"})])
    assert "has example.com/widget=1 (none has any)" in res.unschedulable[0].reason


def test_the_daemonset_note_and_whole_cores_in_a_request_no_type_holds():
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "kube-system"},
          "spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x",
                                                           "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}}
    res = run([pod("huge", cpu="500", memory="1Gi")], daemonsets=[ds])
    why = res.unschedulable[0].reason
    m = re.search(r"has cpu=500 \(at most (\d+)\) \(\+ daemonset overhead\)$", why)   # whole cores, DaemonSets named
    assert m and int(m.group(1)) < 96, why


def test_prefer_no_schedule_is_tolerated_only_when_a_nodepool_has_such_a_taint():
    """Karpenter tolerates PreferNoSchedule as the last relaxation only when some NodePool carries that effect: a node
    someone else tainted PreferNoSchedule is not used, a new node is launched instead."""
    soft = {"key": "maintenance", "value": "soon", "effect": "PreferNoSchedule"}
    node = ExistingNode(name="n1", labels={L.HOSTNAME: "n1", L.ZONE: "us-east-1a", L.CAPACITY_TYPE: "on-demand"},
                        taints=[soft], allocatable={"cpu": 4000, "memory": 8 * GI, "pods": 10})
    pinned = pod("a", cpu="1", nodeSelector={L.HOSTNAME: "n1"})   # only n1 will do
    res = run([pinned], existing_nodes=[node])
    assert res.existing == {} and not res.nodeclaims and len(res.unschedulable) == 1
    pns_pool = nodepool(taints=[{"key": "soft", "effect": "PreferNoSchedule"}])
    res = run([pinned], existing_nodes=[node], pools=[pns_pool])
    assert res.existing == {"n1": ["default/a"]} and not res.nodeclaims
