"""-c vmMemoryOverheadPercent / -c reservedENIs (Karpenter's Helm ``settings.vmMemoryOverheadPercent`` and
``settings.reservedENIs``): every function gets KARPENTER_LAMBDA_VM_MEMORY_OVERHEAD_PERCENT /
KARPENTER_LAMBDA_RESERVED_ENIS, which the runtime reads (controllers/runtime.py); at the defaults (0.075, 0) neither is
set, so a default deployment is unchanged.  Values are checked at synth by the functions' own rules."""

from __future__ import annotations

import pytest

from infra.config import ConfigError, load_config
from karpenter_lambda.controllers import runtime

VM = "KARPENTER_LAMBDA_VM_MEMORY_OVERHEAD_PERCENT"
ENIS = "KARPENTER_LAMBDA_RESERVED_ENIS"


@pytest.mark.parametrize("ctx, expected", [
    ({}, (0.075, 0)),
    ({"vmMemoryOverheadPercent": "", "reservedENIs": ""}, (0.075, 0)),
    ({"vmMemoryOverheadPercent": "0.05", "reservedENIs": "1"}, (0.05, 1)),        # -c strings
    ({"vmMemoryOverheadPercent": 0.05, "reservedENIs": 2}, (0.05, 2)),            # cdk.json numbers
    ({"vmMemoryOverheadPercent": 0, "reservedENIs": 0}, (0.0, 0)),
])
def test_parsed_from_cli_strings_and_cdk_json_numbers(ctx, expected):
    cfg = load_config({"clusterName": "c", **ctx})
    assert (cfg.vm_memory_overhead_percent, cfg.reserved_enis) == expected


@pytest.mark.parametrize("key, raw, message", [
    ("vmMemoryOverheadPercent", "7.5", r"context parameter vmMemoryOverheadPercent must be a fraction of the instance "
                                       r"memory such as 0\.075 \(7\.5%\).*not '7\.5'.*-c vmMemoryOverheadPercent="),
    ("vmMemoryOverheadPercent", -0.1, r"context parameter vmMemoryOverheadPercent .*not -0\.1: it cannot be negative"),
    ("vmMemoryOverheadPercent", True, r"context parameter vmMemoryOverheadPercent .*not True"),
    ("reservedENIs", "-1", r"context parameter reservedENIs must be a whole number .*not '-1'.*-c reservedENIs="),
    ("reservedENIs", 1.5, r"context parameter reservedENIs must be a whole number .*not 1\.5"),
])
def test_a_bad_value_names_the_parameter(key, raw, message):
    with pytest.raises(ConfigError, match=message):
        load_config({"clusterName": "c", key: raw})


def _environments(synth) -> dict[str, dict]:
    return {k: v["Properties"]["Environment"]["Variables"] for k, v in synth.of_type("AWS::Lambda::Function").items()
            if "Environment" in v["Properties"]}


def test_every_function_gets_the_variables_and_the_runtime_reads_them(synth, settings_synth):
    default = _environments(synth)
    assert default and all(VM not in env and ENIS not in env for env in default.values())
    # settings_synth (tests/infra/conftest.py): vmMemoryOverheadPercent 0.05, reservedENIs 1
    changed = _environments(settings_synth)
    assert set(changed) == set(default)                       # the same functions, each with the variables
    assert all(env.get(VM) == "0.05" and env.get(ENIS) == "1" for env in changed.values())
    env = next(iter(changed.values()))
    config = runtime.Config.from_env({VM: env[VM], ENIS: env[ENIS], "KARPENTER_LAMBDA_CLUSTER": "tuned"})
    assert (config.vm_memory_overhead_percent, config.reserved_enis) == (0.05, 1)
