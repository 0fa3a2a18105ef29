"""sim/moto_speedups_tags: an EC2 resource's tags read from its own entry must be what moto's scan of every tag
gives, for every resource, for ids without tags, for glob ids and other filters (moto's own path), and through
DescribeInstances / DescribeSubnets with tag filters."""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.ec2.models import ec2_backends

from karpenter_lambda.sim import moto_speedups_tags

REGION = "us-east-1"


def _record() -> tuple[dict, dict]:
    """One account, read with moto's own scan and with the fast path."""
    with mock_aws():
        try:
            ec2 = boto3.client("ec2", region_name=REGION)
            vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
            subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", TagSpecifications=[{
                "ResourceType": "subnet", "Tags": [{"Key": "zone", "Value": str(i)}, {"Key": "Name", "Value": f"s{i}"}]}]
                )["Subnet"]["SubnetId"] for i in range(3)]
            ids = []
            for i in range(4):
                tags = [{"Key": "karpenter.sh/nodepool", "Value": "web" if i % 2 else "api"}, {"Key": "n", "Value": str(i)}]
                ids += [x["InstanceId"] for x in ec2.run_instances(
                    ImageId="ami-12c6146b", MinCount=2, MaxCount=2, InstanceType="m5.large", SubnetId=subnets[i % 3],
                    TagSpecifications=[{"ResourceType": "instance", "Tags": tags}] if i < 3 else [])["Instances"]]
            ec2.create_tags(Resources=[ids[0]], Tags=[{"Key": "late", "Value": "x"}, {"Key": "n", "Value": "changed"}])
            backend = ec2_backends[DEFAULT_ACCOUNT_ID][REGION]
            moto_speedups_tags.uninstall()
            slow = _reads(ec2, backend, ids, subnets, vpc)
            assert moto_speedups_tags.install()
            return slow, _reads(ec2, backend, ids, subnets, vpc)
        finally:
            moto_speedups_tags.install()   # as the rest of the session runs (tests/conftest installs the speedups)


def _reads(ec2, backend, ids: list[str], subnets: list[str], vpc: str) -> dict:
    calls = {f"id {r}": backend.describe_tags({"resource-id": [r]}) for r in ids + subnets + [vpc, "i-0000000000missing"]}
    calls["glob"] = backend.describe_tags({"resource-id": [ids[0][:6] + "*"]})
    calls["two ids"] = backend.describe_tags({"resource-id": [ids[1], subnets[0]]})
    calls["id and key"] = backend.describe_tags({"resource-id": [ids[1]], "key": ["n"]})
    calls["all"] = backend.describe_tags(None)
    calls["instances"] = ec2.describe_instances()["Reservations"]
    calls["tag filter"] = ec2.describe_instances(Filters=[{"Name": "tag:karpenter.sh/nodepool", "Values": ["web"]}])["Reservations"]
    calls["subnets"] = ec2.describe_subnets(Filters=[{"Name": "tag:zone", "Values": ["1", "2"]}])["Subnets"]
    calls["DescribeTags"] = ec2.describe_tags(Filters=[{"Name": "resource-id", "Values": [ids[2]]}])["Tags"]
    calls["no entry added"] = "i-0000000000missing" in backend.tags
    return calls


@pytest.fixture(scope="module")
def both():
    return _record()


def test_a_resources_tags_are_what_moto_scans(both):
    slow, fast = both
    assert set(fast) == set(slow)
    for name in slow:
        assert fast[name] == slow[name], name
    # the run was not vacuous: tagged and untagged instances, a changed tag, a filter that selects
    tagged = [v for k, v in fast.items() if k.startswith("id i-") and v]
    assert len(tagged) == 6 and any(t["key"] == "late" for v in tagged for t in v)
    assert sum(len(r["Instances"]) for r in fast["tag filter"]) == 2 and fast["no entry added"] is False
