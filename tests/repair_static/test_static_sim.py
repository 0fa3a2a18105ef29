"""Static NodePools end to end (issue 30 item 3): one ``simulate`` run.  NodePool ``static`` has ``replicas: 3``;
NodePool ``default`` is dynamic.  A Deployment is scaled from 0 to 50 pods and back to 0: the static NodePool is
launched to 3 NodeClaims with no pod at all, takes pods as existing capacity and is never provisioned for them (the
overflow goes to ``default``), and stays at 3 throughout; then ``replicas`` is lowered to 2 and one of its
NodeClaims goes (one ``NodeClaimDisrupted``, reason ``Overprovisioned``).

The static NodePool consolidates after 30s like the dynamic one: the disruption methods leave static NodePools out
(Karpenter never consolidates them: disruption/emptiness.consolidatable_in), so it still stays at 3 while empty."""

from __future__ import annotations

import pytest

from karpenter_lambda.sim.simulator import Simulation

POOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: NAME}
spec:
  EXTRA
  template:
    spec:
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, c5]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: AFTER}
"""

STATIC = POOL.replace("NAME", "static").replace("EXTRA", "replicas: 3").replace("AFTER", "30s")
STATIC_2 = STATIC.replace("replicas: 3", "replicas: 2")
DYNAMIC = POOL.replace("NAME", "default").replace("EXTRA", "limits: {cpu: '1000'}").replace("AFTER", "30s")

REST = """
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-sim
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: sim}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 0
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
        - {name: web, image: nginx, resources: {requests: {cpu: 500m, memory: 512Mi}}}
---
apiVersion: karpenter-lambda.io/v1alpha1
kind: Scenario
metadata: {name: static}
spec:
  steps:
    - {at: 5m, scale: {kind: Deployment, namespace: default, name: web, replicas: 50}}
    - {at: 15m, scale: {kind: Deployment, namespace: default, name: web, replicas: 0}}
    - at: 25m
      apply:
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    f = tmp_path_factory.mktemp("static") / "static.yaml"
    applied = "\n".join("        " + line for line in STATIC_2.strip().splitlines())
    f.write_text(STATIC + "---" + DYNAMIC + "---" + REST + applied + "\n")
    return Simulation([f], progress=lambda m: None).run().to_dict()


def static_count(events: list[dict], until: float) -> list[int]:
    """The static NodePool's NodeClaims not yet disrupted or deleted, after each of its events before ``until``."""
    alive: set[str] = set()
    out = []
    for e in events:
        if e["time"] >= until:
            break
        if not e["object"].startswith("nodeclaim/static-"):
            continue
        if e["type"] == "NodeClaimLaunched":
            alive.add(e["object"])
        elif e["type"] in ("NodeClaimDisrupted", "NodeClaimDeleted"):
            alive.discard(e["object"])
        out.append(len(alive))
    return out


def test_a_static_nodepool_stays_at_3_through_a_scale_from_0_to_50_and_back(run):
    events = run["events"]
    launched = [e for e in events if e["type"] == "NodeClaimLaunched"]
    static = [e for e in launched if e["object"].startswith("nodeclaim/static-")]
    assert len(static) == 3 and all(e["time"] < 5 * 60 for e in static)   # launched with no pod, before the scale
    counts = static_count(events, until=25 * 60)
    assert counts[-1] == 3 and max(counts) == 3 and counts[counts.index(3):] == [3] * len(counts[counts.index(3):])
    dynamic = [e for e in launched if e["object"].startswith("nodeclaim/default-")]
    assert dynamic and all(5 * 60 <= e["time"] < 15 * 60 for e in dynamic)   # the overflow: the dynamic NodePool
    bound = {e["object"].split("/", 1)[1]: e["message"] for e in events if e["type"] == "PodBound"}
    assert len(bound) == 50
    static_nodes = {e["object"].split("/", 1)[1] for e in events if e["type"] == "NodeClaimRegistered"
                    and e["object"].startswith("nodeclaim/static-")}
    assert len(static_nodes) == 3
    # every dynamic NodeClaim went once the pods were gone, the static ones did not
    gone = {e["object"] for e in events if e["type"] == "NodeClaimDisrupted" and e["time"] < 25 * 60}
    assert gone == {e["object"] for e in dynamic}


def test_lowering_replicas_removes_one_static_nodeclaim(run):
    events = run["events"]
    down = [e for e in events if e["type"] == "NodeClaimDisrupted" and e["object"].startswith("nodeclaim/static-")]
    assert len(down) == 1 and down[0]["reason"] == "Overprovisioned" and down[0]["time"] >= 25 * 60
    assert sorted(nc["name"].split("-")[0] for nc in run["nodeClaims"]) == ["static", "static"]
