import pytest
from moto import mock_aws

from karpenter_lambda.adapters.store import Store


@pytest.fixture
def aws():
    with mock_aws():
        yield


@pytest.fixture
def store(aws):
    s = Store("test-cluster", table_name="state-test")
    s.ensure_table()
    return s
