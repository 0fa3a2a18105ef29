"""sim/moto_speedups_xml: moto's XML responses written directly must be xmltodict's text, byte for byte: on every
body a run of EC2 and IAM calls hands the serializer, and on the edge cases of xmltodict's rules (empty and None
values, booleans, numbers, escapes, attributes, quotes, empty lists, tuples, several roots, bad names)."""

from __future__ import annotations

import boto3
import pytest
import xmltodict
from moto import mock_aws
from moto.core import serialize

from karpenter_lambda.sim import moto_speedups_xml

REGION = "us-east-1"


def _bodies() -> list[tuple[dict, dict]]:
    """(body, keyword arguments) of every xmltodict.unparse call a run of EC2 and IAM calls makes."""
    seen: list = []
    moto_speedups_xml.uninstall()
    real = serialize.xmltodict.unparse

    class Recorder:
        def __getattr__(self, name):
            return getattr(xmltodict, name)

        @staticmethod
        def unparse(body, **kwargs):
            seen.append((body, dict(kwargs)))
            return real(body, **kwargs)

    serialize.xmltodict = Recorder()
    try:
        with mock_aws():
            ec2 = boto3.client("ec2", region_name=REGION)
            iam = boto3.client("iam", region_name=REGION)
            vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
            subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.1.0/24", AvailabilityZone="us-east-1b",
                                       TagSpecifications=[{"ResourceType": "subnet", "Tags": [
                                           {"Key": "Name", "Value": "a & <b> \"c\" 'd'"}]}])["Subnet"]["SubnetId"]
            ec2.create_security_group(GroupName="g", Description="x < y & z", VpcId=vpc)
            ec2.create_launch_template(LaunchTemplateName="lt", LaunchTemplateData={
                "ImageId": "ami-12c6146b", "UserData": "IyEvYmluL2Jhc2gK",
                "MetadataOptions": {"HttpTokens": "required", "HttpPutResponseHopLimit": 1},
                "BlockDeviceMappings": [{"DeviceName": "/dev/xvda", "Ebs": {"VolumeSize": 20, "VolumeType": "gp3",
                                                                             "Encrypted": True}}]})
            ids = [i["InstanceId"] for i in ec2.run_instances(
                ImageId="ami-12c6146b", MinCount=3, MaxCount=3, InstanceType="m5.large", SubnetId=subnet,
                TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "k", "Value": ""},
                                                                         {"Key": "n", "Value": "1"}]}])["Instances"]]
            ec2.describe_instances()
            ec2.describe_instances(Filters=[{"Name": "tag:n", "Values": ["1"]}])
            ec2.describe_instance_attribute(InstanceId=ids[0], Attribute="userData")
            ec2.describe_subnets()
            ec2.describe_security_groups()
            ec2.describe_launch_templates()
            ec2.describe_instance_types(InstanceTypes=["m5.large", "g5.xlarge"])
            ec2.terminate_instances(InstanceIds=ids[:1])
            ec2.describe_instances(InstanceIds=ids[:1])
            with pytest.raises(Exception):
                ec2.describe_instances(InstanceIds=["i-00000000000000000"])   # an error body too
            iam.create_role(RoleName="r", AssumeRolePolicyDocument='{"Version": "2012-10-17"}')
            iam.create_instance_profile(InstanceProfileName="p")
            iam.add_role_to_instance_profile(InstanceProfileName="p", RoleName="r")
            iam.get_instance_profile(InstanceProfileName="p")
            iam.list_roles()
    finally:
        serialize.xmltodict = xmltodict
        moto_speedups_xml.install()   # as the rest of the session runs (tests/conftest installs the speedups)
    return seen


def _same(body, **kwargs) -> None:
    want = xmltodict.unparse(body, **kwargs)
    got = moto_speedups_xml.unparse(xmltodict.unparse, body, **kwargs)
    assert got == want


def test_every_body_moto_writes_is_written_the_same():
    bodies = _bodies()
    assert len(bodies) >= 18
    assert any("DescribeInstancesResponse" in b for b, _ in bodies)
    assert any(not kw.get("full_document", True) for _, kw in bodies)   # IAM's bodies: no prolog
    for body, kwargs in bodies:
        _same(body, **kwargs)


EDGES = [
    {"R": None},
    {"R": ""},
    {"R": {}},
    {"R": {"a": None, "b": "", "c": [], "d": True, "e": False, "f": 0, "g": 1.5, "h": "x"}},
    {"R": {"t": "a & b < c > d \" e ' f", "u": "caf\u00e9 \u2603"}},
    {"R": {"@id": "1", "@q": "it's \"quoted\"", "@n": None, "@b": True, "#text": "body"}},
    {"R": {"@only": "attr"}},
    {"R": {"#text": ""}},
    {"R": {"#text": None, "x": "1"}},
    {"R": {"item": ["a", "", None, {"k": "v"}, 3, False]}},
    {"R": {"item": ("a", "b")}},
    {"R": {"item": ()}},
    {"R": {"nested": {"deeper": {"deepest": [{"v": "1"}, {"v": "2"}]}}}},
    {"R": {"bad name": "x"}},
    {"R": {"#comment": "c", "x": "1"}},
    {"R": {"x": b"bytes"}},
    {"R": {"x": [["nested", "list"]]}},
    {"R": {"@xmlns": {"a": "urn:a"}, "x": "1"}},
    {"A": "1", "B": "2"},
    {"R": ["one", "two"]},
    {"R": {1: "int key"}},
]


@pytest.mark.parametrize("body", EDGES, ids=[str(i) for i in range(len(EDGES))])
@pytest.mark.parametrize("full_document", [True, False])
def test_edge_cases_are_written_as_xmltodict_writes_them(body, full_document):
    try:
        want = xmltodict.unparse(body, full_document=full_document, short_empty_elements=True, pretty=False)
    except ValueError as e:
        with pytest.raises(ValueError, match=str(e)[:20]):
            moto_speedups_xml.unparse(xmltodict.unparse, body, full_document=full_document,
                                      short_empty_elements=True, pretty=False)
        return
    assert moto_speedups_xml.unparse(xmltodict.unparse, body, full_document=full_document,
                                     short_empty_elements=True, pretty=False) == want


def test_a_generator_reaches_xmltodict_unread():
    def body():
        return {"R": {"item": (x for x in ("a", "b")), "after": b"bytes: xmltodict writes the rest"}}
    assert moto_speedups_xml.unparse(xmltodict.unparse, body(), full_document=True, short_empty_elements=True,
                                     pretty=False) == xmltodict.unparse(body(), full_document=True,
                                                                        short_empty_elements=True, pretty=False)


def test_other_arguments_are_xmltodicts_own():
    body = {"R": {"a": "1", "b": None}}
    for kwargs in ({"pretty": True, "short_empty_elements": True}, {"short_empty_elements": False}, {}):
        assert moto_speedups_xml.unparse(xmltodict.unparse, body, **kwargs) == xmltodict.unparse(body, **kwargs)


def test_installed_once_and_removed_cleanly():
    try:
        moto_speedups_xml.uninstall()
        assert serialize.xmltodict is xmltodict
        assert moto_speedups_xml.install() and moto_speedups_xml.install()
        assert serialize.xmltodict is not xmltodict
        assert serialize.xmltodict.unparse({"R": "x"}, full_document=True, short_empty_elements=True) == \
            xmltodict.unparse({"R": "x"}, full_document=True, short_empty_elements=True)
        moto_speedups_xml.uninstall()
        assert serialize.xmltodict is xmltodict
    finally:
        moto_speedups_xml.install()
