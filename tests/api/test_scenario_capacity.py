"""The Scenario ``capacity`` action (api/scenario.py): its validation names the step and field, and `validate` /
`simulate` refuse a bad step with exit 2 before anything runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from karpenter_lambda.api.scenario import ACTIONS, ScenarioError, parse_scenario

REPO = Path(__file__).resolve().parents[2]


def _doc(*steps):
    return {"apiVersion": "karpenter-lambda.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "short"},
            "spec": {"steps": list(steps)}}


@pytest.mark.parametrize("args, expected", [
    ({"capacityType": "spotty", "available": False},
     "spec.steps[0].capacity.capacityType: must be one of on-demand, spot, reserved, got 'spotty'"),
    ({"available": False}, "spec.steps[0].capacity.capacityType: required"),
    ({"capacityType": "spot", "available": "false"},
     "spec.steps[0].capacity.available: must be a boolean (true or false, unquoted), got 'false'"),
    ({"capacityType": "spot"}, "spec.steps[0].capacity.available: required"),
    ({"capacityType": "spot", "available": False, "zone": ["us-east-1a"]}, "spec.steps[0].capacity.zone: unknown field"),
    ({"capacityType": "spot", "available": False, "instanceTypes": []},
     "spec.steps[0].capacity.instanceTypes: must be a non-empty list"),
    ({"capacityType": "spot", "available": False, "instanceTypes": ["c6a.xlarge", "big"]},
     "spec.steps[0].capacity.instanceTypes[1]: must be an instance type name like c6a.xlarge, got 'big'"),
    ({"capacityType": "spot", "available": False, "zones": "us-east-1a"},
     "spec.steps[0].capacity.zones: must be a non-empty list"),
    ("spot", "spec.steps[0].capacity: must be a mapping with capacityType and available"),
])
def test_a_bad_capacity_step_names_the_step_and_field(args, expected):
    with pytest.raises(ScenarioError) as e:
        parse_scenario(_doc({"at": "3m", "capacity": args}), "s.yaml", 1)
    assert f"s.yaml:1: Scenario/short: {expected}" in str(e.value)


def test_a_good_capacity_step_parses_and_describes_itself():
    assert "capacity" in ACTIONS
    sc = parse_scenario(_doc({"at": "3m", "capacity": {"capacityType": "spot", "available": False}},
                             {"at": "10m", "capacity": {"capacityType": "on-demand", "available": True,
                                                        "instanceTypes": ["c6a.xlarge"], "zones": ["us-east-1a"]}}))
    assert [(s.at, s.action) for s in sc.steps] == [(180.0, "capacity"), (600.0, "capacity")]
    assert sc.steps[0].describe() == "spot capacity unavailable (every instance type in every zone)"
    assert sc.steps[1].describe() == "on-demand capacity available again (c6a.xlarge in us-east-1a)"


def test_validate_and_simulate_refuse_a_bad_capacity_step_with_exit_2(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text(json.dumps(_doc({"at": "3m", "capacity": {"capacityType": "spot", "available": "no"}})))
    p = subprocess.run([sys.executable, "-m", "karpenter_lambda", "validate", str(f)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "spec.steps[0].capacity.available: must be a boolean" in p.stderr   # validate: 1
    # simulate also checks names against the simulated EC2: an unknown instance type or a zone it has no subnet in
    g = tmp_path / "t.yaml"
    g.write_text(json.dumps(_doc({"at": "3m", "capacity": {"capacityType": "spot", "available": False,
                                                            "instanceTypes": ["c6a.xlarg"], "zones": ["us-west-2a"]}})))
    p = subprocess.run([sys.executable, "-m", "karpenter_lambda", "simulate", str(REPO / "examples" / "default.yaml"),
                        str(g), "--quiet"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert (f"{g}:0: Scenario/short: spec.steps[0].capacity.instanceTypes[0]: unknown instance type 'c6a.xlarg' "
            "(did you mean c6a.xlarge?)") in p.stderr
    assert "spec.steps[0].capacity.zones[0]: 'us-west-2a' is not a zone of the simulated region us-east-1" in p.stderr
