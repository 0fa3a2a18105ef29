"""A faster moto for the embedded environment: TransactWriteItems rolled back in place, from what it may change.

moto 5.2's ``transact_write_items`` deep-copies a table for every action that names it, before running any, so that
a failed transaction can put a copy back (``self.tables[name] = copy``): a transaction of 32 actions on a table of
13,000 items copied the table 32 times (``tests/provision/test_claims_scale.py``'s 400 launch claims of 30 pods),
and the store's launch-claim transactions (two per launch) copied the whole cluster each time in a simulation.

Here, while a transaction runs, moto's deep copy of a table is the table itself (so its rollback assignment changes
nothing), and the transaction is undone in place when it fails: before it runs, each table it names is recorded --
its partitions in order (a shallow copy of ``table.items``), for a table with a range key each named partition's
entries in order, and a deep copy of each item the transaction names (by its key, found as moto finds it). That is
enough because, during a transaction, moto changes only the items it names: Put and Delete replace or remove the
entry at their key, Update changes its item in place (hence the deep copies), ConditionCheck only reads; the one
other change, an empty partition that moto's ``defaultdict`` adds when a read misses, is dropped with the rest. A
failed transaction (moto raises after its own rollback, on every path) leaves each table equal, item for item and in
the same order, to the one moto's deep copy would have restored; a successful one keeps everything.

moto's own path (its deep copies) is taken for a table with a stream (its shard would record the rolled-back
writes), when a key of the transaction cannot be read from its request as moto reads it, and for a transaction
inside another. ``tests/sim/test_speed_transact.py`` holds tables and answers equal to moto's own after
transactions that succeed, fail a condition after earlier writes, name one item twice, or name a missing table.
"""

from __future__ import annotations

import copy as _copy
import threading
from dataclasses import dataclass, field
from typing import Any

from karpenter_lambda.sim import moto_patch

_active = threading.local()   # .tables: the names of the tables a transaction runs on (in this thread)


class _Copy:
    """Stands for the ``copy`` module in ``moto.dynamodb.models``: ``deepcopy`` of a table a transaction runs on is
    the table itself (the transaction is undone in place, :func:`_restore`); everything else is the real module's."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_copy, name)

    @staticmethod
    def deepcopy(obj: Any, memo: dict | None = None) -> Any:
        tables = getattr(_active, "tables", None)
        if tables is not None and memo is None and type(obj).__name__ == "Table" \
                and getattr(obj, "name", None) in tables:
            return obj
        return _copy.deepcopy(obj, memo)


@dataclass
class _Before:
    """One table as a transaction found it (see the module doc)."""

    table: Any
    top: dict                                     # hash key -> partition (range tables) or item, in order
    parts: dict = field(default_factory=dict)     # hash key -> {range key: item} of the named partitions
    fresh: dict = field(default_factory=dict)     # id(item) -> a deep copy of each named item


def _record(backend: Any, transact_items: list[dict[str, Any]]) -> dict[str, _Before] | None:
    """Per table the transaction names, what :func:`_restore` needs; None: use moto's deep copies."""
    from moto.dynamodb.models.dynamo_type import DynamoType

    out: dict[str, _Before] = {}
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
        before = out.get(table.name)
        if before is None:
            before = out[table.name] = _Before(table, dict(table.items))
        found = table.items.get(hash_key)     # .get: no empty partition added
        if range_key is not None and isinstance(found, dict):
            if hash_key not in before.parts:
                before.parts[hash_key] = dict(found)
            found = found.get(range_key)
        if found is not None and not isinstance(found, dict):
            before.fresh[id(found)] = _copy.deepcopy(found)
    return out


def _restore(backend: Any, before: dict[str, _Before]) -> None:
    """Each table back to what :func:`_record` saw: partitions in their order, the named items as they were."""
    for name, b in before.items():
        table, fresh = b.table, b.fresh
        backend.tables[name] = table
        items = table.items
        items.clear()
        for hash_key, value in b.top.items():
            if table.range_key_attr is None:
                items[hash_key] = fresh.get(id(value), value)
                continue
            saved = b.parts.get(hash_key)
            if saved is not None:     # the live partition, its entries as they were
                value.clear()
                value.update((r, fresh.get(id(it), it)) for r, it in saved.items())
            items[hash_key] = value


def install() -> bool:
    """Patch ``DynamoDBBackend.transact_write_items`` (once)."""
    import moto.dynamodb.models as models

    def make(original: Any) -> Any:
        def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
            if getattr(_active, "tables", None) is not None or not isinstance(transact_items, list) \
                    or len(transact_items) > 100:     # moto refuses more before changing anything
                return original(self, transact_items)
            before = _record(self, transact_items)
            if before is None:
                return original(self, transact_items)
            _active.tables = set(before)
            try:
                return original(self, transact_items)
            except BaseException:
                _restore(self, before)
                raise
            finally:
                _active.tables = None
        return transact_write_items

    models.copy = _Copy()
    return moto_patch.replace(models.DynamoDBBackend, "transact_write_items", make)


def uninstall() -> None:
    import moto.dynamodb.models as models

    moto_patch.restore(models.DynamoDBBackend, "transact_write_items")
    models.copy = _copy
