"""`simulate` with the disruption sweeps: a scale-down ends with the empty nodes removed (the --json contract)."""

import json
from pathlib import Path

from karpenter_lambda.sim.simulator import Simulation

NODEPOOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, c5]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 30s
    budgets: [{nodes: "100%"}]
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-sim
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
"""

WEB = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
       "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}}, "template": {
           "metadata": {"labels": {"app": "web"}},
           "spec": {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
               {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}},
               "containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}}}]}}}}


def test_a_scale_down_ends_with_the_empty_nodes_consolidated(tmp_path: Path):
    (tmp_path / "np.yaml").write_text(NODEPOOL)
    (tmp_path / "web.yaml").write_text(json.dumps(WEB))
    (tmp_path / "s.yaml").write_text(json.dumps({
        "apiVersion": "karpenter-lambda.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "night"},
        "spec": {"steps": [{"at": "3m", "scale": {"kind": "Deployment", "namespace": "default", "name": "web", "replicas": 1}}]}}))
    result = Simulation([tmp_path / "np.yaml", tmp_path / "web.yaml", tmp_path / "s.yaml"], progress=lambda m: None).run()
    d = result.to_dict()
    launched = [e for e in d["events"] if e["type"] == "NodeClaimLaunched"]
    assert len(launched) == 4
    disrupted = [e for e in d["events"] if e["type"] == "NodeClaimDisrupted"]
    assert len(disrupted) == 3 and all(e["time"] > 180 for e in disrupted)
    for e in disrupted:
        assert e["object"].startswith("nodeclaim/") and e["reason"] == "Empty" and e["nodePool"] == "default"
        assert e["replacements"] == [] and e["savingsPerHour"] > 0 and e["capacityType"] == "on-demand"
        assert e["instanceType"] and e["zone"].startswith("us-east-1")
    gone = {e["object"].split("/")[1] for e in disrupted}
    assert len(d["nodeClaims"]) == 1 and d["nodeClaims"][0]["name"] not in gone
    assert d["pods"] == {"total": 1, "bound": 1}
    timeline = d["costTimeline"]
    assert timeline[-1]["nodes"] == 1 and max(t["nodes"] for t in timeline) == 4
    assert timeline[-1]["costPerHour"] < max(t["costPerHour"] for t in timeline)
    assert not [e for e in d["events"] if e["type"] == "DisruptionBlocked"]


def test_a_scale_down_ends_with_underused_nodes_consolidated(tmp_path: Path):
    np_ = NODEPOOL.replace("consolidationPolicy: WhenEmpty", "consolidationPolicy: WhenEmptyOrUnderutilized")
    (tmp_path / "np.yaml").write_text(np_)
    web = json.loads(json.dumps(WEB))
    web["spec"]["replicas"] = 12
    web["spec"]["template"]["spec"].pop("affinity")
    web["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "1", "memory": "1Gi"}
    # at most 4 replicas per node, so the 12 start on several nodes (the solver's exact cover would otherwise put them
    # on one c5.4xlarge, as Karpenter does, and there would be no node to remove after the scale-down)
    web["spec"]["template"]["spec"]["topologySpreadConstraints"] = [
        {"maxSkew": 4, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "web"}}}]
    (tmp_path / "web.yaml").write_text(json.dumps(web))
    (tmp_path / "s.yaml").write_text(json.dumps({
        "apiVersion": "karpenter-lambda.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "night"},
        "spec": {"steps": [{"at": "3m", "scale": {"kind": "Deployment", "namespace": "default", "name": "web", "replicas": 3}}]}}))
    d = Simulation([tmp_path / "np.yaml", tmp_path / "web.yaml", tmp_path / "s.yaml"], progress=lambda m: None).run().to_dict()
    under = [e for e in d["events"] if e["type"] == "NodeClaimDisrupted" and e["reason"] == "Underutilized"]
    assert under and all(e["time"] > 180 and e["savingsPerHour"] > 0 and "replacements" in e for e in under)
    blocked = [e for e in d["events"] if e["type"] == "DisruptionBlocked"]
    assert all(e["reason"] for e in blocked)          # each names its cause (e.g. consolidateAfter before the scale-down)
    assert d["pods"] == {"total": 3, "bound": 3}
    timeline = d["costTimeline"]
    assert timeline[-1]["costPerHour"] < timeline[0]["costPerHour"] and timeline[-1]["nodes"] < timeline[0]["nodes"]


def test_a_spot_interruption_is_handled_before_ec2_reclaims_the_instance(tmp_path: Path):
    np_ = NODEPOOL.replace("values: [on-demand]", "values: [spot]")
    (tmp_path / "np.yaml").write_text(np_)
    web = json.loads(json.dumps(WEB))
    (tmp_path / "web.yaml").write_text(json.dumps(web))
    (tmp_path / "s.yaml").write_text(json.dumps({
        "apiVersion": "karpenter-lambda.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "spot"},
        "spec": {"steps": [{"at": "3m", "interrupt": {"kind": "SpotInterruption", "nodePool": "default", "count": 2}}]}}))
    d = Simulation([tmp_path / "np.yaml", tmp_path / "web.yaml", tmp_path / "s.yaml"], progress=lambda m: None).run().to_dict()
    received = [e for e in d["events"] if e["type"] == "InterruptionReceived"]
    assert len(received) == 2 and all(e["kind"] == "SpotInterruption" and e["time"] == 180 for e in received)
    hit = {e["object"] for e in received}
    disrupted = [e for e in d["events"] if e["type"] == "NodeClaimDisrupted" and e["object"] in hit]
    assert len(disrupted) == 2 and all(e["reason"] == "SpotInterrupted" and e["replacements"] for e in disrupted)
    deleted = {e["object"]: e["time"] for e in d["events"] if e["type"] == "NodeClaimDeleted"}
    assert all(deleted[o] < 180 + 120 for o in hit)              # drained and gone before EC2 takes the instance
    reclaimed = [e for e in d["events"] if e["type"] == "SpotInstanceReclaimed"]
    assert len(reclaimed) == 2 and all(e["time"] == 300 for e in reclaimed)
    displaced = [e for e in d["events"] if e["type"] == "PodsDisplaced"]
    assert all(0 < e["seconds"] <= 120 for e in displaced)
    assert d["pods"] == {"total": 4, "bound": 4}
    assert not {c["name"] for c in d["nodeClaims"]} & {o.split("/")[1] for o in hit}
