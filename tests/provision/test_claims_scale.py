"""LaunchClaims at scale and under non-condition failures (moto DynamoDB; failures injected with botocore hooks).
moto's TransactWriteItems copies the table once per action to roll back; tests/conftest installs
sim/moto_speedups_transact (the transaction undone in place instead), without which the 400 claims take minutes.

Issue 21 defect 5: one usage item per NodePool held every claim's resources and pod uids, so it filled DynamoDB's
400 KB item limit at about 300 NodeClaims of 30 pods and every later launch in the NodePool failed for good; and any
cancelled transaction (item too large, TransactionConflict, throttling) was read as a conflict with other NodeClaims.
"""

import json
import threading

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from moto import mock_aws

from karpenter_lambda.adapters.store.claims import ClaimsUnavailable, LaunchClaims

TABLE = "state-claims-scale"


@pytest.fixture
def ddb():
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(TableName=TABLE, BillingMode="PAY_PER_REQUEST",
                            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                                  {"AttributeName": "sk", "AttributeType": "S"}],
                            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}])
        yield client


def _uid(i: int, j: int) -> str:
    return f"{i:08d}-{j:04d}-4a2b-9c3d-0123456789ab"   # the length of a Kubernetes pod uid (36)


# 400 claims of 30 pods: 12,000 pod uids (432 KB of them alone) -- past DynamoDB's 400 KB item limit, which is what
# a design keeping the claims in the NodePool's usage item would hit; here the usage item holds counters only
N_CLAIMS = 400


def test_hundreds_of_claims_of_thirty_pods_in_one_nodepool_commit(ddb):
    n = N_CLAIMS
    c = LaunchClaims(ddb, "c1", TABLE, clock=lambda: 1000.0)
    limits = {"cpu": n * 4000, "nodes": n}
    for i in range(n):
        r = c.commit("default", f"default-{i:05d}", {"cpu": 4000, "memory": 16 * 2**30, "nodes": 1}, limits,
                     [_uid(i, j) for j in range(30)])
        assert r.ok, f"claim {i}: {r.message}"
    totals, claims = c.usage("default")
    assert totals == {"cpu": n * 4000, "memory": n * 16 * 2**30, "nodes": n}
    assert len(claims) == n and len(claims[f"default-{n - 1:05d}"]["pods"]) == 30
    assert 36 * 30 * n > 400 * 1024    # the claims' pod uids alone would not fit one DynamoDB item
    # the limit still holds exactly at the edge, and a redelivery still launches nothing
    over = c.commit("default", "default-x", {"cpu": 4000, "nodes": 1}, limits, ["u-x"])
    assert not over.ok and over.limit_exceeded and "limits reached" in over.message
    again = c.commit("default", "default-00200", {"cpu": 4000, "memory": 16 * 2**30, "nodes": 1}, limits,
                     [_uid(200, j) for j in range(30)])
    assert not again.ok and again.duplicate
    # the NodePool usage item holds counters only: small whatever the number of claims
    item = ddb.get_item(TableName=TABLE, Key={"pk": {"S": "c1#NodePoolUsage"}, "sk": {"S": "default"}})["Item"]
    assert set(item) == {"pk", "sk", "usage:cpu", "usage:memory", "usage:nodes"}
    assert c.release("default", "default-00000") is True
    assert c.usage("default")[0]["nodes"] == n - 1
    assert c.commit("default", "default-x", {"cpu": 4000, "nodes": 1}, limits, ["u-x"]).ok


def _cancel_transactions(client, codes_per_call: list[list[str]]):
    """Answer the next TransactWriteItems calls with TransactionCanceledException carrying these reason codes."""
    calls = {"n": 0}

    def hook(params, **_):
        if calls["n"] >= len(codes_per_call):
            return None
        codes = codes_per_call[calls["n"]]
        calls["n"] += 1
        items = json.loads(params["body"])["TransactItems"]
        reasons = [{"Code": codes[i] if i < len(codes) else "None"} for i in range(len(items))]
        body = {"Error": {"Code": "TransactionCanceledException",
                          "Message": f"Transaction cancelled, please refer cancellation reasons for specific reasons [{', '.join(r['Code'] for r in reasons)}]"},
                "CancellationReasons": reasons,
                "ResponseMetadata": {"HTTPStatusCode": 400, "HTTPHeaders": {}}}
        return AWSResponse("https://dynamodb", 400, {}, None), body

    client.meta.events.register("before-call.dynamodb.TransactWriteItems", hook)
    return calls


def test_transaction_conflict_is_retried_not_read_as_taken_pods(ddb):
    c = LaunchClaims(ddb, "c1", TABLE, sleep=lambda s: None)
    calls = _cancel_transactions(ddb, [["None", "TransactionConflict", "None"]] * 2)
    r = c.commit("np", "n1", {"cpu": 1000, "nodes": 1}, {"cpu": 4000}, ["u1"])
    assert r.ok and calls["n"] == 2            # two conflicts, then committed
    assert c.usage("np")[0] == {"cpu": 1000, "nodes": 1}
    assert c.reservations() == {"u1": "n1"}


def test_non_condition_cancellation_raises_a_retryable_error(ddb):
    c = LaunchClaims(ddb, "c1", TABLE, sleep=lambda s: None)
    _cancel_transactions(ddb, [["ValidationError", "None", "None"]])
    with pytest.raises(ClaimsUnavailable) as err:
        c.commit("np", "n1", {"cpu": 1000}, {}, ["u1"])
    msg = str(err.value)
    assert "ValidationError" in msg and "not a conflict" in msg and "n1" in msg
    assert "pods reserved" not in msg
    _cancel_transactions(ddb, [["ThrottlingError"] * 3] * 10)
    with pytest.raises(ClaimsUnavailable, match="ThrottlingError.*after 5 attempt"):
        c.commit("np", "n2", {"cpu": 1000}, {}, ["u2"])
    assert c.usage("np") == ({}, {}) and c.reservations() == {}


def test_condition_failures_are_told_apart(ddb):
    c = LaunchClaims(ddb, "c1", TABLE)
    assert c.commit("np", "a", {"cpu": 1000}, {"cpu": 1500}, ["u1"]).ok
    dup = c.commit("np", "a", {"cpu": 1000}, {"cpu": 1500}, ["u1"])
    assert dup.duplicate and not dup.limit_exceeded and not dup.taken_pods
    lim = c.commit("np", "b", {"cpu": 1000}, {"cpu": 1500}, ["u2"])
    assert lim.limit_exceeded and lim.taken_pods == [] and "cpu 1000/1500" in lim.message
    taken = c.commit("np", "b", {"cpu": 500}, {"cpu": 1500}, ["u2", "u1"])
    assert not taken.ok and taken.taken_pods == ["u1"] and not taken.limit_exceeded


def test_release_and_adjust_race_without_losing_counts(ddb):
    from karpenter_lambda.sim.world import atomic_aws_requests

    c = LaunchClaims(ddb, "c1", TABLE)
    for i in range(8):
        assert c.commit("np", f"n{i}", {"cpu": 4000, "nodes": 1}, {}, [f"u{i}"]).ok
    threads = [threading.Thread(target=c.adjust, args=("np", f"n{i}", {"cpu": 2000, "nodes": 1})) for i in range(8)]
    threads += [threading.Thread(target=c.release, args=("np", f"n{i}")) for i in range(0, 8, 2)]
    with atomic_aws_requests():
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    totals, claims = c.usage("np")
    assert sorted(claims) == ["n1", "n3", "n5", "n7"]
    assert totals == {"cpu": sum(int(x["resources"]["cpu"]) for x in claims.values()), "nodes": 4}
    assert all(x["resources"]["cpu"] == 2000 for x in claims.values())


def test_release_of_a_missing_claim_is_false(ddb):
    c = LaunchClaims(ddb, "c1", TABLE)
    assert c.release("np", "never") is False


def test_a_claim_written_by_the_older_layout_is_still_listed_and_released(ddb):
    # the layout before issue 21: the claim as an attribute of the NodePool usage item
    ddb.put_item(TableName=TABLE, Item={
        "pk": {"S": "c1#NodePoolUsage"}, "sk": {"S": "np"}, "usage:cpu": {"N": "3000"}, "usage:nodes": {"N": "2"},
        "claim:old-1": {"S": json.dumps({"resources": {"cpu": 2000, "nodes": 1}, "pods": ["u-old"], "at": 5.0})}})
    c = LaunchClaims(ddb, "c1", TABLE)
    assert c.commit("np", "new-1", {"cpu": 1000, "nodes": 1}, {"cpu": 5000}, ["u-new"]).ok
    assert set(c.all_usage()["np"][1]) == {"old-1", "new-1"}
    assert c.release("np", "old-1") is True and c.release("np", "old-1") is False
    totals, claims = c.usage("np")
    assert totals == {"cpu": 2000, "nodes": 2} and list(claims) == ["new-1"]
