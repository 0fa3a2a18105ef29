"""OffPeakSchedule as a manifest: the issue's example loads; each invalid case names its field (load_text and
`karpenter-lambda validate`); apply / get / delete through the store (moto)."""

import copy
import json

import pytest
import yaml
from moto import mock_aws

from karpenter_lambda.adapters.store import Store
from karpenter_lambda.api.manifests import load_text
from karpenter_lambda.api.objects import KINDS, OffPeakSchedule as ObjectsOffPeakSchedule
from karpenter_lambda.api.offpeak import API_VERSION, KIND, NodePoolOverride, OffPeakSchedule, WorkloadTarget
from karpenter_lambda.api.validation import validate_and_default
from karpenter_lambda.cli.main import main

ISSUE_EXAMPLE = """\
apiVersion: karpenter-lambda.io/v1alpha1
kind: OffPeakSchedule
metadata: {name: nights}
spec:
  timeZone: Europe/Berlin          # IANA name; default UTC
  schedule: "0 20 * * 1-5"         # cron (5 fields, or @daily-style macros), window start in timeZone
  duration: 12h                    # window length (as Karpenter's budget schedule + duration)
  workloads:                       # optional: scaled during the window, restored after
    - namespaces: [dev, staging]   # and/or namespaceSelector: <label selector>
      selector: {matchLabels: {tier: web}}   # label selector; Deployments and StatefulSets
      replicas: 0
  nodePools:                       # optional: overrides during the window, restored after
    - name: default
      limits: {cpu: "16"}
      disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s}
"""

NODEPOOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
"""


def base() -> dict:
    return yaml.safe_load(ISSUE_EXAMPLE)


def errors_of(doc: dict) -> list[tuple[str, str]]:
    res = load_text(yaml.safe_dump(doc), "s.yaml")
    assert not res.objects
    return [(i.path, i.message) for i in res.issues]


# -- the valid example -------------------------------------------------------------------------------------------
def test_issue_example_loads_with_typed_accessors_and_defaults():
    res = load_text(ISSUE_EXAMPLE, "nights.yaml")
    assert res.issues == []
    [s] = res.objects
    assert isinstance(s, OffPeakSchedule) and OffPeakSchedule is ObjectsOffPeakSchedule
    assert KINDS[(API_VERSION, KIND)] is OffPeakSchedule and API_VERSION == "karpenter-lambda.io/v1alpha1"
    assert (s.name, s.time_zone, s.schedule, s.duration_seconds) == ("nights", "Europe/Berlin", "0 20 * * 1-5", 43200)
    assert s.workloads == [WorkloadTarget(namespaces=("dev", "staging"), namespace_selector=None,
                                          selector={"matchLabels": {"tier": "web"}},
                                          kinds=("Deployment", "StatefulSet"), replicas=0)]
    assert s.nodepools == [NodePoolOverride(name="default", limits={"cpu": "16"}, drain=False,
                                            disruption={"consolidationPolicy": "WhenEmptyOrUnderutilized",
                                                        "consolidateAfter": "0s"})]
    # CRD-style defaults are written into the object; nothing else is added
    assert s.spec["workloads"][0]["kinds"] == ["Deployment", "StatefulSet"] and s.spec["nodePools"][0]["drain"] is False
    assert "budgets" not in s.spec["nodePools"][0]["disruption"]     # merged into the NodePool's: no defaults


@pytest.mark.parametrize("duration,seconds", [("12h", 43200), ("90m", 5400), ("1h30m", 5400), ("168h", 604800), ("45s", 45)])
def test_durations_accepted(duration, seconds):
    doc = base()
    doc["spec"]["duration"] = duration
    defaulted, errs = validate_and_default("OffPeakSchedule", doc)
    assert errs == []
    assert OffPeakSchedule(defaulted).duration_seconds == seconds


def test_time_zone_defaults_to_utc_and_macros_and_drain_only_entries_are_valid():
    doc = base()
    del doc["spec"]["timeZone"]
    doc["spec"]["schedule"] = "@daily"
    doc["spec"]["nodePools"] = [{"name": "batch", "drain": True}, {"name": "default", "disruption": {"consolidateAfter": "30s"}}]
    defaulted, errs = validate_and_default("OffPeakSchedule", doc)
    assert errs == [] and defaulted["spec"]["timeZone"] == "UTC"
    assert [o.drain for o in OffPeakSchedule(defaulted).nodepools] == [True, False]


def test_workload_target_matches():
    t = WorkloadTarget(namespaces=("dev",), namespace_selector={"matchLabels": {"env": "dev"}},
                       selector={"matchExpressions": [{"key": "tier", "operator": "In", "values": ["web"]}]},
                       kinds=("Deployment",), replicas=1)
    web = {"kind": "Deployment", "metadata": {"name": "w", "namespace": "dev", "labels": {"tier": "web"}}}
    assert t.matches(web, {"env": "dev"})
    assert not t.matches(web, {"env": "prod"})                                        # namespace selector
    assert not t.matches({**web, "kind": "StatefulSet"}, {"env": "dev"})              # kinds
    assert not t.matches({**web, "metadata": {**web["metadata"], "namespace": "qa"}}, {"env": "dev"})
    assert not t.matches({**web, "metadata": {**web["metadata"], "labels": {"tier": "db"}}}, {"env": "dev"})
    anyns = WorkloadTarget(selector={"matchLabels": {"tier": "web"}})
    assert anyns.matches({**web, "kind": "StatefulSet"}, {}) and anyns.kinds == ("Deployment", "StatefulSet")
    everything = WorkloadTarget(namespace_selector={})
    assert everything.matches({"kind": "Deployment", "metadata": {"name": "x"}}, {})


# -- each invalid case names its field ---------------------------------------------------------------------------
def _set(path: str, value):
    def patch(doc):
        node = doc
        keys = path.split(".")
        for k in keys[:-1]:
            node = node[int(k)] if k.isdigit() else node[k]
        last = keys[-1]
        if value is DELETE:
            del node[last]
        else:
            node[int(last) if last.isdigit() else last] = value
    return patch


DELETE = object()

INVALID = [
    ("bad cron", _set("spec.schedule", "0 20 * *"), "spec.schedule", "expected 5 fields"),
    ("cron field range", _set("spec.schedule", "0 24 * * 1-5"), "spec.schedule", "hour field: 24 is out of range 0-23"),
    ("TZ prefix", _set("spec.schedule", "TZ=Europe/Berlin 0 20 * * *"), "spec.schedule", "spec.timeZone"),
    ("unknown macro", _set("spec.schedule", "@nightly"), "spec.schedule", "unknown descriptor"),
    ("missing schedule", _set("spec.schedule", DELETE), "spec.schedule", "Required value"),
    ("unknown time zone", _set("spec.timeZone", "Europe/Berln"), "spec.timeZone", "unknown time zone 'Europe/Berln'"),
    ("empty time zone", _set("spec.timeZone", ""), "spec.timeZone", "empty"),
    ("time zone number", _set("spec.timeZone", 1), "spec.timeZone", "must be a string"),
    ("negative replicas", _set("spec.workloads.0.replicas", -1), "spec.workloads[0].replicas", "must be at least 0"),
    ("replicas string", _set("spec.workloads.0.replicas", "zero"), "spec.workloads[0].replicas", "must be an integer"),
    ("zero duration", _set("spec.duration", "0m"), "spec.duration", "longer than 0"),
    ("negative duration", _set("spec.duration", "-1h"), "spec.duration", "invalid duration '-1h'"),
    ("duration > 7d", _set("spec.duration", "169h"), "spec.duration", "longer than 7 days"),
    ("duration days", _set("spec.duration", "1d"), "spec.duration", "invalid duration '1d'"),
    ("duration number", _set("spec.duration", 12), "spec.duration", "must be a string"),
    ("missing duration", _set("spec.duration", DELETE), "spec.duration", "Required value"),
    ("nodePool without name", _set("spec.nodePools.0.name", DELETE), "spec.nodePools[0].name", "Required value"),
    ("drain with limits", _set("spec.nodePools.0.drain", True), "spec.nodePools[0].limits", "drain: true"),
    ("negative limit", _set("spec.nodePools.0.limits", {"cpu": "-4"}), "spec.nodePools[0].limits.cpu", "must not be negative"),
    ("bad limit", _set("spec.nodePools.0.limits", {"memory": "lots"}), "spec.nodePools[0].limits.memory", "lots"),
    ("bad policy", _set("spec.nodePools.0.disruption", {"consolidationPolicy": "Never"}),
     "spec.nodePools[0].disruption.consolidationPolicy", "unsupported value 'Never'"),
    ("unknown field", _set("spec.workload", []), "spec.workload", 'unknown field (did you mean "workloads"?)'),
    ("unknown nested field", _set("spec.workloads.0.replica", 1), "spec.workloads[0].replica", "unknown field"),
    ("bad kind", _set("spec.workloads.0.kinds", ["CronJob"]), "spec.workloads[0].kinds[0]", "unsupported value 'CronJob'"),
    ("no namespace or selector", _set("spec.workloads.0", {"replicas": 0}), "spec.workloads[0]", "namespaces, namespaceSelector or selector"),
    ("In without values", _set("spec.workloads.0.selector", {"matchExpressions": [{"key": "tier", "operator": "In"}]}),
     "spec.workloads[0].selector.matchExpressions[0].values", "requires at least one value"),
    ("bad namespace", _set("spec.workloads.0.namespaces", ["Dev"]), "spec.workloads[0].namespaces[0]", "DNS-1123 label"),
    ("holds nothing", lambda d: (d["spec"].pop("workloads"), d["spec"].pop("nodePools")), "spec", "at least one of workloads or nodePools"),
    ("empty lists", lambda d: d["spec"].update(workloads=[], nodePools=[]), "spec", "at least one of workloads or nodePools"),
    ("no metadata.name", _set("metadata", {}), "metadata.name", "Required value"),
    ("duplicate nodePool", lambda d: d["spec"]["nodePools"].append({"name": "default", "drain": True}),
     "spec.nodePools[1].name", "already listed at spec.nodePools[0]"),
    ("nothing to override", _set("spec.nodePools.0", {"name": "default"}), "spec.nodePools[0]", "nothing to override"),
]


@pytest.mark.parametrize("case,patch,path,fragment", INVALID, ids=[c[0] for c in INVALID])
def test_invalid_schedule_names_the_field(case, patch, path, fragment):
    doc = base()
    patch(doc)
    errs = errors_of(doc)
    assert any(p == path and fragment in m for p, m in errs), errs


def test_every_error_is_reported_with_file_doc_kind_and_name():
    doc = base()
    doc["spec"].update(schedule="0 20 * *", timeZone="Mars/Olympus", duration="0h")
    doc["spec"]["workloads"][0]["replicas"] = -2
    res = load_text("---\n" + NODEPOOL + "---\n" + yaml.safe_dump(doc), "night.yaml")
    lines = [str(i) for i in res.issues]
    assert sorted(i.path for i in res.issues) == ["spec.duration", "spec.schedule", "spec.timeZone", "spec.workloads[0].replicas"]
    assert "night.yaml:1: OffPeakSchedule/nights: spec.workloads[0].replicas: -2 is too small: must be at least 0" in lines
    assert [o.kind for o in res.objects] == ["NodePool"]       # the valid NodePool still loads


def test_wrong_api_version_and_unsupported_kind_message():
    doc = base()
    doc["apiVersion"] = "karpenter.sh/v1"
    assert errors_of(doc) == [("apiVersion", "unsupported apiVersion/kind karpenter.sh/v1/OffPeakSchedule")]
    res = load_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n", "cm.yaml")
    assert "karpenter-lambda.io/v1alpha1 OffPeakSchedule" in res.issues[0].message


def test_validate_and_default_does_not_modify_its_input():
    doc = base()
    before = copy.deepcopy(doc)
    validate_and_default("OffPeakSchedule", doc)
    assert doc == before


# -- through the CLI -----------------------------------------------------------------------------------------------
@pytest.fixture
def cli(capsys):
    def run(*argv: str):
        try:
            rc = main(list(argv))
        except SystemExit as e:
            rc = e.code
        out, err = capsys.readouterr()
        return rc, out, err

    return run


def test_cli_validate_reports_the_field(cli, tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text(ISSUE_EXAMPLE)
    rc, out, _ = cli("validate", str(good))
    assert rc == 0 and out == "valid: 1 object in 1 file\n"
    doc = base()
    doc["spec"]["nodePools"][0]["drain"] = True
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    rc, _, err = cli("validate", str(bad))
    assert rc == 1
    assert f"{bad}:0: OffPeakSchedule/nights: spec.nodePools[0].limits: must not be set with drain: true" in err
    rc, out, _ = cli("validate", "--json", str(bad))
    assert rc == 1 and json.loads(out)["errors"][0]["path"] == "spec.nodePools[0].limits"


@pytest.fixture
def table():
    with mock_aws():
        Store("default").ensure_table()
        yield


def test_apply_get_delete_round_trip(cli, tmp_path, table):
    f = tmp_path / "all.yaml"
    f.write_text(ISSUE_EXAMPLE + "---\n" + NODEPOOL)
    rc, out, err = cli("apply", "-f", str(f))
    assert rc == 0, err
    assert out.splitlines() == ["nodepool/default created", "offpeakschedule/nights created"]   # NodePools first
    rc, out, _ = cli("apply", "-f", str(f))
    assert out.splitlines() == ["nodepool/default unchanged", "offpeakschedule/nights unchanged"]

    stored = Store("default").get("OffPeakSchedule", "nights")
    assert isinstance(stored, OffPeakSchedule) and stored.duration_seconds == 43200
    assert [n.name for n in Store("default").list("NodePool")] == ["default"]      # not mixed with NodePools
    assert Store("default").get("ops", "nights").name == "nights"

    rc, out, _ = cli("get", "offpeakschedules")
    assert rc == 0
    header, row = out.splitlines()
    assert header.split() == ["NAME", "TIMEZONE", "SCHEDULE", "DURATION", "WORKLOADS", "NODEPOOLS"]
    assert row.startswith("nights  Europe/Berlin  0 20 * * 1-5  12h")
    assert "dev,staging[tier=web]->0" in row and "default(limits cpu=16; disruption)" in row

    rc, out, _ = cli("get", "ops", "nights", "-o", "json")
    doc = json.loads(out)
    assert rc == 0 and doc["kind"] == "OffPeakSchedule" and doc["spec"]["schedule"] == "0 20 * * 1-5"
    assert doc["metadata"]["resourceVersion"] == "1"

    rc, out, _ = cli("get", "nodepools")
    assert rc == 0 and len(out.splitlines()) == 2 and "nights" not in out

    rc, out, _ = cli("delete", "offpeakschedule", "nights")
    assert (rc, out) == (0, 'offpeakschedule "nights" deleted\n')
    rc, _, err = cli("get", "offpeakschedule", "nights")
    assert rc == 1 and err == 'error: OffPeakSchedule "nights" not found in cluster "default"\n'
    rc, _, err = cli("get", "offpeakschedules")
    assert rc == 0 and err == 'No offpeakschedules found in cluster "default".\n'
    assert [n.name for n in Store("default").list("NodePool")] == ["default"]


def test_apply_refuses_an_invalid_schedule(cli, tmp_path, table):
    doc = base()
    doc["spec"]["workloads"][0]["replicas"] = -1
    f = tmp_path / "bad.yaml"
    f.write_text(yaml.safe_dump(doc))
    rc, out, err = cli("apply", "-f", str(f))
    assert rc == 1 and out == ""
    assert "OffPeakSchedule/nights: spec.workloads[0].replicas" in err
    assert Store("default").list("OffPeakSchedule") == []
