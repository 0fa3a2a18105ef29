"""DynamoDB state via pynamodb: :class:`Store` keeps a cluster's Karpenter objects with optimistic locking.

Names are loaded lazily so ``import karpenter_lambda.adapters.store`` stays cheap (pynamodb costs ~0.4 s).
See docs/state.md for the tables, keys and environment variables.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "Store": "state", "resolve_kind": "state", "merge_patch": "state", "KIND_ALIASES": "state",
    "StoreError": "errors", "NotFound": "errors", "AlreadyExists": "errors", "Conflict": "errors",
    "StoreUnavailable": "errors",
    "state_model": "models", "state_table_name": "tables", "cache_table_name": "tables",
    "resolve_region": "models", "resolve_endpoint": "models",
    "STATE_TABLE_ENV": "tables", "DEFAULT_STATE_TABLE": "tables",
    "CACHE_TABLE_ENV": "tables", "DEFAULT_CACHE_TABLE": "tables",
    "LaunchClaims": "claims", "CommitResult": "claims", "ClaimsUnavailable": "claims",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value
