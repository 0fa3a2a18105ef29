"""EC2 create/tag/terminate scoping of the controller policy (issue 21), as Karpenter's controller policy does it:
``kubernetes.io/cluster/<c>=owned`` AND ``karpenter.sh/nodepool`` on what is created, tagged or terminated, and this
deployment's own ``karpenter-lambda.io/cluster=<c>`` on instances (launch and termination), so neither a managed
node group's instances (owned tag only) nor an upstream Karpenter's (owned + nodepool) can be terminated.

The conditions are also evaluated against the tags the launch code really sends (adapters/aws/fleet.py,
adapters/aws/launch_templates.py): a condition the code does not satisfy would deny every launch in AWS.
"""

from __future__ import annotations

import fnmatch

import pytest

from karpenter_lambda.adapters.aws.fleet import FleetLauncher, LaunchRequest
from karpenter_lambda.adapters.aws.launch_templates import LaunchTemplateOptions, LaunchTemplates
from karpenter_lambda.api.labels import NODEPOOL, OWNER_TAG

CLUSTER = "demo-cluster"  # the session synth's clusterName (conftest)
OWNED = f"kubernetes.io/cluster/{CLUSTER}"


def _listify(x):
    return x if isinstance(x, list) else [x]


def _resource_type(resource) -> str:
    """``...:instance/*`` (possibly an Fn::Join) -> ``instance``."""
    if isinstance(resource, dict) and "Fn::Join" in resource:
        resource = "".join(p for p in resource["Fn::Join"][1] if isinstance(p, str))
    return str(resource).rsplit(":", 1)[-1].split("/")[0]


@pytest.fixture(scope="module")
def statements(synth) -> list[dict]:
    """Every Allow statement attached to the controller role (its policy and the stack's grants)."""
    role_id = next(k for k in synth.of_type("AWS::IAM::Role") if k.startswith("ControllerRole"))
    return [st for pol in synth.of_type("AWS::IAM::Policy").values() if {"Ref": role_id} in pol["Properties"]["Roles"]
            for st in pol["Properties"]["PolicyDocument"]["Statement"] if st["Effect"] == "Allow"]


def _matches(condition: dict, context: dict) -> bool:
    """IAM condition evaluation for the operators the policy uses (StringEquals, StringLike, ForAllValues)."""
    for op, keys in condition.items():
        for key, expected in keys.items():
            expected = _listify(expected)
            if op == "ForAllValues:StringEquals":
                if not all(v in expected for v in _listify(context.get(key, []))):
                    return False
                continue
            value = context.get(key)
            if value is None:
                return False
            if op == "StringEquals" and value not in expected:
                return False
            if op == "StringLike" and not any(fnmatch.fnmatchcase(value, e) for e in expected):
                return False
            if op not in ("StringEquals", "StringLike"):
                raise AssertionError(f"unexpected condition operator {op}")
    return True


def allowed(statements, action: str, resource_type: str, context: dict) -> bool:
    return any(action in _listify(st["Action"]) and resource_type in {_resource_type(r) for r in _listify(st["Resource"])}
               and _matches(st.get("Condition") or {}, context) for st in statements)


def request(tags: dict) -> dict:
    return {f"aws:RequestTag/{k}": v for k, v in tags.items()} | {"aws:TagKeys": list(tags)}


def resource(tags: dict) -> dict:
    return {f"aws:ResourceTag/{k}": v for k, v in tags.items()}


# -- the statements ---------------------------------------------------------------------------------------------------


def test_no_terminate_or_tag_statement_without_the_nodepool_condition(statements):
    """Every statement that can terminate, tag, or create an instance, fleet or volume names karpenter.sh/nodepool
    (the only resources without it are launch templates and what takes its tags from them: the EC2NodeClass tag)."""
    checked = 0
    for st in statements:
        actions = set(_listify(st["Action"]))
        types = {_resource_type(r) for r in _listify(st["Resource"])}
        cond = st.get("Condition") or {}
        like = cond.get("StringLike") or {}
        if {"ec2:TerminateInstances", "ec2:CreateTags", "ec2:RunInstances", "ec2:CreateFleet"} & actions and \
                types & {"instance", "fleet", "volume"}:
            checked += 1
            assert types <= {"instance", "fleet", "volume"}, st["Sid"]
            assert like.get(f"aws:RequestTag/{NODEPOOL}") == "*" or like.get(f"aws:ResourceTag/{NODEPOOL}") == "*", st["Sid"]
            assert (cond.get("StringEquals") or {}).get(f"aws:RequestTag/{OWNED}") == "owned" or \
                (cond.get("StringEquals") or {}).get(f"aws:ResourceTag/{OWNED}") == "owned", st["Sid"]
        elif {"ec2:CreateTags", "ec2:CreateLaunchTemplate", "ec2:DeleteLaunchTemplate"} & actions or \
                ({"ec2:RunInstances", "ec2:CreateFleet"} & actions and types & {"network-interface", "spot-instances-request"}):
            checked += 1
            assert like.get("aws:RequestTag/karpenter.k8s.aws/ec2nodeclass") == "*" or \
                like.get("aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass") == "*", st["Sid"]
    assert checked == 10


def test_only_this_deployments_instances_can_be_terminated(statements):
    ours = {OWNED: "owned", NODEPOOL: "default", OWNER_TAG: CLUSTER, "karpenter.sh/nodeclaim": "default-abc"}
    assert allowed(statements, "ec2:TerminateInstances", "instance", resource(ours))
    managed_node_group = {OWNED: "owned", "eks:nodegroup-name": "system"}
    upstream_karpenter = {OWNED: "owned", NODEPOOL: "default", "karpenter.sh/nodeclaim": "default-xyz"}
    other_cluster = {**ours, OWNER_TAG: "other-cluster"}
    for tags in (managed_node_group, upstream_karpenter, other_cluster, {}):
        assert not allowed(statements, "ec2:TerminateInstances", "instance", resource(tags)), tags
    # nothing else but instances can be terminated, and only the one statement can
    assert [st["Sid"] for st in statements if "ec2:TerminateInstances" in _listify(st["Action"])] == ["AllowScopedDeletion"]


def test_instances_are_created_only_with_the_nodepool_and_owner_tags(statements):
    ours = {OWNED: "owned", NODEPOOL: "default", OWNER_TAG: CLUSTER}
    for action in ("ec2:CreateFleet", "ec2:RunInstances"):
        assert allowed(statements, action, "instance", request(ours))
        for missing in ours:
            tags = {k: v for k, v in ours.items() if k != missing}
            assert not allowed(statements, action, "instance", request(tags)), (action, missing)
    tag_on_create = request(ours) | {"ec2:CreateAction": "CreateFleet"}
    assert allowed(statements, "ec2:CreateTags", "instance", tag_on_create)
    assert not allowed(statements, "ec2:CreateTags", "instance", request({OWNED: "owned", NODEPOOL: "x"}) | {"ec2:CreateAction": "CreateFleet"})
    # re-tagging later: an owned NodePool instance of this deployment, NodeClaim/Name keys only
    # (an upstream Karpenter's instance, without the owner tag: tests/infra/test_iam_retag_owner.py)
    retag = resource({OWNED: "owned", NODEPOOL: "default", OWNER_TAG: CLUSTER}) | {"aws:TagKeys": ["karpenter.sh/nodeclaim"]}
    assert allowed(statements, "ec2:CreateTags", "instance", retag)
    assert not allowed(statements, "ec2:CreateTags", "instance", resource({OWNED: "owned"}) | {"aws:TagKeys": ["Name"]})


# -- the conditions against the tags the launch code sends -----------------------------------------------------------


def _fleet_request() -> dict:
    req = LaunchRequest(nodeclaim_name="default-abc12", nodepool_name="default", nodeclass_name="default",
                        capacity_type="spot", candidates=[("m5.large", "us-east-1a", 0.05)],
                        launch_templates={"m5.large": "karpenter-lambda/123"}, subnets={"us-east-1a": "subnet-1"},
                        tags={"team": "a"})
    launcher = FleetLauncher(ec2=None, cluster_name=CLUSTER)
    return launcher.build_request(req, launcher.plan_overrides(req))


def _template_request() -> dict:
    opts = LaunchTemplateOptions(cluster_name=CLUSTER, nodeclass_name="default", image_id="ami-1", user_data="#!/bin/sh",
                                 instance_profile="p", security_group_ids=["sg-1"], tags={"team": "a"}, capacity_type="spot")
    return LaunchTemplates(ec2=None, cluster_name=CLUSTER).request(opts)


def _tags(spec: dict) -> dict:
    return {t["Key"]: t["Value"] for t in spec["Tags"]}


_SENDS_OWNER = OWNER_TAG in _tags(next(s for s in _fleet_request()["TagSpecifications"] if s["ResourceType"] == "instance"))


@pytest.mark.xfail(not _SENDS_OWNER, strict=True,
                   reason="adapters/aws/fleet.py does not tag instances with karpenter-lambda.io/cluster yet (the "
                          "owner-tag change in progress): until it does, AWS denies CreateFleet for instances")
def test_the_fleet_request_satisfies_the_launch_conditions(statements):
    specs = {s["ResourceType"]: _tags(s) for s in _fleet_request()["TagSpecifications"]}
    assert set(specs) == {"instance", "volume", "fleet"}
    for rt, tags in specs.items():
        for action in ("ec2:CreateFleet", "ec2:RunInstances"):
            assert allowed(statements, action, rt, request(tags)), (action, rt, tags)
        assert allowed(statements, "ec2:CreateTags", rt, request(tags) | {"ec2:CreateAction": "CreateFleet"}), rt
    # what it launches can be terminated by this deployment again
    assert allowed(statements, "ec2:TerminateInstances", "instance", resource(specs["instance"]))


def test_the_fleet_tags_satisfy_the_nodepool_conditions(statements):
    """What holds today whatever the owner tag: fleets and volumes (owned + NodePool) are allowed."""
    specs = {s["ResourceType"]: _tags(s) for s in _fleet_request()["TagSpecifications"]}
    for rt in ("volume", "fleet"):
        assert allowed(statements, "ec2:CreateFleet", rt, request(specs[rt])), rt
    assert specs["instance"][NODEPOOL] == "default" and specs["instance"][OWNED] == "owned"


def test_the_launch_template_request_satisfies_its_conditions(statements):
    req = _template_request()
    [lt] = req["TagSpecifications"]
    assert lt["ResourceType"] == "launch-template"
    assert allowed(statements, "ec2:CreateLaunchTemplate", "launch-template", request(_tags(lt)))
    assert allowed(statements, "ec2:CreateTags", "launch-template",
                   request(_tags(lt)) | {"ec2:CreateAction": "CreateLaunchTemplate"})
    assert allowed(statements, "ec2:DeleteLaunchTemplate", "launch-template", resource(_tags(lt)))
    # the template's data tags the network interfaces and spot requests CreateFleet makes
    for spec in req["LaunchTemplateData"]["TagSpecifications"]:
        rt, tags = spec["ResourceType"], _tags(spec)
        assert rt in ("network-interface", "spot-instances-request")
        assert allowed(statements, "ec2:CreateFleet", rt, request(tags)), rt
        assert allowed(statements, "ec2:CreateTags", rt, request(tags) | {"ec2:CreateAction": "CreateFleet"}), rt
    # another tool's template (owned, but no EC2NodeClass) cannot be deleted
    assert not allowed(statements, "ec2:DeleteLaunchTemplate", "launch-template", resource({OWNED: "owned"}))
