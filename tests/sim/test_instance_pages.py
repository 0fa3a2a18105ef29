"""sim/moto_ec2.all_instances: the simulated world sees every instance, not DescribeInstances' first page (moto, as
EC2, answers 100 reservations a page: a 200-node simulate once joined only 100 kubelets)."""

from __future__ import annotations

import boto3
from moto import mock_aws

from karpenter_lambda.sim import moto_ec2


@mock_aws
def test_all_instances_reads_every_page():
    ec2 = boto3.client("ec2", region_name="us-east-1")
    for _ in range(101):   # one reservation each: pages are counted in reservations
        ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="m5.large")
    first = ec2.describe_instances()
    assert len(first["Reservations"]) == 100 and first.get("NextToken")
    every = moto_ec2.all_instances(ec2)
    assert len(every) == len({i["InstanceId"] for i in every}) == 101
    running = moto_ec2.all_instances(ec2, Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}])
    assert len(running) == 101


@mock_aws
def test_instance_launches_answer_as_describe_instances():
    """The loop's discovery reads moto's backend: the same instances, order and (whole-second) launch times as
    DescribeInstances with the same filters."""
    import datetime

    import moto.ec2.models.instances as moto_instances

    ec2 = boto3.client("ec2", region_name="us-east-1")
    owned = [{"ResourceType": "instance", "Tags": [{"Key": "kubernetes.io/cluster/c1", "Value": "owned"}]}]
    original = moto_instances.utcnow
    try:
        for us in (999999, 500000, 0):
            moto_instances.utcnow = lambda us=us: datetime.datetime(2026, 12, 6, 4, 15, 22, us)
            ec2.run_instances(ImageId="ami-12c6146b", MinCount=2, MaxCount=2, TagSpecifications=owned)
    finally:
        moto_instances.utcnow = original
    ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1)   # not the cluster's
    gone = ec2.describe_instances(Filters=[{"Name": "tag:kubernetes.io/cluster/c1", "Values": ["owned"]}])
    ec2.terminate_instances(InstanceIds=[gone["Reservations"][0]["Instances"][0]["InstanceId"]])
    filters = {"tag:kubernetes.io/cluster/c1": ["owned"], "instance-state-name": ["pending", "running"]}
    described = [(i["InstanceId"], i["LaunchTime"].timestamp())
                 for i in moto_ec2.all_instances(ec2, Filters=[{"Name": k, "Values": v} for k, v in filters.items()])]
    assert len(described) == 5
    assert moto_ec2.instance_launches("us-east-1", filters) == described
