"""sim/moto_speedups_transact: TransactWriteItems rolled back from a copy of only the items it names must leave the
tables and give the answers moto's own (a deep copy of every table named) gives: transactions that succeed, fail a
condition after earlier writes in the same transaction, name one item twice, or name a missing table; then more
writes on the rolled-back tables."""

from __future__ import annotations

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends

from karpenter_lambda.sim import moto_speedups, moto_speedups_transact

REGION = "us-east-1"


def _key(pk: str, sk: str | None = None) -> dict:
    return {"pk": {"S": pk}, **({"sk": {"S": sk}} if sk is not None else {})}


def _put(table: str, pk: str, sk: str | None, **attrs) -> dict:
    return {"Put": {"TableName": table, "Item": {**_key(pk, sk), **{k: {"S": v} for k, v in attrs.items()}}}}


def _update(table: str, pk: str, sk: str | None, value: str) -> dict:
    return {"Update": {"TableName": table, "Key": _key(pk, sk), "UpdateExpression": "SET v = :v, n = if_not_exists(n, :z) + :one",
                       "ExpressionAttributeValues": {":v": {"S": value}, ":z": {"N": "0"}, ":one": {"N": "1"}}}}


def _delete(table: str, pk: str, sk: str | None) -> dict:
    return {"Delete": {"TableName": table, "Key": _key(pk, sk)}}


def _check(table: str, pk: str, sk: str | None, value: str, *, all_old: bool = False) -> dict:
    op = {"TableName": table, "Key": _key(pk, sk), "ConditionExpression": "v = :v",
          "ExpressionAttributeValues": {":v": {"S": value}}}
    if all_old:
        op["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    return {"ConditionCheck": op}


TRANSACTIONS = [
    # succeeds: a new item, one changed in place, one removed, one read
    [_put("t", "a", "9", v="new"), _update("t", "a", "1", "one"), _delete("t", "b", "1"), _check("h", "x", None, "x0"),
     _update("h", "y", None, "why")],
    # fails on its last condition after a write, an in-place update and a delete in both tables: all rolled back
    [_update("t", "a", "1", "changed"), _delete("t", "a", "2"), _put("t", "c", "1", v="c"), _delete("h", "x", None),
     _update("h", "z", None, "zed"), _check("t", "a", "3", "nope", all_old=True)],
    # one item named twice (after an update): ValidationException, rolled back
    [_update("t", "a", "3", "three"), _update("h", "y", None, "again"), _check("t", "a", "3", "three")],
    # a table that does not exist, after a write
    [_update("t", "a", "3", "x"), _put("missing", "q", None, v="q")],
    # succeeds after the rollbacks
    [_update("t", "a", "2", "two"), _put("h", "w", None, v="w"), _delete("t", "a", "9")],
]


def _run(fast: bool) -> tuple[list, dict]:
    outcomes: list = []
    with mock_aws():
        if fast:
            assert moto_speedups.install() and moto_speedups_transact.install()
        else:
            moto_speedups_transact.uninstall()
        try:
            client = boto3.client("dynamodb", region_name=REGION)
            client.create_table(TableName="t", BillingMode="PAY_PER_REQUEST",
                                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                                      {"AttributeName": "sk", "AttributeType": "S"}],
                                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}])
            client.create_table(TableName="h", BillingMode="PAY_PER_REQUEST",
                                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
            for pk, sk in (("a", "1"), ("a", "2"), ("a", "3"), ("b", "1"), ("b", "2")):
                client.put_item(TableName="t", Item={**_key(pk, sk), "v": {"S": f"{pk}{sk}"}})
            for pk in ("x", "y", "z"):
                client.put_item(TableName="h", Item={**_key(pk), "v": {"S": f"{pk}0"}})
            tables = dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION].tables
            for items in TRANSACTIONS:
                before = {name: _objects(tables[name]) for name in ("t", "h")}
                try:
                    client.transact_write_items(TransactItems=items)
                    outcome: dict = {"ok": True}
                except ClientError as e:
                    outcome = {"error": e.response["Error"], "reasons": e.response.get("CancellationReasons")}
                outcome["shared"] = {name: len(before[name] & _objects(tables[name])) for name in ("t", "h")}
                outcome["scan"] = {name: client.scan(TableName=name)["Items"] for name in ("t", "h")}
                outcome["query"] = client.query(TableName="t", KeyConditionExpression="pk = :p",
                                                ExpressionAttributeValues={":p": {"S": "a"}})["Items"]
                outcomes.append(outcome)
            order = {name: [repr(k) for k in tables[name].items] for name in ("t", "h")}
        finally:
            moto_speedups.install()   # as the rest of the session runs (tests/conftest installs it)
            moto_speedups_transact.install()
    return outcomes, order


def _objects(table) -> set[int]:
    """The ids of the table's item objects (the fast rollback keeps the untouched ones; moto's copies them all)."""
    if table.range_key_attr is not None:
        return {id(it) for part in table.items.values() for it in part.values()}
    return {id(it) for it in table.items.values()}


@pytest.fixture(scope="module")
def both():
    return _run(fast=False), _run(fast=True)


def test_transactions_leave_the_same_tables_and_answers_as_moto(both):
    (slow, slow_order), (fast, fast_order) = both
    strip = lambda outs: [{k: v for k, v in o.items() if k != "shared"} for o in outs]   # noqa: E731
    assert strip(fast) == strip(slow)
    assert fast_order == slow_order
    assert [bool(o.get("ok")) for o in fast] == [True, False, False, False, True]
    assert fast[1]["reasons"][-1]["Code"] == "ConditionalCheckFailed"
    assert fast[1]["reasons"][-1]["Item"] == {**_key("a", "3"), "v": {"S": "a3"}}
    assert fast[2]["error"]["Code"] == "ValidationException"
    # the rolled-back transaction changed nothing: the first transaction's results are still there
    assert fast[1]["scan"] == fast[0]["scan"]


def test_the_fast_rollback_ran(both):
    (slow, _), (fast, _) = both
    # after the failed transaction (index 1), moto's deep copy holds no item object of before; the fast copy keeps
    # every item the transaction did not name (t: a/9 and b/2 of 5 items; h: y of 3)
    assert slow[1]["shared"] == {"t": 0, "h": 0}
    assert fast[1]["shared"] == {"t": 2, "h": 1}
