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
