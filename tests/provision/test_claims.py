"""LaunchClaims: conditional writes that prevent duplicate launches and limit overshoot (moto DynamoDB)."""

import threading

import boto3
import pytest
from moto import mock_aws

from karpenter_lambda.adapters.store.claims import LaunchClaims

TABLE = "state-claims-test"


@pytest.fixture
def ddb():
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(TableName=TABLE, BillingMode="PAY_PER_REQUEST",
                            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                                  {"AttributeName": "sk", "AttributeType": "S"}],
                            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}])
        yield client


def test_commit_then_duplicate_is_refused(ddb):
    c = LaunchClaims(ddb, "c1", TABLE, clock=lambda: 1000.0)
    r = c.commit("default", "default-abc", {"cpu": 2000, "nodes": 1}, {}, ["u1", "u2"])
    assert r.ok
    again = c.commit("default", "default-abc", {"cpu": 2000, "nodes": 1}, {}, ["u1", "u2"])
    assert not again.ok and again.duplicate
    totals, claims = c.usage("default")
    assert totals == {"cpu": 2000, "nodes": 1}
    assert list(claims) == ["default-abc"]
    assert c.reservations() == {"u1": "default-abc", "u2": "default-abc"}


def test_pod_reserved_by_other_nodeclaim(ddb):
    c = LaunchClaims(ddb, "c1", TABLE, clock=lambda: 1000.0)
    assert c.commit("default", "a", {"cpu": 1000}, {}, ["u1"]).ok
    r = c.commit("default", "b", {"cpu": 1000}, {}, ["u2", "u1"])
    assert not r.ok and r.taken_pods == ["u1"]
    # rolled back: b's claim and its u2 reservation were not written
    totals, claims = c.usage("default")
    assert totals == {"cpu": 1000} and list(claims) == ["a"]
    assert c.reservations() == {"u1": "a"}


def test_expired_reservation_can_be_taken(ddb):
    now = [1000.0]
    c = LaunchClaims(ddb, "c1", TABLE, clock=lambda: now[0], reservation_ttl=60)
    assert c.commit("default", "a", {"cpu": 1000}, {}, ["u1"]).ok
    now[0] += 61
    assert c.reservations() == {}
    assert c.commit("default", "b", {"cpu": 1000}, {}, ["u1"]).ok
    assert c.reservations() == {"u1": "b"}


def test_limits_and_release(ddb):
    c = LaunchClaims(ddb, "c1", TABLE)
    limits = {"cpu": 4000}
    assert c.commit("np", "n1", {"cpu": 2000}, limits, ["u1"]).ok
    assert c.commit("np", "n2", {"cpu": 2000}, limits, ["u2"]).ok
    r = c.commit("np", "n3", {"cpu": 1}, limits, ["u3"])
    assert not r.ok and r.limit_exceeded and "limits reached" in r.message
    assert c.release("np", "n1") is True
    assert c.release("np", "n1") is False  # idempotent
    assert c.usage("np")[0] == {"cpu": 2000}
    assert "u1" not in c.reservations()
    assert c.commit("np", "n3", {"cpu": 2000}, limits, ["u3"]).ok


def test_a_replacement_counts_against_the_limits_as_if_what_it_replaces_were_gone(ddb):
    c = LaunchClaims(ddb, "c1", TABLE)
    limits = {"cpu": 4000, "nodes": 2}
    assert c.commit("np", "old1", {"cpu": 2000, "nodes": 1}, limits, ["u1"]).ok
    assert c.commit("np", "old2", {"cpu": 2000, "nodes": 1}, limits, ["u2"]).ok
    assert c.commit("other", "x", {"cpu": 8000, "nodes": 1}, {}, ["u3"]).ok
    assert c.claimed("np", ["old1", "old2", "old1", "x", "missing"]) == {"cpu": 4000, "nodes": 2}
    assert not c.commit("np", "new", {"cpu": 2000, "nodes": 1}, limits, []).ok          # at the limit
    headroom = c.claimed("np", ["old1"])
    assert c.commit("np", "new", {"cpu": 2000, "nodes": 1}, limits, [], headroom=headroom).ok
    assert c.usage("np")[0] == {"cpu": 6000, "nodes": 3}        # over the limit until old1 goes
    r = c.commit("np", "new2", {"cpu": 2000, "nodes": 1}, limits, [], headroom=headroom)   # old1 freed once only
    assert not r.ok and r.limit_exceeded
    assert "limits reached" in r.message and "the NodeClaims it replaces free cpu 2000, nodes 1" in r.message
    r = c.commit("np", "big", {"cpu": 9000, "nodes": 1}, limits, [], headroom=headroom)
    assert not r.ok and r.limit_exceeded and "limits cpu 4000 < request 9000" in r.message
    assert c.release("np", "old1")
    assert c.usage("np")[0] == {"cpu": 4000, "nodes": 2}


def test_adjust_lowers_usage_to_actual(ddb):
    c = LaunchClaims(ddb, "c1", TABLE)
    assert c.commit("np", "n1", {"cpu": 8000, "memory": 32}, {"cpu": 10000}, ["u1"]).ok
    c.adjust("np", "n1", {"cpu": 2000, "memory": 8})
    totals, claims = c.usage("np")
    assert totals == {"cpu": 2000, "memory": 8}
    assert claims["n1"]["resources"] == {"cpu": 2000, "memory": 8}


def test_concurrent_commits_never_exceed_limit(ddb):
    from karpenter_lambda.sim.world import atomic_aws_requests

    c = LaunchClaims(ddb, "c1", TABLE)
    results = []
    lock = threading.Lock()

    def worker(i):
        r = c.commit("np", f"n{i}", {"cpu": 1000, "nodes": 1}, {"cpu": 5000}, [f"u{i}"])
        with lock:
            results.append(r.ok)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(12)]
    with atomic_aws_requests():  # each DynamoDB request atomic, as in AWS (moto alone is not thread-safe)
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert results.count(True) == 5
    assert c.usage("np")[0]["cpu"] == 5000
