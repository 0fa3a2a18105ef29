"""DynamoDB state via pynamodb: :class:`Store` keeps a cluster's Karpenter objects with optimistic locking.

Names are loaded lazily so ``import karpenter_lambda.adapters.store`` stays cheap (pynamodb costs ~0.4 s).
See docs/state.md for the tables, keys and environment variables.
"""

from __future__ import annotations

_EXPORTS = {
    "Store": "state", "resolve_kind": "state", "merge_patch": "state", "KIND_ALIASES": "state",
    "StoreError": "errors", "NotFound": "errors", "AlreadyExists": "errors", "Conflict": "errors",
    "StoreUnavailable": "errors",
    "state_model": "models", "state_table_name": "models", "cache_table_name": "models",
    "resolve_region": "models", "resolve_endpoint": "models",
    "STATE_TABLE_ENV": "models", "DEFAULT_STATE_TABLE": "models",
    "CACHE_TABLE_ENV": "models", "DEFAULT_CACHE_TABLE": "models",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value
