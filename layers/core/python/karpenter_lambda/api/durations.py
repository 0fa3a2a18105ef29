"""Duration strings as Karpenter's CRDs accept them, and Go-style duration parsing.

Karpenter's v1 CRDs restrict durations with patterns (not with Go's full
``time.ParseDuration`` grammar):

* ``expireAfter`` / ``consolidateAfter``: ``^(([0-9]+(s|m|h))+|Never)$``
* ``terminationGracePeriod``: ``^([0-9]+(s|m|h))+$`` (no ``Never``: unset means wait forever)
* budget ``duration``: ``^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`` (hours/minutes only)

Kubelet's ``evictionSoftGracePeriod`` values are ``metav1.Duration`` and take
Go's grammar (``1m30s``, ``500ms``, ``1.5h``).  Everything here is pure.
"""

from __future__ import annotations

import re
from fractions import Fraction

__all__ = [
    "NEVER",
    "NILLABLE_DURATION_RE",
    "DURATION_RE",
    "BUDGET_DURATION_RE",
    "DurationError",
    "parse_duration",
    "parse_nillable_duration",
    "parse_go_duration",
    "format_duration",
]

NEVER = "Never"
NILLABLE_DURATION_RE = re.compile(r"^(([0-9]+(s|m|h))+|Never)$")
DURATION_RE = re.compile(r"^([0-9]+(s|m|h))+$")
BUDGET_DURATION_RE = re.compile(r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$")

_UNIT_SECONDS = {"h": 3600, "m": 60, "s": 1}
_GO_UNITS = {
    "ns": Fraction(1, 10**9),
    "us": Fraction(1, 10**6),
    "\u00b5s": Fraction(1, 10**6),
    "\u03bcs": Fraction(1, 10**6),
    "ms": Fraction(1, 10**3),
    "s": Fraction(1),
    "m": Fraction(60),
    "h": Fraction(3600),
}
_GO_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")


class DurationError(ValueError):
    """A duration string that does not parse."""


def parse_duration(text: str) -> int:
    """``"1h30m"`` -> 5400 seconds; accepts the CRD form ``([0-9]+(s|m|h))+``."""
    if not isinstance(text, str) or not DURATION_RE.match(text):
        raise DurationError(f"invalid duration {text!r}: expected digits with units s, m or h, e.g. 30s, 10m, 1h30m")
    return sum(int(n) * _UNIT_SECONDS[u] for n, u in re.findall(r"([0-9]+)(s|m|h)", text))


def parse_nillable_duration(text: str) -> int | None:
    """Like :func:`parse_duration` but ``"Never"`` -> ``None``."""
    if text == NEVER:
        return None
    return parse_duration(text)


def parse_go_duration(text: str) -> Fraction:
    """Go ``time.ParseDuration`` grammar, in seconds: ``"1m30s"``, ``"1.5h"``, ``"300ms"``, ``"0"``."""
    if not isinstance(text, str) or not text:
        raise DurationError(f"invalid duration {text!r}")
    s = text
    sign = 1
    if s[0] in "+-":
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if s == "0":
        return Fraction(0)
    pos, total = 0, Fraction(0)
    while pos < len(s):
        m = _GO_PART.match(s, pos)
        if not m or m.group(1) in ("", "."):
            raise DurationError(f"invalid duration {text!r}: expected a Go duration such as 30s, 1m30s or 1.5h")
        total += Fraction(m.group(1)) * _GO_UNITS[m.group(2)]
        pos = m.end()
    if pos == 0:
        raise DurationError(f"invalid duration {text!r}")
    return sign * total


def format_duration(seconds: int | None) -> str:
    """5400 -> ``"1h30m"``; ``None`` -> ``"Never"``; 0 -> ``"0s"``."""
    if seconds is None:
        return NEVER
    if seconds == 0:
        return "0s"
    out = []
    for unit, size in (("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            out.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(out)
