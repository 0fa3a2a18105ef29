"""A planned replace whose pods all fit on the remaining nodes by the time it is carried out goes ahead as a delete
(docs/disruption.md); its NodeClaimDisrupted event and the deletion say so.  Before, the event kept the proposal's
text ("replace 1 node(s) by c6a.large, saves $0.0765/h") with no replacement launched and the delete's savings."""

from __future__ import annotations

from pathlib import Path

from karpenter_lambda.sim.simulator import Simulation

DATA = Path(__file__).parent / "data"


def test_every_disruption_without_replacement_is_told_as_a_delete():
    sim = Simulation([DATA / "replace_as_delete_pool.yaml", DATA / "replace_as_delete_work.yaml"],
                     progress=lambda m: None)
    d = sim.run().to_dict()
    disrupted = [e for e in d["events"] if e["type"] == "NodeClaimDisrupted" and e.get("reason") == "Underutilized"]
    assert len(disrupted) >= 3
    for e in disrupted:
        if not e.get("replacements"):
            assert "delete" in e["message"] and "replace" not in e["message"], e
            assert f"saves ${e['savingsPerHour']:.4f}/h" in e["message"], e
