"""EC2 instance status checks (pure): which NodeClaims to delete for an impaired instance or a scheduled event, as
karpenter-provider-aws's instance status controller (v1.12+, forceful since v1.13:
``pkg/providers/instancestatus/instancestatus.go``, ``pkg/controllers/interruption/instancestatus_controller.go``
and ``utils.go``), which polls ``DescribeInstanceStatus`` every minute with or without an interruption queue.

Input: the ``InstanceStatuses`` items of ``DescribeInstanceStatus`` (plain dicts as boto3 returns them), the
NodeClaims by instance id, and now.  Per instance:

* **impaired** (forceful): its ``InstanceStatus`` or ``SystemStatus`` summary is ``impaired`` with a detail whose
  ``Status`` is ``failed`` and whose ``ImpairedSince`` is at least :data:`UNHEALTHY_THRESHOLD` (120 s) ago (a
  failed detail without ``ImpairedSince`` counts as due, as upstream reads the missing time as the zero time).
  Karpenter sets ``karpenter.sh/nodeclaim-termination-timestamp`` to now and deletes the NodeClaim: the drain deletes
  the pods at once instead of evicting them.  A NodeClaim already deleting gets the timestamp (its drain becomes
  forceful) unless an earlier one is set.
* **scheduled event** (graceful, as a scheduled-change interruption): an ``Events`` item whose ``Code`` is one of
  :data:`SCHEDULED_EVENT_CODES`, no threshold.  Karpenter deletes the NodeClaim (cordon and drain, PDBs honoured).
  A NodeClaim already deleting is left to its deletion.  Events whose ``Description`` starts with ``[Completed]`` or
  ``[Canceled]`` (EC2 keeps them listed for a while after they are over) are ignored -- a difference from upstream,
  which acts on them too.
* EBS status (``AttachedEbsStatus``) is ignored, as upstream (it cannot tell the node's volumes from the pods').
* An impaired check younger than the threshold is :attr:`InstanceHealthPlan.waiting`; an instance no NodeClaim
  names is not ours and is ignored.

Impaired wins over an event on the same instance (upstream handles both and the termination timestamp makes the
one deletion forceful).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from ..api import labels as wk
from ..api.durations import format_duration
from ..api.times import format_time, to_epoch

UNHEALTHY_THRESHOLD = 120.0     # seconds an impaired status check is tolerated (upstream UnhealthyThreshold)
INSTANCE_STATUS = "InstanceStatus"
SYSTEM_STATUS = "SystemStatus"
STATUS_CATEGORIES = (INSTANCE_STATUS, SYSTEM_STATUS)
SCHEDULED_EVENT_CODES = ("instance-reboot", "system-reboot", "system-maintenance", "instance-retirement",
                         "instance-stop")
OVER_PREFIXES = ("[Completed]", "[Canceled]")   # an event EC2 still lists after it is over

INSTANCE_UNHEALTHY = "InstanceUnhealthy"   # forceful deletion's reason (and Karpenter's Event reason)
SCHEDULED_CHANGE = "ScheduledChange"       # graceful deletion's reason: as an AWS Health scheduled change


@dataclass(frozen=True)
class StatusFailure:
    category: str               # InstanceStatus | SystemStatus
    name: str                   # the check's name (reachability)
    since: float | None         # ImpairedSince (None: not given)

    def held(self, now: float) -> float | None:
        return None if self.since is None else now - self.since

    def describe(self, now: float) -> str:
        held = self.held(now)
        return f"{self.category} {self.name or 'check'} failed" + (
            f" for {format_duration(int(max(held, 0)))}" if held is not None else "")


@dataclass(frozen=True)
class ScheduledEvent:
    code: str
    description: str = ""
    not_before: float | None = None

    def describe(self) -> str:
        when = f" from {format_time(self.not_before)}" if self.not_before is not None else ""
        return f"scheduled {self.code}{when}" + (f" ({self.description})" if self.description else "")


@dataclass(frozen=True)
class InstanceHealthAction:
    nodeclaim: str
    instance_id: str
    reason: str                                  # INSTANCE_UNHEALTHY (forceful) | SCHEDULED_CHANGE (graceful)
    detail: str
    failures: tuple[StatusFailure, ...] = ()     # forceful: the due failed checks
    events: tuple[ScheduledEvent, ...] = ()      # graceful: the scheduled events
    deadline: float | None = None                # graceful: the earliest event start still ahead

    @property
    def forceful(self) -> bool:
        return self.reason == INSTANCE_UNHEALTHY

    @property
    def categories(self) -> list[str]:
        return sorted({f.category for f in self.failures})


@dataclass
class InstanceHealthPlan:
    forceful: list[InstanceHealthAction] = field(default_factory=list)    # delete, termination timestamp now
    graceful: list[InstanceHealthAction] = field(default_factory=list)    # delete (cordon, drain)
    # NodeClaims already deleting whose instance is impaired: termination timestamp now (the drain turns forceful)
    force_deleting: list[InstanceHealthAction] = field(default_factory=list)
    waiting: list[InstanceHealthAction] = field(default_factory=list)     # impaired, not for 120 s yet

    def __bool__(self) -> bool:
        return bool(self.forceful or self.graceful or self.force_deleting)


def status_failures(status: Mapping) -> list[StatusFailure]:
    """The failed InstanceStatus / SystemStatus checks of one ``InstanceStatuses`` item (summary ``impaired``)."""
    out = []
    for category in STATUS_CATEGORIES:
        summary = status.get(category) or {}
        if summary.get("Status") != "impaired":
            continue
        for d in summary.get("Details") or []:
            if d.get("Status") == "failed":
                out.append(StatusFailure(category, str(d.get("Name") or ""), to_epoch(d.get("ImpairedSince"))))
    return out


def scheduled_events(status: Mapping) -> list[ScheduledEvent]:
    """The scheduled events of one ``InstanceStatuses`` item that are still to come or under way."""
    out = []
    for e in status.get("Events") or []:
        code = str(e.get("Code") or "")
        description = str(e.get("Description") or "")
        if code not in SCHEDULED_EVENT_CODES or description.lstrip().startswith(OVER_PREFIXES):
            continue
        out.append(ScheduledEvent(code, description, to_epoch(e.get("NotBefore"))))
    return out


def _deleting(nc) -> bool:
    return bool((nc.metadata or {}).get("deletionTimestamp"))


def _stamped_by(nc, now: float) -> bool:
    """Does the NodeClaim already carry a termination timestamp no later than ``now``?"""
    stamped = to_epoch(((nc.metadata or {}).get("annotations") or {}).get(wk.NODECLAIM_TERMINATION_TIMESTAMP_ANNOTATION))
    return stamped is not None and stamped <= now


def plan_instance_health(statuses: list[Mapping], nodeclaims_by_instance: Mapping[str, object],
                         now: float) -> InstanceHealthPlan:
    """What to do about the instances ``DescribeInstanceStatus`` reported (see the module doc).

    ``nodeclaims_by_instance``: instance id -> NodeClaim (:class:`~karpenter_lambda.api.objects.NodeClaim`, or any
    object with ``name`` and ``metadata``).  Each NodeClaim is in at most one list, sorted by name."""
    plan = InstanceHealthPlan()
    seen: set[str] = set()
    for status in statuses:
        iid = str(status.get("InstanceId") or "")
        nc = nodeclaims_by_instance.get(iid)
        if nc is None or nc.name in seen:
            continue
        failures = status_failures(status)
        due = tuple(f for f in failures if f.since is None or now - f.since >= UNHEALTHY_THRESHOLD)
        if due:
            seen.add(nc.name)
            action = InstanceHealthAction(nc.name, iid, INSTANCE_UNHEALTHY, "; ".join(f.describe(now) for f in due),
                                          failures=due)
            if not _deleting(nc):
                plan.forceful.append(action)
            elif not _stamped_by(nc, now):
                plan.force_deleting.append(action)
            continue
        events = tuple(scheduled_events(status))
        if events and not _deleting(nc):
            seen.add(nc.name)
            ahead = [e.not_before for e in events if e.not_before is not None and e.not_before > now]
            plan.graceful.append(InstanceHealthAction(nc.name, iid, SCHEDULED_CHANGE,
                                                      "; ".join(e.describe() for e in events), events=events,
                                                      deadline=min(ahead) if ahead else None))
            continue
        if failures:
            seen.add(nc.name)
            plan.waiting.append(InstanceHealthAction(nc.name, iid, INSTANCE_UNHEALTHY,
                                                     "; ".join(f.describe(now) for f in failures),
                                                     failures=tuple(failures)))
    for items in (plan.forceful, plan.graceful, plan.force_deleting, plan.waiting):
        items.sort(key=lambda a: a.nodeclaim)
    return plan


__all__ = ["UNHEALTHY_THRESHOLD", "SCHEDULED_EVENT_CODES", "INSTANCE_UNHEALTHY", "SCHEDULED_CHANGE",
           "INSTANCE_STATUS", "SYSTEM_STATUS", "StatusFailure", "ScheduledEvent", "InstanceHealthAction",
           "InstanceHealthPlan", "plan_instance_health", "status_failures", "scheduled_events"]
