"""IAM least privilege (modelled on Karpenter's controller policy), cdk-nag and cfn-lint on the synthesized template."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CLUSTER = "demo-cluster"  # the clusterName of the session synth (tests/infra/conftest.py)
OWNED = {f"aws:RequestTag/kubernetes.io/cluster/{CLUSTER}": "owned"}
RESOURCE_OWNED = {f"aws:ResourceTag/kubernetes.io/cluster/{CLUSTER}": "owned"}
# issue 21: NodePool scoping (as Karpenter's policy) and this deployment's own instance tag
REQUEST_NODEPOOL = {"aws:RequestTag/karpenter.sh/nodepool": "*"}
RESOURCE_NODEPOOL = {"aws:ResourceTag/karpenter.sh/nodepool": "*"}
REQUEST_NODECLASS = {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"}
REQUEST_OWNER = {"aws:RequestTag/karpenter-lambda.io/cluster": CLUSTER}
RESOURCE_OWNER = {"aws:ResourceTag/karpenter-lambda.io/cluster": CLUSTER}


def _render(value) -> str:
    """A template value as text with intrinsics shown as <Ref> / <Logical.Attr> (for comparing ARNs)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(_render(p) for p in parts)
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return "<{}.{}>".format(*value["Fn::GetAtt"])
    return json.dumps(value)


def _listify(x):
    return x if isinstance(x, list) else [x]


def _all_policy_statements(template: dict):
    """(resource id, statement) for every IAM policy document in the template (inline, managed, trust, queue)."""
    for rid, res in template["Resources"].items():
        p = res.get("Properties", {})
        docs = []
        if res["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::SQS::QueuePolicy"):
            docs.append(p["PolicyDocument"])
        if res["Type"] == "AWS::IAM::Role":
            docs.append(p["AssumeRolePolicyDocument"])
            docs.extend(pol["PolicyDocument"] for pol in p.get("Policies", []))
        for doc in docs:
            for st in doc["Statement"]:
                yield rid, st


@pytest.fixture(scope="module")
def controller(synth) -> dict:
    """Sid -> statement of the controller policy."""
    [pol] = [v for k, v in synth.of_type("AWS::IAM::Policy").items() if k.startswith("ControllerPolicy")]
    statements = pol["Properties"]["PolicyDocument"]["Statement"]
    assert all("Sid" in s for s in statements)
    return {s["Sid"]: s for s in statements}


def test_no_wildcard_action_anywhere(synth):
    seen = 0
    for rid, st in _all_policy_statements(synth.template):
        assert "NotAction" not in st and "NotResource" not in st, rid
        if st["Effect"] == "Deny":
            continue  # enforce-TLS denies on the queues (sqs:* over plain HTTP) restrict, they grant nothing
        for action in _listify(st["Action"]):
            seen += 1
            assert "*" not in action, (rid, action)
    assert seen > 40


def test_launch_requires_owned_request_tag(controller):
    # issue 21: split by where each resource's tags come from; instances also need the NodePool and owner tags
    st = controller["AllowScopedEC2InstanceActionsWithTags"]
    assert sorted(st["Action"]) == ["ec2:CreateFleet", "ec2:RunInstances"]
    assert st["Condition"] == {"StringEquals": {**OWNED, **REQUEST_OWNER}, "StringLike": REQUEST_NODEPOOL}
    assert [_render(r).split(":")[-1] for r in _listify(st["Resource"])] == ["instance/*"]
    st = controller["AllowScopedEC2FleetResourceActionsWithTags"]
    assert st["Condition"] == {"StringEquals": OWNED, "StringLike": REQUEST_NODEPOOL}
    assert sorted(_render(r).split(":")[-1] for r in st["Resource"]) == ["fleet/*", "volume/*"]
    st = controller["AllowScopedEC2TemplateResourceActionsWithTags"]
    assert st["Condition"] == {"StringEquals": OWNED, "StringLike": REQUEST_NODECLASS}
    assert sorted(_render(r).split(":")[-1] for r in st["Resource"]) == ["network-interface/*", "spot-instances-request/*"]
    st = controller["AllowScopedEC2LaunchTemplateCreation"]
    assert st["Action"] == "ec2:CreateLaunchTemplate"
    assert st["Condition"] == {"StringEquals": OWNED, "StringLike": REQUEST_NODECLASS}
    assert [_render(r).split(":")[-1] for r in _listify(st["Resource"])] == ["launch-template/*"]


def test_untaggable_launch_inputs_and_owned_launch_templates(controller):
    st = controller["AllowScopedEC2InstanceAccessActions"]
    assert sorted(st["Action"]) == ["ec2:CreateFleet", "ec2:RunInstances"]
    assert "Condition" not in st
    rendered = sorted(_render(r) for r in st["Resource"])
    assert sorted(r.split(":")[-1] for r in rendered) == ["capacity-reservation/*", "image/*", "placement-group/*",
                                                                  "security-group/*", "snapshot/*", "subnet/*"]
    assert all(r.startswith("arn:<AWS::Partition>:ec2:<AWS::Region>:") for r in rendered)
    lt = controller["AllowScopedEC2LaunchTemplateAccessActions"]
    assert [_render(r).split(":")[-1] for r in _listify(lt["Resource"])] == ["launch-template/*"]
    assert lt["Condition"] == {"StringEquals": RESOURCE_OWNED}


def test_tagging_on_create_and_on_owned_instances_only(controller):
    launches = ["RunInstances", "CreateFleet"]
    st = controller["AllowScopedResourceCreationTagging"]
    assert st["Action"] == "ec2:CreateTags"
    assert _render(st["Resource"]).endswith(":instance/*")
    assert st["Condition"] == {"StringEquals": {**OWNED, **REQUEST_OWNER, "ec2:CreateAction": launches},
                               "StringLike": REQUEST_NODEPOOL}
    st = controller["AllowScopedFleetResourceCreationTagging"]
    assert st["Condition"] == {"StringEquals": {**OWNED, "ec2:CreateAction": launches}, "StringLike": REQUEST_NODEPOOL}
    st = controller["AllowScopedTemplateResourceCreationTagging"]
    assert st["Condition"] == {"StringEquals": {**OWNED, "ec2:CreateAction": [*launches, "CreateLaunchTemplate"]},
                               "StringLike": REQUEST_NODECLASS}
    st = controller["AllowScopedResourceTagging"]
    assert st["Action"] == "ec2:CreateTags"
    assert _render(st["Resource"]).endswith(":instance/*")
    assert st["Condition"] == {"StringEquals": {**RESOURCE_OWNED, **RESOURCE_OWNER}, "StringLike": RESOURCE_NODEPOOL,
                               "ForAllValues:StringEquals": {"aws:TagKeys": ["karpenter.sh/nodeclaim", "Name"]}}


def test_deletion_only_on_owned_resources(controller):
    st = controller["AllowScopedDeletion"]
    assert st["Action"] == "ec2:TerminateInstances"
    assert st["Condition"] == {"StringEquals": {**RESOURCE_OWNED, **RESOURCE_OWNER}, "StringLike": RESOURCE_NODEPOOL}
    assert _render(st["Resource"]).endswith(":instance/*")
    lt = controller["AllowScopedLaunchTemplateDeletion"]
    assert lt["Action"] == "ec2:DeleteLaunchTemplate"
    assert lt["Condition"] == {"StringEquals": RESOURCE_OWNED,
                               "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"}}
    assert _render(lt["Resource"]).endswith(":launch-template/*")
    # nothing else may terminate or delete
    for sid, other in controller.items():
        if sid not in ("AllowScopedDeletion", "AllowScopedLaunchTemplateDeletion"):
            assert not {"ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"} & set(_listify(other["Action"])), sid


def test_reads_ssm_pricing_and_cluster(controller):
    reads = controller["AllowRegionalReadActions"]
    assert reads["Resource"] == "*"
    assert all(a.startswith("ec2:Describe") for a in reads["Action"])
    assert {"ec2:DescribeCapacityReservations", "ec2:DescribePlacementGroups"} <= set(reads["Action"])  # issue 30
    assert reads["Condition"] == {"StringEquals": {"aws:RequestedRegion": {"Ref": "AWS::Region"}}}
    ssm = controller["AllowSSMReadActions"]
    assert ssm["Action"] == ["ssm:GetParameter", "ssm:GetParameters"]
    assert _render(ssm["Resource"]) == "arn:<AWS::Partition>:ssm:<AWS::Region>::parameter/aws/service/*"
    assert controller["AllowPricingReadActions"]["Action"] == "pricing:GetProducts"
    eks = controller["AllowAPIServerEndpointDiscovery"]
    assert eks["Action"] == "eks:DescribeCluster"
    assert _render(eks["Resource"]) == f"arn:<AWS::Partition>:eks:<AWS::Region>:<AWS::AccountId>:cluster/{CLUSTER}"


def test_pass_role_only_node_role_to_ec2(synth, controller):
    node_role_id = next(k for k in synth.of_type("AWS::IAM::Role") if k.startswith("NodeRole"))
    st = controller["AllowPassingInstanceRole"]
    assert st["Action"] == "iam:PassRole"
    assert st["Resource"] == {"Fn::GetAtt": [node_role_id, "Arn"]}
    assert st["Condition"] == {"StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}}
    passes = [(rid, s) for rid, s in _all_policy_statements(synth.template) if "iam:PassRole" in _listify(s.get("Action", []))]
    assert len(passes) == 1
    assert controller["AllowNodeRoleReadActions"] == {"Action": "iam:GetRole", "Effect": "Allow", "Resource": {"Fn::GetAtt": [node_role_id, "Arn"]}, "Sid": "AllowNodeRoleReadActions"}


def test_instance_profiles_only_with_cluster_region_and_nodeclass_tags(controller):
    profiles = "arn:<AWS::Partition>:iam::<AWS::AccountId>:instance-profile/*"
    region = {"Ref": "AWS::Region"}
    create = controller["AllowScopedInstanceProfileCreationActions"]
    assert create["Action"] == "iam:CreateInstanceProfile" and _render(create["Resource"]) == profiles
    assert create["Condition"] == {
        "StringEquals": {**OWNED, "aws:RequestTag/topology.kubernetes.io/region": region},
        "StringLike": {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"},
    }
    change = controller["AllowScopedInstanceProfileActions"]
    assert sorted(change["Action"]) == ["iam:AddRoleToInstanceProfile", "iam:DeleteInstanceProfile", "iam:RemoveRoleFromInstanceProfile"]
    assert change["Condition"] == {
        "StringEquals": {**RESOURCE_OWNED, "aws:ResourceTag/topology.kubernetes.io/region": region},
        "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"},
    }
    tag = controller["AllowScopedInstanceProfileTagActions"]
    assert tag["Action"] == "iam:TagInstanceProfile"
    assert set(tag["Condition"]["StringEquals"]) == {*OWNED, *RESOURCE_OWNED, "aws:RequestTag/topology.kubernetes.io/region", "aws:ResourceTag/topology.kubernetes.io/region"}
    assert _render(controller["AllowInstanceProfileReadActions"]["Resource"]) == profiles
    # every IAM action the controller has, and nothing else (no role creation, no policy changes)
    iam_actions = {a for st in controller.values() for a in _listify(st["Action"]) if a.startswith("iam:")}
    assert iam_actions == {
        "iam:PassRole", "iam:GetRole", "iam:GetInstanceProfile", "iam:CreateInstanceProfile", "iam:TagInstanceProfile",
        "iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile",
    }


def test_controller_data_access_is_the_two_tables_and_the_two_queues(synth):
    role_id = next(k for k in synth.of_type("AWS::IAM::Role") if k.startswith("ControllerRole"))
    tables = {f"<{k}.Arn>" for k in synth.of_type("AWS::DynamoDB::Table")}
    queues = {f"<{k}.Arn>" for k in synth.of_type("AWS::SQS::Queue") if "DeadLetter" not in k}
    assert len(queues) == 2   # the pod queue and the interruption queue
    log_groups = {f"<{k}.Arn>" for k in synth.of_type("AWS::Logs::LogGroup") if not k.startswith("NodePools")}
    services = set()
    for pid, pol in synth.of_type("AWS::IAM::Policy").items():
        if {"Ref": role_id} not in pol["Properties"]["Roles"] or pid.startswith("ControllerPolicy"):
            continue
        for st in pol["Properties"]["PolicyDocument"]["Statement"]:
            actions = _listify(st["Action"])
            resources = {_render(r) for r in _listify(st["Resource"])}
            service = {a.split(":")[0] for a in actions}
            assert len(service) == 1, actions
            service = service.pop()
            services.add(service)
            if service == "dynamodb":
                assert resources <= tables, resources
                assert not {"dynamodb:CreateTable", "dynamodb:DeleteTable", "dynamodb:UpdateTable"} & set(actions)
            elif service == "sqs":
                assert resources <= queues, resources
            elif service == "logs":
                assert resources <= log_groups and set(actions) == {"logs:CreateLogStream", "logs:PutLogEvents"}
            elif service == "xray":
                assert set(actions) == {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
            else:
                pytest.fail(f"unexpected grant {actions} on {resources}")
    assert services == {"dynamodb", "sqs", "logs", "xray"}
    # no AWS managed policy on the functions' role (logs are granted per log group)
    assert "ManagedPolicyArns" not in synth.resources[role_id]["Properties"]


def test_cdk_nag_passes_with_reasoned_acknowledgements(synth):
    [report] = [r for r in synth.report["pluginReports"] if r["pluginName"] == "AwsSolutions"]
    assert report["conclusion"] == "success"
    assert report["violations"] == []
    suppressed = report["suppressedViolations"]
    assert suppressed, "the node role's managed policies must show up as acknowledged"
    for v in suppressed:
        assert len(v["reason"]) > 30, v["ruleName"]
    rules = {v["ruleName"] for v in suppressed}
    assert any(r.startswith("AwsSolutions-IAM4[Policy::") and r.endswith("AmazonEKSWorkerNodePolicy]") for r in rules)
    # only IAM4 (managed policies) and IAM5 (wildcard resources) are acknowledged: every other rule passes
    assert {r.split("[")[0] for r in rules} == {"AwsSolutions-IAM4", "AwsSolutions-IAM5"}


def test_cfn_lint_reports_no_errors(synth):
    exe = Path(sys.executable).parent / "cfn-lint"
    cmd = [str(exe)] if exe.exists() else [shutil.which("cfn-lint") or "cfn-lint"]
    template = next(synth.outdir.glob("*.template.json"))
    proc = subprocess.run([*cmd, "--format", "json", str(template)], capture_output=True, text=True)
    findings = json.loads(proc.stdout or "[]")
    errors = [f for f in findings if f["Level"] == "Error"]
    assert errors == [], errors
    assert proc.returncode in (0, 4), proc.stderr  # 4 = warnings only (CDK's redundant DependsOn)
