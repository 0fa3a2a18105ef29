"""adapters/aws/nodeclass_resolver: an EC2NodeClass's instance profile, once created, costs one read per resolution
(issue 32: fewer calls per sweep) -- no CreateInstanceProfile failing with EntityAlreadyExists every time."""

from __future__ import annotations

import collections
import json

import boto3
from moto import mock_aws

from karpenter_lambda.adapters.aws.nodeclass_resolver import NodeClassResolver


@mock_aws
def test_instance_profile_created_once_then_read():
    iam = boto3.client("iam", region_name="us-east-1")
    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
                                                     "Action": "sts:AssumeRole"}]}
    for role in ("NodeRole", "OtherRole"):
        iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps(trust))
    calls = collections.Counter()
    iam.meta.events.register("before-call.iam.*", lambda model, **_: calls.update([model.name]))
    r = NodeClassResolver(None, None, iam, "c1", "1.31", "us-east-1")
    profile, err = r.resolve_instance_profile("default", {"role": "NodeRole"}, {"uid": "u1"})
    assert profile and not err
    assert calls == {"GetRole": 1, "GetInstanceProfile": 1, "CreateInstanceProfile": 1, "AddRoleToInstanceProfile": 1}
    calls.clear()
    assert r.resolve_instance_profile("default", {"role": "NodeRole"}, {"uid": "u1"}) == (profile, "")
    assert calls == {"GetRole": 1, "GetInstanceProfile": 1}
    # the role changed: swapped on the existing profile
    calls.clear()
    assert r.resolve_instance_profile("default", {"role": "OtherRole"}, {"uid": "u1"}) == (profile, "")
    got = iam.get_instance_profile(InstanceProfileName=profile)["InstanceProfile"]
    assert [x["RoleName"] for x in got["Roles"]] == ["OtherRole"] and "CreateInstanceProfile" not in calls
