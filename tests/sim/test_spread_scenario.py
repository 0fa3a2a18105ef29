"""A zone-spread Deployment scaled up in timed steps ends close to the plan for its final size (issue: a node per pod)."""

from __future__ import annotations

from pathlib import Path

import yaml

from karpenter_lambda.cli.plan import build_plan
from karpenter_lambda.sim.simulator import Simulation

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "spread"


def test_spread_scaled_3_12_30_consolidates_within_1_3x_of_the_plan_for_30(tmp_path):
    # the 30-replica step is at 15m; two minutes later its nodes are up and the first consolidation sweeps ran
    result = Simulation(sorted(EXAMPLE.glob("*.yaml")), until=18 * 60.0, progress=lambda m: None).run().to_dict()
    final = result["costTimeline"][-1]
    # what plan gives for the same NodePool and the Deployment at 30 replicas
    web = yaml.safe_load((EXAMPLE / "web.yaml").read_text())
    web["spec"]["replicas"] = 30
    (tmp_path / "web30.yaml").write_text(yaml.safe_dump(web))
    plan, _ = build_plan([str(EXAMPLE / "nodepool.yaml"), str(tmp_path / "web30.yaml")], "us-east-1")
    assert not plan.unschedulable
    assert final["costPerHour"] <= 1.3 * plan.cost_per_hour, (final, plan.cost_per_hour)
    assert final["nodes"] < 30 / 2   # not a node per pod
    launched = [e for e in result["events"] if e["type"] == "NodeClaimLaunched"]
    assert len(launched) < 15
