"""Moved to :mod:`karpenter_lambda.adapters.store.claims` (DynamoDB lives in adapters); this name stays for the
modules that still import it from here."""

from ..adapters.store.claims import (  # noqa: F401  (re-exported)
    DEFAULT_STATE_TABLE,
    RESERVATION_TTL_SECONDS,
    ClaimsUnavailable,
    CommitResult,
    LaunchClaims,
)
