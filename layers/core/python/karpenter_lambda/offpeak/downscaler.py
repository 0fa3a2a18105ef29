"""kube-downscaler annotations, honoured unchanged: is a workload down now, and at how many replicas?

Teams moving from kube-downscaler (hjacobs/kube-downscaler, codeberg.org/hjacobs/kube-downscaler) keep their
annotations; the off-peak plan asks :func:`downscaler_decision` for each Deployment/StatefulSet.

Supported, with kube-downscaler's meaning:

* ``downscaler/uptime`` and ``downscaler/downtime`` on the workload or on its Namespace.  Each annotation is
  looked up on the workload first, then on the Namespace (so a workload's ``downtime`` and its Namespace's
  ``uptime`` combine, as in kube-downscaler).  Defaults: uptime ``always``, downtime ``never``.  The workload is
  down when ``not matches(uptime) or matches(downtime)``.
* time specs: ``always``, ``never`` (the whole value, any case); otherwise a comma-separated list of
  recurring specs ``Mon-Fri 07:30-20:30 Europe/Berlin`` (three-letter weekdays, any case, a range that may
  wrap, e.g. ``Sun-Thu``; ``HH:MM-HH:MM`` from inclusive, to exclusive, ``24:00`` allowed as the end; an IANA
  zone) and absolute ranges ``2019-04-30T08:29:00+00:00-2019-04-30T19:30:00+00:00`` (both ends inclusive).
  A recurring range whose start is after its end (``22:00-06:00``) never matches, exactly as in
  kube-downscaler: write ``Mon-Fri 22:00-24:00 UTC, Tue-Sat 00:00-06:00 UTC`` instead.
* ``downscaler/downtime-replicas``: the replicas while down (workload first, then Namespace; default 0).
* ``downscaler/exclude``: any value other than ``false`` (any case) on the workload or its Namespace: left
  alone (kube-downscaler's "to be on the safe side").
* ``downscaler/exclude-until``: left alone before that time.  Formats: ``2024-04-05``, ``2024-04-05 08:00``,
  ``2024-04-05T08:00``, ``2024-04-05T08:00:00Z`` (UTC, as kube-downscaler), and RFC 3339 with an offset.
* the namespace ``kube-system`` is left alone (kube-downscaler's default ``--exclude-namespaces``).

Where we differ on purpose (each makes the workload *left alone* with an error, instead of guessing):

* an annotation that does not parse (time spec, replicas, exclude-until): kube-downscaler logs and, for a bad
  ``exclude-until``, scales anyway; here the decision carries ``error`` and the workload is left alone.
* hours above 24 or minutes above 59 in a recurring spec are errors (kube-downscaler computes with them).
* zone names may contain digits, ``+`` and ``-`` (``Etc/GMT+1``, ``America/Port-au-Prince``), which
  kube-downscaler's pattern refuses; absolute ranges also accept ``Z``.

Not supported (an annotation present gives an error naming it; the workload is left alone):
``downscaler/upscale-period``, ``downscaler/downscale-period``, ``downscaler/force-uptime``,
``downscaler/force-downtime``, ``downscaler/grace-period``, percentages in ``downtime-replicas``.
Not applicable: the command-line/environment defaults (``--default-uptime``, ``--default-downtime``,
``--exclude-namespaces``, ``--exclude-deployments``, ``--grace-period``, ``--deployment-time-annotation``),
CronJob suspension, HPA ``minReplicas`` scaling, Stacks, Argo Rollouts, KEDA ScaledObjects as targets, and the
``downscaler/force-uptime`` pod annotation.  kube-downscaler's own record, ``downscaler/original-replicas``, is
read (:attr:`DownscalerDecision.original_replicas`) so the plan can restore a workload that kube-downscaler
scaled down before the switch.  The decision is per workload; the plan applies it (lowest replica count wins
when several holds apply).

Pure: ``now`` is passed in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..api.times import to_datetime

__all__ = [
    "DownscalerError",
    "TimeSpec",
    "RecurringRange",
    "AbsoluteRange",
    "DownscalerDecision",
    "parse_timespec",
    "timespec_matches",
    "parse_exclude_until",
    "downscaler_decision",
    "UPTIME",
    "DOWNTIME",
    "DOWNTIME_REPLICAS",
    "EXCLUDE",
    "EXCLUDE_UNTIL",
    "ORIGINAL_REPLICAS",
    "UNSUPPORTED",
]

PREFIX = "downscaler/"
UPTIME = PREFIX + "uptime"
DOWNTIME = PREFIX + "downtime"
DOWNTIME_REPLICAS = PREFIX + "downtime-replicas"
EXCLUDE = PREFIX + "exclude"
EXCLUDE_UNTIL = PREFIX + "exclude-until"
ORIGINAL_REPLICAS = PREFIX + "original-replicas"
UNSUPPORTED = tuple(PREFIX + n for n in ("upscale-period", "downscale-period", "force-uptime", "force-downtime",
                                         "grace-period"))
EXCLUDED_NAMESPACES = ("kube-system",)

WEEKDAYS = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")
_RECURRING = re.compile(r"^([a-zA-Z]{3})-([a-zA-Z]{3}) (\d\d):(\d\d)-(\d\d):(\d\d) ([A-Za-z0-9/_+-]+)$")
_ISO = r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:Z|[-+]\d{2}:\d{2}))"
_ABSOLUTE = re.compile(rf"^{_ISO}-{_ISO}$")
_UNTIL_FORMATS = ("%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M", "%Y-%m-%d")
_FORMAT_HINT = '"Mon-Fri 07:30-20:30 Europe/Berlin", "2019-01-01T00:00:00+00:00-2019-01-02T12:34:56+00:00", always or never'


class DownscalerError(ValueError):
    """An annotation value that does not parse."""


@dataclass(frozen=True)
class RecurringRange:
    day_from: int          # 0 = Monday (Python's weekday())
    day_to: int
    minute_from: int       # minutes after local midnight, inclusive
    minute_to: int         # exclusive; 1440 for 24:00
    time_zone: str

    def matches(self, now: datetime) -> bool:
        local = now.astimezone(ZoneInfo(self.time_zone))
        wd = local.weekday()
        if self.day_from > self.day_to:          # wraps, e.g. Sun-Thu
            day_ok = wd >= self.day_from or wd <= self.day_to
        else:
            day_ok = self.day_from <= wd <= self.day_to
        return day_ok and self.minute_from <= local.hour * 60 + local.minute < self.minute_to


@dataclass(frozen=True)
class AbsoluteRange:
    start: datetime
    end: datetime

    def matches(self, now: datetime) -> bool:
        return self.start <= now <= self.end


@dataclass(frozen=True)
class TimeSpec:
    text: str
    constant: bool | None                          # True for "always", False for "never", else None
    ranges: tuple[RecurringRange | AbsoluteRange, ...] = ()


def parse_timespec(text: str) -> TimeSpec:
    """``"Mon-Fri 07:30-20:30 Europe/Berlin"``, comma lists, ``always``/``never``, absolute ranges."""
    if not isinstance(text, str) or not text.strip():
        raise DownscalerError(f"empty time spec: expected {_FORMAT_HINT}")
    if text.strip().lower() in ("always", "never"):
        return TimeSpec(text, text.strip().lower() == "always")
    ranges = []
    for part in text.split(","):
        part = part.strip()
        m = _RECURRING.match(part)
        if m:
            ranges.append(_recurring(part, m))
            continue
        m = _ABSOLUTE.match(part)
        if m:
            start, end = (to_datetime(g) for g in m.groups())      # the pattern requires the offset
            if start is None or end is None:                         # e.g. month 13: not a date
                raise DownscalerError(f"time spec {text!r}: {part!r} is not a valid time range ({_FORMAT_HINT})")
            ranges.append(AbsoluteRange(start, end))
            continue
        raise DownscalerError(f"time spec {text!r}: {part!r} does not match the format ({_FORMAT_HINT})")
    return TimeSpec(text, None, tuple(ranges))


def _recurring(part: str, m: re.Match) -> RecurringRange:
    d1, d2, h1, m1, h2, m2, tz = m.groups()
    days = []
    for d in (d1, d2):
        if d.upper() not in WEEKDAYS:
            raise DownscalerError(f"time spec {part!r}: unknown weekday {d!r} (use Mon, Tue, Wed, Thu, Fri, Sat, Sun)")
        days.append(WEEKDAYS.index(d.upper()))
    minutes = []
    for h, mm in ((h1, m1), (h2, m2)):
        if int(mm) > 59 or int(h) > 24 or (int(h) == 24 and int(mm) > 0):
            raise DownscalerError(f"time spec {part!r}: {h}:{mm} is not a time of day (00:00-24:00)")
        minutes.append(int(h) * 60 + int(mm))
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise DownscalerError(f"time spec {part!r}: unknown time zone {tz!r}") from None
    return RecurringRange(days[0], days[1], minutes[0], minutes[1], tz)


def timespec_matches(spec: TimeSpec, now: datetime) -> bool:
    if spec.constant is not None:
        return spec.constant
    now = _aware(now)
    return any(r.matches(now) for r in spec.ranges)


def parse_exclude_until(text: str) -> datetime:
    """kube-downscaler's formats (UTC) and RFC 3339 with an offset."""
    value = (text or "").strip()
    for fmt in _UNTIL_FORMATS:
        try:
            return datetime.strptime(value, fmt).replace(tzinfo=timezone.utc)
        except ValueError:
            pass
    parsed = to_datetime(value, require_offset=True)
    if parsed is not None:
        return parsed
    raise DownscalerError(f"{EXCLUDE_UNTIL} {text!r}: expected 2024-04-05, 2024-04-05 08:00, 2024-04-05T08:00, "
                          f"2024-04-05T08:00:00Z or an RFC 3339 time with an offset")


@dataclass(frozen=True)
class DownscalerDecision:
    replicas: int | None                 # the target while down; None = not down now (keep/restore original)
    source: str                          # which annotation on which object decided
    error: str | None = None             # an annotation that did not parse (the workload is then left alone)
    original_replicas: int | None = None  # kube-downscaler's downscaler/original-replicas, when present


def downscaler_decision(workload: dict, namespace: dict | None, now: datetime) -> DownscalerDecision | None:
    """None when neither the workload nor its namespace carries downscaler annotations (or exclude is set)."""
    w_ann = _annotations(workload)
    ns_ann = _annotations(namespace)
    if not any(k.startswith(PREFIX) for k in (*w_ann, *ns_ann)):
        return None
    meta = workload.get("metadata") or {}
    ns_name = meta.get("namespace") or "default"
    w_label = f"{workload.get('kind', 'workload')} {ns_name}/{meta.get('name', '')}"
    ns_label = f"Namespace {ns_name}"
    now = _aware(now)
    if ns_name in EXCLUDED_NAMESPACES:
        return None
    try:
        for ann, label in ((w_ann, w_label), (ns_ann, ns_label)):
            if _excluded(ann, now, label):
                return None
        original = _int(w_ann, ORIGINAL_REPLICAS, w_label)
        for ann, label in ((w_ann, w_label), (ns_ann, ns_label)):
            present = [k for k in UNSUPPORTED if k in ann]
            if present:
                raise DownscalerError(f"{present[0]} on {label} is not supported (see the off-peak docs): left alone")
        uptime, up_src = _lookup(UPTIME, w_ann, ns_ann, w_label, ns_label)
        downtime, down_src = _lookup(DOWNTIME, w_ann, ns_ann, w_label, ns_label)
        if uptime is None and downtime is None:
            if original is None:
                return None
            return DownscalerDecision(None, f"{ORIGINAL_REPLICAS} on {w_label}", None, original)
        up = parse_timespec(uptime) if uptime is not None else TimeSpec("always", True)
        down = parse_timespec(downtime) if downtime is not None else TimeSpec("never", False)
        reps = _int(w_ann, DOWNTIME_REPLICAS, w_label)
        if reps is None:
            reps = _int(ns_ann, DOWNTIME_REPLICAS, ns_label)
        reps = 0 if reps is None else reps
    except DownscalerError as e:
        return DownscalerDecision(None, "downscaler", str(e))
    if timespec_matches(down, now):
        return DownscalerDecision(reps, f"{DOWNTIME} on {down_src}", None, original)
    if not timespec_matches(up, now):
        return DownscalerDecision(reps, f"{UPTIME} on {up_src}", None, original)
    src = up_src if uptime is not None else down_src
    return DownscalerDecision(None, f"{UPTIME if uptime is not None else DOWNTIME} on {src}", None, original)


def _annotations(obj: dict | None) -> dict:
    return ((obj or {}).get("metadata") or {}).get("annotations") or {}


def _aware(t: datetime) -> datetime:
    return to_datetime(t)          # naive = UTC


def _lookup(key: str, w_ann: dict, ns_ann: dict, w_label: str, ns_label: str) -> tuple[str | None, str]:
    if key in w_ann:
        return w_ann[key], w_label
    if key in ns_ann:
        return ns_ann[key], ns_label
    return None, ""


def _excluded(ann: dict, now: datetime, label: str) -> bool:
    if str(ann.get(EXCLUDE, "false")).lower() != "false":
        return True
    until = ann.get(EXCLUDE_UNTIL)
    if until:
        try:
            return now < parse_exclude_until(until)
        except DownscalerError as e:
            raise DownscalerError(f"{e} on {label}") from None
    return False


def _int(ann: dict, key: str, label: str) -> int | None:
    raw = ann.get(key)
    if raw is None:
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise DownscalerError(f"{key} {raw!r} on {label}: expected a whole number of replicas") from None
    if value < 0:
        raise DownscalerError(f"{key} {raw!r} on {label}: must not be negative")
    return value
