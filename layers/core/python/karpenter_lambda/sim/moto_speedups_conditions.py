"""A faster moto for the embedded environment: a DynamoDB condition or filter expression parsed once per text.

moto 5.2 parses a ``ConditionExpression`` / ``FilterExpression`` (``comparisons.get_filter_expression``: a lexer built
on regular expressions, then a parser) on every action that has one, about 0.2 ms each.  The store's launch claim
puts one conditional reservation per pod in its transaction, all with the same expression and values, so a launch
of 30 pods parsed the same text 30 times: ``tests/provision/test_claims_scale.py``'s 400 launches spent most of
their time there.  The parsed expression is a tree of operators that only reads the item it is given
(``.expr(item)``), so the tree of one (expression, names, values) is kept and given again; values are part of the
key (they are embedded in the tree).  A text that does not parse is not kept: it raises, as moto's own, every time.
At most :data:`SIZE` trees are kept (cleared when full).  ``tests/sim/test_speed_conditions.py`` holds the answers
equal to moto's own for conditions that pass, fail and do not parse.
"""

from __future__ import annotations

import json
from typing import Any

from karpenter_lambda.sim import moto_patch

#: the parsed expressions kept at most (cleared past it)
SIZE = 512
#: moto's modules that call ``get_filter_expression`` by a name of their own
_CALLERS = ("moto.dynamodb.models", "moto.dynamodb.models.table")


def _modules() -> list[Any]:
    import importlib

    return [importlib.import_module(m) for m in _CALLERS]


def install() -> bool:
    """Replace ``get_filter_expression`` where moto's DynamoDB models call it (once)."""
    trees: dict = {}

    def make(original: Any) -> Any:
        def get_filter_expression(expr: Any, names: Any = None, values: Any = None) -> Any:
            try:
                key = (expr, json.dumps(names, sort_keys=True), json.dumps(values, sort_keys=True))
            except (TypeError, ValueError):   # not JSON (bytes): parse it, as moto does
                return original(expr, names, values)
            tree = trees.get(key)
            if tree is None:
                tree = original(expr, names, values)
                if len(trees) >= SIZE:
                    trees.clear()
                trees[key] = tree
            return tree
        return get_filter_expression

    for module in _modules():
        moto_patch.replace(module, "get_filter_expression", make)
    return True


def uninstall() -> None:
    for module in _modules():
        moto_patch.restore(module, "get_filter_expression")
