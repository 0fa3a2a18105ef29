"""NodePool deletion: the NodeClaims a deleted NodePool leaves behind are deleted gracefully, as Kubernetes' garbage
collector deletes Karpenter's (their ownerReference), each one ``NodeClaimDisrupted`` with reason
``NodePoolDeleted``.  The rule on objects (milliseconds), then one ``simulate`` run with a Scenario ``delete`` step:
the NodeClaims drain (a PodDisruptionBudget honoured), the pods go to the other NodePool, nothing is left running."""

from __future__ import annotations

import pytest

import builders
import manifests
from karpenter_lambda.disruption.nodepool_deleted import NODEPOOL_DELETED, left_behind
from karpenter_lambda.sim.simulator import Simulation


def test_only_nodeclaims_of_a_missing_nodepool_not_deleting_yet_are_left_behind():
    (a, _), (b, _), (c, _), (d, _) = (builders.claimed_node(n, nodepool=p) for n, p in
                                      (("a", "gone"), ("b", "kept"), ("c", "gone"), ("d", "gone")))
    d.metadata["deletionTimestamp"] = "2026-12-07T10:00:00Z"          # already going
    manual = builders.claimed_node("m")[0]
    manual.labels.pop("karpenter.sh/nodepool")                        # owned by no NodePool: left alone
    assert [nc.name for nc in left_behind([c, b, a, d, manual], ["kept"])] == ["a", "c"]
    assert left_behind([a, b, c], ["kept", "gone"]) == []


NODEPOOLS = manifests.to_yaml(
    manifests.nodepool("old", capacity_types=("on-demand",), families=("m5",), weight=50, cpu_limit=None,
                       policy="WhenEmpty", consolidate_after="Never"),
    manifests.nodepool("new", capacity_types=("on-demand",), families=("c5",), cpu_limit=None,
                       policy="WhenEmpty", consolidate_after="Never"),
    manifests.nodeclass(role="KarpenterNodeRole-sim", discovery="sim")) + """---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            - {labelSelector: {matchLabels: {app: web}}, topologyKey: kubernetes.io/hostname}
      containers: [{name: web, image: nginx, resources: {requests: {cpu: 500m, memory: 512Mi}}}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: default}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: web}}
---
apiVersion: karpenter-lambda.io/v1alpha1
kind: Scenario
metadata: {name: delete-nodepool}
spec:
  steps:
    - {at: 5m, delete: {kind: NodePool, name: old}}
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    f = tmp_path_factory.mktemp("npdel") / "npdel.yaml"
    f.write_text(NODEPOOLS)
    return Simulation([f], progress=lambda m: None).run().to_dict()


def test_a_deleted_nodepools_nodes_are_drained_and_its_pods_move_to_the_other_nodepool(run):
    events = run["events"]
    launched_old = {e["object"] for e in events if e["type"] == "NodeClaimLaunched" and e["object"].startswith("nodeclaim/old-")}
    assert len(launched_old) == 3                                        # one per replica (hostname anti-affinity)
    disrupted = [e for e in events if e["type"] == "NodeClaimDisrupted"]
    assert sorted(e["object"] for e in disrupted) == sorted(launched_old)   # each exactly once
    assert all(e["reason"] == NODEPOOL_DELETED and e["nodePool"] == "old" and e["time"] >= 300 for e in disrupted)
    deleted = {e["object"] for e in events if e["type"] == "NodeClaimDeleted"}
    assert deleted == launched_old
    assert all(nc["nodePool"] == "new" for nc in run["nodeClaims"]) and len(run["nodeClaims"]) == 3
    assert run["pods"] == {"total": 3, "bound": 3} and not run["unschedulable"]
    # the drain honoured the PodDisruptionBudget: never two web pods evicted before the first was back and bound
    evictions = [e["time"] for e in events if e["type"] == "PodEvicted"]
    assert len(evictions) == 3 and len(set(evictions)) == 3


def test_capacity_for_the_pods_is_launched_with_the_deletion_not_after_each_eviction(run):
    """Karpenter's provisioner counts a deleting node's pods as pending, so their capacity launches before the drain
    reaches them: here the lifecycle sweep that requests the deletions launches it first (controllers/leaving.py),
    one replacement per old node (hostname anti-affinity), each named on its old NodeClaim's NodeClaimDisrupted; the
    drains wait for them to be Initialized (controllers/termination.HOLD_FOR_REPLACEMENTS), so every pod binds the
    moment it is evicted, and no fourth node is made for a pod that came back."""
    events = run["events"]
    disrupted = [e for e in events if e["type"] == "NodeClaimDisrupted"]
    launched_new = [e for e in events if e["type"] == "NodeClaimLaunched" and e["object"].startswith("nodeclaim/new-")
                    and e["time"] >= 300]
    assert len(launched_new) == 3 and all(e["time"] == 300 for e in launched_new)
    assert sorted(r for e in disrupted for r in e["replacements"]) == sorted(e["object"].split("/")[1] for e in launched_new)
    assert all(len(e["replacements"]) == 1 for e in disrupted)
    assert all(len(e.get("replaces") or []) == 1 for e in launched_new)   # each holds room for its old node's pod only
    # each announced with the reason it replaces for, before the deletion it replaces for
    assert {e["reason"] for e in launched_new} == {"NodePoolDeleted"}
    assert max(events.index(e) for e in launched_new) < min(events.index(e) for e in disrupted)
    bound = {e["object"]: e["time"] for e in events if e["type"] == "PodBound" and e["time"] >= 300}
    evicted = [e for e in events if e["type"] == "PodEvicted"]
    assert len(evicted) == 3 and all(bound[e["object"]] == e["time"] for e in evicted)   # none waits for a node
    assert not [e for e in events if e["type"] == "PodPending" and e["time"] >= 300]
