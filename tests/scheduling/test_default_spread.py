"""Default topology spread constraints (scheduling/default_spread.py): Karpenter v1.15's
``DefaultTopologySpreadInjector`` (pkg/controllers/provisioning/scheduling/defaultconstraints.go, its cases in
defaultconstraints_test.go) and kube-scheduler's ``helper.DefaultSelector``.  The selector deduction, the injection
(which pods, which objects are shared), and the point of the feature: what the solver and the disruption
simulations do with the injected constraints.  Pure, on tests/builders.py snapshots; milliseconds."""

from __future__ import annotations

import copy

import pytest

from builders import ZONES, claimed_node, nodepool, pod, snapshot
from karpenter_lambda.api import labels as L
from karpenter_lambda.api.scheduler_config import parse_scheduler_config
from karpenter_lambda.disruption.emptiness import Emptiness
from karpenter_lambda.disruption.plan import SweepBudgets, plan_sweep
from karpenter_lambda.disruption.underutilized import MultiNodeConsolidation, SingleNodeConsolidation
from karpenter_lambda.scheduling import solve
from karpenter_lambda.scheduling.default_spread import (ControllerIndex, apply_default_spread, default_selector,
                                                        default_spread_applied, inject_default_spread)
from karpenter_lambda.scheduling.inputs import scheduling_input
from karpenter_lambda.scheduling.podfacts import build_classes

A, B, C = ZONES
ZONE_DNS = {"maxSkew": 1, "topologyKey": L.ZONE, "whenUnsatisfiable": "DoNotSchedule"}
ZONE_SA = {"maxSkew": 1, "topologyKey": L.ZONE, "whenUnsatisfiable": "ScheduleAnyway"}
HOST_DNS = {"maxSkew": 1, "topologyKey": L.HOSTNAME, "whenUnsatisfiable": "DoNotSchedule"}


def defaults(*constraints: dict) -> tuple:
    """The constraints as the setting delivers them (through the real parser)."""
    return parse_scheduler_config({"podTopologySpread": {"defaultConstraints": list(constraints)}}).default_constraints


def replicaset(name: str = "web", namespace: str = "default", api_version: str = "apps/v1", **selector) -> dict:
    """A ReplicaSet whose spec.selector is ``selector`` (default ``matchLabels: {app: <name>}``)."""
    sel = selector or {"matchLabels": {"app": name}}
    return {"apiVersion": api_version, "kind": "ReplicaSet", "metadata": {"name": name, "namespace": namespace,
                                                                          "uid": f"replicaset-{name}"},
            "spec": {"selector": sel}}


def statefulset(name: str, **selector) -> dict:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": selector or {"matchLabels": {"app": name}}}}


def rc(name: str, selector: dict | None) -> dict:
    return {"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": selector}}


def service(name: str, selector: dict | None, namespace: str = "default") -> dict:
    spec = {"ports": [{"port": 80}]}
    if selector is not None:
        spec["selector"] = selector
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def owned(name: str, labels: dict, kind: str = "ReplicaSet", owner: str = "web", api_version: str = "apps/v1",
          controller: bool = True, **kw) -> dict:
    """A pending pod with exactly ``labels``, controlled by ``kind``/``owner`` (``kind=None``: no owner)."""
    p = pod(name, owner=None, **kw)
    p["metadata"]["labels"] = dict(labels)
    if kind:
        p["metadata"]["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": owner,
                                             "uid": f"{kind.lower()}-{owner}", "controller": controller}]
    return p


def tsc(p: dict) -> list | None:
    return (p.get("spec") or {}).get("topologySpreadConstraints")


IN = "In"


def expr(key: str, *values: str, op: str = IN) -> dict:
    return {"key": key, "operator": op, "values": list(values)}


# -- the selector: Services -------------------------------------------------------------------------------------
def test_a_matching_service_contributes_its_selector_as_match_labels():
    p = owned("a", {"app": "web", "extra": "ignored"}, kind=None)
    assert default_selector(p, [service("s", {"app": "web"})], []) == {"matchLabels": {"app": "web"}}


def test_the_selectors_of_every_matching_service_are_merged():
    p = owned("a", {"app": "web", "tier": "frontend"}, kind=None)
    svcs = [service("s1", {"app": "web"}), service("s2", {"tier": "frontend"}), service("s3", {"app": "other"}),
            service("s4", {"app": "web", "tier": "frontend"})]
    assert default_selector(p, svcs, []) == {"matchLabels": {"app": "web", "tier": "frontend"}}


def test_a_non_matching_service_contributes_nothing():
    assert default_selector(owned("a", {"app": "web"}, kind=None), [service("s", {"app": "other"})], []) is None


def test_a_service_without_selector_matches_nothing_and_an_empty_one_adds_nothing():
    p = owned("a", {"app": "web"}, kind=None)
    assert default_selector(p, [service("headless", None)], []) is None
    assert default_selector(p, [service("all", {})], []) is None
    # the empty one matched but added nothing: with a real one the result is that one's alone
    assert default_selector(p, [service("all", {}), service("s", {"app": "web"})], []) == {"matchLabels": {"app": "web"}}


def test_a_matching_service_in_another_namespace_is_ignored():
    p = owned("a", {"app": "web"}, kind=None)
    assert default_selector(p, [service("s", {"app": "web"}, namespace="other")], []) is None


# -- the selector: the controller -------------------------------------------------------------------------------
def test_a_replicaset_selector_becomes_in_expressions_not_the_pod_labels():
    p = owned("a", {"app": "web", "pod-template-hash": "abc123", "extra": "ignored"})
    rs = replicaset(matchLabels={"app": "web", "pod-template-hash": "abc123"})
    assert default_selector(p, [], [rs]) == {"matchExpressions": [expr("app", "web"),
                                                                  expr("pod-template-hash", "abc123")]}


def test_a_replicaset_match_expressions_are_carried_verbatim_after_its_match_labels():
    rs = replicaset(matchLabels={"tier": "fe"}, matchExpressions=[{"key": "app", "operator": "NotIn", "values": ["x"]},
                                                                  {"key": "track", "operator": "Exists"}])
    sel = default_selector(owned("a", {"app": "web", "tier": "fe", "track": "1"}), [], [rs])
    assert sel == {"matchExpressions": [expr("tier", "fe"), expr("app", "x", op="NotIn"), expr("track", op="Exists")]}


def test_a_statefulset_selector_ignores_the_pods_volatile_labels():
    p = owned("db-0", {"app": "db", "controller-revision-hash": "db-6f8c", "statefulset.kubernetes.io/pod-name": "db-0"},
              kind="StatefulSet", owner="db")
    assert default_selector(p, [], [statefulset("db")]) == {"matchExpressions": [expr("app", "db")]}


def test_a_replicationcontroller_selector_becomes_match_labels():
    p = owned("a", {"app": "legacy"}, kind="ReplicationController", owner="legacy", api_version="v1")
    assert default_selector(p, [], [rc("legacy", {"app": "legacy"})]) == {"matchLabels": {"app": "legacy"}}
    assert default_selector(p, [], [rc("legacy", {})]) is None
    assert default_selector(p, [], [rc("legacy", None)]) is None


def test_a_service_and_the_owner_combine():
    p = owned("a", {"app": "web", "pod-template-hash": "abc", "tier": "frontend"})
    rs = replicaset(matchLabels={"app": "web", "pod-template-hash": "abc"})
    assert default_selector(p, [service("s", {"tier": "frontend"})], [rs]) == {
        "matchLabels": {"tier": "frontend"},
        "matchExpressions": [expr("app", "web"), expr("pod-template-hash", "abc")]}


def test_a_replicationcontroller_overwrites_a_conflicting_service_label():
    p = owned("a", {"app": "web"}, kind="ReplicationController", owner="legacy", api_version="v1")
    sel = default_selector(p, [service("s", {"app": "web"})], [rc("legacy", {"app": "legacy"})])
    assert sel == {"matchLabels": {"app": "legacy"}}


def test_a_replicaset_conflicting_with_a_service_is_anded_and_selects_nothing():
    from karpenter_lambda.api.selectors import Selector
    p = owned("a", {"app": "web"})
    sel = default_selector(p, [service("s", {"app": "web"})], [replicaset(matchLabels={"app": "other"})])
    assert sel == {"matchLabels": {"app": "web"}, "matchExpressions": [expr("app", "other")]}
    assert not Selector(sel).matches({"app": "web"}) and not Selector(sel).matches({"app": "other"})


@pytest.mark.parametrize("ref_version, object_version", [
    ("extensions/v1beta1", "apps/v1"),          # the ownerReference names another API version
    ("apps/v1", "extensions/v1beta1"),          # the object of that name is another API version's
    ("apps/v1beta2/x", "apps/v1"),              # does not parse
])
def test_a_replicaset_of_another_api_version_contributes_nothing(ref_version, object_version):
    p = owned("a", {"app": "web"}, api_version=ref_version)
    assert default_selector(p, [], [replicaset(api_version=object_version)]) is None


def test_an_owner_reference_without_api_version_reads_as_the_kinds_own():
    p = owned("a", {"app": "web"})
    del p["metadata"]["ownerReferences"][0]["apiVersion"]
    assert default_selector(p, [], [replicaset()]) == {"matchExpressions": [expr("app", "web")]}


def test_a_non_controller_owner_reference_is_ignored():
    assert default_selector(owned("a", {"app": "web"}, controller=False), [], [replicaset()]) is None


def test_an_unsupported_owner_kind_contributes_nothing():
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "web", "namespace": "default"},
           "spec": {"selector": {"matchLabels": {"app": "web"}}}}
    assert default_selector(owned("a", {"app": "web"}, kind="Job", api_version="batch/v1"), [], [job]) is None


def test_a_missing_owner_contributes_nothing():
    p = owned("a", {"app": "web"}, owner="gone")
    assert default_selector(p, [], [replicaset("web")]) is None
    assert default_selector(p, [], [replicaset("gone", namespace="other")]) is None   # looked up in the pod's namespace
    # ... but a Service still defaults it
    assert default_selector(p, [service("s", {"app": "web"})], [replicaset("web")]) == {"matchLabels": {"app": "web"}}


def test_an_owner_selector_with_an_unknown_operator_contributes_nothing():
    rs = replicaset(matchExpressions=[{"key": "app", "operator": "Like", "values": ["web"]}])
    assert default_selector(owned("a", {"app": "web"}), [], [rs]) is None


def test_the_selector_never_aliases_the_owner():
    rs = replicaset(matchExpressions=[{"key": "app", "operator": "In", "values": ["web"]}])
    keep = copy.deepcopy(rs)
    sel = default_selector(owned("a", {"app": "web"}), [], ControllerIndex([rs]))
    sel["matchExpressions"][0]["values"].append("mutated")
    assert rs == keep


# -- injection --------------------------------------------------------------------------------------------------
def test_a_pod_without_constraints_gets_every_default_with_its_selector_and_the_input_is_not_modified():
    p = owned("a", {"app": "web"})
    before = copy.deepcopy(p)
    [out] = inject_default_spread([p], defaults(ZONE_SA, HOST_DNS), [], [replicaset()])
    assert p == before
    assert out is not p and out["metadata"] is p["metadata"]
    sel = {"matchExpressions": [expr("app", "web")]}
    assert tsc(out) == [{**ZONE_SA, "labelSelector": sel}, {**HOST_DNS, "labelSelector": sel}]
    assert {k: v for k, v in out["spec"].items() if k != "topologySpreadConstraints"} == p["spec"]


def test_the_configured_fields_are_kept_on_the_copy():
    con = {**ZONE_SA, "maxSkew": 4, "minDomains": 3, "nodeTaintsPolicy": "Honor"}
    [out] = inject_default_spread([owned("a", {"app": "web"})], defaults(con), [], [replicaset()])
    assert tsc(out) == [{**con, "labelSelector": {"matchExpressions": [expr("app", "web")]}}]


def test_a_pod_with_its_own_constraints_is_untouched():
    own = [{"maxSkew": 5, "topologyKey": L.HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": "web"}}}]
    p = owned("a", {"app": "web"}, topologySpreadConstraints=own)
    [out] = inject_default_spread([p], defaults(ZONE_DNS), [], [replicaset()])
    assert out is p and tsc(out) == own


def test_an_empty_constraints_list_counts_as_none():
    p = owned("a", {"app": "web"}, topologySpreadConstraints=[])
    [out] = inject_default_spread([p], defaults(ZONE_DNS), [], [replicaset()])
    assert out is not p and len(tsc(out)) == 1


def test_a_pod_with_no_deducible_selector_is_not_defaulted():
    p = owned("a", {"app": "orphan"}, kind=None)
    [out] = inject_default_spread([p], defaults(ZONE_DNS), [service("s", {"app": "web"})], [replicaset()])
    assert out is p and tsc(out) is None


def test_daemonset_and_terminal_pods_are_left_as_they_are():
    ds = owned("ds", {"app": "web"}, kind="DaemonSet", owner="web")
    done = owned("done", {"app": "web"}, phase="Succeeded")
    out = inject_default_spread([ds, done], defaults(ZONE_DNS), [service("s", {"app": "web"})], [])
    assert out[0] is ds and out[1] is done


def test_no_defaults_is_a_no_op():
    pods = [owned("a", {"app": "web"})]
    out = inject_default_spread(pods, (), [], [replicaset()])
    assert out == pods and out[0] is pods[0] and out is not pods


def test_pods_sharing_inputs_share_one_constraints_list_and_form_one_class():
    pods = [owned(f"web-{i}", {"app": "web"}) for i in range(3)]
    out = inject_default_spread(pods, defaults(ZONE_DNS), [], [replicaset()])
    assert tsc(out[0]) is tsc(out[1]) is tsc(out[2])
    classes = build_classes(out, lambda: {}, [])
    assert len(classes) == 1 and len(classes[0].pods) == 3


def test_pods_with_different_labels_but_the_same_selector_share_the_list():
    pods = [owned(f"db-{i}", {"app": "db", "statefulset.kubernetes.io/pod-name": f"db-{i}"}, kind="StatefulSet",
                  owner="db") for i in range(2)]
    out = inject_default_spread(pods, defaults(ZONE_DNS), [], [statefulset("db")])
    assert tsc(out[0]) is tsc(out[1])


def test_pods_of_one_owner_with_different_labels_get_different_selectors():
    svc = service("s", {"tier": "frontend"})
    frontend, plain = owned("f", {"app": "web", "tier": "frontend"}), owned("p", {"app": "web"})
    out = inject_default_spread([frontend, plain], defaults(ZONE_DNS), [svc], [replicaset()])
    assert tsc(out[0])[0]["labelSelector"]["matchLabels"] == {"tier": "frontend"}
    assert "matchLabels" not in tsc(out[1])[0]["labelSelector"]


def test_identically_labelled_pods_in_two_namespaces_are_deduced_apart():
    here, there = owned("a", {"app": "web"}, kind=None), owned("a", {"app": "web"}, kind=None, namespace="other")
    out = inject_default_spread([here, there], defaults(ZONE_DNS), [service("s", {"app": "web"})], [])
    assert len(tsc(out[0])) == 1 and out[1] is there


def test_pods_of_different_workloads_in_one_pass():
    web, api = owned("w", {"app": "web"}, owner="web"), owned("a", {"app": "api"}, owner="api")
    orphan = owned("o", {"app": "orphan"}, kind=None)
    out = inject_default_spread([web, api, orphan], defaults(ZONE_DNS), [], [replicaset("web"), replicaset("api")])
    assert tsc(out[0])[0]["labelSelector"] == {"matchExpressions": [expr("app", "web")]}
    assert tsc(out[1])[0]["labelSelector"] == {"matchExpressions": [expr("app", "api")]}
    assert out[2] is orphan


# -- the snapshot -----------------------------------------------------------------------------------------------
def web_snapshot(n: int = 3, *constraints: dict, **kw):
    """``n`` pending replicas of Deployment web (pods of ReplicaSet web, selector app=web), with ``constraints``
    as the snapshot's default spread."""
    snap = snapshot(pods=[pod(f"web-{i}", cpu="100m") for i in range(n)], **kw)
    snap.default_spread = defaults(*constraints) if constraints else ()
    snap.workload_controllers = [replicaset()]
    return snap


def test_apply_default_spread_replaces_the_pods_once_and_refreshes_the_views():
    snap = web_snapshot(2, ZONE_DNS)
    old = snap.pods
    assert snap.pods_by_uid["uid-default-web-0"] is old[0]   # a view computed before
    apply_default_spread(snap)
    assert default_spread_applied(snap)
    assert snap.pods is not old and all(len(tsc(p)) == 1 for p in snap.pods)
    assert snap.pods_by_uid["uid-default-web-0"] is snap.pods[0]
    now = snap.pods
    apply_default_spread(snap)
    assert snap.pods is now


def test_apply_default_spread_without_defaults_leaves_the_snapshot_alone():
    snap = web_snapshot(2)
    old = snap.pods
    apply_default_spread(snap)
    assert snap.pods is old and not default_spread_applied(snap)


def test_bound_pods_are_defaulted_too_so_disruption_sees_them():
    a = claimed_node("a", zone=A, instance_type="m5.xlarge")
    snap = snapshot(a, pods=[pod("web-0", cpu="500m", node="node-a")])
    snap.default_spread, snap.workload_controllers = defaults(ZONE_DNS), [replicaset()]
    apply_default_spread(snap)
    [on_node] = snap.pods_by_node["node-a"]
    assert tsc(on_node)[0]["topologyKey"] == L.ZONE


def test_scheduling_input_maps_pods_taken_before_to_the_injected_copies():
    snap = web_snapshot(3, ZONE_DNS)
    pending = snap.pending_pods()   # taken before the defaults are applied
    inp, _ = scheduling_input(snap, pending)
    assert all(tsc(p) is None for p in pending)
    assert [p["metadata"]["name"] for p in inp.pods] == ["web-0", "web-1", "web-2"]
    assert all(a is b for a, b in zip(inp.pods, snap.pods))
    assert all(tsc(p)[0]["labelSelector"] == {"matchExpressions": [expr("app", "web")]} for p in inp.pods)


# -- what the solver does with them -----------------------------------------------------------------------------
def zones_of(res) -> list[str]:
    return sorted(c.zone for c in res.nodeclaims)


def plan(snap):
    return solve(scheduling_input(snap, snap.pending_pods())[0])


def test_without_a_default_three_replicas_share_one_node():
    res = plan(web_snapshot(3))
    assert res.unschedulable == [] and len(res.nodeclaims) == 1 and len(res.nodeclaims[0].pods) == 3


def test_a_zone_default_spreads_three_replicas_over_three_zones():
    res = plan(web_snapshot(3, ZONE_DNS))
    assert res.unschedulable == []
    assert zones_of(res) == [A, B, C]
    assert all(len(c.pods) == 1 for c in res.nodeclaims)


def test_a_hostname_default_puts_one_replica_per_node():
    res = plan(web_snapshot(3, HOST_DNS))
    assert res.unschedulable == [] and len(res.nodeclaims) == 3
    assert all(len(c.pods) == 1 for c in res.nodeclaims)


def test_a_schedule_anyway_default_is_a_preference_kept_when_it_can_be():
    res = plan(web_snapshot(3, ZONE_SA))
    assert res.unschedulable == [] and zones_of(res) == [A, B, C]


def test_a_default_does_not_apply_to_pods_with_their_own_constraints():
    own = [{"maxSkew": 1, "topologyKey": L.HOSTNAME, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}}}]
    snap = snapshot(pods=[pod(f"web-{i}", cpu="100m", topologySpreadConstraints=own) for i in range(3)])
    snap.default_spread, snap.workload_controllers = defaults(ZONE_DNS), [replicaset()]
    res = plan(snap)
    assert len(res.nodeclaims) == 3 and len(set(c.zone for c in res.nodeclaims)) == 1   # hostname only: one zone


@pytest.mark.parametrize("when, placed", [("ScheduleAnyway", True), ("DoNotSchedule", False)])
def test_only_one_zone_allowed_schedule_anyway_relaxes_do_not_schedule_refuses(when, placed):
    # two web pods already run in zone a, and a node in zone b makes b a domain (0 pods); the NodePool offers only
    # zone a and both nodes are tainted: the new replicas can only go to a new node in zone a (skew 3 and 4)
    taint = [{"key": "dedicated", "value": "other", "effect": "NoSchedule"}]
    a = claimed_node("a", zone=A, instance_type="m5.xlarge", taints=taint)
    b = claimed_node("b", zone=B, instance_type="m5.xlarge", taints=taint)
    pool = nodepool(requirements=[{"key": L.ZONE, "operator": "In", "values": [A]},
                                  {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}])
    snap = snapshot(a, b, nodepools=[pool], pods=[pod("web-0", node="node-a"), pod("web-1", node="node-a"),
                                                  pod("web-2"), pod("web-3")])
    snap.default_spread = defaults({**ZONE_DNS, "whenUnsatisfiable": when})
    snap.workload_controllers = [replicaset()]
    res = plan(snap)
    if placed:
        assert res.unschedulable == [] and zones_of(res) == [A]
    else:
        assert res.nodeclaims == [] and len(res.unschedulable) == 2
        assert all("topology spread topology.kubernetes.io/zone maxSkew 1" in u.reason for u in res.unschedulable)


def test_consolidation_keeps_a_zone_default_spread():
    # two half-empty nodes in zones a and b, one web replica each: without the default both pods move onto one new
    # node; with it, that would leave zone b empty (skew 2), so each node is only replaced in its own zone
    def snap_for(constraints):
        a = claimed_node("a", zone=A, instance_type="m5.xlarge")
        b = claimed_node("b", zone=B, instance_type="m5.xlarge")
        snap = snapshot(a, b, pods=[pod("web-0", cpu="500m", node="node-a"), pod("web-1", cpu="500m", node="node-b")],
                        nodepools=[nodepool(budgets=[{"nodes": "100%"}])])
        snap.default_spread, snap.workload_controllers = constraints, [replicaset()]
        apply_default_spread(snap)   # as the snapshot loader does
        return snap

    def commands(snap):
        methods = [Emptiness(), MultiNodeConsolidation(), SingleNodeConsolidation()]
        return sorted((sorted(c.names), [r.zone for r in c.replacements])
                      for c in plan_sweep(snap, methods, SweepBudgets(snap, {})).commands)

    assert commands(snap_for(())) == [(["a", "b"], [A])]
    assert commands(snap_for(defaults(ZONE_DNS))) == [(["a"], [A]), (["b"], [B])]


def test_match_label_keys_pod_template_hash_counts_only_the_deployments_own_pods():
    """A Deployment's pods carry pod-template-hash (api/workloads.py), so a spread with matchLabelKeys:
    [pod-template-hash] counts only them: 9 replicas spread 3/3/3 though other pods matching the selector sit in
    one zone.  Before, the label was missing and the key did nothing (4/1/4 in a randomized audit)."""
    import collections

    from karpenter_lambda.api import labels as L
    from karpenter_lambda.api.workloads import expand

    from .helpers import run

    spread = [{"maxSkew": 1, "topologyKey": L.ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"grp": "g2"}}, "matchLabelKeys": ["pod-template-hash"]}]
    web = expand({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
                  "spec": {"replicas": 9, "selector": {"matchLabels": {"app": "web"}}, "template": {
                      "metadata": {"labels": {"app": "web", "grp": "g2"}},
                      "spec": {"topologySpreadConstraints": spread,
                               "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}}}}).pods
    other = expand({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "other", "namespace": "default"},
                    "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "other"}}, "template": {
                        "metadata": {"labels": {"app": "other", "grp": "g2"}},
                        "spec": {"nodeSelector": {L.ZONE: "us-east-1b"},
                                 "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}}}}).pods
    res = run(web + other)
    assert not res.unschedulable
    per_zone = collections.Counter()
    for nc in res.nodeclaims:
        per_zone[nc.zone] += sum(1 for p in nc.pods if p.startswith("default/web-"))
    assert sorted(per_zone.values()) == [3, 3, 3], per_zone
