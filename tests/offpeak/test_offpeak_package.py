"""Off-peak as its own pure package (issue 22 item 4), the api import cycle broken, and the shared definitions the
off-peak code now uses (api/validators, api/offpeak_types, api/selectors, api/times, api/labels, controllers/base)."""

import ast
import logging
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

import karpenter_lambda.offpeak as offpeak
from karpenter_lambda.api import labels as L
from karpenter_lambda.api import scenario, selectors, times, validators
from karpenter_lambda.api.errors import FieldError
from karpenter_lambda.api.objects import OffPeakSchedule
from karpenter_lambda.api.offpeak import NodePoolOverride, WorkloadTarget, selector_matches
from karpenter_lambda.api.scenario import ScenarioError, parse_scenario
from karpenter_lambda.controllers.base import Controller
from karpenter_lambda.controllers.offpeak import RECORD_API_VERSION, OffPeakController
from karpenter_lambda.offpeak.downscaler import DownscalerError, downscaler_decision, parse_timespec
from test_structure import cycles, import_graph

PKG = Path(__file__).resolve().parents[2] / "layers" / "core" / "python" / "karpenter_lambda"


def _cycles(package: str) -> list[list[str]]:
    """The package-wide import cycles (tests/test_structure.py: imports inside functions count) touching ``package``."""
    return [c for c in cycles(import_graph(PKG)) if any(m.startswith(f"karpenter_lambda.{package}") for m in c)]


@pytest.mark.parametrize("package", ["api", "offpeak"])
def test_no_import_cycle_counting_imports_inside_functions(package):
    # before: api/objects -> api/offpeak -> api/validation -> api/objects (hidden behind imports at call time)
    assert _cycles(package) == []


def _function_level_imports(path: Path) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines += [n.lineno for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))]
    return sorted(set(lines))


@pytest.mark.parametrize("rel", ["api/offpeak.py", "api/offpeak_types.py", "api/validation.py", "api/validators.py",
                                 "api/scenario.py", "offpeak/__init__.py", "offpeak/plan.py", "offpeak/window.py",
                                 "offpeak/downscaler.py", "controllers/offpeak.py", "sim/offpeak.py"])
def test_the_off_peak_modules_import_at_module_level(rel):
    assert _function_level_imports(PKG / rel) == []


@pytest.mark.parametrize("first", ["api.offpeak", "api.validation", "api.objects", "offpeak", "api.offpeak_types"])
def test_any_module_can_be_imported_first(first):
    code = (f"import karpenter_lambda.{first}\n"
            "from karpenter_lambda.api.validation import SCHEMAS\n"
            "from karpenter_lambda.api.objects import OffPeakSchedule\n"
            "s = OffPeakSchedule({'spec': {'duration': '1h', 'workloads': [{'namespaces': ['dev']}]}})\n"
            "assert s.duration_seconds == 3600 and s.workloads[0].namespaces == ('dev',)\n"
            "assert 'OffPeakSchedule' in SCHEMAS\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# ----------------------------------------------------------------------------- the package
def test_the_package_gives_the_plan_the_windows_and_the_downscaler():
    for name in offpeak.__all__:
        assert hasattr(offpeak, name), name
    assert offpeak.plan_offpeak.__module__ == "karpenter_lambda.offpeak.plan"
    assert offpeak.window_at.__module__ == "karpenter_lambda.api.wallclock"   # one definition, shared with budgets
    # the old modules are gone: nothing imports them any more
    for old in ("offpeak", "offpeak_window", "downscaler"):
        assert not (PKG / "disruption" / f"{old}.py").exists(), old


def test_the_package_imports_nothing_from_disruption():
    for path in (PKG / "offpeak").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                assert "disruption" not in (node.module or ""), f"{path.name}: {node.module}"


def test_the_names_come_from_api():
    assert offpeak.ORIGINAL_ANNOTATION == L.OFFPEAK_ORIGINAL_ANNOTATION == "karpenter-lambda.io/offpeak-original-replicas"
    assert offpeak.HELD_BY_ANNOTATION == L.OFFPEAK_HELD_BY_ANNOTATION == "karpenter-lambda.io/offpeak-held-by"
    assert RECORD_API_VERSION == scenario.API_VERSION == L.PROJECT_API_VERSION == OffPeakSchedule.api_version
    assert offpeak.WORKLOAD_KINDS == ("Deployment", "StatefulSet")


def test_a_plan_through_the_package_holds_and_records():
    sched = OffPeakSchedule({"metadata": {"name": "nights"}, "spec": {
        "schedule": "0 20 * * *", "duration": "12h", "workloads": [{"namespaces": ["dev"], "replicas": 0}]}})
    web = {"kind": "Deployment", "metadata": {"name": "web", "namespace": "dev", "uid": "u1",
                                              "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": {"replicas": 3}}
    now = datetime(2026, 1, 5, 21, 0, tzinfo=timezone.utc)
    plan = offpeak.plan_offpeak(offpeak.OffPeakInput(schedules=[sched], workloads=[web], now=now))
    assert [(c.action, c.frm, c.to) for c in plan.changes] == [("scale-down", 3, 0)]
    assert plan.put_records[0]["originalReplicas"] == 3 and plan.put_records[0]["since"] == "2026-01-05T21:00:00Z"
    assert plan.schedules[0].to_dict()["window"]["start"] == "2026-01-05T20:00:00Z"


def test_a_workload_created_after_the_window_started_is_left_alone():
    sched = OffPeakSchedule({"metadata": {"name": "nights"}, "spec": {
        "schedule": "0 20 * * *", "duration": "12h", "workloads": [{"namespaces": ["dev"]}]}})
    late = {"kind": "Deployment", "metadata": {"name": "late", "namespace": "dev",
                                               "creationTimestamp": "2026-01-05T20:30:00Z"}, "spec": {"replicas": 2}}
    now = datetime(2026, 1, 5, 21, 0, tzinfo=timezone.utc)
    plan = offpeak.plan_offpeak(offpeak.OffPeakInput(schedules=[sched], workloads=[late], now=now))
    assert plan.changes == []
    assert plan.skipped[0]["reason"].startswith("created 2026-01-05T20:30:00Z, after OffPeakSchedule/nights's window "
                                                "started 2026-01-05T20:00:00Z")


# ----------------------------------------------------------------------------- one definition each
@pytest.mark.parametrize("selector, labels, expected", [
    (None, {"a": "1"}, True),
    ({}, {}, True),
    ({"matchLabels": {"tier": "web"}}, {"tier": "web"}, True),
    ({"matchLabels": {"tier": "web"}}, {"tier": "db"}, False),
    ({"matchExpressions": [{"key": "env", "operator": "In", "values": ["dev", "qa"]}]}, {"env": "qa"}, True),
    ({"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]}, {}, True),
    ({"matchExpressions": [{"key": "env", "operator": "Exists"}]}, {}, False),
    ({"matchExpressions": [{"key": "env", "operator": "DoesNotExist"}]}, {"env": "x"}, False),
])
def test_workload_selectors_match_through_api_selectors(selector, labels, expected):
    assert selector_matches(selector, labels) is expected
    assert selectors.selector_matches(selector, labels, none_matches_all=True) is expected


def test_workload_target_and_nodepool_override_views():
    t = WorkloadTarget.from_spec({"namespaceSelector": {"matchLabels": {"team": "a"}}, "replicas": 1})
    dep = {"kind": "Deployment", "metadata": {"name": "w", "namespace": "x"}}
    assert t.matches(dep, {"team": "a"}) and not t.matches(dep, {"team": "b"})
    assert not t.matches({**dep, "kind": "DaemonSet"}, {"team": "a"})
    assert NodePoolOverride.from_spec({"name": "batch", "drain": True}) == NodePoolOverride("batch", drain=True)


def test_shared_validators():
    assert validators.label_key_problem("example.com/tier") is None
    assert "at most one '/'" in validators.label_key_problem("a/b/c")
    errors: list[FieldError] = []
    validators.label_value_check("-bad", "spec.x", errors)
    validators.dns_subdomain_check("Bad_Name", "metadata.name", errors)
    assert [e.path for e in errors] == ["spec.x", "metadata.name"]
    errors = []
    out = validators.BUDGET.walk({"schedule": "0 9 * * *"}, "b", errors)
    assert out["nodes"] == "10%"
    assert [(e.path, "set both or neither" in e.message) for e in errors] == [("b.duration", True)]


def test_to_datetime_can_require_an_offset():
    assert times.to_datetime("2024-04-05T08:00:00") == datetime(2024, 4, 5, 8, tzinfo=timezone.utc)
    assert times.to_datetime("2024-04-05T08:00:00", require_offset=True) is None
    assert times.to_datetime("2024-04-05T08:00:00+02:00", require_offset=True) == \
        datetime(2024, 4, 5, 6, tzinfo=timezone.utc)
    assert times.to_datetime("2024-04-05T08:00:00Z", require_offset=True) == datetime(2024, 4, 5, 8, tzinfo=timezone.utc)


def test_a_downscaler_range_that_is_no_date_is_an_error_not_a_crash():
    # before: datetime.fromisoformat raised a bare ValueError ("month must be in 1..12") out of the plan
    with pytest.raises(DownscalerError, match="not a valid time range"):
        parse_timespec("2019-13-30T08:29:00+00:00-2019-04-30T19:30:00+00:00")
    w = {"kind": "Deployment", "metadata": {"name": "w", "namespace": "dev", "annotations": {
        "downscaler/downtime": "2019-13-30T08:29:00+00:00-2019-04-30T19:30:00+00:00"}}}
    d = downscaler_decision(w, None, datetime(2026, 1, 1, tzinfo=timezone.utc))
    assert d.replicas is None and "not a valid time range" in d.error


def test_scenario_start_time_still_needs_rfc3339_text():
    doc = {"apiVersion": L.PROJECT_API_VERSION, "kind": "Scenario", "metadata": {"name": "n"},
           "spec": {"startTime": "2026-12-07T18:00:00Z", "steps": []}}
    assert parse_scenario(doc).start_time == datetime(2026, 12, 7, 18, tzinfo=timezone.utc).timestamp()
    for bad in (5, "tonight"):
        with pytest.raises(ScenarioError, match="spec.startTime: not an RFC 3339 time"):
            parse_scenario({**doc, "spec": {"startTime": bad, "steps": []}})


class _Lines:
    def __init__(self):
        self.lines = []

    def info(self, message, extra=None):
        self.lines.append((message, extra))


def test_the_controller_logs_through_the_shared_base():
    assert issubclass(OffPeakController, Controller)
    assert "_decision" not in OffPeakController.__dict__
    out = _Lines()
    c = OffPeakController(store=None, kube=None, clock=lambda: 0.0, logger=out)
    c._decision("OffPeakStarted", "OffPeakSchedule n: window started", schedule="n")
    assert out.lines == [("OffPeakSchedule n: window started",
                          {"decision": "OffPeakStarted", "sweep": "offpeak", "schedule": "n"})]
    assert c.clock() == 0.0


def test_the_default_logger_is_still_the_modules_own():
    c = OffPeakController(store=None, kube=None)
    assert c.logger is logging.getLogger("karpenter_lambda.controllers.offpeak")
