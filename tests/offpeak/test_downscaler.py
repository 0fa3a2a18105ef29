"""kube-downscaler annotations (offpeak/downscaler.py): the time-spec grammar, namespace vs workload,
exclude / exclude-until, downtime-replicas, and errors reported (never raised) by downscaler_decision."""

from datetime import datetime, timedelta, timezone

import pytest

from karpenter_lambda.offpeak.downscaler import (
    AbsoluteRange,
    DownscalerError,
    RecurringRange,
    downscaler_decision,
    parse_exclude_until,
    parse_timespec,
    timespec_matches,
)

UTC = timezone.utc
FRI = datetime(2026, 3, 6, tzinfo=UTC)          # a Friday, winter time in Berlin (UTC+1)
SAT = datetime(2026, 3, 7, tzinfo=UTC)


def at(day: datetime, hh: int, mm: int = 0) -> datetime:
    return day + timedelta(hours=hh, minutes=mm)


def deploy(ann: dict | None = None, ns: str = "dev", name: str = "web", kind: str = "Deployment", replicas: int = 3):
    return {"apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": name, "namespace": ns, "annotations": dict(ann or {})},
            "spec": {"replicas": replicas}}


def namespace(ann: dict | None = None, name: str = "dev"):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "annotations": dict(ann or {})}}


# -- grammar -----------------------------------------------------------------------------------------------------
def test_recurring_spec_parses_to_weekdays_minutes_and_zone():
    spec = parse_timespec("Mon-Fri 07:30-20:30 Europe/Berlin")
    assert spec.constant is None
    assert spec.ranges == (RecurringRange(0, 4, 450, 1230, "Europe/Berlin"),)
    assert parse_timespec("mon-FRI 07:30-20:30 UTC").ranges[0].day_to == 4          # any case


def test_always_never_and_comma_lists_and_absolute_ranges():
    assert parse_timespec("always").constant is True and parse_timespec(" NEVER ").constant is False
    spec = parse_timespec("Mon-Fri 08:00-12:00 UTC, Mon-Fri 13:00-18:00 UTC,"
                          "2026-03-07T10:00:00+00:00-2026-03-07T11:00:00Z")
    assert len(spec.ranges) == 3 and isinstance(spec.ranges[2], AbsoluteRange)
    assert not timespec_matches(spec, at(FRI, 12, 30))          # the lunch gap
    assert timespec_matches(spec, at(FRI, 13, 0))
    assert timespec_matches(spec, at(SAT, 10, 0)) and timespec_matches(spec, at(SAT, 11, 0))   # both ends inclusive
    assert not timespec_matches(spec, at(SAT, 11, 0) + timedelta(seconds=1))


@pytest.mark.parametrize("text,fragment", [
    ("", "empty time spec"),
    ("Mon-Fri 7:30-20:30 UTC", "does not match the format"),
    ("Mon-Fry 07:30-20:30 UTC", "unknown weekday 'Fry'"),
    ("Mon-Fri 07:30-20:30 Mars/Base", "unknown time zone 'Mars/Base'"),
    ("Mon-Fri 07:60-20:30 UTC", "not a time of day"),
    ("Mon-Fri 07:00-25:00 UTC", "not a time of day"),
    ("always, Mon-Fri 07:30-20:30 UTC", "does not match the format"),
    ("Mon-Fri 07:30-20:30 UTC,", "does not match the format"),
    ("2026-03-07T10:00:00-2026-03-07T11:00:00", "does not match the format"),      # absolute needs an offset
])
def test_grammar_errors(text, fragment):
    with pytest.raises(DownscalerError, match=fragment.replace("(", r"\(")):
        parse_timespec(text)


def test_recurring_matching_in_local_time_start_inclusive_end_exclusive():
    spec = parse_timespec("Mon-Fri 07:30-20:30 Europe/Berlin")
    assert not timespec_matches(spec, at(FRI, 6, 29))     # 07:29 CET
    assert timespec_matches(spec, at(FRI, 6, 30))         # 07:30 CET
    assert timespec_matches(spec, at(FRI, 19, 29))        # 20:29
    assert not timespec_matches(spec, at(FRI, 19, 30))    # 20:30: end exclusive
    assert not timespec_matches(spec, at(SAT, 10))        # Saturday
    summer_fri = datetime(2026, 7, 3, tzinfo=UTC)
    assert timespec_matches(spec, at(summer_fri, 5, 30))  # 07:30 CEST: the zone's own DST
    assert not timespec_matches(spec, at(summer_fri, 5, 29))


def test_weekday_ranges_wrap_and_full_days_and_overnight_ranges_never_match():
    sun_thu = parse_timespec("Sun-Thu 00:00-24:00 UTC")
    assert timespec_matches(sun_thu, at(SAT + timedelta(days=1), 23, 59))     # Sunday
    assert timespec_matches(sun_thu, at(FRI - timedelta(days=1), 12))         # Thursday
    assert not timespec_matches(sun_thu, at(FRI, 12)) and not timespec_matches(sun_thu, at(SAT, 12))
    overnight = parse_timespec("Mon-Sun 22:00-06:00 UTC")                      # kube-downscaler: never
    assert not any(timespec_matches(overnight, at(FRI, h)) for h in range(24))


def test_naive_now_is_utc():
    assert timespec_matches(parse_timespec("Fri-Fri 10:00-11:00 UTC"), datetime(2026, 3, 6, 10, 30))


def test_exclude_until_formats():
    assert parse_exclude_until("2026-04-05") == datetime(2026, 4, 5, tzinfo=UTC)
    assert parse_exclude_until("2026-04-05T08:00:00Z") == datetime(2026, 4, 5, 8, tzinfo=UTC)
    assert parse_exclude_until("2026-04-05T08:00") == datetime(2026, 4, 5, 8, tzinfo=UTC)
    assert parse_exclude_until("2026-04-05 08:00") == datetime(2026, 4, 5, 8, tzinfo=UTC)
    assert parse_exclude_until("2026-04-05T10:00:00+02:00") == datetime(2026, 4, 5, 8, tzinfo=UTC)
    with pytest.raises(DownscalerError, match="exclude-until"):
        parse_exclude_until("next tuesday")


# -- decisions ---------------------------------------------------------------------------------------------------
def test_no_annotations_no_decision():
    assert downscaler_decision(deploy(), namespace(), at(FRI, 22)) is None
    assert downscaler_decision(deploy({"other/thing": "x"}), None, at(FRI, 22)) is None


def test_workload_downtime_and_uptime():
    w = deploy({"downscaler/downtime": "Mon-Fri 20:00-24:00 UTC"})
    d = downscaler_decision(w, namespace(), at(FRI, 21))
    assert (d.replicas, d.error) == (0, None)
    assert d.source == "downscaler/downtime on Deployment dev/web"
    up = downscaler_decision(w, namespace(), at(FRI, 19))
    assert up.replicas is None and up.error is None
    w = deploy({"downscaler/uptime": "Mon-Fri 07:30-20:30 Europe/Berlin"}, kind="StatefulSet", name="db")
    assert downscaler_decision(w, None, at(FRI, 12)).replicas is None
    d = downscaler_decision(w, None, at(SAT, 12))
    assert d.replicas == 0 and d.source == "downscaler/uptime on StatefulSet dev/db"


def test_namespace_annotations_apply_and_the_workload_wins():
    ns = namespace({"downscaler/uptime": "Mon-Fri 07:30-20:30 Europe/Berlin", "downscaler/downtime-replicas": "1"})
    d = downscaler_decision(deploy(), ns, at(FRI, 21))
    assert d.replicas == 1 and d.source == "downscaler/uptime on Namespace dev"
    # the workload's own uptime replaces the namespace's: up until 23:00 UTC
    late = deploy({"downscaler/uptime": "Mon-Fri 07:00-23:00 UTC", "downscaler/downtime-replicas": "2"})
    assert downscaler_decision(late, ns, at(FRI, 21)).replicas is None
    d = downscaler_decision(late, ns, at(FRI, 23, 30))
    assert d.replicas == 2 and d.source == "downscaler/uptime on Deployment dev/web"
    # per annotation: the workload's downtime combines with the namespace's uptime (as kube-downscaler does)
    lunch = deploy({"downscaler/downtime": "Mon-Fri 12:00-13:00 UTC"})
    assert downscaler_decision(lunch, ns, at(FRI, 12, 30)).source == "downscaler/downtime on Deployment dev/web"
    assert downscaler_decision(lunch, ns, at(FRI, 10)).replicas is None
    assert downscaler_decision(lunch, ns, at(FRI, 21)).replicas == 1       # down by the namespace's uptime


def test_exclude_on_workload_or_namespace():
    ns = namespace({"downscaler/downtime": "always"})
    assert downscaler_decision(deploy(), ns, at(FRI, 12)).replicas == 0
    assert downscaler_decision(deploy({"downscaler/exclude": "true"}), ns, at(FRI, 12)) is None
    assert downscaler_decision(deploy({"downscaler/exclude": "yes"}), ns, at(FRI, 12)) is None   # not "false"
    assert downscaler_decision(deploy({"downscaler/exclude": "False"}), ns, at(FRI, 12)).replicas == 0
    ns_ex = namespace({"downscaler/downtime": "always", "downscaler/exclude": "true"})
    assert downscaler_decision(deploy(), ns_ex, at(FRI, 12)) is None
    # kube-system is left alone, as kube-downscaler's default --exclude-namespaces
    assert downscaler_decision(deploy(ns="kube-system"), namespace({"downscaler/downtime": "always"}, "kube-system"),
                               at(FRI, 12)) is None


def test_exclude_until():
    ann = {"downscaler/downtime": "always", "downscaler/exclude-until": "2026-03-07"}
    assert downscaler_decision(deploy(ann), None, at(FRI, 23, 59)) is None
    assert downscaler_decision(deploy(ann), None, SAT).replicas == 0                 # the moment it passes
    ns = namespace({"downscaler/downtime": "always", "downscaler/exclude-until": "2026-03-06T12:00:00Z"})
    assert downscaler_decision(deploy(), ns, at(FRI, 11, 59)) is None
    assert downscaler_decision(deploy(), ns, at(FRI, 12)).replicas == 0


def test_downtime_replicas_default_workload_and_namespace():
    ns = namespace({"downscaler/downtime-replicas": "2"})
    assert downscaler_decision(deploy({"downscaler/downtime": "always"}), None, FRI).replicas == 0
    assert downscaler_decision(deploy({"downscaler/downtime": "always"}), ns, FRI).replicas == 2
    w = deploy({"downscaler/downtime": "always", "downscaler/downtime-replicas": " 1 "})
    assert downscaler_decision(w, ns, FRI).replicas == 1


@pytest.mark.parametrize("ann,ns_ann,fragment", [
    ({"downscaler/uptime": "weekdays 9-5"}, {}, "does not match the format"),
    ({"downscaler/downtime": "Mon-Fri 20:00-24:00 Moon/Base"}, {}, "unknown time zone"),
    ({"downscaler/downtime": "always", "downscaler/downtime-replicas": "two"}, {}, "downtime-replicas 'two' on Deployment dev/web"),
    ({"downscaler/downtime": "always", "downscaler/downtime-replicas": "-1"}, {}, "must not be negative"),
    ({"downscaler/downtime": "always"}, {"downscaler/downtime-replicas": "20%"}, "on Namespace dev"),
    ({"downscaler/downtime": "always", "downscaler/exclude-until": "soon"}, {}, "exclude-until 'soon'"),
    ({"downscaler/downscale-period": "Mon-Fri 20:00-24:00 UTC"}, {}, "downscaler/downscale-period on Deployment dev/web is not supported"),
    ({"downscaler/downtime": "always"}, {"downscaler/force-uptime": "true"}, "downscaler/force-uptime on Namespace dev is not supported"),
])
def test_parse_errors_are_reported_not_raised(ann, ns_ann, fragment):
    d = downscaler_decision(deploy(ann), namespace(ns_ann), at(FRI, 21))
    assert d is not None and d.replicas is None
    assert fragment in d.error


def test_kube_downscalers_original_replicas_is_passed_on():
    w = deploy({"downscaler/downtime": "always", "downscaler/original-replicas": "4"}, replicas=0)
    assert downscaler_decision(w, None, FRI).original_replicas == 4
    # annotations removed but the record is still there (kube-downscaler uninstalled mid-downtime)
    d = downscaler_decision(deploy({"downscaler/original-replicas": "4"}, replicas=0), None, FRI)
    assert d.replicas is None and d.original_replicas == 4
