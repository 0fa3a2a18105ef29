"""Consolidation's one replacement node is sized through the solver's NodeClaim template (issue 22): the node it
chooses is the cheapest answer of ``NodeClaimTemplate.offers_holding`` for the moved pods under the NodePool."""

from builders import ZONES, claimed_node, pod, snapshot
from karpenter_lambda.api import labels as L
from karpenter_lambda.api.kube import pod_key
from karpenter_lambda.disruption.candidates import build_candidates
from karpenter_lambda.disruption.consolidation import consolidation_option
from karpenter_lambda.scheduling.inputs import nodepool_inputs
from karpenter_lambda.scheduling.nodeclaim import NodeClaimTemplate
from karpenter_lambda.scheduling.requirements import Requirement, Requirements
from karpenter_lambda.scheduling.resources import pod_requests

DAEMONSET = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "kube-system"},
             "spec": {"template": {"metadata": {"labels": {"app": "agent"}}, "spec": {"containers": [
                 {"name": "a", "image": "pause", "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}}}]}}}}


def _requests(pods) -> dict:
    out: dict = {}
    for p in pods:
        for k, v in pod_requests(p).items():
            out[k] = out.get(k, 0) + v
    return out


def test_the_one_replacement_is_the_templates_cheapest_offer_holding_the_moved_pods():
    zone = ZONES[0]
    members, pods = [], []
    for i in range(3):
        nc, n = claimed_node(f"default-{i}", instance_type="m5.xlarge", zone=zone)
        members.append((nc, n))
        pods += [pod(f"web{i}-{j}", cpu="400m", memory="1Gi", node=n["metadata"]["name"], app="web") for j in range(2)]
    snap = snapshot(*members, pods=pods, daemonsets=[DAEMONSET])
    cands, _ = build_candidates(snap)
    assert len(cands) == 3
    total = sum(c.price for c in cands)

    opt = consolidation_option(snap, cands, None, window=set(), one_node=zone)
    assert opt.valid, opt.reason
    plan = opt.replacement
    assert plan is not None and plan.zone == zone
    assert plan.reason.startswith("one node for the pods")               # sized by the one-replacement path
    moved = [p for c in cands for p in c.reschedulable]
    assert sorted(plan.pods) == sorted(pod_key(p) for p in moved)      # every pod moves to the one new node

    inputs, _ = nodepool_inputs(snap)
    template = NodeClaimTemplate.for_nodepool(inputs[0], daemonsets=snap.daemonsets)
    assert template.daemon.get("cpu") == 200                           # the DaemonSet's overhead is the template's
    in_zone = Requirements().add(Requirement.new(L.ZONE, "In", [zone]))
    offers = template.offers_holding(_requests(moved), in_zone, below=total - 1e-12)
    assert offers, "some node holds the six pods for less than the three nodes"
    best = offers[0]
    assert (plan.instance_type, plan.price, plan.capacity_type) == (
        best.instance_type.name, best.price, best.offering.capacity_type)
    assert plan.price < total
    # the replacement's instance types: those whose node holds its pods at that zone and capacity type
    at = in_zone.copy().add(Requirement.new(L.CAPACITY_TYPE, "In", [plan.capacity_type]))
    holding = {x.instance_type.name for x in template.offers_holding(_requests(moved), at)}
    assert {t.name for t in plan.instance_types} <= holding
    assert plan.instance_type in {t.name for t in plan.instance_types}
