"""-c schedulerConfig (Karpenter's Helm ``settings.schedulerConfig``, ``--scheduler-config``): a YAML/JSON document
``podTopologySpread: {defaultConstraints: [...]}`` (a string from ``-c``, or a mapping in cdk.json), checked at synth
by the functions' own parser (api/scheduler_config.py) and passed as KARPENTER_LAMBDA_SCHEDULER_CONFIG (its
canonical JSON) to the controller-role functions, which build snapshots; not set, no function gets the variable."""

from __future__ import annotations

import json

import pytest

from infra.config import CONTEXT_KEYS, ConfigError, load_config
from karpenter_lambda.api.scheduler_config import SCHEDULER_CONFIG_ENV
from karpenter_lambda.controllers import runtime
from tests.infra.conftest import SETTINGS_SCHEDULER_CONFIG

ZONE = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}
DOC = {"podTopologySpread": {"defaultConstraints": [ZONE]}}
YAML = SETTINGS_SCHEDULER_CONFIG   # the settings synth's (tests/infra/conftest.py): ZONE
SNAPSHOT_FUNCTIONS = {"provisioner", "lifecycle", "drift", "consolidation", "interruption"}


def test_it_is_a_known_context_key():
    assert "schedulerConfig" in CONTEXT_KEYS


@pytest.mark.parametrize("raw", [None, "", "  "])
def test_not_set_is_none(raw):
    cfg = load_config({"clusterName": "c", "schedulerConfig": raw})
    assert cfg.scheduler_config is None and cfg.scheduler_environment() == {}


@pytest.mark.parametrize("raw", [YAML, json.dumps(DOC), DOC])      # -c YAML, -c JSON, a cdk.json mapping
def test_a_string_or_a_mapping_gives_the_constraints(raw):
    cfg = load_config({"clusterName": "c", "schedulerConfig": raw})
    assert [dict(c) for c in cfg.scheduler_config.default_constraints] == [ZONE]
    assert json.loads(cfg.scheduler_environment()[SCHEDULER_CONFIG_ENV]) == DOC


@pytest.mark.parametrize("raw, field", [
    ({"podTopologySpread": {"defaultConstraints": [{**ZONE, "maxSkew": 0}]}}, r"defaultConstraints\[0\]\.maxSkew"),
    ({"podTopologySpread": {"defaultConstraints": [{**ZONE, "labelSelector": {"matchLabels": {"a": "b"}}}]}},
     r"defaultConstraints\[0\]\.labelSelector"),
    ("podTopologySpread: {defaultConstraints: [{maxSkew: 1}]}", r"defaultConstraints\[0\]\.topologyKey"),
    ("podTopologySpreads: {}", r"podTopologySpreads"),
    ("{not: [yaml", r"not valid YAML or JSON"),
])
def test_a_bad_value_names_schedulerConfig_and_the_field(raw, field):
    with pytest.raises(ConfigError, match=rf"context parameter schedulerConfig: .*{field}.*-c schedulerConfig="):
        load_config({"clusterName": "c", "schedulerConfig": raw})


def _environments(synth) -> dict[str, dict]:
    """Function name (from its logical id) -> its environment variables."""
    out = {}
    for key, res in synth.of_type("AWS::Lambda::Function").items():
        variables = (res["Properties"].get("Environment") or {}).get("Variables")
        if variables is None:
            continue
        name = next((n for n in (*SNAPSHOT_FUNCTIONS, "offpeak") if key.lower().startswith(n)), None)
        if name is not None:
            out[name] = variables
    return out


def test_synth_passes_it_to_the_functions_that_build_snapshots(synth, settings_synth):
    default = _environments(synth)
    assert set(default) == SNAPSHOT_FUNCTIONS | {"offpeak"}
    assert all(SCHEDULER_CONFIG_ENV not in env for env in default.values())
    changed = _environments(settings_synth)   # schedulerConfig: YAML
    assert set(changed) == set(default)
    assert {name for name, env in changed.items() if SCHEDULER_CONFIG_ENV in env} == SNAPSHOT_FUNCTIONS
    # what the functions get is what they read back: the same constraints
    raw = changed["provisioner"][SCHEDULER_CONFIG_ENV]
    config = runtime.Config.from_env({SCHEDULER_CONFIG_ENV: raw, "KARPENTER_LAMBDA_CLUSTER": "spread"})
    assert [dict(c) for c in config.scheduler_config.default_constraints] == [ZONE]


def test_synth_refuses_a_bad_one_naming_schedulerConfig(synth_factory, tmp_path):
    bad = json.dumps({"podTopologySpread": {"defaultConstraints": [{**ZONE, "whenUnsatisfiable": "Never"}]}})
    with pytest.raises(ConfigError, match=r"schedulerConfig: .*whenUnsatisfiable"):
        synth_factory({"clusterName": "spread", "schedulerConfig": bad}, tmp_path / "out")
