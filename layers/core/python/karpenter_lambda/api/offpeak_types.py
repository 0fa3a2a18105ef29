"""The typed views of an OffPeakSchedule's spec: :class:`WorkloadTarget`, :class:`NodePoolOverride`, the window
length and the time zone.

:class:`~.objects.OffPeakSchedule` returns these from its accessors, so they live below both :mod:`.objects` and
:mod:`.offpeak` (the contract, its validation and docs): this module imports neither.  Pure: no I/O beyond
``zoneinfo`` reading the time-zone database.
"""

from __future__ import annotations

from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .durations import DurationError, parse_duration
from .selectors import selector_matches as _selector_matches

__all__ = [
    "WorkloadTarget",
    "NodePoolOverride",
    "WORKLOAD_KINDS",
    "MAX_DURATION_SECONDS",
    "parse_window_duration",
    "time_zone_problem",
    "selector_matches",
]

WORKLOAD_KINDS = ("Deployment", "StatefulSet")
MAX_DURATION_SECONDS = 7 * 24 * 3600


def selector_matches(selector: dict | None, labels: dict) -> bool:
    """A metav1.LabelSelector against labels: ``None`` or ``{}`` matches everything (as in a workload target).

    :func:`.selectors.selector_matches` with ``none_matches_all=True``."""
    return _selector_matches(selector, labels, none_matches_all=True)


@dataclass(frozen=True)
class WorkloadTarget:
    """One ``spec.workloads`` entry: which Deployments/StatefulSets to hold and at how many replicas."""

    namespaces: tuple[str, ...] = ()            # empty = any namespace (subject to namespace_selector)
    namespace_selector: dict | None = None      # label selector on the Namespace's labels
    selector: dict | None = None                # label selector on the workload's metadata.labels; None = all
    kinds: tuple[str, ...] = WORKLOAD_KINDS
    replicas: int = 0

    @classmethod
    def from_spec(cls, entry: dict) -> "WorkloadTarget":
        return cls(
            namespaces=tuple(entry.get("namespaces") or ()),
            namespace_selector=entry.get("namespaceSelector"),
            selector=entry.get("selector"),
            kinds=tuple(entry.get("kinds") or WORKLOAD_KINDS),
            replicas=int(entry.get("replicas") or 0),
        )

    def matches(self, workload: dict, namespace_labels: dict) -> bool:
        """All given conditions hold (kind, namespace list, namespace selector, workload selector)."""
        if workload.get("kind") not in self.kinds:
            return False
        meta = workload.get("metadata") or {}
        if self.namespaces and (meta.get("namespace") or "default") not in self.namespaces:
            return False
        if self.namespace_selector is not None and not selector_matches(self.namespace_selector, namespace_labels):
            return False
        return selector_matches(self.selector, meta.get("labels") or {})


@dataclass(frozen=True)
class NodePoolOverride:
    """One ``spec.nodePools`` entry."""

    name: str
    limits: dict | None = None          # e.g. {"cpu": "16"}; replaces spec.limits during the window
    disruption: dict | None = None      # merged into spec.disruption during the window
    drain: bool = False                 # True: held at zero (limits cpu/memory 0) and its nodes drained

    @classmethod
    def from_spec(cls, entry: dict) -> "NodePoolOverride":
        return cls(name=entry.get("name", ""), limits=entry.get("limits"), disruption=entry.get("disruption"),
                   drain=bool(entry.get("drain", False)))


def parse_window_duration(text) -> int:
    """``"12h"`` -> 43200; raises :class:`DurationError` unless 0 < seconds <= 168h."""
    seconds = parse_duration(text)
    if seconds <= 0:
        raise DurationError(f"duration {text!r} must be longer than 0")
    if seconds > MAX_DURATION_SECONDS:
        raise DurationError(f"duration {text!r} is longer than 7 days (168h)")
    return seconds


def time_zone_problem(name) -> str | None:
    """Why ``name`` is not a usable IANA time zone, or None."""
    if not isinstance(name, str) or not name.strip():
        return "must be an IANA time zone name such as Europe/Berlin or UTC, got an empty value"
    if name == "localtime":
        return "'localtime' depends on the machine: use an IANA name such as Europe/Berlin"
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return f"unknown time zone {name!r}: expected an IANA name such as Europe/Berlin, America/New_York or UTC"
    return None
