"""Table name, region and endpoint from the environment; environment errors say what to fix."""

import socket

import pytest
from store_objects import nodepool

from karpenter_lambda.adapters.store import Store, StoreUnavailable


def test_defaults(monkeypatch):
    for var in ("KARPENTER_LAMBDA_STATE_TABLE", "KARPENTER_LAMBDA_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL", "AWS_REGION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    s = Store("c")
    assert (s.table_name, s.region, s.endpoint_url) == ("karpenter-lambda-state", "eu-west-1", None)
    assert s.model.Meta.table_name == "karpenter-lambda-state" and s.model.Meta.region == "eu-west-1"


def test_env_overrides_and_explicit_arguments_win(monkeypatch):
    monkeypatch.setenv("KARPENTER_LAMBDA_STATE_TABLE", "from-env")
    monkeypatch.setenv("AWS_REGION", "ap-south-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:1")
    monkeypatch.setenv("KARPENTER_LAMBDA_ENDPOINT_URL", "http://127.0.0.1:2")
    s = Store("c")
    assert (s.table_name, s.region, s.endpoint_url) == ("from-env", "ap-south-1", "http://127.0.0.1:2")
    assert s.model.Meta.host == "http://127.0.0.1:2"
    monkeypatch.delenv("KARPENTER_LAMBDA_ENDPOINT_URL")
    assert Store("c").endpoint_url == "http://127.0.0.1:1"
    s = Store("c", table_name="arg", region="us-west-2", endpoint_url="http://localhost:3")
    assert (s.table_name, s.region, s.endpoint_url) == ("arg", "us-west-2", "http://localhost:3")


def test_env_table_is_used_for_writes(aws, monkeypatch):
    monkeypatch.setenv("KARPENTER_LAMBDA_STATE_TABLE", "env-table")
    s = Store("c")
    assert s.ensure_table() is True
    s.create(nodepool())
    assert Store("c", table_name="env-table").get("NodePool", "default") is not None


def test_missing_table_says_how_to_fix(aws):
    s = Store("c", table_name="never-created")
    assert s.table_exists() is False
    with pytest.raises(StoreUnavailable) as e:
        s.get("NodePool", "default")
    assert "state table never-created does not exist" in str(e.value)
    assert "--create-table" in str(e.value)
    with pytest.raises(StoreUnavailable):
        s.create(nodepool())


def test_unreachable_endpoint_says_so():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    s = Store("c", table_name="t", endpoint_url=f"http://127.0.0.1:{port}")
    with pytest.raises(StoreUnavailable) as e:
        s.list("NodePool")
    assert f"cannot reach DynamoDB at http://127.0.0.1:{port}: is moto_server running?" in str(e.value)
