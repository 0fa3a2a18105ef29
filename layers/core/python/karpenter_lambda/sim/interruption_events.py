"""Real-shaped EventBridge events of the interruption queue, as AWS documents them (for the simulator and tests).

``spot_warning``, ``rebalance``, ``state_change``, ``capacity_reservation_interruption``,
``health_scheduled_change`` build one event each; :func:`events_for` builds what a Scenario ``interrupt`` step sends
for a kind and a list of instance ids (one AWS Health event names every affected instance).
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from email.utils import format_datetime

from ..api.times import to_epoch

ACCOUNT = "123456789012"
NOTICE_DAYS = 14   # how far ahead of its start AWS Health announces an EC2 scheduled change here (retirements: ~2 weeks)


def _rfc1123(epoch: float) -> str:
    """AWS Health's time format: ``Sat, 05 Jun 2027 15:10:09 GMT``."""
    return format_datetime(datetime.fromtimestamp(epoch, timezone.utc), usegmt=True)


def _envelope(detail_type: str, source: str, detail: dict, resources: list[str], time: str) -> dict:
    return {"version": "0", "id": str(uuid.uuid4()), "detail-type": detail_type, "source": source, "account": ACCOUNT,
            "time": time, "region": "us-east-1", "resources": resources, "detail": detail}


def _arn(iid: str) -> str:
    return f"arn:aws:ec2:us-east-1:{ACCOUNT}:instance/{iid}"


def spot_warning(iid: str, time: str) -> dict:
    return _envelope("EC2 Spot Instance Interruption Warning", "aws.ec2",
                     {"instance-id": iid, "instance-action": "terminate"}, [_arn(iid)], time)


def rebalance(iid: str, time: str) -> dict:
    return _envelope("EC2 Instance Rebalance Recommendation", "aws.ec2", {"instance-id": iid}, [_arn(iid)], time)


def state_change(iid: str, state: str, time: str) -> dict:
    return _envelope("EC2 Instance State-change Notification", "aws.ec2", {"instance-id": iid, "state": state},
                     [_arn(iid)], time)


def capacity_reservation_interruption(iid: str, time: str) -> dict:
    return _envelope("EC2 Capacity Reservation Instance Interruption Warning", "aws.ec2",
                     {"instance-id": iid, "instance-action": "terminate", "instance-termination-time": time,
                      "azId": "use1-az1"}, [_arn(iid)], time)


def health_scheduled_change(iids: list[str], time: str, service: str = "EC2", category: str = "scheduledChange",
                            notice_days: float = NOTICE_DAYS) -> dict:
    """An EC2 scheduled change for ``iids`` announced at ``time``, starting ``notice_days`` later (an hour long)."""
    code = "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"
    at = to_epoch(time) or 0.0
    start = at + notice_days * 86400
    detail = {
        "eventArn": f"arn:aws:health:us-east-1::event/EC2/{code}/{code}_ABC123-DEF456",
        "service": service, "eventTypeCode": code, "eventTypeCategory": category,
        "eventScopeCode": "ACCOUNT_SPECIFIC", "communicationId": "1234abc01232a4012345678-1",
        "startTime": _rfc1123(start), "endTime": _rfc1123(start + 3600),
        "lastUpdatedTime": _rfc1123(at), "statusCode": "upcoming", "eventRegion": "us-east-1",
        "eventDescription": [{"language": "en_US", "latestDescription": "EC2 has detected degradation of the "
                                                                          "underlying hardware hosting your instances."}],
        "affectedEntities": [{"entityValue": i, "lastUpdatedTime": _rfc1123(at),
                              "status": "IMPAIRED"} for i in iids],
        "affectedAccount": ACCOUNT,
    }
    return _envelope("AWS Health Event", "aws.health", detail, list(iids), time)



def events_for(kind: str, instance_ids: list[str], time: str, state: str | None = None) -> list[dict]:
    """The events AWS would send for ``kind`` (a Scenario ``interrupt`` kind) about these instances."""
    if kind == "SpotInterruption":
        return [spot_warning(i, time) for i in instance_ids]
    if kind == "RebalanceRecommendation":
        return [rebalance(i, time) for i in instance_ids]
    if kind == "StateChange":
        return [state_change(i, state or "terminated", time) for i in instance_ids]
    if kind == "CapacityReservationInterruption":
        return [capacity_reservation_interruption(i, time) for i in instance_ids]
    if kind == "ScheduledChange":
        return [health_scheduled_change(instance_ids, time)] if instance_ids else []
    raise ValueError(f"unknown interruption kind {kind!r}")
