"""Kubernetes resource quantities, parsed exactly.

A quantity is ``<signed number><suffix>`` where the suffix is a binary SI
(Ki, Mi, Gi, Ti, Pi, Ei), a decimal SI (n, u, m, "", k, M, G, T, P, E) or a
decimal exponent (e3, E-2).  Values are held as :class:`fractions.Fraction`
so nothing is rounded while parsing.

Throughout the project a *resource list* is ``dict[str, int]`` in integer
base units, with one exception: ``cpu`` is held in **millicores**.  Memory,
ephemeral-storage and hugepages are bytes; pods, GPUs and other extended
resources are counts.  :func:`resource_value` converts a quantity to that
unit (rounding up, as Kubernetes does for requests).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

__all__ = [
    "QuantityError",
    "parse_quantity",
    "resource_value",
    "parse_resource_list",
    "format_cpu",
    "format_bytes",
    "format_resource",
    "quantity_problem",
]


class QuantityError(ValueError):
    """Raised for a string that is not a Kubernetes quantity."""


_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_RE = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?[0-9]+)|(?P<dec>[numkMGTPE]?))$"
)

_cache: dict[str, Fraction] = {}


def parse_quantity(value: str | int | float) -> Fraction:
    """Parse a Kubernetes quantity (``"100"``, ``"500m"``, ``"4Gi"``, ``"1.5"``, ``"1e3"``).

    Integers are taken as they are; floats are accepted for YAML convenience
    (``cpu: 1.5`` in a manifest) and converted through their decimal repr.
    Raises :class:`QuantityError` naming the bad value.
    """
    if isinstance(value, bool):
        raise QuantityError(f"invalid quantity {value!r}: must be a number or a string like 500m or 4Gi")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"invalid quantity {value!r}")
        value = repr(value)
    if not isinstance(value, str):
        raise QuantityError(f"invalid quantity {value!r}: must be a number or a string like 500m or 4Gi")
    hit = _cache.get(value)
    if hit is not None:
        return hit
    m = _RE.match(value.strip())
    if not m:
        raise QuantityError(f"invalid quantity {value!r}: expected a number with an optional suffix (m, k, M, G, Ki, Mi, Gi, ...)")
    num = Fraction(m.group("num"))
    if m.group("bin"):
        num *= _BINARY[m.group("bin")]
    elif m.group("exp"):
        exp = int(m.group("exp")[1:])
        if abs(exp) > 30:
            raise QuantityError(f"invalid quantity {value!r}: exponent out of range")
        num *= Fraction(10) ** exp
    else:
        num *= _DECIMAL[m.group("dec") or ""]
    if m.group("sign") == "-":
        num = -num
    if len(_cache) < 10000:
        _cache[value] = num
    return num


def resource_value(name: str, value: str | int | float | Fraction) -> int:
    """A quantity in the project's integer unit for resource ``name`` (cpu: millicores; else base units), rounded up."""
    q = value if isinstance(value, Fraction) else parse_quantity(value)
    if name == "cpu":
        q = q * 1000
    return math.ceil(q)


def parse_resource_list(resources: dict | None) -> dict[str, int]:
    """``{"cpu": "500m", "memory": "1Gi"}`` -> ``{"cpu": 500, "memory": 1073741824}``."""
    if not resources:
        return {}
    return {k: resource_value(k, v) for k, v in resources.items()}


def format_cpu(millicores: int) -> str:
    if millicores % 1000 == 0:
        return str(millicores // 1000)
    return f"{millicores}m"


def format_bytes(n: int) -> str:
    for suffix, mult in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if n and n % mult == 0:
            return f"{n // mult}{suffix}"
    return str(n)


def format_resource(name: str, value: int) -> str:
    """Inverse of :func:`resource_value` for display: ``format_resource("cpu", 1500) == "1500m"``."""
    if name == "cpu":
        return format_cpu(value)
    if name in ("memory", "ephemeral-storage") or name.startswith("hugepages-"):
        return format_bytes(value)
    return str(value)


_SUFFIX_HINT = re.compile(r"^([+-]?[0-9.]+)\s*([KMGTPE])i?B$", re.IGNORECASE)


def quantity_problem(value: object) -> str | None:
    """Why ``value`` is not a Kubernetes quantity as the API server reads one (the grammar exactly: no spaces, a
    known suffix), or None when it is one.  ``12GB`` -> a hint naming ``12G`` and ``12Gi``."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return "must be a quantity such as 500m, 2, 4Gi or 512M (a string or a number)"
    if isinstance(value, str) and value != value.strip():
        problem = "must be a quantity without spaces"
    else:
        try:
            parse_quantity(value)
            return None
        except QuantityError:
            problem = "must be a quantity such as 500m, 2, 4Gi or 512M (suffixes: m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei)"
    m = _SUFFIX_HINT.match(value.strip()) if isinstance(value, str) else None
    if m:
        number, unit = m.group(1), m.group(2).upper().replace("K", "k")
        problem += f" (did you mean {number}{unit} or {number}{unit.upper()}i?)"
    return problem
