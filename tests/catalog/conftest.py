"""Catalog fixtures: moto's real EC2 descriptions, fetched once per test session."""

import copy

import boto3
import pytest
from moto import mock_aws

from karpenter_lambda.adapters.aws.ec2_catalog import fetch_instance_types, fetch_offerings
from karpenter_lambda.catalog import PriceBook, build_instance_types

REGION = "us-east-1"


@pytest.fixture(scope="session")
def moto_ec2_data():
    """(raw DescribeInstanceTypes entries, raw availability-zone offerings) from moto.

    mock_aws runs only while fetching; the adapter's per-process cache keeps the answer, so
    later load_catalog calls under a fresh mock_aws do not pay moto's 4-9 s again.
    """
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        raw = fetch_instance_types(ec2)
        offerings = fetch_offerings(ec2)
    return raw, offerings


@pytest.fixture(scope="session")
def raw_by_name(moto_ec2_data):
    return {t["InstanceType"]: t for t in moto_ec2_data[0]}


@pytest.fixture
def raw(raw_by_name):
    """A deep copy of one raw description by name (safe to edit)."""
    return lambda name: copy.deepcopy(raw_by_name[name])


@pytest.fixture(scope="session")
def default_catalog(moto_ec2_data):
    raw, offerings = moto_ec2_data
    types = build_instance_types(raw, offerings, PriceBook.from_bundled(REGION), REGION)
    return {it.name: it for it in types}
