"""Issue 22: the launch claims live in adapters/store (one table-name definition), and boto3 clients are made in
adapters/aws/clients.py."""

from __future__ import annotations

from karpenter_lambda.adapters import store
from karpenter_lambda.adapters.aws import clients
from karpenter_lambda.adapters.store import claims, models, tables


def test_table_names_have_one_definition(monkeypatch):
    monkeypatch.delenv(tables.STATE_TABLE_ENV, raising=False)
    assert tables.state_table_name() == "karpenter-lambda-state" == tables.DEFAULT_STATE_TABLE
    monkeypatch.setenv(tables.STATE_TABLE_ENV, "t-from-env")
    assert tables.state_table_name() == "t-from-env" and tables.state_table_name("explicit") == "explicit"
    assert claims.LaunchClaims(None, "c1").table == "t-from-env"
    assert models.state_table_name is tables.state_table_name and store.DEFAULT_CACHE_TABLE == "karpenter-lambda-cache"


def test_launch_claims_are_exported_by_the_store_package():
    assert store.LaunchClaims is claims.LaunchClaims
    assert store.ClaimsUnavailable is claims.ClaimsUnavailable


def test_clients_get_the_botocore_settings_and_the_endpoint():
    cfg = clients.botocore_config("adaptive", 4, 2.0, 9.0)
    assert cfg.retries == {"mode": "adaptive", "total_max_attempts": 4}
    assert (cfg.connect_timeout, cfg.read_timeout) == (2.0, 9.0)
    session = clients.make_session("eu-west-1")
    c = clients.make_client(session, "sqs", cfg, "http://127.0.0.1:5999")
    assert c.meta.endpoint_url == "http://127.0.0.1:5999" and c.meta.region_name == "eu-west-1"
    assert c.meta.config.read_timeout == 9.0
    explicit = clients.make_client(session, "sqs", cfg, "http://127.0.0.1:5999", endpoint_url="http://127.0.0.1:6000")
    assert explicit.meta.endpoint_url == "http://127.0.0.1:6000"
    assert clients.make_client(session, "sqs", cfg).meta.endpoint_url.startswith("https://")
