"""The offline catalog source (``moto-bundled``): moto's data files read directly give the very catalog
that boto3 + mock_aws gives (raw dicts, zone ids, InstanceType objects with offerings and prices);
selection by argument and by $KARPENTER_LAMBDA_CATALOG_SOURCE; unknown regions; plan without moto."""

import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from karpenter_lambda.adapters.aws import moto_catalog
from karpenter_lambda.adapters.aws.ec2_catalog import (
    SOURCE_ENV,
    catalog_source,
    fetch_zone_ids,
    load_catalog,
)
from karpenter_lambda.api.objects import EC2NodeClass
from karpenter_lambda.cloudprovider.catalog import default_catalog_loader

REGION = "us-east-1"
REPO = Path(__file__).resolve().parents[2]
SAMPLE = ["m5.large", "c6g.xlarge", "t3.micro", "g4dn.xlarge", "p4d.24xlarge", "inf2.xlarge", "hpc7g.4xlarge",
          "u-6tb1.56xlarge", "m7i-flex.large", "i4i.metal", "mac1.metal", "trn1.32xlarge"]


@pytest.fixture(autouse=True)
def _no_source_env(monkeypatch):
    monkeypatch.delenv(SOURCE_ENV, raising=False)


def _view(it):
    return {"name": it.name, "labels": it.labels, "capacity": it.capacity, "overhead": it.overhead,
            "allocatable": it.allocatable, "offerings": it.offerings}


# --- raw dicts -------------------------------------------------------------------------------------


def test_instance_type_dicts_are_the_boto3_dicts(moto_ec2_data):
    via_boto3, _ = moto_ec2_data
    bundled = moto_catalog.instance_types()
    assert [t["InstanceType"] for t in bundled] == [t["InstanceType"] for t in via_boto3]  # same types, same order
    by_name = {t["InstanceType"]: t for t in bundled}
    for name in SAMPLE:
        assert by_name[name] == next(t for t in via_boto3 if t["InstanceType"] == name), name
    assert bundled == via_boto3  # and every one of the 1,395
    m5 = by_name["m5.large"]  # the parsed types: ints, floats, bools, lists
    assert m5["VCpuInfo"]["DefaultVCpus"] == 2 and type(m5["VCpuInfo"]["DefaultVCpus"]) is int
    assert m5["BareMetal"] is False and m5["ProcessorInfo"]["SupportedArchitectures"] == ["x86_64"]
    assert type(m5["NetworkInfo"]["NetworkCards"][0]["BaselineBandwidthInGbps"]) is float


def test_offering_dicts_are_the_boto3_dicts(moto_ec2_data):
    _, via_boto3 = moto_ec2_data
    bundled = moto_catalog.offerings(REGION)
    assert bundled == via_boto3
    assert {"InstanceType": "m5.large", "LocationType": "availability-zone", "Location": "us-east-1a"} in bundled


def test_offerings_of_a_few_types_and_zone_ids_per_region():
    types = ["m5.large", "c6g.xlarge", "p4d.24xlarge", "t3.micro", "r7g.2xlarge"]
    with mock_aws():
        for region in ["us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-east-2"]:
            ec2 = boto3.client("ec2", region_name=region)
            pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
                LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": types}])
            via_boto3 = [o for p in pages for o in p["InstanceTypeOfferings"]]
            assert [o for o in moto_catalog.offerings(region) if o["InstanceType"] in types] == via_boto3, region
            assert moto_catalog.zone_ids(region) == fetch_zone_ids(ec2), region
            assert bool(via_boto3) == (region != "ap-east-2")  # a real region without moto data: none either way


def test_zone_ids_match_moto_for_every_region():
    from moto.ec2.models.availability_zones_and_regions import RegionsAndZonesBackend

    for region in moto_catalog.known_regions():
        expected = {z.name: z.zone_id for z in RegionsAndZonesBackend.zones.get(region, [])}
        assert moto_catalog.zone_ids(region) == expected, region


def test_offerings_match_moto_for_every_region_with_data():
    from moto.ec2.models.instance_types import INSTANCE_TYPE_OFFERINGS

    for location_type, by_region in INSTANCE_TYPE_OFFERINGS.items():
        for region, entries in by_region.items():
            assert moto_catalog.offerings(region, location_type) == entries, (location_type, region)


def test_known_regions_are_botocores():
    s = boto3.session.Session()
    expected = {r for p in s.get_available_partitions() for r in s.get_available_regions("ec2", partition_name=p)}
    assert moto_catalog.known_regions() == expected
    assert {"us-east-1", "us-gov-west-1", "cn-north-1"} <= expected


def test_callers_get_their_own_lists():
    first = moto_catalog.instance_types()
    first.pop()
    assert len(moto_catalog.instance_types()) == 1395
    offers = moto_catalog.offerings(REGION)
    offers.clear()
    assert moto_catalog.offerings(REGION)


# --- InstanceType objects --------------------------------------------------------------------------


def test_catalogs_are_identical(moto_ec2_data):
    nc = EC2NodeClass({"kind": "EC2NodeClass", "metadata": {"name": "br"},
                       "spec": {"role": "r", "amiSelectorTerms": [{"alias": "bottlerocket@latest"}], "kubelet": {"maxPods": 40}}})
    unavailable = {("c5.large", "us-east-1a", "spot"), ("m5.large", "us-east-1b", "on-demand")}
    variants = ({}, {"nodeclass": nc, "unavailable": unavailable, "zones": ["us-east-1a", "us-east-1b"]})
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        via_boto3_runs = [load_catalog(ec2, REGION, source="ec2", **kwargs) for kwargs in variants]
    for kwargs, via_boto3 in zip(variants, via_boto3_runs):
        bundled = load_catalog(None, REGION, source="moto-bundled", **kwargs)
        assert [it.name for it in bundled] == [it.name for it in via_boto3]
        assert len(bundled) > 1300
        b = {it.name: it for it in bundled}
        for it in via_boto3:
            assert _view(b[it.name]) == _view(it), it.name
        m5 = {(o.zone, o.capacity_type): o for o in b["m5.large"].offerings}
        assert m5[("us-east-1a", "on-demand")].zone_id == "use1-az6"
        assert m5[("us-east-1a", "on-demand")].price_source == "bundled"
        assert m5[("us-east-1a", "spot")].price_source == "spot-estimate"
    assert b["m5.large"].capacity["pods"] == 40
    assert not m5[("us-east-1b", "on-demand")].available


# --- selection -------------------------------------------------------------------------------------


def test_source_selection(monkeypatch):
    assert catalog_source() == "ec2"
    assert catalog_source("moto-bundled") == "moto-bundled"
    monkeypatch.setenv(SOURCE_ENV, "moto-bundled")
    assert catalog_source() == "moto-bundled"
    assert catalog_source("ec2") == "ec2"  # the argument wins
    monkeypatch.setenv(SOURCE_ENV, "moto")
    with pytest.raises(ValueError, match=f"\\${SOURCE_ENV}='moto'"):
        catalog_source()
    with pytest.raises(ValueError, match="source='nope'"):
        catalog_source("nope")


def test_env_var_selects_the_bundled_source(monkeypatch):
    with pytest.raises(ValueError, match="session_or_clients"):  # the describe path needs a client
        load_catalog(None, REGION)
    monkeypatch.setenv(SOURCE_ENV, "moto-bundled")
    types = {it.name: it for it in load_catalog(None, REGION)}  # no client, no mock_aws: moto's files
    assert types["m5.large"].capacity["pods"] == 29
    with pytest.raises(ValueError, match="session_or_clients"):
        load_catalog(None, REGION, source="ec2")


def test_provisioner_catalog_loader_follows_the_env_var(monkeypatch):
    """controllers' default_catalog_loader calls load_catalog({"ec2": ec2, "pricing": p}, ...): with the variable
    set it works without any EC2 endpoint (an EC2 client would be needed otherwise)."""
    monkeypatch.setenv(SOURCE_ENV, "moto-bundled")
    unavailable = {("offline-source.test", "us-east-1a", "spot")}  # a key of its own in the loader's cache
    types = default_catalog_loader(None, REGION, None, ["us-east-1c"], unavailable)
    assert {o.zone for it in types for o in it.offerings} == {"us-east-1c"}
    assert next(it for it in types if it.name == "m5.large").offerings[0].zone_id == "use1-az2"


# --- regions ---------------------------------------------------------------------------------------


def test_unknown_region_raises_key_error_as_moto_does():
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="mars-1")
        with pytest.raises(KeyError) as via_boto3:
            load_catalog(ec2, "mars-1", source="ec2")
    with pytest.raises(KeyError) as bundled:
        load_catalog(None, "mars-1", source="moto-bundled")
    assert str(bundled.value) == str(via_boto3.value) == "'mars-1'"


def test_region_without_data_has_no_offerings():
    types = load_catalog(None, "ap-east-2", source="moto-bundled")
    assert not any(it.offerings for it in types)


def test_offline_plan_needs_neither_moto_nor_boto3():
    code = ("import sys, io, contextlib\n"
            "from karpenter_lambda.cli.main import main\n"
            "out = io.StringIO()\n"
            "with contextlib.redirect_stdout(out):\n"
            "    rc = main(['plan', '-f', 'examples/default.yaml', '-f', 'examples/workloads/web.yaml', '--json'])\n"
            "assert rc == 0 and '\"nodeClaims\"' in out.getvalue(), (rc, out.getvalue())\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('moto', 'boto3', 'botocore')))\n")
    env = {k: v for k, v in os.environ.items() if k != SOURCE_ENV}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
