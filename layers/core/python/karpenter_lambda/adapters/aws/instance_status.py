"""EC2 ``DescribeInstanceStatus`` for the instances of this deployment's NodeClaims (the instance status checks of
the lifecycle sweep; the rules are :mod:`karpenter_lambda.disruption.instance_health`).

One call per :data:`MAX_IDS` instance ids (EC2's limit on ``InstanceIds``), each paginated, ``IncludeAllInstances``
false (only running instances have status checks worth reading).  Karpenter asks with server-side filters for the
whole region (three filter sets: instance status impaired, system status impaired, the scheduled event codes); here
the ids are this deployment's own and the filtering is done by the rules, so one call per 100 instances suffices.

An id EC2 no longer knows fails the whole call (``InvalidInstanceID.NotFound`` naming the ids): those ids are
dropped and the chunk asked again.  ``UnauthorizedOperation`` (the role lacks ``ec2:DescribeInstanceStatus``) is
raised as :class:`StatusCheckDenied`, so the caller can say what to grant.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

MAX_IDS = 100
NOT_FOUND = ("InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed")
_ID = re.compile(r"\bi-[0-9a-zA-Z]+\b")


class StatusCheckDenied(Exception):
    """The caller may not call ``ec2:DescribeInstanceStatus``."""


def _code(e: Exception) -> str:
    return ((getattr(e, "response", None) or {}).get("Error") or {}).get("Code", "")


def _chunk(ids: list[str], size: int = MAX_IDS) -> Iterable[list[str]]:
    for i in range(0, len(ids), size):
        yield ids[i:i + size]


def _describe_chunk(ec2: Any, ids: list[str]) -> list[dict]:
    out: list[dict] = []
    params: dict = {"InstanceIds": ids, "IncludeAllInstances": False}
    while True:
        resp = ec2.describe_instance_status(**params)
        out.extend(resp.get("InstanceStatuses") or [])
        token = resp.get("NextToken")
        if not token:
            return out
        params["NextToken"] = token


def describe_instance_status(ec2: Any, instance_ids: Iterable[str]) -> list[dict]:
    """The ``InstanceStatuses`` items (boto3's dicts) of the running instances among ``instance_ids``."""
    ids = sorted({i for i in instance_ids if i})
    out: list[dict] = []
    for chunk in _chunk(ids):
        while chunk:
            try:
                out.extend(_describe_chunk(ec2, chunk))
                break
            except Exception as e:  # noqa: BLE001
                code = _code(e)
                if code == "UnauthorizedOperation":
                    raise StatusCheckDenied(str(e)) from e
                unknown = set(_ID.findall(str(e))) & set(chunk) if code in NOT_FOUND else set()
                if not unknown:
                    raise
                chunk = [i for i in chunk if i not in unknown]
    return out


__all__ = ["MAX_IDS", "StatusCheckDenied", "describe_instance_status"]
