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
    (summary,) = d["offpeak"]
    assert summary["schedule"] == "nights" and summary["simulatedToEnd"] is True
    assert summary["lowestCostPerHour"] == min(night_costs)
    assert summary["savedDollars"] > 5 * (summary["costPerHourBefore"] - summary["lowestCostPerHour"])
    # and in the morning everything is back, including the pods of the drained NodePool (handed off by the function)
    assert _events(d, "PodsHandedOff")
    assert d["pods"]["bound"] == d["pods"]["total"] == 17
    assert d["unschedulable"] == []
