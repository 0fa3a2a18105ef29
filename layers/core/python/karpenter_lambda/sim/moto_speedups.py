"""A faster moto for the embedded environment: DynamoDB item reads written straight to JSON, and each response
class's method names listed once.

moto 5.2 serializes every response by walking the operation's output shape, trying several spellings of every member
name on every value. For DynamoDB's item reads (GetItem, Query, Scan, BatchGetItem) that walk costs more than the read:
each attribute value is a structure of ten possible members. It was about a sixth of a simulation's time. Here the
items, which moto has already turned into their wire form (``{"S": ...}``, ``{"N": ...}``, ``{"M": {...}}``; blobs as
bytes), are written to JSON directly, blobs base64-encoded as the JSON protocol says. The rest of the response
(``Count``, ``LastEvaluatedKey``, ``ConsumedCapacity``, ``UnprocessedKeys``) and the headers still come from moto's own
serializer. ``tests/sim/test_moto_speedups.py`` holds the two outputs equal on items of every attribute type.

moto also lists a response class's methods (``inspect.getmembers``) on every request to find the action's
method; classes do not change while running, so the list is kept per class.

:func:`install` also installs ``moto_speedups_query`` (a Query on the table's key reads its partition only) and
``moto_speedups_serialize`` (the serializer's attribute names and response transformers found once),
``moto_speedups_transact`` (a failed TransactWriteItems undone in place, no table copies),
``moto_speedups_conditions`` (a condition or filter expression parsed once per text, names and values),
``moto_speedups_tags`` (an EC2 resource's tags read from its own entry), ``moto_speedups_sqs`` (a received
message's retention read from its queue's field), ``moto_speedups_xml`` (XML responses written without
xmltodict's SAX machinery), ``moto_speedups_botocore`` (while the in-process mock is active, plain SigV4 requests
carry a zero signature instead of being hashed and signed; event aliases worked out once per process; random
strings drawn at once) and ``moto_speedups_request`` (each request's WSGI environ written directly).

Only moto 5.2.x is patched (the version the tests pin); with any other version :func:`install` changes nothing.
"""

from __future__ import annotations

import base64
import json

from . import (moto_speedups_botocore, moto_speedups_conditions, moto_speedups_query, moto_speedups_request,
               moto_speedups_serialize, moto_speedups_sqs, moto_speedups_tags, moto_speedups_transact, moto_speedups_xml)

# per operation: the response members that hold items
ITEM_MEMBERS = {"GetItem": ("Item",), "Query": ("Items",), "Scan": ("Items",), "BatchGetItem": ("Responses",)}


def wire(value):
    """An item (or a list or map of them) in moto's internal form -> the JSON protocol's form."""
    if isinstance(value, dict):
        return {k: wire(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [wire(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    return value


def install() -> bool:
    """Patch moto's DynamoDB handler (once); False when this moto is not one the fast path was checked against."""
    import moto
    from moto.core.responses import ActionResult
    from moto.dynamodb.responses import DynamoHandler

    if not str(getattr(moto, "__version__", "")).startswith("5.2."):
        return False
    if getattr(DynamoHandler, "karpenter_lambda_fast_items", False):
        return True
    _cache_method_names()
    moto_speedups_query.install()
    moto_speedups_serialize.install()
    moto_speedups_transact.install()
    moto_speedups_conditions.install()
    moto_speedups_tags.install()
    moto_speedups_sqs.install()
    moto_speedups_xml.install()
    moto_speedups_botocore.install()
    moto_speedups_request.install()
    original = DynamoHandler.serialized

    def serialized(self, action_result):
        members = ITEM_MEMBERS.get(self._get_action())
        result = getattr(action_result, "result", None)
        if not members or not isinstance(result, dict) or not any(result.get(m) is not None for m in members):
            return original(self, action_result)
        items = {m: result[m] for m in members if result.get(m) is not None}
        status, headers, body = original(self, ActionResult({k: v for k, v in result.items() if k not in items}))
        doc = json.loads(body) if body else {}
        doc.update((m, wire(v)) for m, v in items.items())
        return status, headers, json.dumps(doc, separators=(",", ":"))

    DynamoHandler.serialized = serialized
    DynamoHandler.karpenter_lambda_fast_items = True
    return True


def _cache_method_names() -> None:
    import moto.core.responses as responses

    listed = responses.method_names_from_class
    if getattr(listed, "karpenter_lambda_cached", False):
        return
    names: dict = {}

    def method_names_from_class(clazz) -> list[str]:
        hit = names.get(clazz)
        if hit is None:
            hit = names[clazz] = listed(clazz)
        return hit

    method_names_from_class.karpenter_lambda_cached = True
    responses.method_names_from_class = method_names_from_class


def uninstall() -> None:
    """Back to moto's own serializer (tests compare the two)."""
    from moto.dynamodb.responses import DynamoHandler

    moto_speedups_query.uninstall()
    moto_speedups_serialize.uninstall()
    moto_speedups_transact.uninstall()
    moto_speedups_tags.uninstall()
    moto_speedups_sqs.uninstall()
    moto_speedups_xml.uninstall()
    moto_speedups_botocore.uninstall()
    moto_speedups_request.uninstall()
    if getattr(DynamoHandler, "karpenter_lambda_fast_items", False):
        del DynamoHandler.serialized   # moto's own (BaseResponse's) again
        DynamoHandler.karpenter_lambda_fast_items = False
