"""AWS faults: which operation a request is, and the error answers moto hands back in its place (EC2 insufficient
capacity and throttling, DynamoDB throttling and transaction conflicts)."""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs


def _header(request, name: str) -> str:
    v = request.headers.get(name)
    if isinstance(v, bytes):
        v = v.decode()
    return v or ""


def _body(request) -> str:
    b = request.body
    if b is None:
        return ""
    if isinstance(b, bytes):
        return b.decode("utf-8", "replace")
    if hasattr(b, "read"):
        data = b.read()
        try:
            b.seek(0)
        except Exception:  # noqa: BLE001
            pass
        return data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data)
    return str(b)


def aws_operation(request) -> tuple[str, str]:
    """(service, operation) of an AWS request: JSON protocols name it in X-Amz-Target, query protocols in Action."""
    target = _header(request, "X-Amz-Target")
    if target:
        prefix, _, op = target.partition(".")
        svc = {"DynamoDB_20120810": "dynamodb", "AmazonSQS": "sqs", "AmazonSSM": "ssm"}.get(prefix, prefix.lower())
        return svc, op
    host = re.sub(r"^https?://", "", request.url).split("/")[0]
    svc = host.split(".")[0]
    action = parse_qs(_body(request)).get("Action", [""])[0]
    if not action:
        action = parse_qs(request.url.partition("?")[2]).get("Action", [""])[0]
    return svc, action


def _ec2_error(code: str, message: str, status: int) -> tuple:
    body = (f'<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>{code}</Code><Message>{message}'
            f'</Message></Error></Errors><RequestID>fault-injected</RequestID></Response>')
    return status, {"Content-Type": "text/xml"}, body


def _ec2_fleet_ice(request) -> tuple:
    """A CreateFleet (type instant) answer with no instance and an InsufficientInstanceCapacity error per override."""
    q = parse_qs(_body(request))
    items = []
    for key, vals in q.items():
        m = re.match(r"LaunchTemplateConfigs\.(\d+)\.Overrides\.(\d+)\.InstanceType$", key)
        if not m:
            continue
        pre = f"LaunchTemplateConfigs.{m.group(1)}.Overrides.{m.group(2)}."
        ov = f"<instanceType>{vals[0]}</instanceType>"
        for fld, tag in (("SubnetId", "subnetId"), ("AvailabilityZone", "availabilityZone")):
            if q.get(pre + fld):
                ov += f"<{tag}>{q[pre + fld][0]}</{tag}>"
        lt = q.get(f"LaunchTemplateConfigs.{m.group(1)}.LaunchTemplateSpecification.LaunchTemplateId", [""])[0]
        ltn = q.get(f"LaunchTemplateConfigs.{m.group(1)}.LaunchTemplateSpecification.LaunchTemplateName", [""])[0]
        spec = (f"<launchTemplateId>{lt}</launchTemplateId>" if lt else "") + \
               (f"<launchTemplateName>{ltn}</launchTemplateName>" if ltn else "")
        items.append(f"<item><launchTemplateAndOverrides><launchTemplateSpecification>{spec}</launchTemplateSpecification>"
                     f"<overrides>{ov}</overrides></launchTemplateAndOverrides>"
                     f"<errorCode>InsufficientInstanceCapacity</errorCode><errorMessage>We currently do not have sufficient "
                     f"capacity in the Availability Zone you requested (fault injected).</errorMessage></item>")
    body = ('<?xml version="1.0" encoding="UTF-8"?><CreateFleetResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
            '<requestId>fault-injected</requestId><fleetId>fleet-00000000-0000-0000-0000-000000000000</fleetId>'
            f'<errorSet>{"".join(items)}</errorSet><fleetInstanceSet/></CreateFleetResponse>')
    return 200, {"Content-Type": "text/xml"}, body


def _ddb_error(name: str, message: str, extra: dict | None = None) -> tuple:
    doc = {"__type": f"com.amazonaws.dynamodb.v20120810#{name}", "message": message, **(extra or {})}
    return 400, {"Content-Type": "application/x-amz-json-1.0"}, json.dumps(doc)


def ddb_conflict(request) -> tuple:
    """TransactionCanceledException with a TransactionConflict for every item of the transaction."""
    try:
        n = len(json.loads(_body(request)).get("TransactItems") or [])
    except ValueError:
        n = 1
    return _ddb_error("TransactionCanceledException",
                      "Transaction cancelled, please refer cancellation reasons for specific reasons "
                      f"[{', '.join(['TransactionConflict'] * max(n, 1))}]",
                      {"CancellationReasons": [{"Code": "TransactionConflict",
                                                "Message": "Transaction is ongoing for the item"}] * max(n, 1)})
