"""Kubernetes timestamps, one definition: RFC 3339 text <-> epoch seconds / aware datetimes.

Every layer reads and writes times through these (the pure code gets ``now`` as a number; nothing here reads a
clock).  Kubernetes writes ``2026-12-04T18:00:00Z``; Python before 3.11 cannot parse the ``Z``, hence one helper.
"""

from __future__ import annotations

from datetime import datetime, timezone
from functools import lru_cache

RFC3339 = "%Y-%m-%dT%H:%M:%SZ"


def to_datetime(value, *, require_offset: bool = False) -> datetime | None:
    """An aware UTC-or-offset datetime from RFC 3339 text, a datetime (naive = UTC) or epoch seconds; ``None`` for
    empty or unparseable input.  ``require_offset``: text without a UTC offset (``Z`` or ``+02:00``) is refused
    (``None``) instead of read as UTC."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if isinstance(value, (int, float)):
        return datetime.fromtimestamp(float(value), tz=timezone.utc)
    try:
        dt = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if dt.tzinfo is None and require_offset:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)


def to_epoch(value) -> float | None:
    """Epoch seconds from RFC 3339 text, a datetime or a number; ``None`` for empty or unparseable input."""
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        return _epoch_text(value)
    dt = to_datetime(value)
    return None if dt is None else dt.timestamp()


@lru_cache(maxsize=4096)
def _epoch_text(value: str) -> float | None:
    # a sweep reads the same few timestamps (pods created together) many times over
    dt = to_datetime(value)
    return None if dt is None else dt.timestamp()


def format_time(ts) -> str:
    """``2026-12-04T18:00:00Z`` for epoch seconds or a datetime (whole seconds, UTC)."""
    dt = ts if isinstance(ts, datetime) else datetime.fromtimestamp(float(ts), tz=timezone.utc)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone(timezone.utc).strftime(RFC3339)
