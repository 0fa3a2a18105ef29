"""An OffPeakSchedule in `simulate`: one weeknight of examples/offpeak/ in virtual time (EventBridge Scheduler edges
as timers, the quiet night skipped), its events and the --json keys that show it."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpenter_lambda.sim.simulator import Simulation

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def night() -> dict:
    files = sorted((REPO / "examples" / "offpeak").glob("*.yaml"))
    return Simulation(files, progress=lambda m: None).run().to_dict()


def _events(d: dict, kind: str) -> list[dict]:
    return [e for e in d["events"] if e["type"] == kind]


def test_the_night_scales_down_consolidates_and_comes_back(night):
    d = night
    assert d["startTime"] == "2027-01-12T18:30:00Z"
    (started,) = _events(d, "OffPeakStarted")
    (ended,) = _events(d, "OffPeakEnded")
    assert started["time"] == 1800.0 and ended["time"] == 1800.0 + 12 * 3600     # 20:00 -> 08:00 in Berlin
    scaled = {(e["object"], e["from"], e["to"]) for e in _events(d, "WorkloadScaled")}
    assert {("deployment/dev/web", 6, 0), ("deployment/staging/api", 4, 0), ("statefulset/dev/db", 2, 0),
            ("deployment/dev/web", 0, 6), ("deployment/staging/api", 0, 4), ("statefulset/dev/db", 0, 2)} == scaled
    history = {w["name"]: [h["replicas"] for h in w["history"]] for w in d["workloads"]}
    assert history["web"] == [6, 0, 6] and history["shop"] == [3]
    # nodes went away at night (emptied / underused ones consolidated, the batch NodePool drained)
    night_costs = [c["costPerHour"] for c in d["costTimeline"] if started["time"] < c["time"] < ended["time"]]
    assert night_costs and min(night_costs) < 0.25 * d["costTimeline"][1]["costPerHour"]
    assert _events(d, "NodeClaimDrained") and _events(d, "NodeClaimDisrupted")
    # every drained NodeClaim is a disruption as any other: exactly one NodeClaimDisrupted, reason OffPeakDrain, and
    # every deleted NodeClaim had one (docs/simulator.md's event guarantee)
    disrupted = [e["object"] for e in _events(d, "NodeClaimDisrupted")]
    assert len(disrupted) == len(set(disrupted))
    drained = {e["object"] for e in _events(d, "NodeClaimDrained")}
    assert drained and {e["object"] for e in _events(d, "NodeClaimDisrupted")
                        if e.get("reason") == "OffPeakDrain"} == drained
    assert {e["object"] for e in _events(d, "NodeClaimDeleted")} <= set(disrupted)
    (summary,) = d["offpeak"]
    assert summary["schedule"] == "nights" and summary["simulatedToEnd"] is True
    assert summary["lowestCostPerHour"] == min(night_costs)
    assert summary["savedDollars"] > 5 * (summary["costPerHourBefore"] - summary["lowestCostPerHour"])
    # and in the morning everything is back, including the pods of the drained NodePool (handed off by the function)
    assert _events(d, "PodsHandedOff")
    assert d["pods"]["bound"] == d["pods"]["total"] == 17
    assert d["unschedulable"] == []


def test_a_quiet_stretch_is_skipped_but_never_past_a_nodeclaims_expiry(tmp_path):
    (tmp_path / "in.yaml").write_text("""
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      expireAfter: 2h
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: ["on-demand"]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx, resources: {requests: {cpu: 500m, memory: 512Mi}}}]
---
apiVersion: karpenter-lambda.io/v1alpha1
kind: OffPeakSchedule
metadata: {name: late}
spec:
  schedule: "0 6 * * *"
  duration: 30m
  workloads: [{namespaces: [other], replicas: 0}]
---
apiVersion: karpenter-lambda.io/v1alpha1
kind: Scenario
metadata: {name: s}
spec:
  startTime: "2027-01-12T00:00:00Z"
""")
    d = Simulation([tmp_path / "in.yaml"], progress=lambda m: None).run().to_dict()
    expired = [e for e in d["events"] if e["type"] == "NodeClaimDisrupted" and e.get("reason") == "Expired"]
    assert expired, [e["type"] for e in d["events"]]
    assert 2 * 3600 <= expired[0]["time"] <= 2 * 3600 + 180          # on time, not at the 06:00 edge
    assert [e["time"] for e in _events(d, "OffPeakInvoked")] == [6 * 3600.0, 6.5 * 3600]
    assert d["pods"]["bound"] == d["pods"]["total"] == 2
