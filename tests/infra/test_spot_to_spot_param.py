"""-c spotToSpotConsolidation=false (Karpenter's SpotToSpotConsolidation feature gate at its default, off): every
function gets KARPENTER_LAMBDA_SPOT_TO_SPOT_CONSOLIDATION=false, which the runtime reads; by default (on here) it is
absent."""

from __future__ import annotations

import pytest

from infra.config import ConfigError, load_config
from karpenter_lambda.controllers import runtime

VAR = "KARPENTER_LAMBDA_SPOT_TO_SPOT_CONSOLIDATION"


@pytest.mark.parametrize("raw,expected", [(None, True), ("", True), ("false", False), ("FALSE", False),
                                          ("true", True), (False, False), (True, True)])
def test_parsed_from_cli_strings_and_cdk_json_booleans(raw, expected):
    ctx = {"clusterName": "c"} if raw is None else {"clusterName": "c", "spotToSpotConsolidation": raw}
    assert load_config(ctx).spot_to_spot_consolidation is expected


def test_anything_else_names_the_parameter_and_the_fix():
    with pytest.raises(ConfigError, match=r"context parameter spotToSpotConsolidation: expected true or false, got "
                                          r".*pass -c spotToSpotConsolidation=false"):
        load_config({"clusterName": "c", "spotToSpotConsolidation": "off"})


def _environments(synth) -> dict[str, dict]:
    return {k: v["Properties"]["Environment"]["Variables"] for k, v in synth.of_type("AWS::Lambda::Function").items()
            if "Environment" in v["Properties"]}


def test_the_functions_get_the_variable_and_the_runtime_reads_it(synth, settings_synth):
    assert all(VAR not in env for env in _environments(synth).values())
    off = _environments(settings_synth)   # spotToSpotConsolidation: false (tests/infra/conftest.py SETTINGS_CONTEXT)
    assert off and all(env.get(VAR) == "false" for env in off.values())
    assert runtime.Config.from_env({VAR: "false", "KARPENTER_LAMBDA_CLUSTER": "c"}).spot_to_spot_consolidation is False
    assert runtime.Config.from_env({"KARPENTER_LAMBDA_CLUSTER": "c"}).spot_to_spot_consolidation is True
    with pytest.raises(ValueError, match=VAR):
        runtime.Config.from_env({VAR: "no", "KARPENTER_LAMBDA_CLUSTER": "c"})
