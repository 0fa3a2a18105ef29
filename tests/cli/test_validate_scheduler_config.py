"""`validate --scheduler-config FILE`: the scheduler config (Karpenter v1.15's --scheduler-config, read by the functions
as KARPENTER_LAMBDA_SCHEDULER_CONFIG) checked offline with the manifests: each problem one error naming the file and
the field, exit 1; a file that cannot be read is a usage error (exit 2); a good one changes nothing."""

from __future__ import annotations

import json

from cli_manifests import pair

GOOD = """podTopologySpread:
  defaultConstraints:
    - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}
"""
BAD = """podTopologySpread:
  defaultConstraints:
    - {maxSkew: 0, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: Never, labelSelector: {}}
"""


def test_a_good_scheduler_config_changes_nothing(cli, manifests):
    f, sc = manifests("pair.yaml", pair()), manifests("sc.yaml", GOOD)
    assert cli("validate", f, "--scheduler-config", sc) == cli("validate", f)
    rc, out, err = cli("validate", f, "--scheduler-config", sc)
    assert (rc, err) == (0, "") and out.startswith("valid: ")


def test_each_problem_is_an_error_naming_the_file_and_the_field(cli, manifests):
    f, sc = manifests("pair.yaml", pair()), manifests("sc.yaml", BAD)
    rc, out, err = cli("validate", f, "--scheduler-config", sc)
    assert rc == 1 and out == ""
    lines = [l for l in err.splitlines() if "SchedulerConfig" in l]
    fields = [l.split("SchedulerConfig/-: ", 1)[1].split(": ", 1)[0] for l in lines]
    assert fields == ["podTopologySpread.defaultConstraints[0].maxSkew",
                      "podTopologySpread.defaultConstraints[0].whenUnsatisfiable",
                      "podTopologySpread.defaultConstraints[0].labelSelector"], err
    assert all(l.startswith(f"{sc}:0: ") for l in lines)
    rc, out, _ = cli("validate", f, "--scheduler-config", sc, "--json")
    doc = json.loads(out)
    assert rc == 1 and doc["valid"] is False
    assert [e["path"] for e in doc["errors"] if e["kind"] == "SchedulerConfig"] == fields


def test_a_document_that_does_not_parse_is_one_error(cli, manifests):
    f, sc = manifests("pair.yaml", pair()), manifests("sc.yaml", "podTopologySpread: [\n")
    rc, _out, err = cli("validate", f, "--scheduler-config", sc)
    assert rc == 1 and "not valid YAML or JSON" in err and f"{sc}:0: SchedulerConfig/-" in err


def test_a_missing_file_is_a_usage_error(cli, manifests, tmp_path):
    f = manifests("pair.yaml", pair())
    rc, _out, err = cli("validate", f, "--scheduler-config", str(tmp_path / "nope.yaml"))
    assert rc == 2 and "--scheduler-config" in err and "nope.yaml" in err
