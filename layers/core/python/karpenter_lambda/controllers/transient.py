"""Which failures are worth retrying: throttling, a 5xx, a connection failure (pure classification of exceptions and
error texts, shared by the controllers; a transient failure returns an SQS record for redelivery or fails a sweep
that the next run repeats, never a decision taken on missing data)."""

from __future__ import annotations

import re

__all__ = ["TRANSIENT_CODES", "TransientError", "is_transient"]

TRANSIENT_CODES = ("Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException",
                   "ProvisionedThroughputExceededException", "RequestThrottled", "RequestThrottledException",
                   "SlowDown", "InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable",
                   "TransactionInProgressException", "RequestTimeout", "RequestTimeoutException")
_TRANSIENT_TEXT = re.compile(r"\b(" + "|".join(TRANSIENT_CODES) + r")\b|\b(429|50[0-4]) ")


class TransientError(RuntimeError):
    """A read failed for a transient reason (:func:`is_transient`): what depends on it is retried, not decided."""


def is_transient(exc: BaseException | str | None) -> bool:
    """Throttling, a 5xx or a connection failure anywhere in the exception chain (or in an error text)."""
    seen = 0
    while exc is not None and seen < 10:
        seen += 1
        if isinstance(exc, str):
            return bool(_TRANSIENT_TEXT.search(exc))
        resp = getattr(exc, "response", None)
        if isinstance(resp, dict):  # botocore ClientError
            code = (resp.get("Error") or {}).get("Code", "")
            status = (resp.get("ResponseMetadata") or {}).get("HTTPStatusCode") or 0
            if code in TRANSIENT_CODES or status == 429 or status >= 500:
                return True
        status = getattr(exc, "status", None)  # adapters.kube.KubeError (after its own retries)
        if isinstance(status, int) and type(exc).__name__ in ("KubeError", "Conflict") and (status in (0, 429) or status >= 500):
            return True
        if type(exc).__name__ in ("EndpointConnectionError", "ConnectionClosedError", "ReadTimeoutError",
                                  "ConnectTimeoutError", "StoreUnavailable"):
            return True
        if _TRANSIENT_TEXT.search(str(exc)):
            return True
        exc = exc.__cause__ or exc.__context__
    return False
