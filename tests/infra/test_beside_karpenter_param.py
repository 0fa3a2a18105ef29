"""-c besideKarpenter=true (a migration from Karpenter, docs/migration.md): every function gets
KARPENTER_LAMBDA_BESIDE_KARPENTER=true, which the runtime reads (controllers/runtime.py); by default it is absent."""

from __future__ import annotations

import pytest

from infra.config import ConfigError, load_config
from karpenter_lambda.controllers import runtime

VAR = "KARPENTER_LAMBDA_BESIDE_KARPENTER"


@pytest.mark.parametrize("raw,expected", [(None, False), ("", False), ("true", True), ("TRUE", True), (" false ", False),
                                          (True, True), (False, False)])
def test_parsed_from_cli_strings_and_cdk_json_booleans(raw, expected):
    ctx = {"clusterName": "c"} if raw is None else {"clusterName": "c", "besideKarpenter": raw}
    assert load_config(ctx).beside_karpenter is expected


@pytest.mark.parametrize("raw", ["yes", "1", "on"])
def test_anything_else_names_the_parameter_and_the_fix(raw):
    with pytest.raises(ConfigError, match=r"context parameter besideKarpenter: expected true or false, got .*"
                                          r"pass -c besideKarpenter=true"):
        load_config({"clusterName": "c", "besideKarpenter": raw})


def _environments(synth) -> dict[str, dict]:
    return {k: v["Properties"]["Environment"]["Variables"] for k, v in synth.of_type("AWS::Lambda::Function").items()
            if "Environment" in v["Properties"]}


def test_every_function_gets_the_variable_and_the_runtime_reads_it(synth, settings_synth):
    default = _environments(synth)
    assert default and all(VAR not in env for env in default.values())
    beside = _environments(settings_synth)   # besideKarpenter: true (tests/infra/conftest.py SETTINGS_CONTEXT)
    assert set(beside) == set(default)                       # the same functions, each with the variable
    assert all(env.get(VAR) == "true" for env in beside.values())
    config = runtime.Config.from_env({VAR: "true", "KARPENTER_LAMBDA_CLUSTER": "migrating"})
    assert config.beside_karpenter is True
