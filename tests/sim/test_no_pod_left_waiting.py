"""The issue's day-one scenario: three zones, 12 pods of 1 CPU / 2Gi and 6 zone-spread pods of 500m.

The kube-scheduler binds in its own order, so a node planned for some pods can fill with others; those pods must
not wait on a full node for the nomination's 20 minutes (scheduling/inputs.held_reservations)."""

from pathlib import Path

from karpenter_lambda.sim.simulator import Simulation

REPO = Path(__file__).resolve().parents[2]


def test_every_pod_ends_bound():
    result = Simulation([REPO / "examples" / "default.yaml", Path(__file__).parent / "data" / "zone-spread-and-big.yaml"],
                        progress=lambda m: None).run()
    assert result.unschedulable == []
    assert result.pods_bound == result.pods_total == 18
    assert all(c["ready"] for c in result.nodeclaims)
