"""sim/moto_ec2.instance_entry: what a simulated kubelet reads of its own instance, straight from moto's backend,
must be exactly those fields of moto's DescribeInstances answer (in a zone other than the default, with tags in
their order, before and after a state change)."""

import boto3
from moto import mock_aws

from karpenter_lambda.sim import moto_ec2

KEYS = ("InstanceId", "InstanceType", "Placement", "PrivateDnsName", "State", "Tags")


def _described(ec2, iid: str) -> dict:
    inst = ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]
    return {"InstanceId": inst["InstanceId"], "InstanceType": inst["InstanceType"],
            "Placement": {"AvailabilityZone": inst["Placement"]["AvailabilityZone"]},
            "PrivateDnsName": inst["PrivateDnsName"], "State": {"Name": inst["State"]["Name"]},
            "Tags": inst.get("Tags") or []}


def test_instance_entry_is_what_describe_instances_says():
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1")
        tags = [{"Key": "karpenter.sh/nodeclaim", "Value": "general-abc"}, {"Key": "b", "Value": "2"},
                {"Key": "a", "Value": "1"}]
        ids = [i["InstanceId"] for i in ec2.run_instances(
            ImageId="ami-12c6146b", MinCount=2, MaxCount=2, InstanceType="c7a.large",
            Placement={"AvailabilityZone": "us-east-1c"},
            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])["Instances"]]
        bare = ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
        ec2.terminate_instances(InstanceIds=[ids[1]])
        for iid in ids + [bare]:
            got = moto_ec2.instance_entry("us-east-1", iid)
            assert set(got) == set(KEYS)
            assert got == _described(ec2, iid)
        assert moto_ec2.instance_entry("us-east-1", ids[0])["Placement"]["AvailabilityZone"] == "us-east-1c"
        assert moto_ec2.instance_entry("us-east-1", ids[1])["State"]["Name"] == "terminated"
        assert [t["Key"] for t in moto_ec2.instance_entry("us-east-1", ids[0])["Tags"]] == [
            "karpenter.sh/nodeclaim", "b", "a"]
        assert moto_ec2.instance_entry("us-east-1", "i-00000000000000000") is None
