"""The interruption queue's bodies: real-shaped EventBridge events parse to typed messages; anything else raises an
error naming the field, and an unknown detail-type is its own error class."""

import json

import pytest

from karpenter_lambda.controllers.interruption_messages import (EVENT_PATTERNS, MalformedEvent, UnknownEventType,
                                                                parse_message)

from .interruption_world import (capacity_reservation_interruption, health_scheduled_change, rebalance, spot_warning,
                                 state_change)

T = "2027-06-01T12:00:00Z"


def test_each_event_type_parses_with_aws_field_names():
    m = parse_message(json.dumps(spot_warning("i-0abc123", T)))
    assert (m.kind, m.instance_ids, m.action, m.time) == ("SpotInterruption", ("i-0abc123",), "terminate", T)
    assert m.id and m.source == "aws.ec2" and m.detail_type == "EC2 Spot Instance Interruption Warning"
    assert parse_message(json.dumps(rebalance("i-0abc123", T))).kind == "RebalanceRecommendation"
    m = parse_message(json.dumps(state_change("i-0abc123", "Shutting-Down", T)))
    assert (m.kind, m.state) == ("StateChange", "shutting-down")
    m = parse_message(json.dumps(capacity_reservation_interruption("i-0abc123", T)))
    assert (m.kind, m.action) == ("CapacityReservationInterruption", "terminate")
    m = parse_message(json.dumps(health_scheduled_change(["i-01", "vol-0123", "i-02"], T)))
    assert (m.kind, m.instance_ids, m.event_type_code) == ("ScheduledChange", ("i-01", "i-02"),
                                                           "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED")


def test_account_is_not_required_and_health_events_of_other_services_are_noop():
    doc = spot_warning("i-0abc123", T)
    del doc["account"]
    assert parse_message(json.dumps(doc)).kind == "SpotInterruption"
    for service, category in (("RDS", "scheduledChange"), ("EC2", "issue")):
        m = parse_message(json.dumps(health_scheduled_change(["i-01"], T, service=service, category=category)))
        assert m.kind == "NoOp" and m.instance_ids == () and service in m.note


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d.pop("detail-type"), "detail-type: required string missing"),
    (lambda d: d.pop("source"), "source: required string missing"),
    (lambda d: d.pop("id"), "id: required string missing"),
    (lambda d: d.pop("detail"), "detail: required object missing"),
    (lambda d: d.__setitem__("detail", []), "detail: must be an object, got list"),
    (lambda d: d["detail"].pop("instance-id"), "detail.instance-id: required string missing"),
    (lambda d: d["detail"].__setitem__("instance-id", 7), "detail.instance-id: must be a string, got int"),
    (lambda d: d["detail"].__setitem__("instance-id", "vol-0123"), "detail.instance-id: 'vol-0123' is not an EC2"),
])
def test_a_bad_field_is_named(mutate, field):
    doc = spot_warning("i-0abc123", T)
    mutate(doc)
    with pytest.raises(MalformedEvent, match=f"^{field}"):
        parse_message(json.dumps(doc))


def test_state_and_health_fields_are_checked():
    doc = state_change("i-0abc123", "stopped", T)
    del doc["detail"]["state"]
    with pytest.raises(MalformedEvent, match="^detail.state: required string missing"):
        parse_message(json.dumps(doc))
    doc = health_scheduled_change(["i-01"], T)
    doc["detail"]["affectedEntities"] = [{"entityValue": "i-01"}, {"status": "IMPAIRED"}]
    m = parse_message(json.dumps(doc))   # the unusable entity is skipped (Karpenter: "" matches nothing), not fatal
    assert m.instance_ids == ("i-01",)
    assert m.skipped == ("detail.affectedEntities[1].entityValue: required string missing",)
    # no affectedEntities at all: no instance named, as an empty list (Karpenter); acknowledged, not dead-lettered
    del doc["detail"]["affectedEntities"]
    m = parse_message(json.dumps(doc))
    assert m.instance_ids == () and m.skipped == ("detail.affectedEntities: missing (no instance named)",)
    doc["detail"]["affectedEntities"] = {"entityValue": "i-01"}
    with pytest.raises(MalformedEvent, match="^detail.affectedEntities: must be a list, got dict"):
        parse_message(json.dumps(doc))


@pytest.mark.parametrize("body, match", [("", "empty message body"), ("{not json", "body is not JSON"),
                                         ("[1, 2]", "body must be a JSON object")])
def test_not_an_event(body, match):
    with pytest.raises(MalformedEvent, match=match):
        parse_message(body)


def test_unknown_detail_type_is_its_own_error():
    doc = spot_warning("i-0abc123", T)
    doc["detail-type"] = "EC2 Instance Launch Successful"
    with pytest.raises(UnknownEventType, match="detail-type: 'EC2 Instance Launch Successful' from source 'aws.ec2'"):
        parse_message(json.dumps(doc))
    doc = spot_warning("i-0abc123", T)
    doc["source"] = "aws.autoscaling"
    with pytest.raises(UnknownEventType):
        parse_message(json.dumps(doc))
    assert not issubclass(UnknownEventType, MalformedEvent)


def test_the_five_rule_patterns():
    assert EVENT_PATTERNS == [
        {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
        {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
        {"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"],
         "detail": {"state": ["stopping", "stopped", "shutting-down", "terminated"]}},
        {"source": ["aws.ec2"], "detail-type": ["EC2 Capacity Reservation Instance Interruption Warning"]},
        {"source": ["aws.health"], "detail-type": ["AWS Health Event"]},
    ]


def test_the_state_change_rule_takes_the_states_the_handler_acts_on():
    from karpenter_lambda.controllers.interrupt import ACTED_STATES
    from karpenter_lambda.controllers.interruption_messages import ACTED_STATE_NAMES

    assert set(ACTED_STATES) == set(ACTED_STATE_NAMES)


def test_a_scheduled_changes_start_time_is_read_when_readable():
    from karpenter_lambda.api.times import to_epoch

    doc = health_scheduled_change(["i-01"], T)
    assert doc["detail"]["startTime"] == "Tue, 15 Jun 2027 12:00:00 GMT"          # AWS Health's format
    assert parse_message(json.dumps(doc)).start == to_epoch("2027-06-15T12:00:00Z")
    doc["detail"]["startTime"] = "2027-06-20T08:30:00Z"                            # ISO 8601 read too
    assert parse_message(json.dumps(doc)).start == to_epoch("2027-06-20T08:30:00Z")
    for unreadable in ("next tuesday", "", 1812208209, None):                     # optional: acted on without it
        doc["detail"]["startTime"] = unreadable
        m = parse_message(json.dumps(doc))
        assert (m.kind, m.instance_ids, m.start) == ("ScheduledChange", ("i-01",), None), unreadable
    del doc["detail"]["startTime"]
    assert parse_message(json.dumps(doc)).start is None


def test_a_mistyped_optional_field_is_not_read_and_the_event_still_acts():
    """``time``, ``instance-action`` and a Health ``eventTypeCode`` are optional: of the wrong type they are not read
    (listed in ``skipped``, which the handler logs), and the event still names its instance -- a spot warning is never
    dropped for its timestamp."""
    doc = spot_warning("i-0abc123", T)
    doc["time"], doc["detail"]["instance-action"] = 1780000000, ["terminate"]
    m = parse_message(json.dumps(doc))
    assert (m.kind, m.instance_ids, m.time, m.action) == ("SpotInterruption", ("i-0abc123",), None, None)
    assert m.skipped == ("time: must be a string, got int (not read)",
                         "detail.instance-action: must be a string, got list (not read)")
    doc = health_scheduled_change(["i-01"], T)
    doc["detail"]["eventTypeCode"] = 7
    m = parse_message(json.dumps(doc))
    assert (m.kind, m.instance_ids, m.event_type_code) == ("ScheduledChange", ("i-01",), None)
    assert m.skipped == ("detail.eventTypeCode: must be a string, got int (not read)",)


def test_another_services_health_event_without_a_category_is_a_noop_and_a_wrong_source_is_named():
    doc = health_scheduled_change(["i-01"], T, service="RDS")
    del doc["detail"]["eventTypeCategory"]
    m = parse_message(json.dumps(doc))
    assert m.kind == "NoOp" and "RDS" in m.note
    doc = health_scheduled_change(["i-01"], T)
    del doc["detail"]["eventTypeCategory"]          # EC2's own event must say what it is
    with pytest.raises(MalformedEvent, match="^detail.eventTypeCategory: required string missing"):
        parse_message(json.dumps(doc))
    doc = spot_warning("i-0abc123", T)
    doc["source"] = "my.app"
    with pytest.raises(UnknownEventType, match="^source: 'my.app' does not send 'EC2 Spot Instance Interruption "
                                               "Warning' events \\(expected 'aws.ec2'\\)"):
        parse_message(json.dumps(doc))
