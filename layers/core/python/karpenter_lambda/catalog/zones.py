"""The availability zones a cluster is assumed to have when no subnets say so. Pure.

One definition for both the simulator (``sim/aws.py`` creates one subnet per zone, ``<region>a..c``) and
``plan`` (offline, it has no EC2NodeClass subnets to resolve, so it assumes the same zones unless
``--zones`` says otherwise): a plan and a simulation of the same manifests see the same offerings.
"""

from __future__ import annotations

import re
from typing import Iterable

__all__ = ["DEFAULT_ZONE_SUFFIXES", "default_zones", "parse_zones"]

#: Zone letters of the simulated account's subnets and of ``plan``'s default: ``<region>a``, ``b``, ``c``.
DEFAULT_ZONE_SUFFIXES: tuple[str, ...] = ("a", "b", "c")

_ZONE_SUFFIX = re.compile(r"[a-z]")


def default_zones(region: str) -> list[str]:
    """``[<region>a, <region>b, <region>c]``: the zones the simulator creates subnets in."""
    return [f"{region}{s}" for s in DEFAULT_ZONE_SUFFIXES]


def parse_zones(region: str, zones: str | Iterable[str], field: str = "--zones") -> list[str]:
    """Zone names from ``"us-east-1a,us-east-1b"`` (or a list), de-duplicated in order.

    Each must be a zone of ``region`` (``<region>`` + one letter, e.g. ``us-east-1a``); a ValueError names
    ``field`` and the offending value otherwise.
    """
    items = zones.split(",") if isinstance(zones, str) else list(zones)
    out: list[str] = []
    for raw in items:
        z = str(raw).strip()
        if not z:
            continue
        if not (z.startswith(region) and _ZONE_SUFFIX.fullmatch(z[len(region):])):
            raise ValueError(f"{field}: {z!r} is not an availability zone of region {region} "
                             f"(expected {region} followed by one letter, e.g. {region}a)")
        if z not in out:
            out.append(z)
    if not out:
        raise ValueError(f"{field}: no zone given (e.g. {','.join(default_zones(region))})")
    return out
