"""A virtual clock for the simulator (and tests): time only moves when told to.

``VirtualClock()`` is callable like ``time.time`` (epoch seconds as float), so it can be injected
wherever a ``clock`` parameter is taken.  ``start`` defaults to the real time when created, in whole seconds, so
that objects stamped with it (creationTimestamp, moto launch times) look plausible and a time read back from such a
stamp (Kubernetes and EC2 keep whole seconds) falls on the same virtual second: a fraction of the real start would
shift the timers computed from those stamps (a NodeClaim's expiry) by a different amount in every run.
"""

from __future__ import annotations

import re
import threading
import time
from datetime import datetime, timezone

from ..api.times import format_time


class VirtualClock:
    def __init__(self, start: float | None = None):
        self.start = float(int(time.time()) if start is None else start)
        self._now = self.start
        self._lock = threading.Lock()

    def __call__(self) -> float:
        return self._now

    def now(self) -> float:
        return self._now

    @property
    def elapsed(self) -> float:
        """Virtual seconds since the start."""
        return self._now - self.start

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError(f"cannot move a clock backwards ({seconds} s)")
        with self._lock:
            self._now += seconds
            return self._now

    def advance_to(self, t: float) -> float:
        with self._lock:
            if t > self._now:
                self._now = t
            return self._now

    def datetime(self) -> datetime:
        return datetime.fromtimestamp(self._now, tz=timezone.utc)

    def utcnow_naive(self) -> datetime:
        """What moto's ``utcnow()`` returns (naive UTC)."""
        return datetime.fromtimestamp(self._now, tz=timezone.utc).replace(tzinfo=None)

    def isoformat(self) -> str:
        return format_time(self._now)


def format_elapsed(seconds: float) -> str:
    """``75.5`` -> ``"1m15.5s"``; used in timelines."""
    seconds = round(seconds, 1)
    m, s = divmod(seconds, 60)
    if m >= 60:
        h, m = divmod(m, 60)
        return f"{int(h)}h{int(m):02d}m{s:04.1f}s"
    if m:
        return f"{int(m)}m{s:04.1f}s"
    return f"{s:.1f}s"


def parse_duration(text: str) -> float:
    """``"90s"``, ``"5m"``, ``"1h30m"``, ``"2.5m"`` or a bare number of seconds -> seconds. ValueError naming the value."""
    t = str(text).strip()
    if re.fullmatch(r"[0-9]+(\.[0-9]+)?", t):
        return float(t)
    parts = re.findall(r"([0-9]+(?:\.[0-9]+)?)(h|m|s)", t)
    if not parts or "".join(n + u for n, u in parts) != t:
        raise ValueError(f"invalid duration {text!r}: expected e.g. 90s, 5m, 1h30m")
    mult = {"h": 3600, "m": 60, "s": 1}
    return sum(float(n) * mult[u] for n, u in parts)
