"""sim/moto_speedups_conditions: a condition or filter expression parsed once per (text, names, values) must answer
as moto's own parse: the same writes refused and allowed, the same items filtered, and a text that does not parse
refused every time (not remembered): moto 5.2 raises its parser's ValueError."""

from __future__ import annotations

import boto3
from botocore.exceptions import ClientError
from moto import mock_aws

from karpenter_lambda.sim import moto_speedups_conditions

TABLE = "t"


def _run(fast: bool) -> list:
    if fast:
        assert moto_speedups_conditions.install()
    else:
        moto_speedups_conditions.uninstall()
    out: list = []

    def attempt(call, **kw):
        try:
            call(**kw)
            out.append("ok")
        except ClientError as e:
            out.append(e.response["Error"]["Code"])
        except ValueError as e:   # moto 5.2 raises its parser's error as it is
            out.append(f"ValueError: {e}")

    try:
        with mock_aws():
            ddb = boto3.client("dynamodb", region_name="us-east-1")
            ddb.create_table(TableName=TABLE, BillingMode="PAY_PER_REQUEST",
                             AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                                   {"AttributeName": "sk", "AttributeType": "S"}],
                             KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                                        {"AttributeName": "sk", "KeyType": "RANGE"}])
            cond = "attribute_not_exists(pk) OR holder = :me OR expiresAt < :now"
            for who, now in (("a", 10), ("b", 10), ("a", 10), ("b", 100), ("a", 100)):
                for sk in ("x", "y"):   # the same text and values twice in a row: the kept tree
                    attempt(ddb.put_item, TableName=TABLE, ConditionExpression=cond,
                            Item={"pk": {"S": "p"}, "sk": {"S": sk}, "holder": {"S": who}, "expiresAt": {"N": "50"}},
                            ExpressionAttributeValues={":me": {"S": who}, ":now": {"N": str(now)}})
            attempt(ddb.transact_write_items, TransactItems=[
                {"Put": {"TableName": TABLE, "Item": {"pk": {"S": "p"}, "sk": {"S": sk}, "holder": {"S": "c"}},
                         "ConditionExpression": "attribute_not_exists(pk)"}} for sk in ("x", "z")])
            for _ in range(2):      # does not parse: refused both times
                attempt(ddb.put_item, TableName=TABLE, Item={"pk": {"S": "p"}, "sk": {"S": "w"}},
                        ConditionExpression="attribute_not_exists(pk) OR OR")
            for limit in ("60", "40", "60"):
                items = ddb.query(TableName=TABLE, KeyConditionExpression="pk = :p",
                                  FilterExpression="#e < :l", ExpressionAttributeNames={"#e": "expiresAt"},
                                  ExpressionAttributeValues={":p": {"S": "p"}, ":l": {"N": limit}})["Items"]
                out.append(sorted((i["sk"]["S"], i["holder"]["S"]) for i in items))
            out.append(sorted((i["sk"]["S"], i["holder"]["S"]) for i in ddb.scan(TableName=TABLE)["Items"]))
    finally:
        moto_speedups_conditions.install()   # as the rest of the session runs (tests/conftest installs the speedups)
    return out


def test_conditions_answer_as_moto_parses_them():
    slow, fast = _run(False), _run(True)
    assert fast == slow
    # not vacuous: writes were refused and allowed by the values, a bad text refused twice, filters by their value
    assert fast[:10] == ["ok", "ok", "ConditionalCheckFailedException", "ConditionalCheckFailedException", "ok", "ok",
                         "ok", "ok", "ok", "ok"]
    assert fast[10] == "TransactionCanceledException"
    assert fast[11] == fast[12] and fast[11].startswith("ValueError: Bad OR expression")
    assert fast[13] == [("x", "a"), ("y", "a")] and fast[14] == [] and fast[15] == fast[13]
