"""Issue 30 item 1 end to end: `simulate` with a ``consolidationPolicy: Balanced`` NodePool removes the node whose
move saves 40% of the NodePool's price and keeps the one whose move would save 2%, read from the ``--json`` events.

The cluster: ``hold`` (6 CPUs, do-not-disrupt) and ``big`` (6 CPUs, never with ``hold``) each on a c5.2xlarge in
zone a, ``small`` (1 CPU) beside ``big``, and ``zonal`` (3 x 1 CPU / 2.5Gi, zone b) on an m5.xlarge.  At 2m ``big``
is deleted and ``zonal`` scaled to 2: ``big``'s node is left with ``small``, which fits on ``hold``'s node (deleting
it saves 39% of the price: score 1.36); ``zonal``'s node could become a c5.xlarge (saves 2.5% of the starting price,
4.1% of what is left: score 0.08).  The budget lets one node go at a
time (with more, multi-node consolidation would score the two moves together, as Karpenter, and approve both)."""

from __future__ import annotations

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
    consolidationPolicy: Balanced
    consolidateAfter: 30s
    budgets: [{nodes: "1"}]
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

ZONE = "topology.kubernetes.io/zone"


def deployment(name: str, replicas: int, cpu: str, memory: str, zone: str, *, annotations=None, affinity=None) -> dict:
    spec: dict = {"nodeSelector": {ZONE: zone},
                  "containers": [{"name": "c", "image": "app", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
    if affinity:
        spec["affinity"] = affinity
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}}, "template": {
                "metadata": {"labels": {"app": name}, "annotations": dict(annotations or {})}, "spec": spec}}}


def away_from(app: str) -> dict:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": "kubernetes.io/hostname"}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def test_a_balanced_nodepool_removes_the_40_percent_node_and_keeps_the_2_percent_one(tmp_path: Path):
    docs = [deployment("hold", 1, "6", "1Gi", "us-east-1a", annotations={"karpenter.sh/do-not-disrupt": "true"}),
            deployment("big", 1, "6", "1Gi", "us-east-1a", affinity=away_from("hold")),
            deployment("small", 1, "500m", "512Mi", "us-east-1a"),
            deployment("zonal", 3, "1", "2560Mi", "us-east-1b"),
            {"apiVersion": "karpenter-lambda.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "balanced"},
             "spec": {"steps": [{"at": "2m", "delete": {"kind": "Deployment", "namespace": "default", "name": "big"}},
                                {"at": "2m", "scale": {"kind": "Deployment", "namespace": "default", "name": "zonal",
                                                       "replicas": 2}}]}}]
    (tmp_path / "np.yaml").write_text(NODEPOOL)
    (tmp_path / "apps.yaml").write_text("\n---\n".join(json.dumps(d) for d in docs))
    d = Simulation([tmp_path / "np.yaml", tmp_path / "apps.yaml"], until=420, progress=lambda m: None).run().to_dict()
    events = d["events"]
    launched = {e["object"].split("/")[1]: e for e in events if e["type"] == "NodeClaimLaunched"}
    types = {n: e["message"].split()[0] for n, e in launched.items()}   # "c5.2xlarge on-demand in us-east-1a $0.34/h ..."
    assert sorted(types.values()) == ["c5.2xlarge", "c5.2xlarge", "m5.xlarge"], launched
    price = sum(float(e["message"].split("$")[1].split("/")[0]) for e in launched.values())
    zonal = next(n for n, t in types.items() if t == "m5.xlarge")

    disrupted = [e for e in events if e["type"] == "NodeClaimDisrupted"]
    assert len(disrupted) == 1, disrupted                              # one node went, once
    (gone,) = disrupted
    assert gone["reason"] == "Underutilized" and gone["instanceType"] == "c5.2xlarge" and gone["replacements"] == []
    assert 0.38 < gone["savingsPerHour"] / price < 0.40                     # the 40% move: a delete, approved
    assert "balanced score 1.36 >= 0.50" in gone["message"]
    # the 2% move (m5.xlarge -> c5.xlarge: 2.5% of the starting price, 4.1% once the other node is gone) is refused
    # with its score, after the other move (the budget takes one node at a time), and the node stays
    refused = [e for e in events if e["type"] == "DisruptionBlocked" and e["object"] == f"nodeclaim/{zonal}"
               and e.get("reason") == "balanced score"]
    assert refused and refused[0]["time"] > gone["time"], [e for e in events if e["type"] == "DisruptionBlocked"]
    assert "balanced: score 0.08 < 0.50 (saves 4.1% of NodePool default's price" in refused[0]["message"]
    assert "c5.xlarge" not in types.values()
    assert {n["name"] for n in d["nodeClaims"]} == set(launched) - {gone["object"].split("/")[1]}
    assert d["pods"] == {"total": 4, "bound": 4}
