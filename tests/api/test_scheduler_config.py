"""The scheduler config (api/scheduler_config.py): Karpenter v1.15's ``--scheduler-config``
(pkg/operator/options/options.go ``ParseSchedulerConfiguration``, its cases in options/suite_test.go), ours the setting
KARPENTER_LAMBDA_SCHEDULER_CONFIG: strict decoding, upstream's validation, error text naming origin and field path,
and the canonical JSON round trip."""

from __future__ import annotations

import json

import pytest

from karpenter_lambda.api.scheduler_config import (SCHEDULER_CONFIG_ENV, SchedulerConfig, SchedulerConfigError,
                                                   parse_scheduler_config)

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
ENV_ORIGIN = f"environment variable {SCHEDULER_CONFIG_ENV}"

TWO_YAML = f"""
podTopologySpread:
  defaultConstraints:
    - maxSkew: 1
      topologyKey: {ZONE}
      whenUnsatisfiable: ScheduleAnyway
    - maxSkew: 3
      topologyKey: {HOST}
      whenUnsatisfiable: DoNotSchedule
"""


def doc(**fields) -> dict:
    """A document with one default constraint: zone, maxSkew 1, ScheduleAnyway, overridden by ``fields``
    (a value None removes the field)."""
    con = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway", **fields}
    return {"podTopologySpread": {"defaultConstraints": [{k: v for k, v in con.items() if v is not None}]}}


def error(raw, origin: str = ENV_ORIGIN) -> str:
    with pytest.raises(SchedulerConfigError) as e:
        parse_scheduler_config(raw, origin)
    return str(e.value)


# -- not set / empty --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("raw", [None, "", "   ", "\n\t\n"])
def test_an_unset_or_blank_setting_is_none(raw):
    assert parse_scheduler_config(raw) is None


@pytest.mark.parametrize("raw", ["{}", "null", "# only a comment\n", "podTopologySpread: {}",
                                 "podTopologySpread:\n  defaultConstraints: []\n", "podTopologySpread: null", {}])
def test_an_empty_document_is_a_config_defaulting_nothing(raw):
    cfg = parse_scheduler_config(raw)
    assert cfg == SchedulerConfig(())
    assert cfg.default_constraints == ()


# -- valid documents --------------------------------------------------------------------------------------------
def test_yaml_document_with_two_constraints():
    cfg = parse_scheduler_config(TWO_YAML)
    assert cfg.default_constraints == (
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"},
        {"maxSkew": 3, "topologyKey": HOST, "whenUnsatisfiable": "DoNotSchedule"},
    )


def test_json_document_and_parsed_dict_read_the_same_as_yaml():
    as_json = ('{"podTopologySpread":{"defaultConstraints":[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone",'
               '"whenUnsatisfiable":"ScheduleAnyway"},{"maxSkew":3,"topologyKey":"kubernetes.io/hostname",'
               '"whenUnsatisfiable":"DoNotSchedule"}]}}')
    assert parse_scheduler_config(as_json) == parse_scheduler_config(TWO_YAML)
    assert parse_scheduler_config(json.loads(as_json)) == parse_scheduler_config(TWO_YAML)
    # a YAML flow mapping (not JSON: unquoted keys) reads the same too
    flow = f"{{podTopologySpread: {{defaultConstraints: [{{maxSkew: 1, topologyKey: {ZONE}, whenUnsatisfiable: ScheduleAnyway}}]}}}}"
    assert parse_scheduler_config(flow).default_constraints == parse_scheduler_config(TWO_YAML).default_constraints[:1]


def test_same_topology_key_with_another_when_unsatisfiable_is_allowed():
    raw = {"podTopologySpread": {"defaultConstraints": [
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"},
        {"maxSkew": 3, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]}}
    assert len(parse_scheduler_config(raw).default_constraints) == 2


def test_optional_fields_are_kept_and_nulls_dropped():
    cfg = parse_scheduler_config(doc(minDomains=3, nodeTaintsPolicy="Honor", nodeAffinityPolicy="Ignore"))
    assert cfg.default_constraints[0] == {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway",
                                          "minDomains": 3, "nodeTaintsPolicy": "Honor", "nodeAffinityPolicy": "Ignore"}
    # null reads as absent (Go's nil pointer / slice): a null labelSelector and an empty matchLabelKeys are accepted
    raw = doc()
    raw["podTopologySpread"]["defaultConstraints"][0].update(labelSelector=None, matchLabelKeys=[], minDomains=None)
    assert parse_scheduler_config(raw) == parse_scheduler_config(doc())


def test_the_parsed_dict_is_not_aliased():
    raw = doc()
    cfg = parse_scheduler_config(raw)
    raw["podTopologySpread"]["defaultConstraints"][0]["maxSkew"] = 7
    assert cfg.default_constraints[0]["maxSkew"] == 1


# -- round trip -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("raw", [TWO_YAML, "{}", doc(minDomains=2, nodeTaintsPolicy="Honor")])
def test_to_json_reads_back_equal(raw):
    cfg = parse_scheduler_config(raw)
    text = cfg.to_json()
    assert parse_scheduler_config(text) == cfg
    assert parse_scheduler_config(text).to_json() == text
    assert hash(parse_scheduler_config(text)) == hash(cfg)


def test_to_json_is_canonical():
    a = parse_scheduler_config(TWO_YAML)
    b = parse_scheduler_config({"podTopologySpread": {"defaultConstraints": [
        {"whenUnsatisfiable": "ScheduleAnyway", "topologyKey": ZONE, "maxSkew": 1},
        {"topologyKey": HOST, "whenUnsatisfiable": "DoNotSchedule", "maxSkew": 3}]}})
    assert a.to_json() == b.to_json()
    assert " " not in a.to_json()
    assert SchedulerConfig(()).to_json() == "{}"


# -- validation (upstream's rules) ------------------------------------------------------------------------------
def test_error_names_origin_and_field_path():
    assert error(doc(maxSkew=0)) == (f"{ENV_ORIGIN}: podTopologySpread.defaultConstraints[0].maxSkew: "
                                     "must be greater than 0")
    assert error(doc(maxSkew=0), origin="file sched.yaml").startswith("file sched.yaml: podTopologySpread.")


def test_default_origin():
    assert error(doc(maxSkew=-1), origin="scheduler config").startswith("scheduler config: ")
    with pytest.raises(SchedulerConfigError, match=r"^scheduler config: "):
        parse_scheduler_config(doc(maxSkew=-1))


@pytest.mark.parametrize("fields, path, words", [
    ({"maxSkew": 0}, "maxSkew", "greater than 0"),
    ({"maxSkew": -2}, "maxSkew", "greater than 0"),
    ({"maxSkew": None}, "maxSkew", "greater than 0"),              # missing: Go's zero value
    ({"maxSkew": "1"}, "maxSkew", "integer"),                      # strict types: not a string
    ({"maxSkew": 1.5}, "maxSkew", "integer"),
    ({"maxSkew": True}, "maxSkew", "integer"),
    ({"maxSkew": 2**31}, "maxSkew", "integer"),                    # int32
    ({"topologyKey": None}, "topologyKey", "must be set"),
    ({"topologyKey": ""}, "topologyKey", "must be set"),
    ({"topologyKey": "not a valid label name"}, "topologyKey", "invalid label key"),
    ({"topologyKey": "a/b/c"}, "topologyKey", "invalid label key"),
    ({"topologyKey": 5}, "topologyKey", "string"),
    ({"whenUnsatisfiable": "Sometimes"}, "whenUnsatisfiable", "DoNotSchedule or ScheduleAnyway"),
    ({"whenUnsatisfiable": None}, "whenUnsatisfiable", "must be set"),
    ({"labelSelector": {"matchLabels": {"app": "test"}}}, "labelSelector", "must not be set"),
    ({"labelSelector": {}}, "labelSelector", "must not be set"),    # non-nil, even empty
    ({"matchLabelKeys": ["pod-template-hash"]}, "matchLabelKeys", "must not be set"),
    ({"minDomains": 0}, "minDomains", "greater than 0"),
    ({"minDomains": "3"}, "minDomains", "integer"),
    ({"nodeTaintsPolicy": "Sometimes"}, "nodeTaintsPolicy", "Honor or Ignore"),
    ({"nodeAffinityPolicy": "honor"}, "nodeAffinityPolicy", "Honor or Ignore"),
])
def test_each_rule_is_refused_with_its_field_path(fields, path, words):
    msg = error(doc(**fields))
    assert f"{ENV_ORIGIN}: podTopologySpread.defaultConstraints[0].{path}: " in msg
    assert words in msg


def test_a_duplicate_topology_key_and_when_unsatisfiable_pair_is_refused():
    raw = {"podTopologySpread": {"defaultConstraints": [
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"},
        {"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "ScheduleAnyway"},
        {"maxSkew": 3, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"}]}}
    msg = error(raw)
    assert "podTopologySpread.defaultConstraints[2]: duplicate of defaultConstraints[0]" in msg
    assert ZONE in msg and "[1]" not in msg


def test_every_problem_is_reported():
    raw = {"podTopologySpread": {"defaultConstraints": [
        {"maxSkew": 0, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway"},
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "Later"}]}}
    msg = error(raw)
    assert "defaultConstraints[0].maxSkew" in msg and "defaultConstraints[1].whenUnsatisfiable" in msg


# -- strict decoding --------------------------------------------------------------------------------------------
def test_unknown_field_at_the_top_is_refused():
    msg = error(TWO_YAML + "notARealField: true\n")
    assert msg.startswith(f"{ENV_ORIGIN}: notARealField: unknown field")


def test_unknown_field_in_pod_topology_spread_is_refused():
    msg = error({"podTopologySpread": {"defaultConstraints": [], "defaultingType": "List"}})
    assert "podTopologySpread.defaultingType: unknown field" in msg


def test_unknown_field_in_a_constraint_is_refused():
    msg = error(doc(maxskew=2))
    assert "podTopologySpread.defaultConstraints[0].maxskew: unknown field" in msg


@pytest.mark.parametrize("raw, where", [
    ("- 1\n- 2\n", "must be a mapping"),
    ("just text", "must be a mapping"),
    ({"podTopologySpread": []}, "podTopologySpread: must be a mapping"),
    ({"podTopologySpread": {"defaultConstraints": {"maxSkew": 1}}}, "podTopologySpread.defaultConstraints: must be a list"),
    ({"podTopologySpread": {"defaultConstraints": ["zone"]}}, "podTopologySpread.defaultConstraints[0]: must be a mapping"),
])
def test_wrong_shapes_are_refused(raw, where):
    assert where in error(raw)


@pytest.mark.parametrize("raw", [
    "podTopologySpread: {",                                       # malformed YAML (upstream's case)
    '{"podTopologySpread": {"defaultConstraints": []}',           # malformed JSON
    "podTopologySpread: {}\npodTopologySpread: {}\n",             # duplicate key (UnmarshalStrict refuses it)
    '{"podTopologySpread": {}, "podTopologySpread": {}}',
    "podTopologySpread: {}\n---\npodTopologySpread: {}\n",        # more than one document
])
def test_malformed_documents_are_refused_naming_the_origin(raw):
    msg = error(raw)
    assert msg.startswith(f"{ENV_ORIGIN}: ")
    assert "not valid" in msg


def test_the_error_is_a_value_error():
    with pytest.raises(ValueError):
        parse_scheduler_config(doc(maxSkew=0))
