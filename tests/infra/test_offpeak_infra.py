"""Off-peak deployment: cron -> EventBridge Scheduler conversion (pure), the Scheduler schedules, the off-peak
function's own role, and the RBAC it needs.

One synth of the whole app (module scope) with a nodePools folder holding OffPeakSchedules in Europe/Berlin; the
construct's edge cases run on a bare stack with stand-in schedule objects (fast).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from infra.offpeak_cron import CronConversionError, compress, end_expression, end_expression_or_reason, to_eventbridge_cron
from karpenter_lambda.api.cron import CronError

REPO = Path(__file__).resolve().parents[2]
CLUSTER = "offpeak-cluster"

# -- the pure conversion -------------------------------------------------------------------------------


@pytest.mark.parametrize("expr,expected", [
    ("0 20 * * 1-5", "cron(0 20 ? * 2-6 *)"),                      # Mon-Fri: robfig 1-5 -> EventBridge 2-6
    ("0 20 * * MON-FRI", "cron(0 20 ? * 2-6 *)"),                  # names
    ("0 20 * * mon,wed,fri", "cron(0 20 ? * 2,4,6 *)"),
    ("0 9 * * SUN", "cron(0 9 ? * 1 *)"),                          # Sunday 0 -> 1
    ("0 9 * * 0,6", "cron(0 9 ? * 1,7 *)"),                        # the weekend
    ("0 9 * * 5-6,0", "cron(0 9 ? * 1,6-7 *)"),
    ("0 0 * * */2", "cron(0 0 ? * 1,3,5,7 *)"),                    # no "/" in EventBridge's day-of-week
    ("@daily", "cron(0 0 * * ? *)"),
    ("@midnight", "cron(0 0 * * ? *)"),
    ("@weekly", "cron(0 0 ? * 1 *)"),
    ("@monthly", "cron(0 0 1 * ? *)"),
    ("@yearly", "cron(0 0 1 1 ? *)"),
    ("@hourly", "cron(0 * * * ? *)"),
    ("*/15 8-18/2 * * MON,WED,FRI", "cron(0/15 8,10,12,14,16,18 ? * 2,4,6 *)"),   # steps: to the end -> a/s, else a list
    ("5/20 * * * *", "cron(5/20 * * * ? *)"),
    ("0,30 7-9 * * *", "cron(0,30 7-9 * * ? *)"),
    ("0 0 1,15 * *", "cron(0 0 1,15 * ? *)"),                      # day-of-month restricted: day-of-week "?"
    ("0 0 */2 * *", "cron(0 0 1/2 * ? *)"),
    ("30 22 * JAN-MAR *", "cron(30 22 * 1-3 ? *)"),                # month names
    ("0 9 ? * ?", "cron(0 9 * * ? *)"),                            # robfig's "?" is "*"
    ("0 0 1-31 * MON", "cron(0 0 * * ? *)"),                       # both restricted, but cron ORs: every day
    ("0 0 1 * 0-6", "cron(0 0 * * ? *)"),
])
def test_to_eventbridge_cron(expr, expected):
    assert to_eventbridge_cron(expr) == expected


@pytest.mark.parametrize("expr", ["0 0 1 * 1", "0 0 1-7 * MON", "0 0 */2 * 1-5"])
def test_both_day_fields_restricted_cannot_be_expressed(expr):
    with pytest.raises(CronConversionError, match="restricts both day-of-month and day-of-week") as e:
        to_eventbridge_cron(expr)
    assert e.value.field == "day-of-month/day-of-week"
    assert end_expression(expr, 3600) is None


def test_an_invalid_schedule_is_the_parser_error():
    with pytest.raises(CronError, match="day-of-week"):
        to_eventbridge_cron("0 0 * * 7")


def test_compress():
    assert compress(range(60), 0) == "*" and compress({1, 2, 3, 7}, 2) == "1-3,7"
    assert compress({0, 20, 40}, 0) == "0/20" and compress({0, 20}, 0) == "0,20"
    assert compress({2, 4, 6}, 4) == "2,4,6"     # day-of-week never uses "/"


@pytest.mark.parametrize("expr,seconds,expected", [
    ("0 20 * * 1-5", 12 * 3600, "cron(0 8 ? * 3-7 *)"),            # 20:00 Mon-Fri + 12 h -> 08:00 Tue-Sat
    ("0 20 * * 5", 60 * 3600, "cron(0 8 ? * 2 *)"),                # Friday 20:00 + 60 h -> Monday 08:00
    ("0 20 * * 6", 36 * 3600, "cron(0 8 ? * 2 *)"),                # Saturday + 36 h wraps to Monday
    ("30 22 * * *", 90 * 60, "cron(0 0 * * ? *)"),                 # 22:30 + 90 min crosses midnight
    ("30 22 * * 1-5", 90 * 60, "cron(0 0 ? * 3-7 *)"),             # ... onto the next weekday
    ("0 1 * * 1-5", 3600, "cron(0 2 ? * 2-6 *)"),                  # no carry: same days
    ("0 20 * * 1-5", 12 * 3600 + 1, "cron(1 8 ? * 3-7 *)"),       # seconds round up to the next minute
    ("@hourly", 12 * 3600, "cron(0 * * * ? *)"),                   # every day: a carry changes nothing
    ("0 0 1,15 * *", 8 * 3600, "cron(0 8 1,15 * ? *)"),            # day-of-month kept without a carry
    ("0 20,23 * * 1-5", 9 * 3600, "cron(0 5,8 ? * 3-7 *)"),        # both hours carry one day
    ("0,30 20 * * *", 3600, "cron(0,30 21 * * ? *)"),
])
def test_end_expression(expr, seconds, expected):
    assert end_expression(expr, seconds) == expected


@pytest.mark.parametrize("expr,seconds,reason", [
    ("0 20,23 * * 1-5", 2 * 3600, "end on different days"),        # 22:00 the same day, 01:00 the next
    ("0,30 20 * * *", 45 * 60, "not a set of hours x minutes"),    # 20:45 and 21:15
    ("0 20 1,15 * *", 12 * 3600, "restricted day-of-month"),       # the 31st + 1 day is the 1st: month lengths
    ("0 20 * JAN *", 12 * 3600, "month is restricted"),            # Jan 31 + 12 h is in February
    ("0 0 1 * 1", 3600, "restricts both"),
])
def test_end_not_expressible(expr, seconds, reason):
    end, why = end_expression_or_reason(expr, seconds)
    assert end is None and reason in why


# -- the construct on a bare stack (stand-in schedules) -------------------------------------------------


def _bare(schedules, interval=5):
    import aws_cdk as cdk
    from aws_cdk import aws_lambda as lambda_

    from infra.offpeak import OffPeakSchedules

    app = cdk.App()
    stack = cdk.Stack(app, "Bare")
    fn = lambda_.Function(stack, "Fn", runtime=lambda_.Runtime.PYTHON_3_13, handler="h.h",
                          code=lambda_.Code.from_inline("def h(e, c): pass"))
    construct = OffPeakSchedules(stack, "OffPeakSchedules", cluster="c", schedules=schedules, function=fn,
                                 interval_minutes=interval)
    return construct, app.synth().get_stack_by_name("Bare").template


def _sched(name, schedule, duration, tz="UTC"):
    return SimpleNamespace(name=name, schedule=schedule, duration_seconds=duration, time_zone=tz)


def test_unexpressible_edges_are_warnings_and_left_to_the_reconcile():
    construct, template = _bare([
        _sched("both-days", "0 0 1 * 1", 3600),                  # no start, no end
        _sched("split.end", "0,30 20 * * *", 45 * 60),           # a start, no end
        _sched("fine", "0 22 * * *", 8 * 3600, "America/New_York"),
    ], interval=7)
    assert sorted(construct.schedules) == [("fine", "end"), ("fine", "start"), ("split.end", "start")]
    schedules = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::Scheduler::Schedule"]
    assert sorted((p["ScheduleExpression"], p["ScheduleExpressionTimezone"]) for p in schedules) == [
        ("cron(0 22 * * ? *)", "America/New_York"), ("cron(0 6 * * ? *)", "America/New_York"),
        ("cron(0,30 20 * * ? *)", "UTC")]
    assert len(construct.warnings) == 2
    both, split = construct.warnings
    assert both.startswith("OffPeakSchedule/both-days: spec.schedule: schedule '0 0 1 * 1' restricts both")
    assert split.startswith("OffPeakSchedule/split.end: spec.duration: ")
    assert all("periodic reconcile (every 7 min, offpeakIntervalMinutes)" in w for w in construct.warnings)
    from aws_cdk.assertions import Annotations, Match

    Annotations.from_stack(construct.node.scope).has_warning("*", Match.string_like_regexp("OffPeakSchedule/both-days"))


def test_no_expressible_edge_creates_no_role_or_queue():
    construct, template = _bare([_sched("x", "0 0 1 * 1", 3600)])
    assert construct.role is None and construct.dlq is None
    assert not [r for r in template["Resources"].values() if r["Type"] in ("AWS::SQS::Queue", "AWS::Scheduler::Schedule")]


# -- the RBAC file -------------------------------------------------------------------------------------


def _rules() -> list[dict]:
    docs = list(yaml.safe_load_all((REPO / "infra" / "rbac" / "controller-rbac.yaml").read_text()))
    [role] = [d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "karpenter-lambda-offpeak"]
    return role["rules"]


def _allowed(group: str, resource: str, verb: str) -> bool:
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in _rules())


@pytest.mark.parametrize("group,resource,verbs", [      # (only the verbs controllers/offpeak.py uses: issue 21)
    ("apps", "deployments", ("list", "patch")),
    ("apps", "statefulsets", ("list", "patch")),
    ("apps", "deployments/scale", ("patch",)),
    ("apps", "statefulsets/scale", ("patch",)),
    ("autoscaling", "horizontalpodautoscalers", ("list", "patch")),
    ("keda.sh", "scaledobjects", ("list", "patch")),
    ("", "namespaces", ("list",)),
    ("", "pods", ("list",)),                                   # the morning hand-off of pending pods
])
def test_rbac_allows_the_offpeak_calls(group, resource, verbs):
    for verb in verbs:
        assert _allowed(group, resource, verb), (group, resource, verb)


def test_rbac_stays_minimal():
    # the workloads are patched, never created, replaced or deleted; autoscalers are never created or deleted
    for group, resource in (("apps", "deployments"), ("apps", "statefulsets"), ("autoscaling", "horizontalpodautoscalers"),
                            ("keda.sh", "scaledobjects")):
        for verb in ("create", "update", "delete", "deletecollection"):
            assert not _allowed(group, resource, verb), (group, resource, verb)
    assert not any("*" in r["verbs"] or "*" in r["resources"] or "*" in r["apiGroups"] for r in _rules())


def _kube_methods(path: Path) -> set[str]:
    """Every ``self.kube.<method>`` the module calls."""
    import ast

    tree = ast.parse(path.read_text())
    return {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute)
            and n.value.attr == "kube" and isinstance(n.value.value, ast.Name) and n.value.value.id == "self"}


def _rbac_request(method: str, path: str) -> tuple[str, str, str]:
    """(apiGroup, resource[/subresource], verb) of one logged API request."""
    path, _, query = path.partition("?")
    parts = path.strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    if rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]
    resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
    named = len(rest) > 1
    verb = {"GET": ("get" if named else ("watch" if "watch=true" in query else "list")), "PATCH": "patch",
            "PUT": "update", "POST": "create", "DELETE": "delete"}[method]
    return group, resource, verb


# what each KubeClient method of the off-peak controller does, on a seeded local API server
OFFPEAK_KUBE_CALLS = {
    "list_deployments": lambda kc: (kc.list_deployments(), kc.list_deployments(namespace="dev")),
    "list_statefulsets": lambda kc: (kc.list_statefulsets(), kc.list_statefulsets(namespace="dev")),
    "get_workload": lambda kc: (kc.get_workload("Deployment", "dev", "web"), kc.get_workload("StatefulSet", "dev", "db")),
    "scale_workload": lambda kc: (kc.scale_workload("Deployment", "dev", "web", 0), kc.scale_workload("StatefulSet", "dev", "db", 0)),
    "patch_workload": lambda kc: [kc.patch_workload(k, "dev", n, {"metadata": {"annotations": {"a": "1"}}})
                                  for k, n in (("Deployment", "web"), ("StatefulSet", "db"))],
    "list_namespaces": lambda kc: kc.list_namespaces(),
    "list_hpas": lambda kc: (kc.list_hpas(), kc.list_hpas(namespace="dev")),
    "patch_hpa": lambda kc: kc.patch_hpa("dev", "web", {"spec": {"minReplicas": 1, "maxReplicas": 1}}),
    "list_scaledobjects": lambda kc: (kc.list_scaledobjects(), kc.list_scaledobjects(namespace="dev")),
    "patch_scaledobject": lambda kc: kc.patch_scaledobject("dev", "worker", {"metadata": {"annotations": {"p": "0"}}}),
    "list_pods": lambda kc: kc.list_pods(field_selector="spec.nodeName="),
}


def test_rbac_allows_every_kubernetes_call_of_the_offpeak_controller():
    """The ClusterRole against what the code does: every ``self.kube`` method of controllers/offpeak.py is run on
    the local API server and each request it makes must be allowed by a rule of infra/rbac/controller-rbac.yaml."""
    from karpenter_lambda.adapters.kube.client import KubeClient
    from karpenter_lambda.sim.kubeapi import KubeAPIServer

    used = _kube_methods(REPO / "layers/core/python/karpenter_lambda/controllers/offpeak.py")
    assert used and used <= set(OFFPEAK_KUBE_CALLS), f"add to OFFPEAK_KUBE_CALLS (and RBAC): {used - set(OFFPEAK_KUBE_CALLS)}"
    server = KubeAPIServer()
    server.start()
    kc = KubeClient.from_host(server.url, backoff_base=0.001, backoff_cap=0.01)
    try:
        pod_spec = {"containers": [{"name": "c", "image": "x"}]}
        for plural, name in (("deployments", "web"), ("statefulsets", "db")):
            server.store.create(plural, {"metadata": {"name": name, "namespace": "dev"}, "spec": {
                "replicas": 2, "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec}}})
        server.store.create("horizontalpodautoscalers", {"metadata": {"name": "web", "namespace": "dev"}, "spec": {
            "minReplicas": 2, "maxReplicas": 5, "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}}})
        server.store.create("scaledobjects", {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                                              "metadata": {"name": "worker", "namespace": "dev"},
                                              "spec": {"scaleTargetRef": {"name": "db"}}})
        server.request_log.clear()
        for name in sorted(used):
            OFFPEAK_KUBE_CALLS[name](kc)
        requests = {_rbac_request(m, path) for m, path, code in server.requests()}
    finally:
        kc.close()
        server.stop()
    assert ("apps", "deployments/scale", "patch") in requests and ("keda.sh", "scaledobjects", "patch") in requests
    denied = sorted(r for r in requests if not _allowed(*r))
    assert denied == [], f"infra/rbac/controller-rbac.yaml does not allow {denied}"


# -- the whole app: an OffPeakSchedule in the nodePools folder --------------------------------------------

OFFPEAK_YAML = """\
apiVersion: karpenter-lambda.io/v1alpha1
kind: OffPeakSchedule
metadata: {name: nights}
spec:
  timeZone: Europe/Berlin
  schedule: "0 20 * * 1-5"
  duration: 12h
  workloads:
    - namespaces: [dev, staging]
      selector: {matchLabels: {tier: web}}
      replicas: 0
  nodePools:
    - name: default
      limits: {cpu: "16"}
---
apiVersion: karpenter-lambda.io/v1alpha1
kind: OffPeakSchedule
metadata: {name: first-mondays}
spec:
  schedule: "0 0 1-7 * 1"
  duration: 1h
  workloads: [{namespaces: [batch]}]
"""


@pytest.fixture(scope="module")
def offpeak_synth(tmp_path_factory, synth_factory, nodepools_dir):
    pools = tmp_path_factory.mktemp("offpeak-pools")
    (pools / "default.yaml").write_text((nodepools_dir / "default.yaml").read_text().replace("demo-cluster", CLUSTER))
    (pools / "offpeak.yaml").write_text(OFFPEAK_YAML)
    return synth_factory({"clusterName": CLUSTER, "nodePools": str(pools), "offpeakIntervalMinutes": "10"},
                         tmp_path_factory.mktemp("cdk.out.offpeak"))


def _one(synth, cfn_type: str, prefix: str) -> tuple[str, dict]:
    found = {k: v for k, v in synth.of_type(cfn_type).items() if k.startswith(prefix)}
    assert len(found) == 1, (cfn_type, prefix, list(found))
    return next(iter(found.items()))


def _listify(x):
    return x if isinstance(x, list) else [x]


def test_the_offpeak_function_and_its_periodic_reconcile(offpeak_synth):
    fid, fn = _one(offpeak_synth, "AWS::Lambda::Function", "OffpeakFunction")
    p = fn["Properties"]
    assert (p["Timeout"], p["MemorySize"], p["ReservedConcurrentExecutions"]) == (300, 1024, 1)
    assert p["Environment"]["Variables"]["POWERTOOLS_SERVICE_NAME"] == "karpenter-lambda-offpeak"
    assert "KARPENTER_LAMBDA_POD_QUEUE_URL" in p["Environment"]["Variables"]
    rid, rule = _one(offpeak_synth, "AWS::Events::Rule", "OffpeakEvery")
    assert rule["Properties"]["ScheduleExpression"] == "rate(10 minutes)"          # offpeakIntervalMinutes
    assert rule["Properties"]["Targets"][0]["Arn"] == {"Fn::GetAtt": [fid, "Arn"]}
    alarms = [a["Properties"] for a in offpeak_synth.of_type("AWS::CloudWatch::Alarm").values()]
    failures = [a for a in alarms if a.get("MetricName") == "OffPeakFailures"]
    assert len(failures) == 1 and {d["Name"]: d["Value"] for d in failures[0]["Dimensions"]} == {
        "cluster": CLUSTER, "service": "karpenter-lambda-offpeak"}


def test_scheduler_schedules_at_each_window_edge_in_the_time_zone(offpeak_synth):
    fid, _ = _one(offpeak_synth, "AWS::Lambda::Function", "OffpeakFunction")
    role_id, _ = _one(offpeak_synth, "AWS::IAM::Role", "OffPeakSchedulesRole")
    dlq_id, dlq = _one(offpeak_synth, "AWS::SQS::Queue", "OffPeakSchedulesDeadLetter")
    schedules = {k: v["Properties"] for k, v in offpeak_synth.of_type("AWS::Scheduler::Schedule").items()}
    assert len(schedules) == 2                 # "first-mondays" restricts both day fields: reconcile only (a warning)
    by_edge = {json.loads(p["Target"]["Input"])["edge"]: p for p in schedules.values()}
    assert by_edge["start"]["ScheduleExpression"] == "cron(0 20 ? * 2-6 *)"
    assert by_edge["end"]["ScheduleExpression"] == "cron(0 8 ? * 3-7 *)"
    for edge, p in by_edge.items():
        assert json.loads(p["Target"]["Input"]) == {"schedule": "nights", "edge": edge}
        assert p["ScheduleExpressionTimezone"] == "Europe/Berlin"
        assert p["FlexibleTimeWindow"] == {"Mode": "OFF"}
        assert p["State"] == "ENABLED"
        assert p["Target"]["Arn"] == {"Fn::GetAtt": [fid, "Arn"]}
        assert p["Target"]["RoleArn"] == {"Fn::GetAtt": [role_id, "Arn"]}
        assert p["Target"]["RetryPolicy"] == {"MaximumRetryAttempts": 3, "MaximumEventAgeInSeconds": 3600}
        assert p["Target"]["DeadLetterConfig"] == {"Arn": {"Fn::GetAtt": [dlq_id, "Arn"]}}
    assert dlq["Properties"]["SqsManagedSseEnabled"] is True
    dlq_alarms = [a["Properties"] for a in offpeak_synth.of_type("AWS::CloudWatch::Alarm").values()
                  if a["Properties"].get("MetricName") == "ApproximateNumberOfMessagesVisible"]
    assert {"Name": "QueueName", "Value": {"Fn::GetAtt": [dlq_id, "QueueName"]}} in [d for a in dlq_alarms for d in a["Dimensions"]]
    stack = offpeak_synth.stack
    [warning] = stack.offpeak_schedules.warnings
    assert warning.startswith("OffPeakSchedule/first-mondays: spec.schedule: ")
    assert "every 10 min" in warning


def test_the_scheduler_role_can_only_invoke_the_offpeak_function(offpeak_synth):
    fid, _ = _one(offpeak_synth, "AWS::Lambda::Function", "OffpeakFunction")
    role_id, role = _one(offpeak_synth, "AWS::IAM::Role", "OffPeakSchedulesRole")
    dlq_id, _ = _one(offpeak_synth, "AWS::SQS::Queue", "OffPeakSchedulesDeadLetter")
    [trust] = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"} and trust["Action"] == "sts:AssumeRole"
    assert trust["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}
    assert "ManagedPolicyArns" not in role["Properties"]
    statements = [st for pol in offpeak_synth.of_type("AWS::IAM::Policy").values()
                  if {"Ref": role_id} in pol["Properties"]["Roles"] for st in pol["Properties"]["PolicyDocument"]["Statement"]]
    assert sorted((st["Action"], json.dumps(st["Resource"])) for st in statements) == sorted([
        ("lambda:InvokeFunction", json.dumps({"Fn::GetAtt": [fid, "Arn"]})),          # that function, no versions
        ("sqs:SendMessage", json.dumps({"Fn::GetAtt": [dlq_id, "Arn"]})),             # failed deliveries
    ])
    # no other principal may invoke it through a resource policy from Scheduler
    assert not [p for p in offpeak_synth.of_type("AWS::Lambda::Permission").values()
                if p["Properties"]["Principal"] == "scheduler.amazonaws.com"]


def test_the_offpeak_role_is_least_privilege(offpeak_synth):
    fid, fn = _one(offpeak_synth, "AWS::Lambda::Function", "OffpeakFunction")
    role_id, role = _one(offpeak_synth, "AWS::IAM::Role", "OffPeakIamRole")
    assert fn["Properties"]["Role"] == {"Fn::GetAtt": [role_id, "Arn"]}
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "lambda.amazonaws.com"}
    assert "ManagedPolicyArns" not in role["Properties"]
    state_id, _ = _one(offpeak_synth, "AWS::DynamoDB::Table", "TablesState")
    pod_queue_id = next(k for k in offpeak_synth.of_type("AWS::SQS::Queue") if k.startswith("PodQueue") and "DeadLetter" not in k)
    log_group = fn["Properties"]["LoggingConfig"]["LogGroup"]["Ref"]
    grants: dict[str, set] = {}
    for pol in offpeak_synth.of_type("AWS::IAM::Policy").values():
        if {"Ref": role_id} not in pol["Properties"]["Roles"]:
            continue
        for st in pol["Properties"]["PolicyDocument"]["Statement"]:
            for action in _listify(st["Action"]):
                grants.setdefault(action.split(":")[0], set()).update(json.dumps(r, sort_keys=True) for r in _listify(st["Resource"]))
                if action.startswith("sqs:"):
                    assert action == "sqs:SendMessage"
                if action.startswith("eks:"):
                    assert action == "eks:DescribeCluster"
    assert set(grants) == {"dynamodb", "sqs", "eks", "logs", "xray"}     # no ec2, iam, ssm or pricing
    assert grants["dynamodb"] <= {json.dumps({"Fn::GetAtt": [state_id, "Arn"]}), json.dumps({"Ref": "AWS::NoValue"})}
    assert grants["sqs"] == {json.dumps({"Fn::GetAtt": [pod_queue_id, "Arn"]})}
    assert all(CLUSTER in r for r in grants["eks"])
    assert grants["logs"] == {json.dumps({"Fn::GetAtt": [log_group, "Arn"]})}
    entry = offpeak_synth.of_type("AWS::EKS::AccessEntry")["OffPeakAccessEntry"]["Properties"]
    assert entry["PrincipalArn"] == {"Fn::GetAtt": [role_id, "Arn"]}
    assert entry["KubernetesGroups"] == ["karpenter-lambda-offpeak"]      # its own group (issue 21)


def test_offpeak_schedules_are_written_to_the_state_table(offpeak_synth):
    keys = set()
    for res in offpeak_synth.of_type("Custom::AWS").values():
        parts = res["Properties"]["Create"]["Fn::Join"][1]
        call = json.loads("".join(p if isinstance(p, str) else "T" for p in parts))
        key = call["parameters"]["Key"]
        keys.add((key["pk"]["S"], key["sk"]["S"]))
        if key["pk"]["S"] == f"{CLUSTER}#OffPeakSchedule" and key["sk"]["S"] == "nights":
            values = call["parameters"]["ExpressionAttributeValues"]
            spec = next(json.loads(v["S"]) for v in values.values() if "S" in v and v["S"].startswith("{") and "timeZone" in v["S"])
            assert spec["timeZone"] == "Europe/Berlin" and spec["schedule"] == "0 20 * * 1-5"
    assert {(f"{CLUSTER}#OffPeakSchedule", "nights"), (f"{CLUSTER}#OffPeakSchedule", "first-mondays")} <= keys


def test_cdk_nag_passes_with_the_scheduler(offpeak_synth):
    [report] = [r for r in offpeak_synth.report["pluginReports"] if r["pluginName"] == "AwsSolutions"]
    assert report["conclusion"] == "success" and report["violations"] == []
    sqs3 = [v for v in report["suppressedViolations"] if v["ruleName"].startswith("AwsSolutions-SQS3")]
    assert len(sqs3) == 1 and "OffPeakSchedules" in json.dumps(sqs3[0])


def test_cfn_lint_accepts_the_scheduler_resources(offpeak_synth):
    import shutil
    import subprocess
    import sys

    exe = Path(sys.executable).parent / "cfn-lint"
    cmd = [str(exe)] if exe.exists() else [shutil.which("cfn-lint") or "cfn-lint"]
    template = next(offpeak_synth.outdir.glob("*.template.json"))
    proc = subprocess.run([*cmd, "--format", "json", str(template)], capture_output=True, text=True)
    errors = [f for f in json.loads(proc.stdout or "[]") if f["Level"] == "Error"]
    assert errors == [], errors
    assert proc.returncode in (0, 4), proc.stderr
