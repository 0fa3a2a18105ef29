"""The DynamoDB-backed unavailable-offerings cache."""

import pytest

from karpenter_lambda.adapters.aws.unavailable import DEFAULT_CACHE_TABLE, UnavailableOfferings


class Clock:
    t = 5000.0

    def __call__(self):
        return self.t


@pytest.fixture
def cache(env):
    c = UnavailableOfferings(clock=Clock(), cluster_name="c1", client=env.ddb)
    c.ensure_table()
    c.ensure_table()  # idempotent
    return c


def test_table_defaults_and_env(env, monkeypatch):
    assert UnavailableOfferings(client=env.ddb).table_name == DEFAULT_CACHE_TABLE
    monkeypatch.setenv("KARPENTER_LAMBDA_CACHE_TABLE", "my-cache")
    assert UnavailableOfferings(client=env.ddb).table_name == "my-cache"
    assert UnavailableOfferings(table_name="explicit", client=env.ddb).table_name == "explicit"


def test_table_shape(cache, env):
    d = env.ddb.describe_table(TableName=cache.table_name)["Table"]
    assert {k["AttributeName"]: k["KeyType"] for k in d["KeySchema"]} == {"pk": "HASH", "sk": "RANGE"}
    ttl = env.ddb.describe_time_to_live(TableName=cache.table_name)["TimeToLiveDescription"]
    assert ttl.get("AttributeName") == "ttl" and ttl.get("TimeToLiveStatus") == "ENABLED"


def test_mark_all_expiry_and_remark_extends(cache):
    cache.mark("c5.large", "us-east-1a", "spot", "InsufficientInstanceCapacity: x")
    cache.clock.t += 100
    cache.mark("m5.large", "us-east-1b", "on-demand")
    assert cache.all() == {("c5.large", "us-east-1a", "spot"), ("m5.large", "us-east-1b", "on-demand")}
    cache.clock.t += 81  # c5 expired (181 s), m5 not (81 s)
    assert cache.all() == {("m5.large", "us-east-1b", "on-demand")}
    cache.mark("m5.large", "us-east-1b", "on-demand", "again")  # extends to now + 180
    cache.clock.t += 150
    assert cache.is_unavailable("m5.large", "us-east-1b", "on-demand")
    assert cache.entries()[0]["reason"] == "again"
    cache.clear("m5.large", "us-east-1b", "on-demand")
    assert cache.all() == set()


def test_clusters_are_separate_and_many_marks_batch(cache, env):
    other = UnavailableOfferings(clock=cache.clock, cluster_name="c2", client=env.ddb)
    cache.mark_many([(f"t{i}.large", "us-east-1a", "spot") for i in range(60)], "bulk")
    assert len(cache.all()) == 60 and other.all() == set()


def test_bad_input_is_a_clear_error(cache):
    with pytest.raises(ValueError, match="zone must be a non-empty string"):
        cache.mark("m5.large", "", "spot")
    with pytest.raises(ValueError, match="ttl_seconds must be positive"):
        UnavailableOfferings(ttl_seconds=0, client=cache.client)
