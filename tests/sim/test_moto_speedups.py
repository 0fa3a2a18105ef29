"""sim/moto_speedups: DynamoDB item reads written straight to JSON must give what moto's own serializer gives, byte
for byte once parsed, on items of every attribute type, for every patched operation (and the unpatched ones still
work)."""

from __future__ import annotations

import json
from decimal import Decimal

import boto3
import pytest
from moto import mock_aws

from karpenter_lambda.sim import moto_speedups

ITEMS = [
    {"pk": {"S": "a"}, "sk": {"S": "1"}, "s": {"S": "text é"}, "n": {"N": "12.50"}, "b": {"B": b"\x00\xffbin"},
     "ss": {"SS": ["x", "y"]}, "ns": {"NS": ["1", "2"]}, "bs": {"BS": [b"\x01", b"\x02"]}, "null": {"NULL": True},
     "bool": {"BOOL": False}, "m": {"M": {"inner": {"L": [{"S": "deep"}, {"N": "3"}, {"M": {}}]}}}, "l": {"L": []}},
    {"pk": {"S": "a"}, "sk": {"S": "2"}, "s": {"S": ""}},
    {"pk": {"S": "b"}, "sk": {"S": "1"}, "big": {"S": "z" * 5000}},
]


def _calls(client):
    return [
        ("GetItem", lambda: client.get_item(TableName="t", Key={"pk": {"S": "a"}, "sk": {"S": "1"}})),
        ("GetItem (missing)", lambda: client.get_item(TableName="t", Key={"pk": {"S": "nope"}, "sk": {"S": "1"}})),
        ("Query", lambda: client.query(TableName="t", KeyConditionExpression="pk = :p",
                                       ExpressionAttributeValues={":p": {"S": "a"}}, ReturnConsumedCapacity="TOTAL")),
        ("Query (paged)", lambda: client.query(TableName="t", KeyConditionExpression="pk = :p", Limit=1,
                                               ExpressionAttributeValues={":p": {"S": "a"}})),
        ("Query (projection)", lambda: client.query(TableName="t", KeyConditionExpression="pk = :p",
                                                    ProjectionExpression="sk, b, m",
                                                    ExpressionAttributeValues={":p": {"S": "a"}})),
        ("Query (empty)", lambda: client.query(TableName="t", KeyConditionExpression="pk = :p",
                                               ExpressionAttributeValues={":p": {"S": "none"}})),
        ("Scan", lambda: client.scan(TableName="t")),
        ("BatchGetItem", lambda: client.batch_get_item(RequestItems={"t": {"Keys": [
            {"pk": {"S": "a"}, "sk": {"S": "1"}}, {"pk": {"S": "b"}, "sk": {"S": "1"}}]}})),
        ("DescribeTable", lambda: client.describe_table(TableName="t")),
    ]


def _record(fast: bool) -> dict:
    bodies, parsed = {}, {}
    with mock_aws():
        if fast:
            assert moto_speedups.install()
        else:
            moto_speedups.uninstall()
        try:
            client = boto3.client("dynamodb", region_name="us-east-1")
            client.create_table(TableName="t", BillingMode="PAY_PER_REQUEST",
                                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                                      {"AttributeName": "sk", "AttributeType": "S"}],
                                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"},
                                           {"AttributeName": "sk", "KeyType": "RANGE"}])
            for item in ITEMS:
                client.put_item(TableName="t", Item=item)
            last = {}
            client.meta.events.register("after-call.dynamodb", lambda http_response, **kw: last.update(body=http_response.content))
            for name, call in _calls(client):
                out = call()
                out.pop("ResponseMetadata", None)
                parsed[name] = out
                bodies[name] = json.loads(last["body"])
        finally:
            moto_speedups.install()   # as the rest of the session runs (tests/conftest installs it)
    return {"parsed": parsed, "bodies": bodies}


def _normalise(doc):
    """Table descriptions carry creation times and ARNs that differ between two tables; items do not."""
    if isinstance(doc, dict):
        return {k: ("<time>" if k in ("CreationDateTime",) else _normalise(v)) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_normalise(v) for v in doc]
    return doc


def test_fast_item_reads_equal_motos_own_serializer():
    slow, fast = _record(fast=False), _record(fast=True)
    assert _normalise(fast["bodies"]) == _normalise(slow["bodies"])
    assert _normalise(fast["parsed"]) == _normalise(slow["parsed"])
    # and the reads returned the data (a broken path would return nothing on both sides)
    item = fast["parsed"]["GetItem"]["Item"]
    assert item["b"] == {"B": b"\x00\xffbin"} and item["bs"] == {"BS": [b"\x01", b"\x02"]}
    assert item["m"]["M"]["inner"]["L"][0] == {"S": "deep"} and item["null"] == {"NULL": True}
    assert fast["parsed"]["Query"]["Count"] == 2 and "ConsumedCapacity" in fast["parsed"]["Query"]
    assert "LastEvaluatedKey" in fast["parsed"]["Query (paged)"]
    assert fast["parsed"]["Query (empty)"]["Items"] == [] and "Item" not in fast["parsed"]["GetItem (missing)"]
    assert len(fast["parsed"]["BatchGetItem"]["Responses"]["t"]) == 2


def test_only_moto_5_2_is_patched(monkeypatch):
    import moto

    moto_speedups.uninstall()
    monkeypatch.setattr(moto, "__version__", "5.3.0")
    try:
        assert moto_speedups.install() is False
        from moto.dynamodb.responses import DynamoHandler
        assert not getattr(DynamoHandler, "karpenter_lambda_fast_items", False)
    finally:
        monkeypatch.undo()
        assert moto_speedups.install() is True


def test_wire_form():
    assert moto_speedups.wire({"B": b"\x00", "L": [{"BS": [b"a"]}], "x": None}) == {"B": "AA==", "L": [{"BS": ["YQ=="]}]}
    assert moto_speedups.wire(Decimal("1")) == Decimal("1")
