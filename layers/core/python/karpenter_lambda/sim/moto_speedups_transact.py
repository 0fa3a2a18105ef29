"""A faster moto for the embedded environment: TransactWriteItems keeps, to roll back, only what it may change.

moto 5.2's ``transact_write_items`` deep-copies every table a transaction names before running it, so that a failed
transaction can put the copy back (``self.tables[name] = copy``). The store's tables hold the whole cluster, and the
launch claims' transactions (two per launch) copied every item each time: 0.6-1 s of a 4-hour simulation.

Here, while a transaction runs, that deep copy of a table is a rollback copy that holds the same state more cheaply:
a new ``Table`` object sharing the table's attributes (``copy.copy``), whose ``items`` are the table's partitions
copied one level deep (insertion order kept), each item the transaction names (by its key, found as moto finds it)
deep-copied, and every other item shared. That is enough because, during a transaction, moto changes only the
items it names: Put and Delete replace or remove the entry at their key, Update changes its item in place (hence the
deep copy of those), ConditionCheck only reads; the one other change, an empty partition that moto's
``defaultdict`` adds when a read misses, is in the table, not in the copy, as with moto's own copy. A successful
transaction drops the copy; a failed one is rolled back by moto's own code to a table equal, item for item and in
the same order, to the one moto's deep copy would have restored.

The fast copy is not used (moto's deep copy is) for a table with a stream (its shard would record the rolled-back
writes) or when a key of the transaction cannot be read from its request as moto reads it.
``tests/sim/test_speed_transact.py`` holds tables and answers equal to moto's own after transactions that succeed,
fail a condition after earlier writes, and name one item twice.
"""

from __future__ import annotations

import copy as _copy
import threading
from collections import defaultdict
from typing import Any

from karpenter_lambda.sim import moto_patch

_active = threading.local()   # .targets: {table name: {id(item): item}} while a transaction runs in this thread


class _Copy:
    """Stands for the ``copy`` module in ``moto.dynamodb.models``: ``deepcopy`` of a table during a transaction
    gives the rollback copy; everything else is the real module's."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_copy, name)

    @staticmethod
    def deepcopy(obj: Any, memo: dict | None = None) -> Any:
        targets = getattr(_active, "targets", None)
        if targets is not None and memo is None and getattr(obj, "name", None) in targets \
                and type(obj).__name__ == "Table":
            return rollback_copy(obj, targets[obj.name])
        return _copy.deepcopy(obj, memo)


def rollback_copy(table: Any, named: dict[int, Any]) -> Any:
    """``table`` as moto's deep copy would restore it after a transaction that changes only the items in
    ``named`` (``id(item) -> item``)."""
    snap = _copy.copy(table)
    items: defaultdict = defaultdict(dict)
    fresh = {key: _copy.deepcopy(item) for key, item in named.items()}
    if table.range_key_attr is not None:
        for hash_key, partition in table.items.items():
            items[hash_key] = {r: fresh.get(id(it), it) for r, it in partition.items()}
    else:
        for hash_key, item in table.items.items():
            items[hash_key] = fresh.get(id(item), item)
    snap.items = items
    return snap


def _named_items(backend: Any, transact_items: list[dict[str, Any]]) -> dict[str, dict[int, Any]] | None:
    """Per table the transaction names, the items at its keys (``id -> item``); None: use moto's deep copy."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    out: dict[str, dict[int, Any]] = {}
    for entry in transact_items:
        if not isinstance(entry, dict) or len(entry) != 1:
            return None
        op_type, op = next(iter(entry.items()))
        if not isinstance(op, dict):
            return None
        table = backend.tables.get(op.get("TableName")) if op.get("TableName") else None
        if table is None:
            continue        # moto copies no table for it either
        if table.stream_shard is not None:
            return None
        key = op.get("Item") if op_type == "Put" else op.get("Key")
        try:
            hash_key = DynamoType(key[table.hash_key_attr])
            range_key = DynamoType(key[table.range_key_attr]) if table.range_key_attr is not None else None
        except (KeyError, TypeError, AttributeError, ValueError):
            return None
        found = table.items.get(hash_key)     # .get: no empty partition added
        if range_key is not None and isinstance(found, dict):
            found = found.get(range_key)
        named = out.setdefault(table.name, {})
        if found is not None and not isinstance(found, dict):
            named[id(found)] = found
    return out


def install() -> bool:
    """Patch ``DynamoDBBackend.transact_write_items`` (once)."""
    import moto.dynamodb.models as models

    def make(original: Any) -> Any:
        def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
            targets = _named_items(self, transact_items) if isinstance(transact_items, list) else None
            if targets is None or getattr(_active, "targets", None) is not None:
                return original(self, transact_items)
            _active.targets = targets
            try:
                return original(self, transact_items)
            finally:
                _active.targets = None
        return transact_write_items

    models.copy = _Copy()
    return moto_patch.replace(models.DynamoDBBackend, "transact_write_items", make)


def uninstall() -> None:
    import moto.dynamodb.models as models

    moto_patch.restore(models.DynamoDBBackend, "transact_write_items")
    models.copy = _copy
