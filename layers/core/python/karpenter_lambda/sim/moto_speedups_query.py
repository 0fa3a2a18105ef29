"""A faster moto for the embedded environment: a DynamoDB Query on a table's key reads only its partition.

moto 5.2's ``Table.query`` without an index gathers every item of the table (``Table.all_items``: every partition,
sorted by hash and range key with Python-level ``DynamoType`` comparisons) and then keeps those whose hash key equals
the query's. The store's tables hold the whole cluster, so each Query cost a sort of every item; it was the
simulation's largest moto cost. Here, for the duration of a Query without ``IndexName`` and with a hash key,
``all_items`` of that table answers that partition only, in the same order: the items moto would have kept (its
partitions are a dict keyed by the hash key's ``DynamoType``, whose hash and equality both use the cast value, so the
lookup finds exactly the items the equality filter keeps), sorted by the same key. Everything after (the range sort,
paging, ``ExclusiveStartKey``, limits, filters, projections, the copy of the results) is moto's own code.
``tests/sim/test_moto_speedups.py`` holds the two paths' responses equal.
"""

from __future__ import annotations

import inspect
import threading
from typing import Any

_narrowed = threading.local()   # .to = (table, hash key) while that table's Query runs in this thread


def _sort_key(item: Any) -> Any:
    return (item.hash_key, item.range_key) if item.range_key else item.hash_key   # as moto's all_items


def install() -> bool:
    """Patch ``Table.query`` and ``Table.all_items`` (once)."""
    from moto.dynamodb.models.table import Table

    if getattr(Table, "karpenter_lambda_partition_query", False):
        return True
    query, all_items = Table.query, Table.all_items
    signature = inspect.signature(query)

    def partition_items(self: Table) -> list:
        to = getattr(_narrowed, "to", None)
        if to is None or to[0] is not self:
            return all_items(self)
        hash_set = self.items.get(to[1])    # .get: no empty partition added to moto's defaultdict
        if hash_set is None:
            return []
        return sorted(hash_set.values() if self.range_key_attr else [hash_set], key=_sort_key)

    def partition_query(self: Table, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        hash_key = bound.arguments.get("hash_key")
        if bound.arguments.get("index_name") or hash_key is None or getattr(_narrowed, "to", None) is not None:
            return query(self, *args, **kwargs)
        _narrowed.to = (self, hash_key)
        try:
            return query(self, *args, **kwargs)
        finally:
            _narrowed.to = None

    Table.query, Table.all_items = partition_query, partition_items
    Table.karpenter_lambda_partition_query = True
    Table.karpenter_lambda_originals = (query, all_items)
    return True


def uninstall() -> None:
    from moto.dynamodb.models.table import Table

    if getattr(Table, "karpenter_lambda_partition_query", False):
        Table.query, Table.all_items = Table.karpenter_lambda_originals
        Table.karpenter_lambda_partition_query = False

