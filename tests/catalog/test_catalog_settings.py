"""Karpenter's two catalog settings, ``--vm-memory-overhead-percent`` (``VM_MEMORY_OVERHEAD_PERCENT``, default 0.075,
>= 0) and ``--reserved-enis`` (``RESERVED_ENIS``, default 0, >= 0) of aws/karpenter-provider-aws v1.14.1
``pkg/operator/options/options.go``: here ``KARPENTER_LAMBDA_VM_MEMORY_OVERHEAD_PERCENT`` and
``KARPENTER_LAMBDA_RESERVED_ENIS``, read once (``controllers/runtime.catalog_settings``) and passed as arguments down
to the catalog build (``ec2_catalog.load_catalog``, ``cloudprovider/catalog.default_catalog_loader``,
``AWSCloudProvider``).  The launch path and the sweeps through the real handlers:
tests/provision/test_catalog_settings_wiring.py; ``plan`` and ``simulate``: tests/plan/test_plan_catalog_settings.py;
the CDK context: tests/infra/test_catalog_settings_param.py."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from karpenter_lambda.adapters.aws.ec2_catalog import load_catalog
from karpenter_lambda.cloudprovider import AWSCloudProvider
from karpenter_lambda.cloudprovider import catalog as catalog_cache
from karpenter_lambda.controllers import runtime

REGION = "us-east-1"
MIB = 1 << 20
VM = "KARPENTER_LAMBDA_VM_MEMORY_OVERHEAD_PERCENT"
ENIS = "KARPENTER_LAMBDA_RESERVED_ENIS"


def _m5_large(**settings):
    return next(it for it in load_catalog(None, REGION, source="moto-bundled", **settings) if it.name == "m5.large")


# --- the catalog build takes them as arguments ------------------------------------------------------------


def test_load_catalog_applies_the_vm_memory_overhead():
    """m5.large, 8192 MiB: 8192 - ceil(8192 x 0.075) = 7577 MiB by default; 8192 - ceil(8192 x 0.05) = 7782 MiB at 0.05
    (allocatable: less 574 MiB kube-reserved and 100 MiB eviction either way)."""
    default, lower = _m5_large(), _m5_large(vm_memory_overhead_percent=0.05)
    assert default.capacity["memory"] == 7577 * MIB and default.allocatable["memory"] == 6903 * MIB
    assert lower.capacity["memory"] == 7782 * MIB and lower.allocatable["memory"] == 7108 * MIB
    assert _m5_large(vm_memory_overhead_percent=0.0).capacity["memory"] == 8192 * MIB


def test_load_catalog_applies_the_reserved_enis():
    """m5.large, 3 ENIs x 10 IPv4: 3 x 9 + 2 = 29 pods; one ENI reserved: 2 x 9 + 2 = 20.  kube-reserved memory
    stays on the unreserved count (Karpenter passes 0 reserved ENIs there: types.go), so allocatable memory is equal."""
    default, reserved = _m5_large(), _m5_large(reserved_enis=1)
    assert default.capacity["pods"] == 29 and reserved.capacity["pods"] == 20
    assert reserved.allocatable["memory"] == default.allocatable["memory"]


def test_the_launch_catalog_passes_them_and_keys_its_cache_on_them(monkeypatch):
    """AWSCloudProvider -> default_catalog_loader -> load_catalog: a warm process asked for other settings builds
    another catalog instead of answering from its cache."""
    monkeypatch.setenv("KARPENTER_LAMBDA_CATALOG_SOURCE", "moto-bundled")
    monkeypatch.setattr(catalog_cache, "_catalog_cache", {})
    resolved = SimpleNamespace(subnets=[{"zone": "us-east-1a"}])

    def m5_large(**settings):
        cloud = AWSCloudProvider(None, None, None, SimpleNamespace(name="c1"), region=REGION, **settings)
        return next(it for it in cloud.instance_types(None, resolved, set()) if it.name == "m5.large")

    assert m5_large().capacity["memory"] == 7577 * MIB and m5_large().capacity["pods"] == 29
    changed = m5_large(vm_memory_overhead_percent=0.05, reserved_enis=1)
    assert changed.capacity["memory"] == 7782 * MIB and changed.capacity["pods"] == 20
    assert m5_large().capacity["memory"] == 7577 * MIB          # the default's cache entry is its own


def test_the_cloud_provider_takes_them_from_the_functions_config():
    config = runtime.Config.from_env({"KARPENTER_LAMBDA_CLUSTER": "c", VM: "0.05", ENIS: "2"})
    env = SimpleNamespace(ec2=None, ssm=None, iam=None, cluster=SimpleNamespace(name="c"), config=config,
                          unavailable=None, pricing=None, price_cache=None)
    cloud = AWSCloudProvider.from_environment(env)
    assert (cloud.vm_memory_overhead_percent, cloud.reserved_enis) == (0.05, 2)


# --- read once, checked ------------------------------------------------------------------------------------


def test_defaults_when_unset_or_empty():
    assert runtime.catalog_settings({}) == {"vm_memory_overhead_percent": 0.075, "reserved_enis": 0}
    assert runtime.catalog_settings({VM: "", ENIS: " "}) == {"vm_memory_overhead_percent": 0.075, "reserved_enis": 0}
    config = runtime.Config.from_env({"KARPENTER_LAMBDA_CLUSTER": "c"})
    assert (config.vm_memory_overhead_percent, config.reserved_enis) == (0.075, 0)
    assert runtime.catalog_environment(runtime.catalog_settings({})) == {}   # nothing for a default deployment


def test_values_from_the_environment_and_flags_winning():
    env = {VM: "0.05", ENIS: "1"}
    assert runtime.catalog_settings(env) == {"vm_memory_overhead_percent": 0.05, "reserved_enis": 1}
    assert runtime.catalog_settings(env, vm_memory_overhead_percent="0.1", reserved_enis="0") == {
        "vm_memory_overhead_percent": 0.1, "reserved_enis": 0}
    config = runtime.Config.from_env({"KARPENTER_LAMBDA_CLUSTER": "c", **env})
    assert config.catalog_settings() == {"vm_memory_overhead_percent": 0.05, "reserved_enis": 1}
    # and back to the variables, as the CDK stack and simulate hand them to the functions
    assert runtime.catalog_environment(config.catalog_settings()) == {VM: "0.05", ENIS: "1"}
    assert runtime.catalog_settings(runtime.catalog_environment(config.catalog_settings())) == config.catalog_settings()


@pytest.mark.parametrize("raw, why", [
    ("7.5", r"that subtracts all the memory \(for 7.5%, write 0.075\)"),
    ("1", "that subtracts all the memory"),
    ("-0.01", "it cannot be negative"),
    ("seven", "not a number"),
    ("7.5%", "not a number"),
    ("nan", "not a finite number"),
])
def test_a_bad_overhead_names_the_variable_the_value_and_the_form(raw, why):
    with pytest.raises(ValueError) as e:
        runtime.Config.from_env({"KARPENTER_LAMBDA_CLUSTER": "c", VM: raw})
    msg = str(e.value)
    assert msg.startswith(f"environment variable {VM} must be a fraction of the instance memory such as 0.075 (7.5%)")
    assert repr(raw) in msg
    assert re.search(why, msg), msg


@pytest.mark.parametrize("raw, why", [("-1", "it cannot be negative"), ("1.5", "not an integer"),
                                      ("two", "not an integer")])
def test_bad_reserved_enis_name_the_variable_and_the_value(raw, why):
    with pytest.raises(ValueError) as e:
        runtime.Config.from_env({"KARPENTER_LAMBDA_CLUSTER": "c", ENIS: raw})
    msg = str(e.value)
    assert msg.startswith(f"environment variable {ENIS} must be a whole number of network interfaces, 0 or more")
    assert repr(raw) in msg and why in msg


def test_a_bad_flag_is_named_as_the_flag():
    with pytest.raises(ValueError, match=r"^--vm-memory-overhead-percent must be a fraction .* not '10'"):
        runtime.catalog_settings({}, vm_memory_overhead_percent="10")
    with pytest.raises(ValueError, match=r"^--reserved-enis must be a whole number .* not '-2'"):
        runtime.catalog_settings({ENIS: "1"}, reserved_enis="-2")
