"""Parse the interruption queue's SQS bodies: each is one EventBridge event (the queue is an EventBridge target).

``parse_message(body) -> InterruptionMessage`` or raises:

* :class:`MalformedEvent` -- not JSON, not an object, or a required field missing / of the wrong type (the message
  names the field, e.g. ``detail.instance-id: required string missing``);
* :class:`UnknownEventType` -- a well-formed event whose (``source``, ``detail-type``) is none of the five below.

Both are :class:`InterruptionMessageError` (a ``ValueError``): such a body can never be processed.

The events (field names exactly as AWS documents them; ``account`` is not required: EventBridge-to-SQS delivery
in some emulators omits it):

=================================================  ==========  ===============================================
detail-type                                        source      detail fields read
=================================================  ==========  ===============================================
EC2 Spot Instance Interruption Warning             aws.ec2     ``instance-id``, ``instance-action``
EC2 Instance Rebalance Recommendation              aws.ec2     ``instance-id``
EC2 Instance State-change Notification             aws.ec2     ``instance-id``, ``state``
EC2 Capacity Reservation Instance Interruption     aws.ec2     ``instance-id``, ``instance-action``,
Warning                                                        ``instance-termination-time`` (``azId`` or
                                                               ``availability-zone-id`` not needed)
AWS Health Event                                   aws.health  ``service``, ``eventTypeCategory``,
                                                               ``affectedEntities[].entityValue``, ``eventTypeCode``
=================================================  ==========  ===============================================

A Health event for another service or category than EC2 ``scheduledChange`` parses to kind ``NoOp`` (as
Karpenter, which ignores them); an EC2 scheduled change names every affected instance.  An affected entity without a
usable ``entityValue`` (missing, empty, not a string, or the entity not an object) is skipped and listed in
``skipped`` -- the other instances of the event are still acted on, as in Karpenter (which reads a missing value as
``""``, matching no instance); an event left with no instance is acknowledged as a no-op, not malformed.

Any failure to decode a body (not JSON, or JSON too deeply nested for the decoder: ``RecursionError``) is a
:class:`MalformedEvent`.  :data:`EVENT_PATTERNS` are the five EventBridge rule patterns that feed the queue (the CDK
stack deploys them).
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field, replace
from email.utils import parsedate_to_datetime

from ..api.times import to_epoch

SPOT_INTERRUPTION = "SpotInterruption"
REBALANCE_RECOMMENDATION = "RebalanceRecommendation"
STATE_CHANGE = "StateChange"
SCHEDULED_CHANGE = "ScheduledChange"
CAPACITY_RESERVATION_INTERRUPTION = "CapacityReservationInterruption"
NOOP = "NoOp"
KINDS = (SPOT_INTERRUPTION, REBALANCE_RECOMMENDATION, STATE_CHANGE, SCHEDULED_CHANGE,
         CAPACITY_RESERVATION_INTERRUPTION, NOOP)

# (source, detail-type) -> kind
EVENT_TYPES = {
    ("aws.ec2", "EC2 Spot Instance Interruption Warning"): SPOT_INTERRUPTION,
    ("aws.ec2", "EC2 Instance Rebalance Recommendation"): REBALANCE_RECOMMENDATION,
    ("aws.ec2", "EC2 Instance State-change Notification"): STATE_CHANGE,
    ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"): CAPACITY_RESERVATION_INTERRUPTION,
    ("aws.health", "AWS Health Event"): SCHEDULED_CHANGE,
}

# The instance states a state-change notification is acted on in (stopping/stopped: the instance stopped;
# shutting-down/terminated: it is gone); pending and running are nothing to do (Karpenter's statechange parser makes
# them no-ops)
ACTED_STATE_NAMES = ("stopping", "stopped", "shutting-down", "terminated")

# The EventBridge rules of the interruption queue, one per event type (Karpenter's set).  The state-change rule
# matches only the states acted on: Karpenter's rule takes every state change in the account and region (each
# instance launch anywhere made an SQS message and a handler run that found nothing to do)
EVENT_PATTERNS = [{"source": [source], "detail-type": [detail_type],
                   **({"detail": {"state": list(ACTED_STATE_NAMES)}} if kind == STATE_CHANGE else {})}
                  for (source, detail_type), kind in EVENT_TYPES.items()]

INSTANCE_ID = re.compile(r"^i-[0-9a-zA-Z]+$")
HEALTH_SERVICE = "EC2"
HEALTH_CATEGORY = "scheduledChange"


class InterruptionMessageError(ValueError):
    """The body can never be processed (logged with the message id and acknowledged)."""


class MalformedEvent(InterruptionMessageError):
    """Not an EventBridge event, or a required field is missing or of the wrong type."""


class UnknownEventType(InterruptionMessageError):
    """A well-formed event of a (source, detail-type) the interruption handler does not handle."""


@dataclass(frozen=True)
class InterruptionMessage:
    kind: str                              # one of KINDS
    instance_ids: tuple[str, ...]          # EC2 instances the event is about (a Health event may name several)
    id: str                                # the EventBridge event id
    time: str | None                       # the event's ``time`` (yyyy-mm-ddThh:mm:ssZ)
    source: str
    detail_type: str
    state: str | None = None               # StateChange: pending|running|stopping|stopped|shutting-down|terminated
    action: str | None = None              # spot / capacity reservation: instance-action (terminate|stop|hibernate)
    event_type_code: str | None = None     # Health: e.g. AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED
    start: float | None = None             # Health: the change's ``startTime`` (epoch seconds; None when absent or unreadable)
    note: str | None = None                # NoOp (or an event naming no instance): why nothing is to be done
    skipped: tuple[str, ...] = ()          # what was not read: unusable Health entities, mistyped optional fields
    message_ids: tuple[str, ...] = field(default=(), compare=False)  # the SQS records that carried it

    @property
    def message_id(self) -> str:
        """The first SQS message id that carried the event (the event id when parsed outside SQS)."""
        return self.message_ids[0] if self.message_ids else self.id

    def with_message_ids(self, ids) -> "InterruptionMessage":
        return replace(self, message_ids=tuple(ids))


def _string(doc: dict, key: str, where: str, required: bool = True) -> str | None:
    value = doc.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        raise MalformedEvent(f"{where}{key}: required string missing" if value is None or value == ""
                             else f"{where}{key}: must be a string, got {type(value).__name__}")
    return value


def _optional(doc: dict, key: str, where: str, skipped: list) -> str | None:
    """An optional string field: None when absent, and when of another type -- then the event is still acted on and
    ``skipped`` says which field was not read (a spot warning with a numeric ``time`` still names its instance)."""
    value = doc.get(key)
    if value is None or isinstance(value, str):
        return value
    skipped.append(f"{where}{key}: must be a string, got {type(value).__name__} (not read)")
    return None


def _instance_id(detail: dict) -> str:
    iid = _string(detail, "instance-id", "detail.")
    if not INSTANCE_ID.match(iid):
        raise MalformedEvent(f"detail.instance-id: {iid!r} is not an EC2 instance id (i-...)")
    return iid


def _health(detail: dict, base: dict, skipped: list) -> InterruptionMessage:
    service = _string(detail, "service", "detail.")
    # the category is read only for EC2: another service's event is a no-op whatever it carries
    category = _string(detail, "eventTypeCategory", "detail.") if service == HEALTH_SERVICE else \
        _optional(detail, "eventTypeCategory", "detail.", [])
    code = _optional(detail, "eventTypeCode", "detail.", skipped)
    if service != HEALTH_SERVICE or category != HEALTH_CATEGORY:
        return InterruptionMessage(kind=NOOP, instance_ids=(), event_type_code=code,
                                   note=f"AWS Health event for service {service}, category {category}: only "
                                        f"{HEALTH_SERVICE} {HEALTH_CATEGORY} is acted on", skipped=tuple(skipped),
                                   **base)
    entities = detail.get("affectedEntities")
    if entities is None:   # absent: no entity named (Karpenter reads it as an empty list), as ``[]``
        skipped.append("detail.affectedEntities: missing (no instance named)")
        entities = []
    if not isinstance(entities, list):
        raise MalformedEvent(f"detail.affectedEntities: must be a list, got {type(entities).__name__}")
    ids = []
    for i, entity in enumerate(entities):
        # One unusable entity does not drop the event: Karpenter reads a missing entityValue as "", which matches no
        # instance, and still acts on the others.  Each is skipped and reported (``skipped``; the handler logs it).
        value = entity.get("entityValue") if isinstance(entity, dict) else None
        if not isinstance(entity, dict):
            skipped.append(f"detail.affectedEntities[{i}]: must be an object, got {type(entity).__name__}")
        elif not isinstance(value, str) or not value:
            skipped.append(f"detail.affectedEntities[{i}].entityValue: required string missing"
                           if value is None or value == "" else
                           f"detail.affectedEntities[{i}].entityValue: must be a string, got {type(value).__name__}")
        elif INSTANCE_ID.match(value) and value not in ids:  # other entities (volumes, hosts) are not nodes
            ids.append(value)
    note = None
    if not ids:
        note = ("the AWS Health event names no EC2 instance" +
                (f" (skipped: {'; '.join(skipped)})" if skipped else ""))
    return InterruptionMessage(kind=SCHEDULED_CHANGE, instance_ids=tuple(ids), event_type_code=code,
                               start=_health_time(detail.get("startTime")), note=note, skipped=tuple(skipped), **base)


def _health_time(value) -> float | None:
    """AWS Health's ``startTime`` (RFC 1123, ``Sat, 05 Jun 2027 15:10:09 GMT``; ISO 8601 also read) in epoch seconds;
    None when absent or unreadable (optional: the event is acted on without it)."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        return parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return to_epoch(value)


def parse_event(doc) -> InterruptionMessage:
    """An :class:`InterruptionMessage` from a decoded EventBridge event."""
    if not isinstance(doc, dict):
        raise MalformedEvent(f"body must be a JSON object (an EventBridge event), got {type(doc).__name__}")
    detail_type = _string(doc, "detail-type", "")
    source = _string(doc, "source", "")
    kind = EVENT_TYPES.get((source, detail_type))
    if kind is None:
        sources = sorted({s for s, dt in EVENT_TYPES if dt == detail_type})
        if sources:   # a known detail-type from another source: the source is what is wrong
            raise UnknownEventType(f"source: {source!r} does not send {detail_type!r} events (expected "
                                   f"{' or '.join(map(repr, sources))}): not an interruption event")
        raise UnknownEventType(f"detail-type: {detail_type!r} from source {source!r} is not an interruption event "
                               f"(expected one of {sorted(dt for _s, dt in EVENT_TYPES)})")
    skipped: list[str] = []
    base = {"id": _string(doc, "id", ""), "time": _optional(doc, "time", "", skipped), "source": source,
            "detail_type": detail_type}
    detail = doc.get("detail")
    if not isinstance(detail, dict):
        raise MalformedEvent("detail: required object missing" if detail is None
                             else f"detail: must be an object, got {type(detail).__name__}")
    if kind == SCHEDULED_CHANGE:
        return _health(detail, base, skipped)
    iid = _instance_id(detail)
    if kind == STATE_CHANGE:
        return InterruptionMessage(kind=kind, instance_ids=(iid,), state=_string(detail, "state", "detail.").lower(),
                                   skipped=tuple(skipped), **base)
    action = None
    if kind in (SPOT_INTERRUPTION, CAPACITY_RESERVATION_INTERRUPTION):
        action = _optional(detail, "instance-action", "detail.", skipped)
    return InterruptionMessage(kind=kind, instance_ids=(iid,), action=action, skipped=tuple(skipped), **base)


def parse_message(body: str | None) -> InterruptionMessage:
    """An :class:`InterruptionMessage` from one SQS body, or :class:`InterruptionMessageError` naming the field."""
    if body is None or body == "":
        raise MalformedEvent("empty message body")
    try:
        doc = json.loads(body)
    except (TypeError, ValueError) as e:
        raise MalformedEvent(f"body is not JSON: {e}") from None
    except RecursionError as e:   # e.g. 100,000 nested '[': the body can never be decoded
        raise MalformedEvent(f"body is not decodable JSON: {e}") from None
    return parse_event(doc)


def body_parser():
    """The parse function of one SQS batch (``controllers.handlers.SqsBatch``): ``body -> (key, item)`` -- the
    message's event id and :class:`InterruptionMessage` (the same event delivered twice is one key), or
    ``("invalid", n)`` (a key no event id can equal) and the :class:`InterruptionMessageError` saying why the body can
    never be processed.  Any failure to parse a body, whatever the exception, is such an error (the handler fails
    the record: after the queue's ``maxReceiveCount`` it is in the DLQ)."""
    invalid = itertools.count(1)

    def parse(body: str):
        try:
            msg = parse_message(body)
        except InterruptionMessageError as e:
            return ("invalid", next(invalid)), e
        except Exception as e:  # noqa: BLE001 - any failure to parse a body (not to act on it) can never succeed
            return ("invalid", next(invalid)), MalformedEvent(f"body could not be parsed: {type(e).__name__}: {e}")
        return msg.id, msg
    return parse


__all__ = ["InterruptionMessage", "InterruptionMessageError", "MalformedEvent", "UnknownEventType", "parse_message",
           "body_parser", "parse_event", "EVENT_TYPES", "EVENT_PATTERNS", "ACTED_STATE_NAMES", "KINDS", "SPOT_INTERRUPTION", "REBALANCE_RECOMMENDATION",
           "STATE_CHANGE", "SCHEDULED_CHANGE", "CAPACITY_RESERVATION_INTERRUPTION", "NOOP"]
