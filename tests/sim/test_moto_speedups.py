"""sim/moto_speedups: DynamoDB item reads written straight to JSON must give what moto's own serializer gives, byte
for byte once parsed, on items of every attribute type, for every patched operation (and the unpatched ones still
work)."""

from __future__ import annotations

import json
import re
from decimal import Decimal

import boto3
import pytest
from moto import mock_aws
from moto.dynamodb.models.table import Table

from karpenter_lambda.sim import moto_speedups

ITEMS = [
    {"pk": {"S": "a"}, "sk": {"S": "1"}, "s": {"S": "text é"}, "n": {"N": "12.50"}, "b": {"B": b"\x00\xffbin"},
     "ss": {"SS": ["x", "y"]}, "ns": {"NS": ["1", "2"]}, "bs": {"BS": [b"\x01", b"\x02"]}, "null": {"NULL": True},
     "bool": {"BOOL": False}, "m": {"M": {"inner": {"L": [{"S": "deep"}, {"N": "3"}, {"M": {}}]}}}, "l": {"L": []}},
    {"pk": {"S": "a"}, "sk": {"S": "2"}, "s": {"S": ""}},
    {"pk": {"S": "b"}, "sk": {"S": "1"}, "big": {"S": "z" * 5000}},
]


def _calls(client):
    return [
        ("GetItem", lambda: client.get_item(TableName="t", Key={"pk": {"S": "a"}, "sk": {"S": "1"}})),
        ("GetItem (missing)", lambda: client.get_item(TableName="t", Key={"pk": {"S": "nope"}, "sk": {"S": "1"}})),
        ("Query", lambda: client.query(TableName="t", KeyConditionExpression="pk = :p",
                                       ExpressionAttributeValues={":p": {"S": "a"}}, ReturnConsumedCapacity="TOTAL")),
        ("Query (paged)", lambda: client.query(TableName="t", KeyConditionExpression="pk = :p", Limit=1,
                                               ExpressionAttributeValues={":p": {"S": "a"}})),
        ("Query (projection)", lambda: client.query(TableName="t", KeyConditionExpression="pk = :p",
                                                    ProjectionExpression="sk, b, m",
                                                    ExpressionAttributeValues={":p": {"S": "a"}})),
        ("Query (empty)", lambda: client.query(TableName="t", KeyConditionExpression="pk = :p",
                                               ExpressionAttributeValues={":p": {"S": "none"}})),
        ("Scan", lambda: client.scan(TableName="t")),
        ("BatchGetItem", lambda: client.batch_get_item(RequestItems={"t": {"Keys": [
            {"pk": {"S": "a"}, "sk": {"S": "1"}}, {"pk": {"S": "b"}, "sk": {"S": "1"}}]}})),
        ("DescribeTable", lambda: client.describe_table(TableName="t")),
    ]


def _record(fast: bool) -> dict:
    bodies, parsed = {}, {}
    with mock_aws():
        if fast:
            assert moto_speedups.install()
        else:
            moto_speedups.uninstall()
        try:
            client = boto3.client("dynamodb", region_name="us-east-1")
            client.create_table(TableName="t", BillingMode="PAY_PER_REQUEST",
                                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                                      {"AttributeName": "sk", "AttributeType": "S"}],
                                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                                           {"AttributeName": "sk", "KeyType": "RANGE"}])
            for item in ITEMS:
                client.put_item(TableName="t", Item=item)
            last = {}
            client.meta.events.register("after-call.dynamodb", lambda http_response, **kw: last.update(body=http_response.content))
            for name, call in _calls(client):
                out = call()
                out.pop("ResponseMetadata", None)
                parsed[name] = out
                bodies[name] = json.loads(last["body"])
        finally:
            moto_speedups.install()   # as the rest of the session runs (tests/conftest installs it)
    return {"parsed": parsed, "bodies": bodies}


def _normalise(doc):
    """Table descriptions carry creation times and ARNs that differ between two tables; items do not."""
    if isinstance(doc, dict):
        return {k: ("<time>" if k in ("CreationDateTime",) else _normalise(v)) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_normalise(v) for v in doc]
    return doc


def test_fast_item_reads_equal_motos_own_serializer():
    slow, fast = _record(fast=False), _record(fast=True)
    assert _normalise(fast["bodies"]) == _normalise(slow["bodies"])
    assert _normalise(fast["parsed"]) == _normalise(slow["parsed"])
    # and the reads returned the data (a broken path would return nothing on both sides)
    item = fast["parsed"]["GetItem"]["Item"]
    assert item["b"] == {"B": b"\x00\xffbin"} and item["bs"] == {"BS": [b"\x01", b"\x02"]}
    assert item["m"]["M"]["inner"]["L"][0] == {"S": "deep"} and item["null"] == {"NULL": True}
    assert fast["parsed"]["Query"]["Count"] == 2 and "ConsumedCapacity" in fast["parsed"]["Query"]
    assert "LastEvaluatedKey" in fast["parsed"]["Query (paged)"]
    assert fast["parsed"]["Query (empty)"]["Items"] == [] and "Item" not in fast["parsed"]["GetItem (missing)"]
    assert len(fast["parsed"]["BatchGetItem"]["Responses"]["t"]) == 2


def test_only_moto_5_2_is_patched(monkeypatch):
    import moto

    moto_speedups.uninstall()
    monkeypatch.setattr(moto, "__version__", "5.3.0")
    try:
        assert moto_speedups.install() is False
        from moto.dynamodb.responses import DynamoHandler
        assert not getattr(DynamoHandler, "karpenter_lambda_fast_items", False)
    finally:
        monkeypatch.undo()
        assert moto_speedups.install() is True


def test_wire_form():
    assert moto_speedups.wire({"B": b"\x00", "L": [{"BS": [b"a"]}], "x": None}) == {"B": "AA==", "L": [{"BS": ["YQ=="]}]}
    assert moto_speedups.wire(Decimal("1")) == Decimal("1")


# -- Query reads one partition (sim/moto_speedups_query.py) ------------------------------------------------------------

def _query_calls():
    p = {":p": {"S": "NodeClaim#c"}}
    calls = [
        ("partition", dict(TableName="kv", KeyConditionExpression="pk = :p", ExpressionAttributeValues=p)),
        ("backwards", dict(TableName="kv", KeyConditionExpression="pk = :p", ExpressionAttributeValues=p,
                           ScanIndexForward=False)),
        ("begins_with", dict(TableName="kv", KeyConditionExpression="pk = :p AND begins_with(sk, :s)",
                             ExpressionAttributeValues={**p, ":s": {"S": "n1"}})),
        ("between", dict(TableName="kv", KeyConditionExpression="pk = :p AND sk BETWEEN :a AND :b",
                         ExpressionAttributeValues={**p, ":a": {"S": "n05"}, ":b": {"S": "n15"}})),
        ("filter+projection", dict(TableName="kv", KeyConditionExpression="pk = :p", ExpressionAttributeValues={
            **p, ":z": {"S": "us-east-1b"}}, FilterExpression="#z = :z", ProjectionExpression="sk, #z, tags", ExpressionAttributeNames={"#z": "zone"})),
        ("missing partition", dict(TableName="kv", KeyConditionExpression="pk = :p",
                                   ExpressionAttributeValues={":p": {"S": "Nope#c"}})),
        ("index (unpatched)", dict(TableName="kv", IndexName="by-zone", KeyConditionExpression="#z = :z",
                                   ExpressionAttributeNames={"#z": "zone"}, ExpressionAttributeValues={":z": {"S": "us-east-1a"}})),
        ("number hash, no range", dict(TableName="num", KeyConditionExpression="id = :i",
                                       ExpressionAttributeValues={":i": {"N": "7.0"}})),
    ]
    return calls


def _record_queries(fast: bool) -> dict:
    bodies = {}
    with mock_aws():
        if fast:
            assert moto_speedups.install()
        else:
            moto_speedups.uninstall()
        assert Table.karpenter_lambda_partition_query is fast
        try:
            client = boto3.client("dynamodb", region_name="us-east-1")
            client.create_table(TableName="kv", BillingMode="PAY_PER_REQUEST",
                                AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in ("pk", "sk", "zone")],
                                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                                           {"AttributeName": "sk", "KeyType": "RANGE"}],
                                GlobalSecondaryIndexes=[{"IndexName": "by-zone", "Projection": {"ProjectionType": "ALL"},
                                                         "KeySchema": [{"AttributeName": "zone", "KeyType": "HASH"}]}])
            client.create_table(TableName="num", BillingMode="PAY_PER_REQUEST",
                                AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "N"}],
                                KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}])
            for kind in ("NodeClaim#c", "Node#c", "Pod#c", "NodePool#c"):
                for i in reversed(range(25)):   # written out of order: the answer must come sorted
                    client.put_item(TableName="kv", Item={
                        "pk": {"S": kind}, "sk": {"S": f"n{i:02d}"}, "zone": {"S": f"us-east-1{'abc'[i % 3]}"},
                        "body": {"B": bytes([i]) * 40}, "v": {"N": str(i)},
                        "tags": {"M": {"karpenter.sh/nodepool": {"S": "web"}, "i": {"N": str(i)}}}})
            client.delete_item(TableName="kv", Key={"pk": {"S": "NodeClaim#c"}, "sk": {"S": "n03"}})
            for i in (3, 7, 11):
                client.put_item(TableName="num", Item={"id": {"N": str(i)}, "x": {"S": "y" * i}})
            last = {}
            client.meta.events.register("after-call.dynamodb", lambda http_response, **kw: last.update(body=http_response.content))
            for name, kw in _query_calls():
                client.query(**kw)
                bodies[name] = json.loads(last["body"])
            start, pages = None, []   # every page of a paged Query, each from the last page's key
            while True:
                kw = dict(TableName="kv", KeyConditionExpression="pk = :p", Limit=7,
                          ExpressionAttributeValues={":p": {"S": "Pod#c"}})
                out = client.query(**kw, **({"ExclusiveStartKey": start} if start else {}))
                pages.append(json.loads(last["body"]))
                start = out.get("LastEvaluatedKey")
                if not start:
                    break
            bodies["pages"] = pages
        finally:
            moto_speedups.install()
    return bodies


def test_partition_query_equals_motos_own_query():
    slow, fast = _record_queries(fast=False), _record_queries(fast=True)
    assert fast == slow
    # and the answers are the data, in key order (a broken path could agree on nothing)
    assert [i["sk"]["S"] for i in fast["partition"]["Items"]] == [f"n{i:02d}" for i in range(25) if i != 3]
    assert [i["sk"]["S"] for i in fast["backwards"]["Items"]][0] == "n24"
    assert fast["begins_with"]["Count"] == 10 and fast["between"]["Count"] == 11
    assert fast["filter+projection"]["Count"] == 8 and set(fast["filter+projection"]["Items"][0]) == {"sk", "zone", "tags"}
    assert fast["missing partition"]["Items"] == [] and fast["index (unpatched)"]["Count"] == 35
    assert fast["number hash, no range"]["Items"] == [{"id": {"N": "7"}, "x": {"S": "yyyyyyy"}}]
    assert [len(p["Items"]) for p in fast["pages"]] == [7, 7, 7, 4]


# -- the serializer's attribute names worked out once (sim/moto_speedups_serialize.py) ---------------------------------

def _ec2_world():
    """A VPC with three tagged subnets, launch templates and 21 instances in several reservations, tagged as
    Karpenter tags them (one untagged), one terminated, one a fleet launch; an instance profile and SSM parameters."""
    ec2 = boto3.client("ec2", region_name="us-east-1")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    disc = [{"Key": "karpenter.sh/discovery", "Value": "c"}]
    subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24", AvailabilityZone=f"us-east-1{z}",
                                 TagSpecifications=[{"ResourceType": "subnet", "Tags": disc + [{"Key": "n", "Value": z}]}]
                                 )["Subnet"]["SubnetId"] for i, z in enumerate("abc")]
    sg = ec2.create_security_group(GroupName="nodes", Description="nodes", VpcId=vpc,
                                   TagSpecifications=[{"ResourceType": "security-group", "Tags": disc}])["GroupId"]
    image = ec2.register_image(Name="eks-node", Architecture="x86_64", RootDeviceName="/dev/xvda")["ImageId"]
    for name in ("default", "spot"):
        ec2.create_launch_template(LaunchTemplateName=f"karpenter.k8s.aws/{name}", LaunchTemplateData={
            "ImageId": image, "UserData": "IyEvYmluL2Jhc2gK", "SecurityGroupIds": [sg],
            "MetadataOptions": {"HttpTokens": "required", "HttpPutResponseHopLimit": 1},
            "BlockDeviceMappings": [{"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 20, "VolumeType": "gp3"}}]},
            TagSpecifications=[{"ResourceType": "launch-template", "Tags": disc + [{"Key": "pool", "Value": name}]}])
    ids = []
    for r, count in enumerate((1, 3, 5, 2, 4, 4)):
        tags = [{"Key": "karpenter.sh/nodepool", "Value": "web" if r % 2 else "batch"},
                {"Key": "karpenter.sh/nodeclaim", "Value": f"web-{r}"}, {"Key": "Name", "Value": f"node-{r}"},
                {"Key": "eks:eks-cluster-name", "Value": "c"}, {"Key": "kubernetes.io/cluster/c", "Value": "owned"}]
        out = ec2.run_instances(ImageId=image, MinCount=count, MaxCount=count, InstanceType=("m5.large", "c5.xlarge")[r % 2],
                                SubnetId=subnets[r % 3], SecurityGroupIds=[sg], UserData="#!/bin/bash\necho hi",
                                TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])
        ids += [i["InstanceId"] for i in out["Instances"]]
    ids += [ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]]   # no tags
    ec2.create_fleet(Type="instant", TargetCapacitySpecification={"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "spot"},
                     LaunchTemplateConfigs=[{"LaunchTemplateSpecification": {"LaunchTemplateName": "karpenter.k8s.aws/spot",
                                                                             "Version": "$Latest"},
                                             "Overrides": [{"InstanceType": "m5.large", "SubnetId": subnets[1]}]}],
                     TagSpecifications=[{"ResourceType": "instance", "Tags": disc}])
    ec2.terminate_instances(InstanceIds=[ids[2]])
    ec2.create_tags(Resources=ids[:4], Tags=[{"Key": "karpenter.sh/registered", "Value": "true"}])
    iam = boto3.client("iam", region_name="us-east-1")
    iam.create_role(RoleName="node", AssumeRolePolicyDocument="{}")
    iam.create_instance_profile(InstanceProfileName="c_123", Tags=[{"Key": "karpenter.sh/discovery", "Value": "c"}])
    iam.add_role_to_instance_profile(InstanceProfileName="c_123", RoleName="node")
    ssm = boto3.client("ssm", region_name="us-east-1")
    ssm.put_parameter(Name="/c/ami", Value=image, Type="String")
    return ec2, iam, ssm, ids


def _reads(ec2, iam, ssm, ids):
    web = {"Name": "tag:karpenter.sh/nodepool", "Values": ["web"]}
    return [
        ("all instances", lambda: ec2.describe_instances()),
        ("by tag and state", lambda: ec2.describe_instances(Filters=[web, {"Name": "instance-state-name",
                                                                           "Values": ["pending", "running"]}])),
        ("by tag key", lambda: ec2.describe_instances(Filters=[{"Name": "tag-key", "Values": ["karpenter.sh/registered"]}])),
        ("by id", lambda: ec2.describe_instances(InstanceIds=ids[3:9])),
        ("paged", lambda: ec2.describe_instances(MaxResults=5)),
        ("launch templates", lambda: ec2.describe_launch_templates(Filters=[{"Name": "tag:karpenter.sh/discovery", "Values": ["c"]}])),
        ("launch template versions", lambda: ec2.describe_launch_template_versions(LaunchTemplateName="karpenter.k8s.aws/spot")),
        ("subnets", lambda: ec2.describe_subnets(Filters=[{"Name": "tag:karpenter.sh/discovery", "Values": ["c"]}])),
        ("security groups", lambda: ec2.describe_security_groups(Filters=[{"Name": "tag:karpenter.sh/discovery", "Values": ["c"]}])),
        ("images", lambda: ec2.describe_images(Owners=["self"])),
        ("tags", lambda: ec2.describe_tags(Filters=[{"Name": "resource-id", "Values": ids[:3]}])),
        ("user data", lambda: ec2.describe_instance_attribute(InstanceId=ids[0], Attribute="userData")),
        ("instance profile", lambda: iam.get_instance_profile(InstanceProfileName="c_123")),
        ("parameters", lambda: ssm.get_parameters(Names=["/c/ami", "/c/none"])),
    ]


def test_cached_attribute_names_give_motos_own_responses_byte_for_byte():
    from moto.core.serialize import XFormedAttributePicker

    with mock_aws():
        ec2, iam, ssm, ids = _ec2_world()
        bodies: dict = {True: {}, False: {}}
        last: dict = {}
        for client in (ec2, iam, ssm):
            client.meta.events.register("after-call.*.*", lambda http_response, **kw: last.update(body=http_response.content))
        try:
            for fast in (False, True, False):    # moto's own, the cached names, moto's own again (no state kept)
                moto_speedups.install() if fast else moto_speedups.uninstall()
                assert XFormedAttributePicker.karpenter_lambda_cached_keys is fast
                for name, call in _reads(ec2, iam, ssm, ids):
                    call()
                    body = re.sub(rb"<(requestId|RequestId)>[^<]*</", b"<\\1>-</", last["body"])
                    assert bodies[fast].setdefault(name, body) == body, name
        finally:
            moto_speedups.install()
    assert bodies[True] == bodies[False]
    text = bodies[True]["all instances"].decode()
    assert text.count("<instanceId>") == 21 and text.count("<reservationId>") == 8
    assert "karpenter.sh/registered" in text and "<name>terminated</name>" in text
    assert bodies[True]["paged"].decode().count("<reservationId>") == 5 and b"<nextToken>" in bodies[True]["paged"]
    assert bodies[True]["by id"].decode().count("<instanceId>") == 6
    assert b"c_123" in bodies[True]["instance profile"] and b"/c/none" in bodies[True]["parameters"]
