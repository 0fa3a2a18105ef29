"""Validation pieces shared by every kind's schema: Kubernetes name and label syntax, and the NodePool disruption
vocabulary (policies, reasons, a budget entry).

:mod:`.validation` (the Karpenter kinds) and :mod:`.offpeak` (OffPeakSchedule) both build on these; this module
imports neither, so neither imports the other to get them.  Pure: no I/O.
"""

from __future__ import annotations

import calendar
import json
import re

from .cron import CronError, TimeZoneError, parse_budget_schedule
from .durations import BUDGET_DURATION_RE
from .errors import FieldError
from .schema import List, Obj, Str, index, join

__all__ = [
    "DNS1123_SUBDOMAIN_RE",
    "CONSOLIDATION_POLICIES",
    "WHEN_EMPTY",
    "WHEN_EMPTY_OR_UNDERUTILIZED",
    "BALANCED",
    "DISRUPTION_REASONS",
    "NILLABLE_DURATION_MSG",
    "DURATION_MSG",
    "BUDGET",
    "label_key_problem",
    "label_value_problem",
    "label_value_check",
    "dns_subdomain_check",
    "is_date_time",
    "date_time_check",
    "unique_items_check",
]

WHEN_EMPTY = "WhenEmpty"
WHEN_EMPTY_OR_UNDERUTILIZED = "WhenEmptyOrUnderutilized"   # the CRD default
BALANCED = "Balanced"   # consolidation moves scored: savings share over disruption share (disruption/balanced.py)
CONSOLIDATION_POLICIES = (WHEN_EMPTY, WHEN_EMPTY_OR_UNDERUTILIZED, BALANCED)
DISRUPTION_REASONS = ("Underutilized", "Empty", "Drifted")
NILLABLE_DURATION_MSG = "must be a duration such as 30s, 10m, 720h or 1h30m (digits with units s, m, h), or Never"
DURATION_MSG = "must be a duration such as 30s, 10m or 1h30m (digits with units s, m, h); Never is not allowed here"

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_RE = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
_NAME_PART_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


# ----------------------------------------------------------------------------- names and labels
def label_key_problem(k: str) -> str | None:
    """Kubernetes qualified-name syntax: ``[prefix/]name``, prefix a DNS subdomain <= 253, name <= 63."""
    if k == "":
        return "label key must not be empty"
    parts = k.split("/")
    if len(parts) > 2:
        return f"invalid label key {k!r}: at most one '/' (an optional DNS-subdomain prefix, then a name)"
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if prefix == "":
            return f"invalid label key {k!r}: the prefix before '/' must not be empty"
        if len(prefix) > 253:
            return f"invalid label key {k!r}: the prefix must be at most 253 characters"
        if not DNS1123_SUBDOMAIN_RE.match(prefix):
            return f"invalid label key {k!r}: the prefix must be a lowercase DNS subdomain (a-z, 0-9, '-', '.')"
    if name == "":
        return f"invalid label key {k!r}: the name part must not be empty"
    if len(name) > 63:
        return f"invalid label key {k!r}: the name part must be at most 63 characters (got {len(name)})"
    if not _NAME_PART_RE.match(name):
        return f"invalid label key {k!r}: the name must start and end with a letter or digit and contain only letters, digits, '-', '_' and '.'"
    return None


def label_value_problem(v: str) -> str | None:
    if len(v) > 63:
        return f"invalid label value {v!r}: must be at most 63 characters (got {len(v)})"
    if not _LABEL_VALUE_RE.match(v):
        return f"invalid label value {v!r}: must be empty or start and end with a letter or digit, with only letters, digits, '-', '_' and '.' between"
    return None


def label_value_check(value, path, errors):
    """A schema check: a label value (the length itself is the ``Str(max_len=63)`` node's message)."""
    if isinstance(value, str) and len(value) <= 63:
        problem = label_value_problem(value)
        if problem:
            errors.append(FieldError(path, problem))


def dns_subdomain_check(value, path, errors):
    """A schema check: an object name (a lowercase DNS-1123 subdomain, at most 253 characters)."""
    if isinstance(value, str) and value and (len(value) > 253 or not DNS1123_SUBDOMAIN_RE.match(value)):
        errors.append(
            FieldError(path, f"invalid name {value!r}: must be a lowercase DNS-1123 subdomain (a-z, 0-9, '-', '.', start and end alphanumeric, at most 253 characters)")
        )


# ----------------------------------------------------------------------------- OpenAPI formats and list types
_DATE_RE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_TIME_RE = re.compile(r"([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))")


def is_date_time(value: str) -> bool:
    """The API server's ``format: date-time`` (kube-openapi ``strfmt.IsDateTime``, which CRD schemas use): the value,
    lower-cased and split at ``t``, is a calendar date ``YYYY-MM-DD`` (a real day of that month) then
    ``HH:MM:SS[.fraction]`` and ``z`` or ``+HH:MM`` / ``-HH:MM``, with HH <= 23 and MM, SS <= 59."""
    if len(value) < 4:
        return False
    parts = value.lower().split("t")
    if len(parts) < 2:
        return False
    date = _DATE_RE.fullmatch(parts[0])
    if not date:
        return False
    year, month, day = (int(g) for g in date.groups())
    if not 1 <= month <= 12 or not 1 <= day <= calendar.mdays[month] + (month == 2 and calendar.isleap(year)):
        return False
    hms = _TIME_RE.fullmatch(parts[1])
    return bool(hms) and hms.group(1) <= "23" and hms.group(2) <= "59" and hms.group(3) <= "59"


def date_time_check(value, path, errors):
    """A schema check: ``format: date-time`` (:func:`is_date_time`)."""
    if isinstance(value, str) and not is_date_time(value):
        errors.append(FieldError(path, f"invalid value {value!r}: must be of type date-time (RFC 3339, such as "
                                       f"2024-05-01T10:00:00Z)"))


def unique_items_check(items, path, errors):
    """A schema check: ``x-kubernetes-list-type: set``, each value at most once (the API server names the repeat:
    ``Duplicate value: "Empty"``)."""
    if isinstance(items, list):
        seen: list = []
        for i, v in enumerate(items):
            if v in seen:
                errors.append(FieldError(index(path, i), f"Duplicate value: {json.dumps(v)}"))
            else:
                seen.append(v)


# ----------------------------------------------------------------------------- a disruption budget entry
def _check_budget(b: dict, path: str, errors: list[FieldError]) -> None:
    has_s, has_d = "schedule" in b, "duration" in b
    if has_s != has_d:
        missing = "duration" if has_s else "schedule"
        errors.append(FieldError(join(path, missing), "Required value: 'schedule' must be set with 'duration' (set both or neither)"))


def _check_schedule(value, path, errors):
    """A budget's schedule: cron, optionally after ``CRON_TZ=Area/City `` (an unknown zone is named as such)."""
    if isinstance(value, str):
        try:
            parse_budget_schedule(value)
        except TimeZoneError as e:
            errors.append(FieldError(path, str(e)))
        except CronError as e:
            errors.append(FieldError(path, f"invalid schedule {value!r}: {e}"))


BUDGET = Obj(
    {
        "nodes": Str(pattern=r"^((100|[0-9]{1,2})%|[0-9]+)$", pattern_msg="must be a node count (e.g. 5) or a percentage 0%-100% (e.g. 10%)", default="10%"),
        "schedule": Str(checks=[_check_schedule]),
        "duration": Str(pattern=BUDGET_DURATION_RE.pattern, pattern_msg="must be hours and/or minutes such as 30m, 8h or 1h30m (no seconds)"),
        "reasons": List(Str(enum=DISRUPTION_REASONS), max_items=50, checks=[unique_items_check]),
    },
    required=("nodes",),
    checks=[_check_budget],
)
