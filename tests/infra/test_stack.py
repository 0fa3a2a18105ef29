"""The synthesized stack (one synth per session, see conftest): every resource and its settings."""

from __future__ import annotations

import json

import pytest

CLUSTER = "demo-cluster"  # the clusterName of the session synth (tests/infra/conftest.py)


def _one(synth, cfn_type: str, contains: str = "") -> tuple[str, dict]:
    found = {k: v for k, v in synth.of_type(cfn_type).items() if contains in k}
    assert len(found) == 1, (cfn_type, contains, list(found))
    return next(iter(found.items()))


def _ref(logical_id: str) -> dict:
    return {"Ref": logical_id}


def _arn(logical_id: str) -> dict:
    return {"Fn::GetAtt": [logical_id, "Arn"]}


def _asset_dir(synth, s3_key: str):
    """The staged folder of a zip asset, from the stack's asset manifest."""
    manifest = json.loads(next(synth.outdir.glob("*.assets.json")).read_text())
    source = manifest["files"][s3_key.split(".")[0]]["source"]
    assert source["packaging"] == "zip"
    return synth.outdir / source["path"]


# -- tables ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("which,ttl,deletion", [("State", "ttl", "Retain"), ("Cache", "ttl", "Delete")])
def test_tables(synth, which, ttl, deletion):
    _, table = _one(synth, "AWS::DynamoDB::Table", which)
    p = table["Properties"]
    assert p["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]
    assert p["AttributeDefinitions"] == [{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}]
    assert p["BillingMode"] == "PAY_PER_REQUEST"
    assert p["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert p["SSESpecification"] == {"SSEEnabled": True}
    if ttl:
        assert p["TimeToLiveSpecification"] == {"AttributeName": ttl, "Enabled": True}
    else:
        assert "TimeToLiveSpecification" not in p
    assert table["DeletionPolicy"] == deletion
    assert len(synth.of_type("AWS::DynamoDB::Table")) == 2


# -- queue -----------------------------------------------------------------------------------------


def test_pod_queue_dlq_redrive_and_encryption(synth):
    queues = synth.of_type("AWS::SQS::Queue")
    assert len(queues) == 4   # the pod and interruption queues with their DLQs
    dlq_id, dlq = _one(synth, "AWS::SQS::Queue", "PodQueueDeadLetter")
    qid = next(k for k in queues if k.startswith("PodQueue") and k != dlq_id)
    q = queues[qid]["Properties"]
    assert q["RedrivePolicy"] == {"deadLetterTargetArn": _arn(dlq_id), "maxReceiveCount": 5}
    assert q["SqsManagedSseEnabled"] is True and dlq["Properties"]["SqsManagedSseEnabled"] is True
    assert dlq["Properties"]["MessageRetentionPeriod"] == 14 * 86400
    # visibility >= 6x the provisioner timeout (+ the batching window)
    _, fn = _one(synth, "AWS::Lambda::Function", "Provisioner")
    assert q["VisibilityTimeout"] >= 6 * fn["Properties"]["Timeout"] + 10


def test_queues_deny_plain_http(synth):
    policies = synth.of_type("AWS::SQS::QueuePolicy")
    assert len(policies) == 4
    for pol in policies.values():
        st = pol["Properties"]["PolicyDocument"]["Statement"][0]
        assert st["Effect"] == "Deny" and st["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_interruption_queue_rules_and_policy(synth):
    dlq_id, dlq = _one(synth, "AWS::SQS::Queue", "InterruptionQueueDeadLetter")
    qid, q = next((k, v) for k, v in synth.of_type("AWS::SQS::Queue").items() if k.startswith("InterruptionQueue") and k != dlq_id)
    p = q["Properties"]
    assert p["MessageRetentionPeriod"] == 300 and p["SqsManagedSseEnabled"] is True
    assert p["RedrivePolicy"] == {"deadLetterTargetArn": _arn(dlq_id), "maxReceiveCount": 3}
    rules = {k: v["Properties"] for k, v in synth.of_type("AWS::Events::Rule").items() if k.startswith("InterruptionRules")}
    patterns = sorted((r["EventPattern"]["source"][0], r["EventPattern"]["detail-type"][0]) for r in rules.values())
    assert patterns == sorted([
        ("aws.ec2", "EC2 Spot Instance Interruption Warning"), ("aws.ec2", "EC2 Instance Rebalance Recommendation"),
        ("aws.ec2", "EC2 Instance State-change Notification"),
        ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"), ("aws.health", "AWS Health Event")])
    assert all(r["Targets"][0]["Arn"] == _arn(qid) for r in rules.values())
    (pol,) = [v["Properties"] for v in synth.of_type("AWS::SQS::QueuePolicy").values() if v["Properties"]["Queues"] == [_ref(qid)]]
    allows = [st for st in pol["PolicyDocument"]["Statement"] if st["Effect"] == "Allow"]
    principals = {st["Principal"]["Service"] for st in allows}
    assert principals == {"events.amazonaws.com", "sqs.amazonaws.com"}
    for st in allows:   # send (and the two reads EventBridge's SQS target asks for), nothing else
        acts = set(st["Action"] if isinstance(st["Action"], list) else [st["Action"]])
        assert "sqs:SendMessage" in acts and acts <= {"sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"}
    events_allows = [st for st in allows if st["Principal"]["Service"] == "events.amazonaws.com"]
    assert len(events_allows) == 5 and all("aws:SourceArn" in st["Condition"]["ArnEquals"] for st in events_allows)
    fid, _ = _one(synth, "AWS::Lambda::Function", "InterruptionFunction")
    (esm,) = [v["Properties"] for v in synth.of_type("AWS::Lambda::EventSourceMapping").values() if v["Properties"]["EventSourceArn"] == _arn(qid)]
    assert esm["FunctionName"] == _ref(fid) and esm["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_provisioner_event_source(synth):
    _, esm = _one(synth, "AWS::Lambda::EventSourceMapping", "Provisioner")
    p = esm["Properties"]
    qid = next(k for k in synth.of_type("AWS::SQS::Queue") if k.startswith("PodQueue") and "DeadLetter" not in k)
    fid, fn = _one(synth, "AWS::Lambda::Function", "Provisioner")
    assert p["EventSourceArn"] == _arn(qid)
    assert p["FunctionName"] == _ref(fid)
    assert p["BatchSize"] == 500
    assert p["MaximumBatchingWindowInSeconds"] == 10
    assert p["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    # pollers never invoke more than the reserved concurrency (no throttles counted as receives)
    assert p["ScalingConfig"] == {"MaximumConcurrency": 2}
    assert fn["Properties"]["ReservedConcurrentExecutions"] == 2


# -- functions -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["Provisioner", "Lifecycle"])
def test_function_settings(synth, name):
    fid, fn = _one(synth, "AWS::Lambda::Function", f"{name}Function")
    p = fn["Properties"]
    assert p["Runtime"] == "python3.14"
    assert p["Architectures"] == ["arm64"]
    assert p["Handler"] == "handler.handler"
    assert p["TracingConfig"] == {"Mode": "Active"}
    layer_id, layer = _one(synth, "AWS::Lambda::LayerVersion")
    assert p["Layers"] == [_ref(layer_id)]
    role_id, _ = _one(synth, "AWS::IAM::Role", "ControllerRole")
    assert p["Role"] == _arn(role_id)
    env = p["Environment"]["Variables"]
    state_id, _ = _one(synth, "AWS::DynamoDB::Table", "State")
    cache_id, _ = _one(synth, "AWS::DynamoDB::Table", "Cache")
    qid = next(k for k in synth.of_type("AWS::SQS::Queue") if "DeadLetter" not in k)
    node_role_id, _ = _one(synth, "AWS::IAM::Role", "NodeRole")
    profile_id, _ = _one(synth, "AWS::IAM::InstanceProfile")
    assert env == {
        "KARPENTER_LAMBDA_CLUSTER": CLUSTER,
        "KARPENTER_LAMBDA_STATE_TABLE": _ref(state_id),
        "KARPENTER_LAMBDA_CACHE_TABLE": _ref(cache_id),
        "KARPENTER_LAMBDA_POD_QUEUE_URL": _ref(qid),
        "KARPENTER_LAMBDA_NODE_ROLE": _ref(node_role_id),
        "KARPENTER_LAMBDA_INSTANCE_PROFILE": _ref(profile_id),
        "POWERTOOLS_SERVICE_NAME": f"karpenter-lambda-{name.lower()}",
        "POWERTOOLS_METRICS_NAMESPACE": "KarpenterLambda",
        "POWERTOOLS_LOG_LEVEL": "INFO",
    }
    # own log group with the configured retention
    lg_id = p["LoggingConfig"]["LogGroup"]["Ref"]
    assert synth.resources[lg_id]["Properties"]["RetentionInDays"] == 30
    # functions wait for the controller policy (EC2/IAM permissions) before they exist
    assert any(d.startswith("ControllerPolicy") for d in fn["DependsOn"])


def test_function_assets_are_their_own_folders(synth):
    from infra.functions import FUNCTIONS_DIR

    for name in ("provisioner", "lifecycle"):
        _, fn = _one(synth, "AWS::Lambda::Function", f"{name.capitalize()}Function")
        staged = _asset_dir(synth, fn["Properties"]["Code"]["S3Key"])
        expected = sorted(p.name for p in (FUNCTIONS_DIR / name).iterdir() if p.name not in ("__pycache__", ".gitkeep"))
        assert sorted(p.name for p in staged.iterdir()) == expected


def test_the_registry_functions(synth):
    names = sorted(k for k in synth.of_type("AWS::Lambda::Function") if not k.startswith("AWS679f53fac002430cb0da5b7982bd2287"))
    assert [n.split("Function")[0] for n in names] == ["Consolidation", "Drift", "Interruption", "Lifecycle", "Offpeak", "Provisioner"]


def test_disruption_sweeps_schedule_and_alarms(synth):
    for name in ("Drift", "Consolidation"):
        rid, rule = _one(synth, "AWS::Events::Rule", f"{name}Every")
        fid, fn = _one(synth, "AWS::Lambda::Function", f"{name}Function")
        assert rule["Properties"]["ScheduleExpression"] == "rate(1 minute)"
        assert rule["Properties"]["Targets"][0]["Arn"] == _arn(fid)
        assert fn["Properties"]["ReservedConcurrentExecutions"] == 1
        alarms = {k: v["Properties"] for k, v in synth.of_type("AWS::CloudWatch::Alarm").items() if k.lower().startswith(f"monitoring{name.lower()}")}
        metrics = {p.get("MetricName") for p in alarms.values()}
        assert {"DisruptionErrors", "DisruptionReplacementFailures", "Errors"} <= metrics, metrics
        custom = next(p for p in alarms.values() if p.get("MetricName") == "DisruptionReplacementFailures")
        assert {d["Name"]: d["Value"] for d in custom["Dimensions"]}["service"] == f"karpenter-lambda-{name.lower()}"


def test_layer(synth):
    _, layer = _one(synth, "AWS::Lambda::LayerVersion")
    assert layer["Properties"]["CompatibleRuntimes"] == ["python3.14"]
    assert layer["Properties"]["CompatibleArchitectures"] == ["arm64"]


def test_lifecycle_schedule(synth):
    rid, rule = _one(synth, "AWS::Events::Rule", "Lifecycle")
    fid, fn = _one(synth, "AWS::Lambda::Function", "LifecycleFunction")
    p = rule["Properties"]
    assert p["ScheduleExpression"] == "rate(1 minute)"
    assert p["State"] == "ENABLED"
    [target] = p["Targets"]
    assert target["Arn"] == _arn(fid)
    assert target["RetryPolicy"]["MaximumRetryAttempts"] == 0
    assert fn["Properties"]["ReservedConcurrentExecutions"] == 1
    perm = [v for v in synth.of_type("AWS::Lambda::Permission").values() if v["Properties"].get("SourceArn") == _arn(rid)]
    assert perm and perm[0]["Properties"]["Principal"] == "events.amazonaws.com"
    cfgs = synth.of_type("AWS::Lambda::EventInvokeConfig").values()
    assert cfgs and all(c["Properties"]["MaximumRetryAttempts"] == 0 for c in cfgs)
    # a tick throttled while the last sweep runs is dropped once the next is due, not kept for Lambda's default 6 h
    ages = {c["Properties"]["FunctionName"]["Ref"]: c["Properties"]["MaximumEventAgeInSeconds"] for c in cfgs}
    assert ages[fid] == 60 and all(60 <= a <= 300 for a in ages.values()), ages


# -- EKS -------------------------------------------------------------------------------------------


def test_access_entries(synth):
    entries = synth.of_type("AWS::EKS::AccessEntry")
    ctrl = entries["ControllerAccessEntry"]["Properties"]
    role_id, _ = _one(synth, "AWS::IAM::Role", "ControllerRole")
    assert ctrl["ClusterName"] == CLUSTER
    assert ctrl["PrincipalArn"] == _arn(role_id)
    assert ctrl["Type"] == "STANDARD"
    assert ctrl["KubernetesGroups"] == ["karpenter-lambda-controller"]
    assert "AccessPolicies" not in ctrl
    # the off-peak function's own role has its own Kubernetes group (issue 21: it must not delete nodes nor evict)
    offpeak = entries["OffPeakAccessEntry"]["Properties"]
    offpeak_role_id, _ = _one(synth, "AWS::IAM::Role", "OffPeakIam")
    assert offpeak["PrincipalArn"] == _arn(offpeak_role_id)
    assert (offpeak["Type"], offpeak["KubernetesGroups"]) == ("STANDARD", ["karpenter-lambda-offpeak"])
    assert len(entries) == 3
    node = entries["NodeAccessEntry"]["Properties"]
    node_role_id, _ = _one(synth, "AWS::IAM::Role", "NodeRole")
    assert node == {"ClusterName": CLUSTER, "PrincipalArn": _arn(node_role_id), "Type": "EC2_LINUX", "Tags": node.get("Tags")}


def test_node_role_and_instance_profile(synth):
    rid, role = _one(synth, "AWS::IAM::Role", "NodeRole")
    p = role["Properties"]
    assert p["RoleName"] == f"KarpenterLambdaNode-{CLUSTER}"
    assert p["AssumeRolePolicyDocument"]["Statement"] == [
        {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}}
    ]
    names = sorted(json.dumps(a)[-60:].split("/")[-1].strip('"]}') for a in p["ManagedPolicyArns"])
    assert names == sorted(["AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly", "AmazonSSMManagedInstanceCore"])
    assert "Policies" not in p
    _, profile = _one(synth, "AWS::IAM::InstanceProfile")
    assert profile["Properties"]["Roles"] == [_ref(rid)]
    assert profile["Properties"]["InstanceProfileName"] == f"KarpenterLambdaNode-{CLUSTER}"


def test_watcher_role_trust_and_single_permission(synth):
    rid, role = _one(synth, "AWS::IAM::Role", "WatcherRole")
    assert role["Properties"]["AssumeRolePolicyDocument"]["Statement"] == [
        {"Action": ["sts:AssumeRole", "sts:TagSession"], "Effect": "Allow", "Principal": {"Service": "pods.eks.amazonaws.com"}}
    ]
    assert "ManagedPolicyArns" not in role["Properties"]
    attached = [p for p in synth.of_type("AWS::IAM::Policy").values() if _ref(rid) in p["Properties"]["Roles"]]
    assert len(attached) == 1
    qid = next(k for k in synth.of_type("AWS::SQS::Queue") if "DeadLetter" not in k)
    statements = attached[0]["Properties"]["PolicyDocument"]["Statement"]
    assert [(s["Effect"], s["Action"], s["Resource"]) for s in statements] == [("Allow", "sqs:SendMessage", _arn(qid))]
    [assoc] = synth.of_type("AWS::EKS::PodIdentityAssociation").values()
    assert assoc["Properties"] == {
        "ClusterName": CLUSTER,
        "Namespace": "karpenter-lambda",
        "ServiceAccount": "karpenter-lambda-watcher",
        "RoleArn": _arn(rid),
        "Tags": assoc["Properties"].get("Tags"),
    }


# -- monitoring ------------------------------------------------------------------------------------


def test_dashboard_shows_every_metric(synth):
    [dash] = synth.of_type("AWS::CloudWatch::Dashboard").values()
    body = json.loads("".join(x if isinstance(x, str) else "REGION" for x in dash["Properties"]["DashboardBody"]["Fn::Join"][1]))
    expressions = [m[0]["expression"] for w in body["widgets"] for m in w["properties"].get("metrics", []) if isinstance(m[0], dict) and "expression" in m[0]]
    for metric in ("NodesLaunched", "PodsScheduled", "DecisionLatencyMs", "Interruptions", "CostPerHour", "NodesTerminated"):
        search = "SEARCH('Namespace=\"KarpenterLambda\" MetricName=\"%s\" cluster=\"%s\"'" % (metric, CLUSTER)
        assert any(search in e for e in expressions), (metric, expressions)
    dlq_lines = [m for w in body["widgets"] for m in w["properties"].get("metrics", []) if "ApproximateNumberOfMessagesVisible" in m]
    assert dlq_lines and dlq_lines[0][0] == "AWS/SQS"
    assert dash["Properties"]["DashboardName"] == f"karpenter-lambda-{CLUSTER}"


def test_alarms(synth):
    alarms = synth.of_type("AWS::CloudWatch::Alarm")
    # one per DLQ, one per function (errors), and the sweeps' own metrics (2 each for drift and consolidation,
    # OffPeakFailures for offpeak, and issue 21's ProvisioningErrors, LifecycleErrors, InterruptionErrors); the
    # session synth's folder has no OffPeakSchedule, so no Scheduler DLQ
    assert len(alarms) == 2 + 6 + 4 + 1 + 3 + 1   # + the interruption queue's oldest message age
    (age,) = [a["Properties"] for a in alarms.values() if a["Properties"]["MetricName"] == "ApproximateAgeOfOldestMessage"]
    (queue_id,) = [k for k in synth.of_type("AWS::SQS::Queue") if k.startswith("InterruptionQueue") and "DeadLetter" not in k]
    assert age["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [queue_id, "QueueName"]}}]
    assert (age["Threshold"], age["ComparisonOperator"], age["Statistic"], age["Period"]) == (
        120, "GreaterThanThreshold", "Maximum", 60)
    dlq_id, _ = _one(synth, "AWS::SQS::Queue", "PodQueueDeadLetter")
    dlq_alarm = next(a["Properties"] for k, a in alarms.items() if a["Properties"]["MetricName"] == "ApproximateNumberOfMessagesVisible" and "pod" in k)
    assert dlq_alarm["Namespace"] == "AWS/SQS"
    assert dlq_alarm["Dimensions"] == [{"Name": "QueueName", "Value": {"Fn::GetAtt": [dlq_id, "QueueName"]}}]
    assert (dlq_alarm["Threshold"], dlq_alarm["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    errors = {json.dumps(a["Properties"]["Dimensions"]) for a in alarms.values() if a["Properties"]["MetricName"] == "Errors"}
    for name in ("Provisioner", "Lifecycle"):
        fid, _ = _one(synth, "AWS::Lambda::Function", f"{name}Function")
        assert json.dumps([{"Name": "FunctionName", "Value": _ref(fid)}]) in errors
    assert all(not a["Properties"].get("AlarmActions") for a in alarms.values())  # no alarmTopicArn given


def test_outputs(synth):
    outputs = synth.template["Outputs"]
    qid = next(k for k in synth.of_type("AWS::SQS::Queue") if "DeadLetter" not in k)
    watcher_id, _ = _one(synth, "AWS::IAM::Role", "WatcherRole")
    node_role_id, _ = _one(synth, "AWS::IAM::Role", "NodeRole")
    state_id, _ = _one(synth, "AWS::DynamoDB::Table", "State")
    assert outputs["PodQueueUrl"]["Value"] == _ref(qid)
    assert outputs["WatcherRoleArn"]["Value"] == _arn(watcher_id)
    assert outputs["NodeRoleName"]["Value"] == _ref(node_role_id)
    assert outputs["StateTableName"]["Value"] == _ref(state_id)
    assert outputs["Region"]["Value"] == {"Ref": "AWS::Region"}
    assert outputs["ClusterName"]["Value"] == CLUSTER
    assert outputs["WatcherNamespace"]["Value"] == "karpenter-lambda"
    assert outputs["WatcherServiceAccount"]["Value"] == "karpenter-lambda-watcher"


# -- nodePools written at deploy ---------------------------------------------------------------------


def _sdk_call(resource: dict, phase: str) -> dict:
    """Resolve the custom resource's JSON call with the table reference replaced by a marker."""
    parts = resource["Properties"][phase]["Fn::Join"][1]
    return json.loads("".join(p if isinstance(p, str) else "@" + p["Ref"] for p in parts))


def test_node_pools_become_state_table_items(synth):
    state_id, _ = _one(synth, "AWS::DynamoDB::Table", "State")
    writers = synth.of_type("Custom::AWS")
    assert sorted(writers) == sorted(k for k in writers if k.startswith("NodePools"))
    by_key = {}
    for res in writers.values():
        create, update, delete = (_sdk_call(res, p) for p in ("Create", "Update", "Delete"))
        assert create == update
        assert (create["service"], create["action"], delete["action"]) == ("DynamoDB", "updateItem", "deleteItem")
        params = create["parameters"]
        assert params["TableName"] == "@" + state_id
        assert delete["parameters"] == {"TableName": "@" + state_id, "Key": params["Key"]}
        names, values = params["ExpressionAttributeNames"], params["ExpressionAttributeValues"]
        item = {names[n]: values[n.replace("#", ":")] for n in names if n != "#v"}
        assert params["UpdateExpression"].endswith("ADD #v :one") and names["#v"] == "version" and values[":one"] == {"N": "1"}
        by_key[(params["Key"]["pk"]["S"], params["Key"]["sk"]["S"])] = item
        assert create["physicalResourceId"]["id"] == f"{params['Key']['pk']['S']}/{params['Key']['sk']['S']}"
    assert set(by_key) == {(f"{CLUSTER}#NodePool", "default"), (f"{CLUSTER}#EC2NodeClass", "default")}
    pool = by_key[(f"{CLUSTER}#NodePool", "default")]
    assert pool["cluster"] == {"S": CLUSTER} and pool["kind"] == {"S": "NodePool"} and pool["apiVersion"] == {"S": "karpenter.sh/v1"}
    spec = json.loads(pool["spec"]["S"])
    assert spec["limits"] == {"cpu": "1000"}
    assert spec["disruption"]["consolidationPolicy"] == "WhenEmptyOrUnderutilized"  # CRD defaults applied
    assert json.loads(pool["metadata"]["S"])["name"] == "default"
    assert "status" not in pool  # status stays with the controllers


def test_node_pool_writer_may_only_update_and_delete_state_items(synth):
    state_id, _ = _one(synth, "AWS::DynamoDB::Table", "State")
    for pid, pol in synth.of_type("AWS::IAM::Policy").items():
        if not pid.startswith("NodePools"):
            continue
        for st in pol["Properties"]["PolicyDocument"]["Statement"]:
            assert st["Action"] == ["dynamodb:UpdateItem", "dynamodb:DeleteItem"]
            assert st["Resource"] == _arn(state_id)
