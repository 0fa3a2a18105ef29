"""The DynamoDB table names and the environment variables that set them (no pynamodb here: cheap to import)."""

from __future__ import annotations

import os

STATE_TABLE_ENV = "KARPENTER_LAMBDA_STATE_TABLE"
DEFAULT_STATE_TABLE = "karpenter-lambda-state"
CACHE_TABLE_ENV = "KARPENTER_LAMBDA_CACHE_TABLE"
DEFAULT_CACHE_TABLE = "karpenter-lambda-cache"


def state_table_name(table_name: str | None = None) -> str:
    return table_name or os.environ.get(STATE_TABLE_ENV) or DEFAULT_STATE_TABLE


def cache_table_name(table_name: str | None = None) -> str:
    return table_name or os.environ.get(CACHE_TABLE_ENV) or DEFAULT_CACHE_TABLE
