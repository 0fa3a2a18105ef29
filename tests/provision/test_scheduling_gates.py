"""Pods with ``spec.schedulingGates`` are neither scheduled nor provisioned for until their gates are removed: the
kube-scheduler leaves them ``PodScheduled=False`` with reason ``SchedulingGated`` (never Unschedulable, so the
watcher does not forward them) and Karpenter does not count them as provisionable.  Before, ``plan`` and
``simulate`` launched a node for a gated pod and the simulated kube-scheduler bound it."""

from __future__ import annotations

import json
from pathlib import Path

from karpenter_lambda.api.kube import SCHEDULING_GATED, scheduling_gates
from karpenter_lambda.api.snapshot import ClusterSnapshot
from karpenter_lambda.api.workloads import expand
from karpenter_lambda.cli.main import main
from karpenter_lambda.sim import kubescheduler
from karpenter_lambda.sim.simulator import Simulation
from karpenter_lambda.sim.world import make_pod

REPO = Path(__file__).resolve().parents[2]
PODS = """
apiVersion: v1
kind: Pod
metadata: {name: gated}
spec:
  schedulingGates: [{name: example.com/quota}]
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: free}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
"""


def _condition(pod: dict) -> dict:
    return next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")


def test_the_rule_on_objects():
    gated = make_pod("g", schedulingGates=[{"name": "a"}, {"name": "b"}])
    assert scheduling_gates(gated) == ["a", "b"] and scheduling_gates(make_pod("f")) == []
    (pod,) = expand({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {
        "replicas": 1, "selector": {}, "template": {"spec": {"schedulingGates": [{"name": "a"}], "containers": []}}}}).pods
    assert _condition(pod)["reason"] == SCHEDULING_GATED
    snap = ClusterSnapshot(now=0.0, pods=[gated, make_pod("f")])
    assert [p["metadata"]["name"] for p in snap.pending_pods()] == ["f"]


def test_plan_does_not_provision_for_a_gated_pod(capsys, tmp_path):
    f = tmp_path / "pods.yaml"
    f.write_text(PODS)
    assert main(["plan", "--json", "-f", str(REPO / "examples" / "default.yaml"), "-f", str(f)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["gated"] == [{"pod": "default/gated", "gates": ["example.com/quota"]}]
    assert [p for c in out["nodeClaims"] for p in c["pods"]] == ["default/free"] and out["unschedulable"] == []


def test_simulate_leaves_a_gated_pod_pending_and_says_why(tmp_path):
    f = tmp_path / "pods.yaml"
    f.write_text(PODS)
    r = Simulation([REPO / "examples" / "default.yaml", f], progress=lambda m: None).run().to_dict()
    assert r["gated"] == [{"pod": "default/gated", "gates": ["example.com/quota"]}]
    assert r["unschedulable"] == [] and r["pods"] == {"total": 2, "bound": 1}
    assert [p for c in r["nodeClaims"] for p in c["pods"]] == ["default/free"]
    assert not any(e["type"] == "PodPending" and e["object"] == "pod/default/gated" for e in r["events"])


def test_the_kube_scheduler_marks_it_gated_and_the_provisioner_skips_it(world):
    pods = world.add_pods([make_pod("g", schedulingGates=[{"name": "example.com/quota"}]), make_pod("f")])
    world.server.store.create("nodes", {"metadata": {"name": "n1"}, "status": {
        "allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True"}]}})
    kubescheduler.schedule_pending(world.server)
    g = world.server.store.get("pods", "g", "default")
    assert not g["spec"].get("nodeName") and _condition(g)["reason"] == SCHEDULING_GATED
    assert world.server.store.get("pods", "f", "default")["spec"].get("nodeName") == "n1"
    world.provision(world.sqs_event([pods[0]]))          # a message for it anyway (not from the watcher)
    assert world.store.list("NodeClaim") == [] and world.instances() == []
    assert "waiting on scheduling gates example.com/quota" in world.logs.getvalue()
