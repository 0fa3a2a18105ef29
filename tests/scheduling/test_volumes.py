"""Volume topology and volume counts (issue 28 items 1-2), on snapshots from tests/builders.py: no moto, no API
server; each test runs in milliseconds.  The rules are scheduling/volumes.py's; the solver, consolidation and
``plan`` see them through the snapshot's pods."""

from __future__ import annotations

import copy
import dataclasses

import pytest

import builders
from builders import ZONES, claimed_node, csinode, nodepool, pod, pv, pvc, snapshot, storageclass, with_claims
from karpenter_lambda.api import labels as L
from karpenter_lambda.disruption.plan import SweepBudgets, plan_sweep
from karpenter_lambda.disruption.underutilized import MultiNodeConsolidation, SingleNodeConsolidation
from karpenter_lambda.disruption.emptiness import Emptiness
from karpenter_lambda.scheduling import solve
from karpenter_lambda.scheduling.inputs import scheduling_input
from karpenter_lambda.scheduling.podfacts import build_classes
from karpenter_lambda.scheduling.volumes import VolumeIndex, _claims, apply_volumes, inject

A, B, C = ZONES


def db(i: int, *claims: str, cpu: str = "1", **kw) -> dict:
    """StatefulSet-like pod db-<i> (its own pod-name label, as a StatefulSet's pods have) using ``claims``."""
    return with_claims(pod(f"db-{i}", cpu=cpu, memory="1Gi", owner="StatefulSet", app="db",
                           labels={"statefulset.kubernetes.io/pod-name": f"db-{i}"}, **kw), *claims)


def plan(snap, pods=None):
    pods = snap.pending_pods() if pods is None else pods
    inp, _ = scheduling_input(snap, pods)
    return solve(inp)


def zone_of(res, key: str) -> str | None:
    return next((c.zone for c in res.nodeclaims if key in c.pods), None)


def reasons(res) -> dict[str, str]:
    return {u.pod: u.reason for u in res.unschedulable}


# -- bound volumes ----------------------------------------------------------------------------------------------
def test_each_pod_gets_a_node_in_its_bound_volumes_zone():
    storage = [storageclass()]
    for i, z in enumerate((C, B, A)):   # not the order the cheapest zone would give
        storage += [pv(f"pv-{i}", zone=z, claim=f"data-db-{i}"), pvc(f"data-db-{i}", volume=f"pv-{i}")]
    snap = snapshot(pods=[db(i, f"data-db-{i}") for i in range(3)], storage=storage)
    res = plan(snap)
    assert res.unschedulable == []
    assert [zone_of(res, f"default/db-{i}") for i in range(3)] == [C, B, A]
    for c in res.nodeclaims:   # the plan's own requirements pin the zone the NodeClaim launches in
        assert c.requirements.get(L.ZONE).values == {c.zone}


def test_a_volume_in_a_zone_the_nodepool_excludes_makes_the_pod_unschedulable_naming_the_volume():
    pool = nodepool(requirements=[{"key": L.ZONE, "operator": "In", "values": [A, B]}])
    storage = [pv("pv-c", zone=C), pvc("data-db-0", volume="pv-c"), pv("pv-a", zone=A), pvc("data-db-1", volume="pv-a")]
    snap = snapshot(pods=[db(0, "data-db-0"), db(1, "data-db-1")], nodepools=[pool], storage=storage)
    res = plan(snap)
    assert [c.pods for c in res.nodeclaims] == [["default/db-1"]] and res.nodeclaims[0].zone == A
    why = reasons(res)["default/db-0"]
    assert "PVC data-db-0 (PV pv-c)" in why and C in why, why


def test_the_ebs_csi_zone_key_means_the_zone():
    storage = [pv("pv-b", zone=B, zone_key="topology.ebs.csi.aws.com/zone"), pvc("data", volume="pv-b")]
    res = plan(snapshot(pods=[db(0, "data")], storage=storage))
    assert zone_of(res, "default/db-0") == B


def test_a_local_volumes_hostname_requirement_is_dropped_and_its_zone_kept():
    local = pv("local-1", zone=B, local={"path": "/mnt/disk"})
    local["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"].append(
        {"key": L.HOSTNAME, "operator": "In", "values": ["node-gone"]})
    res = plan(snapshot(pods=[db(0, "data")], storage=[local, pvc("data", volume="local-1")]))
    assert res.unschedulable == [] and zone_of(res, "default/db-0") == B


def test_requirements_are_added_to_every_required_term_of_the_pod():
    terms = [{"matchExpressions": [{"key": L.ARCH, "operator": "In", "values": ["amd64"]}]},
             {"matchExpressions": [{"key": L.ARCH, "operator": "In", "values": ["arm64"]}]}]
    p = db(0, "data", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}})
    index = VolumeIndex([pvc("data", volume="pv-b")], [pv("pv-b", zone=B)])
    out = inject(p, index.pod_volumes(p))
    got = out["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [[e["key"] for e in t["matchExpressions"]] for t in got] == [[L.ARCH, L.ZONE], [L.ARCH, L.ZONE]]
    assert len(terms[0]["matchExpressions"]) == 1 and "overhead" not in p["spec"]   # the pod itself is not changed
    assert out["spec"]["overhead"] == {L.volume_resource(L.EBS_CSI_DRIVER): 1}


def test_pods_whose_volumes_ask_the_same_share_one_affinity_and_the_solver_reads_them_alike():
    storage = [pv("pv-0", zone=A), pv("pv-1", zone=A), pv("pv-2", zone=B)]
    storage += [pvc(f"data-db-{i}", volume=f"pv-{i}") for i in range(3)]
    snap = snapshot(pods=[db(i, f"data-db-{i}") for i in range(3)], storage=storage)
    apply_volumes(snap)
    aff = {p["metadata"]["name"]: p["spec"]["affinity"] for p in snap.pods}
    assert aff["db-0"] is aff["db-1"] and aff["db-0"] is not aff["db-2"]   # two PVs of zone a: one object
    assert aff["db-0"] == aff["db-1"] != aff["db-2"]
    # each pod's own note still names its own claim and volume
    notes = sorted(snap.pod_notes.values())
    assert notes[0].startswith("PVC data-db-0 (PV pv-0) requires ") and notes[1].startswith("PVC data-db-1 (PV pv-1)")
    # the solver's classes see the equal node affinities as one shape, however the objects are shared
    copies = [dict(p, spec=dict(p["spec"], affinity=copy.deepcopy(p["spec"]["affinity"]))) for p in snap.pods]
    for pods in (snap.pods, copies):
        classes = build_classes(pods, dict, [])
        assert len(classes) == 3 and classes[0].terms is classes[1].terms is not classes[2].terms
        shapes = {str(c.reqs) for c in classes}
        assert len(shapes) == 2


# -- unbound claims ---------------------------------------------------------------------------------------------
def test_an_unbound_claim_follows_its_storage_class_allowed_topologies():
    storage = [storageclass("gp3-c", zones=[C]), pvc("data", storage_class="gp3-c")]
    res = plan(snapshot(pods=[db(0, "data")], storage=storage))
    assert zone_of(res, "default/db-0") == C


def test_an_unbound_claim_without_a_class_name_gets_the_default_class():
    storage = [storageclass("other", zones=[A]), storageclass("gp3-b", zones=[B], default=True),
               pvc("data", storage_class=None)]
    res = plan(snapshot(pods=[db(0, "data")], storage=storage))
    assert zone_of(res, "default/db-0") == B


def test_a_generic_ephemeral_volume_reads_its_template_until_its_claim_exists():
    eph = {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"storageClassName": "gp3-a",
                                                                            "accessModes": ["ReadWriteOnce"]}}}}
    p = pod("worker-0", cpu="1", volumes=[eph])
    res = plan(snapshot(pods=[p], storage=[storageclass("gp3-a", zones=[A])]))
    assert zone_of(res, "default/worker-0") == A
    # once the claim <pod>-<volume> exists and is bound, its volume decides
    res = plan(snapshot(pods=[pod("worker-0", cpu="1", volumes=[eph])],
                        storage=[storageclass("gp3-a", zones=[A]), pv("pv-c", zone=C), pvc("worker-0-scratch", volume="pv-c")]))
    assert zone_of(res, "default/worker-0") == C


def test_the_one_claim_answer_is_the_general_one():
    """``pod_volumes`` answers a pod with one claim on a shorter path; it must say what the general one says."""
    storage = [pv("pv-a", zone=A), pv("pv-none", zone=None), pvc("bound", volume="pv-a"), pvc("bare", volume="pv-none"),
               pvc("wffc", storage_class="gp3-b"), pvc("nozone", storage_class="plain"), pvc("lost", volume="pv-x"),
               pvc("nosc", storage_class="fast"), storageclass("gp3-b", zones=[B]), storageclass("plain")]
    pvcs = [d for d in storage if d["kind"] == "PersistentVolumeClaim"]
    index = VolumeIndex(pvcs, [d for d in storage if d["kind"] == "PersistentVolume"],
                        [d for d in storage if d["kind"] == "StorageClass"])
    eph = {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"storageClassName": "gp3-b"}}}}
    pods = [db(i, name) for i, name in enumerate(["bound", "bare", "wffc", "nozone", "lost", "nosc", "missing"])]
    pods.append(pod("worker-0", cpu="1", volumes=[eph]))
    answers = []
    for p in pods:
        one = index.pod_volumes(p, list(_claims(p)))
        general = VolumeIndex(pvcs, index.pvs.values(), index.classes.values()).pod_volumes(p)   # no shortcut
        assert one == general, p["metadata"]["name"]
        answers.append(one)
    assert [a.problem for a in answers] == [None, None, None, None, "PV pv-x of PVC lost not found",
                                            "StorageClass fast of PVC nosc not found",
                                            "PVC missing not found (namespace default)", None]
    assert answers[0].notes == ("PVC bound (PV pv-a) requires topology.kubernetes.io/zone In [us-east-1a]",)
    assert answers[1].requirements == () and answers[1].counts == ((L.EBS_CSI_DRIVER, 1),)
    assert answers[7].notes == ("PVC worker-0-scratch (StorageClass gp3-b, not bound yet) requires "
                                "topology.kubernetes.io/zone In [us-east-1b]",)


# -- missing objects --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("storage,reason", [
    ([], "PVC data not found (namespace default)"),
    ([pvc("data", volume="pv-x")], "PV pv-x of PVC data not found"),
    ([pvc("data", storage_class="fast")], "StorageClass fast of PVC data not found"),
])
def test_a_missing_claim_volume_or_class_is_the_pods_reason_and_nothing_launches(storage, reason):
    res = plan(snapshot(pods=[db(0, "data"), pod("web-0", cpu="1")], storage=storage))
    assert reasons(res) == {"default/db-0": reason}
    assert [c.pods for c in res.nodeclaims] == [["default/web-0"]]


# -- existing nodes ---------------------------------------------------------------------------------------------
def test_an_existing_node_in_another_zone_is_not_used_and_one_in_the_volumes_zone_is():
    a = claimed_node("a", zone=A)
    snap = snapshot(a, pods=[db(0, "data")], storage=[pv("pv-b", zone=B), pvc("data", volume="pv-b")])
    res = plan(snap)
    assert res.existing == {} and zone_of(res, "default/db-0") == B
    b = claimed_node("b", zone=B)
    res = plan(snapshot(a, b, pods=[db(0, "data")], storage=[pv("pv-b", zone=B), pvc("data", volume="pv-b")]))
    assert res.existing == {"node-b": ["default/db-0"]} and res.nodeclaims == []


def test_a_nodes_csinode_count_limits_the_volumes_it_takes():
    storage = [storageclass(), pv("pv-0", zone=A), pvc("data-db-0", volume="pv-0"), pvc("data-db-1"), pvc("data-db-2")]
    running = db(0, "data-db-0", node="node-a")
    full = snapshot(claimed_node("a", instance_type="m5.2xlarge"), pods=[running, db(1, "data-db-1"), db(2, "data-db-2")],
                    storage=storage + [csinode("node-a", 2)])
    res = plan(full)
    assert sum(len(v) for v in res.existing.values()) == 1    # one more volume fits next to the running one
    assert sum(len(c.pods) for c in res.nodeclaims) == 1
    # a CSINode without a count (or no CSINode at all) sets no limit
    free = snapshot(claimed_node("a", instance_type="m5.2xlarge"), pods=[running, db(1, "data-db-1"), db(2, "data-db-2")],
                    storage=storage + [csinode("node-a", None)])
    assert plan(free).existing == {"node-a": ["default/db-1", "default/db-2"]}


def test_a_new_nodes_attach_limit_comes_from_its_instance_type():
    limited = [dataclasses.replace(it, volume_limits={L.EBS_CSI_DRIVER: 2}) for it in builders.instance_types()]
    storage = [storageclass(zones=[A])] + [pvc(f"data-db-{i}") for i in range(5)]
    pods = [db(i, f"data-db-{i}", cpu="100m") for i in range(5)]
    snap = snapshot(pods=pods, storage=storage, instance_types={"default": limited})
    res = plan(snap)
    assert res.unschedulable == []
    assert sorted(len(c.pods) for c in res.nodeclaims) == [1, 2, 2]
    # the same pods without the limit share one node
    unlimited = snapshot(pods=[db(i, f"data-db-{i}", cpu="100m") for i in range(5)], storage=storage)
    assert [len(c.pods) for c in plan(unlimited).nodeclaims] == [5]


def test_the_catalogs_ebs_limit_is_the_types_attachments_less_the_nodes_block_devices():
    from karpenter_lambda.catalog.allocatable import NodeSettings, volume_limits

    info = {"EbsInfo": {"MaximumEbsAttachments": 26, "AttachmentLimitType": "shared"}}
    assert volume_limits(info, NodeSettings()) == {L.EBS_CSI_DRIVER: 25}
    two = NodeSettings(block_device_mappings=({"deviceName": "/dev/xvda"}, {"deviceName": "/dev/xvdb"}))
    assert volume_limits(info, two) == {L.EBS_CSI_DRIVER: 24}
    assert volume_limits(info, NodeSettings(ami_family="Bottlerocket")) == {L.EBS_CSI_DRIVER: 24}
    assert volume_limits({}, NodeSettings()) == {}


# -- classes: claims do not split what is otherwise one shape ---------------------------------------------------
def test_pods_differing_only_in_their_claims_form_one_class():
    storage = [storageclass(zones=[A])] + [pvc(f"data-{i}") for i in range(20)]
    snap = snapshot(pods=[with_claims(pod(f"w-{i}", cpu="100m"), f"data-{i}") for i in range(20)], storage=storage)
    inp, _ = scheduling_input(snap, snap.pending_pods())
    assert len(build_classes(inp.pods, dict, [])) == 1


# -- consolidation ----------------------------------------------------------------------------------------------
def test_consolidation_never_moves_a_volume_pod_to_another_zone():
    # two half-empty nodes: without volumes one of them goes and its pod moves to the other
    a, b = claimed_node("a", zone=A, instance_type="m5.xlarge"), claimed_node("b", zone=B, instance_type="m5.xlarge")
    pods = [pod("web-0", cpu="500m", node="node-a"), db(0, "data", node="node-b", cpu="500m")]
    methods = [Emptiness(), MultiNodeConsolidation(), SingleNodeConsolidation()]
    pool = nodepool(budgets=[{"nodes": "100%"}])
    free = snapshot(a, b, pods=[pod("web-0", cpu="500m", node="node-a"), db(0, node="node-b", cpu="500m")],
                    nodepools=[pool])
    control = plan_sweep(free, methods, SweepBudgets(free, {})).commands
    # the control: both go for one node, in zone a (the first cheapest): db-0 would leave zone b
    assert [(sorted(c.names), [r.zone for r in c.replacements]) for c in control] == [(["a", "b"], [A])]
    snap = snapshot(a, b, pods=pods, nodepools=[pool], storage=[pv("pv-b", zone=B), pvc("data", volume="pv-b")])
    out = plan_sweep(snap, methods, SweepBudgets(snap, {}))
    assert out.commands
    for cmd in out.commands:
        if "b" in cmd.names:   # db-0's node goes: only for a replacement in zone b
            assert cmd.replacements and all(r.zone == B for r in cmd.replacements), cmd


def test_the_current_zone_label_wins_over_the_ebs_csi_alias_on_a_node():
    # a node of the EBS CSI driver carries both keys; a relabelled zone (or any disagreement) is read from the current key
    assert L.normalize_labels({"topology.ebs.csi.aws.com/zone": A, L.ZONE: B}) == {L.ZONE: B}
    assert L.normalize_labels({L.ZONE: B, "topology.ebs.csi.aws.com/zone": A}) == {L.ZONE: B}
    assert L.normalize_labels({"topology.ebs.csi.aws.com/zone": A}) == {L.ZONE: A}


# -- requirements that exclude each other ------------------------------------------------------------------------
def _affinity(*terms: list[dict]) -> dict:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]}}}


def test_two_volumes_in_two_zones_are_said_to_exclude_each_other_naming_both():
    storage = [pv("pv-a", zone=A, zone_key="topology.ebs.csi.aws.com/zone"), pvc("a", volume="pv-a"),
               pv("pv-b", zone=B), pvc("b", volume="pv-b")]
    res = plan(snapshot(pods=[db(0, "a", "b"), db(1, "a")], storage=storage))
    assert zone_of(res, "default/db-1") == A   # the other pod is placed as before
    why = reasons(res)["default/db-0"]
    assert why.startswith(f"its own node requirements exclude each other: {L.ZONE} In [{A}] and {L.ZONE} In [{B}]"), why
    assert "PVC a (PV pv-a)" in why and "PVC b (PV pv-b)" in why and "NodePool" not in why, why


@pytest.mark.parametrize("spec, conflict", [
    ({"nodeSelector": {L.ZONE: A}, "affinity": _affinity([{"key": L.ZONE, "operator": "In", "values": [B]}])},
     f"{L.ZONE} In [{A}] and {L.ZONE} In [{B}]"),
    ({"affinity": _affinity([{"key": L.ARCH, "operator": "In", "values": ["arm64"]},
                             {"key": L.ARCH, "operator": "NotIn", "values": ["arm64"]}])},
     f"{L.ARCH} In [arm64] and {L.ARCH} NotIn [arm64]"),
])
def test_a_pods_own_conflicting_requirements_are_the_reason_whatever_the_nodepool(spec, conflict):
    zonal = nodepool(requirements=[{"key": L.ZONE, "operator": "In", "values": [A, B]}])
    for pools in ([nodepool()], [zonal]):
        res = plan(snapshot(pods=[pod("p-0", **spec)], nodepools=pools))
        assert reasons(res)["default/p-0"] == \
            f"its own node requirements exclude each other: {conflict} (no node can satisfy them all)"


def test_a_requirement_that_only_the_nodepool_contradicts_is_not_called_a_conflict():
    spec = {"affinity": _affinity([{"key": "team", "operator": "DoesNotExist"},
                                   {"key": L.ZONE, "operator": "In", "values": [C]}])}
    zonal = nodepool(requirements=[{"key": L.ZONE, "operator": "In", "values": [A, B]}])
    res = plan(snapshot(pods=[pod("p-0", **spec)], nodepools=[zonal]))
    assert "exclude each other" not in reasons(res)["default/p-0"]
    assert "incompatible requirements" in reasons(res)["default/p-0"]


def test_a_conflicting_term_is_passed_over_for_an_ored_one_that_can_be_met():
    spec = {"affinity": _affinity([{"key": L.ZONE, "operator": "In", "values": [A]},
                                   {"key": L.ZONE, "operator": "In", "values": [B]}],
                                  [{"key": L.ZONE, "operator": "In", "values": [C]}])}
    res = plan(snapshot(pods=[pod("p-0", **spec)]))
    assert res.unschedulable == [] and zone_of(res, "default/p-0") == C


def test_a_zone_spread_counts_every_zone_for_a_replica_pinned_by_its_volume():
    """The 4th replica of a zone-spread StatefulSet, its volume in zone a, goes to zone a (1 pod in each zone: 2-1 <=
    maxSkew 1): the spread counts the pods of every zone, as the kube-scheduler does -- the volume's zone is not part
    of the pod's own node affinity, which is what the spread's node filter reads."""
    spread = [{"maxSkew": 1, "topologyKey": L.ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "db"}}}]
    nodes = [claimed_node(z[-1], zone=z) for z in (A, B, C)]
    running = [db(i, f"data-db-{i}", topologySpreadConstraints=spread, node=f"node-{z[-1]}") for i, z in enumerate((A, B, C))]
    storage = [storageclass()]
    for i, z in enumerate((A, B, C, A)):
        storage += [pv(f"pv-{i}", zone=z, claim=f"data-db-{i}"), pvc(f"data-db-{i}", volume=f"pv-{i}")]
    new = db(3, "data-db-3", cpu="6", topologySpreadConstraints=spread)   # too big for the running nodes
    res = plan(snapshot(*nodes, pods=running + [new], storage=storage))
    assert reasons(res) == {} and zone_of(res, "default/db-3") == A


def test_a_replica_pinned_by_its_volume_to_the_fullest_zone_waits_for_the_others():
    """Zone a holds 2 replicas, b and c 1 each: a 5th replica whose volume is in zone a would make the skew 2 (the
    kube-scheduler counts every zone), so it is unschedulable (DoNotSchedule) rather than planned into zone a."""
    spread = [{"maxSkew": 1, "topologyKey": L.ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "db"}}}]
    nodes = [claimed_node(z[-1], zone=z) for z in (A, B, C)]
    zones = (A, B, C, A, A)
    running = [db(i, f"data-db-{i}", topologySpreadConstraints=spread, node=f"node-{z[-1]}")
               for i, z in enumerate(zones[:4])]
    storage = [storageclass()]
    for i, z in enumerate(zones):
        storage += [pv(f"pv-{i}", zone=z, claim=f"data-db-{i}"), pvc(f"data-db-{i}", volume=f"pv-{i}")]
    new = db(4, "data-db-4", cpu="6", topologySpreadConstraints=spread)
    res = plan(snapshot(*nodes, pods=running + [new], storage=storage))
    assert not res.nodeclaims and "default/db-4" in reasons(res)
