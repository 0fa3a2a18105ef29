"""NodeOverlay in `simulate` (issue 30 item 5): the simulator takes NodeOverlays from its input and stores them with
the NodePools, so the real handlers' snapshot loader applies them (end to end through the handler:
tests/provision/test_overlay_wiring.py; the price decision in `plan`: tests/plan/test_plan_cli.py)."""

from pathlib import Path

from karpenter_lambda.sim.simulator import Simulation

ROOT = Path(__file__).resolve().parents[2]

OVERLAY = """apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: savings-plan-m6i}
spec:
  weight: 10
  requirements:
    - {key: node.kubernetes.io/instance-type, operator: In, values: ["m6i.2xlarge"]}
  price: "0.0042"
"""


def test_simulate_loads_node_overlays_to_store_them(tmp_path):
    (tmp_path / "overlay.yaml").write_text(OVERLAY)
    sim = Simulation([ROOT / "examples" / "default.yaml", tmp_path / "overlay.yaml"])
    sim._load()
    assert [o.name for o in sim.overlays] == ["savings-plan-m6i"]
