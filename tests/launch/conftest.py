"""Fixtures for the launch path: moto (mock_aws) with a VPC, tagged subnets and security groups,
a node role, and the EKS public AMI parameters seeded into SSM."""

from __future__ import annotations

from dataclasses import dataclass, field

import boto3
import pytest
from moto import mock_aws

from karpenter_lambda.adapters.aws.ssm_seed import seed_eks_amis
from karpenter_lambda.api.objects import EC2NodeClass

REGION = "us-east-1"
CLUSTER = "c1"
K8S = "1.31"
# one botocore session for the whole run: its loader caches the service models, so creating
# clients inside each test's mock_aws costs milliseconds instead of ~0.5 s
_SESSION = boto3.session.Session(region_name=REGION)


@dataclass
class Env:
    ec2: object
    ssm: object
    iam: object
    ddb: object
    vpc: str
    subnets: dict = field(default_factory=dict)  # name -> {id, zone}
    sgs: dict = field(default_factory=dict)  # name -> id
    seeded: dict = field(default_factory=dict)  # ssm path -> image id


def _tags(rt: str, tags: dict) -> list[dict]:
    return [{"ResourceType": rt, "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]


@pytest.fixture
def env(monkeypatch):
    # moto's 1,300 bundled public AMIs cost ~0.8 s per backend and are not needed here
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    with mock_aws():
        ec2 = _SESSION.client("ec2")
        ssm = _SESSION.client("ssm")
        iam = _SESSION.client("iam")
        ddb = _SESSION.client("dynamodb")
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        e = Env(ec2, ssm, iam, ddb, vpc)
        # zone a: two subnets (a /20 with more free IPs and a /24); zone b: /21; zone c: /22 untagged-for-discovery
        layout = [
            ("a-big", "us-east-1a", "10.0.0.0/20", {"karpenter.sh/discovery": CLUSTER, "tier": "private"}),
            ("a-small", "us-east-1a", "10.0.16.0/24", {"karpenter.sh/discovery": CLUSTER, "tier": "private"}),
            ("b", "us-east-1b", "10.0.32.0/21", {"karpenter.sh/discovery": CLUSTER, "tier": "public"}),
            ("c", "us-east-1c", "10.0.48.0/22", {"other": "x"}),
        ]
        for name, zone, cidr, tags in layout:
            s = ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZone=zone, TagSpecifications=_tags("subnet", tags))["Subnet"]
            e.subnets[name] = {"id": s["SubnetId"], "zone": zone}
        for name, tags in (("nodes", {"karpenter.sh/discovery": CLUSTER}), ("extra", {"team": "ml"}), ("plain", {})):
            kw = {"TagSpecifications": _tags("security-group", tags)} if tags else {}
            e.sgs[name] = ec2.create_security_group(GroupName=name, Description=name, VpcId=vpc, **kw)["GroupId"]
        iam.create_role(RoleName="KarpenterNodeRole-c1", AssumeRolePolicyDocument="{}")
        iam.create_role(RoleName="OtherRole", AssumeRolePolicyDocument="{}")
        e.seeded = seed_eks_amis(K8S, REGION)
        yield e


def nodeclass(name: str = "default", **spec) -> EC2NodeClass:
    base = {
        "role": "KarpenterNodeRole-c1",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
    }
    base.update(spec)
    for k in [k for k, v in base.items() if v is None]:
        del base[k]
    return EC2NodeClass({"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": name}, "spec": base})


def resolver(e: Env, clock=None):
    from karpenter_lambda.adapters.aws.nodeclass_resolver import NodeClassResolver

    kw = {"clock": clock} if clock else {}
    return NodeClassResolver(e.ec2, e.ssm, e.iam, CLUSTER, K8S, REGION, **kw)
