"""EC2 instance status checks, carried out from the lifecycle sweep (every minute, quiet or not), as
karpenter-provider-aws's instance status controller: one ``DescribeInstanceStatus`` for the instances of this
deployment's NodeClaims (:mod:`karpenter_lambda.adapters.aws.instance_status`), the pure decision
(:mod:`karpenter_lambda.disruption.instance_health`), then:

* an instance **impaired** (InstanceStatus or SystemStatus check failed) for 120 s: its NodeClaim is deleted
  forcefully, as node repair does (``karpenter.sh/nodeclaim-termination-timestamp`` set to now: the drain deletes the
  pods at once; reason ``InstanceUnhealthy``); a NodeClaim already deleting has its drain made forceful;
* a **scheduled event** (instance-reboot, system-reboot, system-maintenance, instance-retirement, instance-stop):
  handled as an AWS Health scheduled change reaching the interruption queue (reason ``ScheduledChange``): capacity
  for the node's pods is launched first (:func:`.leaving.launch_ahead`), then the deletion, its drain held until
  those replacements are Initialized, the event's start (``NotBefore``) as the drain's deadline.

Each deletion is one ``InstanceUnhealthy`` Warning Event on the Node, one decision line and one ``disrupted`` entry of
the lifecycle report (the simulator's ``NodeClaimDisrupted``).  ``KARPENTER_LAMBDA_INSTANCE_STATUS_CHECKS=false``
turns it off.
"""

from __future__ import annotations

from typing import Callable

from ..adapters.aws.instance_status import StatusCheckDenied, describe_instance_status
from ..api import events as ev
from ..api import labels as wk
from ..api.objects import NodeClaim
from ..api.times import format_time
from ..disruption.instance_health import INSTANCE_UNHEALTHY, InstanceHealthAction, plan_instance_health
from .cluster_state import instance_id_of
from .interrupt import is_transient
from .leaving import launch_ahead
from .termination import Terminator


def _describer(cloud) -> Callable[[list[str]], list[dict]] | None:
    """How to ask EC2: the cloud provider's ``instance_statuses`` if it has one, else the adapter on its EC2 client."""
    own = getattr(cloud, "instance_statuses", None)
    if callable(own):
        return own
    ec2 = getattr(cloud, "ec2", None)
    return (lambda ids: describe_instance_status(ec2, ids)) if ec2 is not None else None


class InstanceHealthChecker:
    def __init__(self, store, kube, cloud, claims, terminator: Terminator, clock: Callable[[], float],
                 decide: Callable[..., None], logger):
        self.store, self.kube, self.cloud, self.claims = store, kube, cloud, claims
        self.terminator, self.clock, self.decide, self.logger = terminator, clock, decide, logger
        self.describe = _describer(cloud)
        self.loader_options: dict = {}   # the replacement solve's snapshot settings (Lifecycle.set_loader_options)

    def run(self, nodes: list[dict], nodeclaims: dict[str, NodeClaim], now: float, report) -> list[str]:
        """Act on the instance status checks; returns the names of the NodeClaims marked deleting (or made forceful)."""
        by_instance = {instance_id_of(nc.status.get("providerID")): nc for nc in nodeclaims.values()
                       if nc.status.get("providerID")}
        by_instance.pop(None, None)
        if not by_instance or self.describe is None:
            return []
        try:
            statuses = self.describe(sorted(by_instance))
        except StatusCheckDenied as e:
            report.errors.append(f"instance status checks: ec2:DescribeInstanceStatus is not allowed, grant it to the "
                                 f"lifecycle function's role: {e}")
            return []
        plan = plan_instance_health(statuses, by_instance, now)
        node_by_provider = {(n.get("spec") or {}).get("providerID"): n for n in nodes}
        done: list[str] = []
        for a in plan.waiting:
            self.decide("instance-impaired", f"NodeClaim {a.nodeclaim}: instance {a.instance_id} {a.detail} "
                                             f"(acted on after 2m)", nodeclaim=a.nodeclaim, instanceId=a.instance_id)
        for a in plan.forceful + plan.graceful:
            nc = nodeclaims[a.nodeclaim]
            node = node_by_provider.get(nc.status.get("providerID"))
            replacements = self._replace(nc, now, report) if not a.forceful else []
            try:
                self.terminator.request(nc, f"{a.reason}: {a.detail}", forceful=a.forceful, deadline=a.deadline)
            except Exception as e:  # noqa: BLE001 - the next sweep tries again
                report.errors.append(f"instance status of NodeClaim {nc.name}: {e}")
                continue
            done.append(nc.name)
            self._report(nc, node, a, replacements, report)
            self.decide("instance-status", f"NodeClaim {nc.name} (instance {a.instance_id}) {a.detail}: deleted "
                                           f"{'forcefully' if a.forceful else 'gracefully'}"
                                           + (f", {len(replacements)} replacements" if replacements else ""),
                        nodeclaim=nc.name, instanceId=a.instance_id, reason=a.reason, node=_name(node),
                        replacements=replacements)
            self._event(node, a, now, report)
        for a in plan.force_deleting:
            nc = nodeclaims[a.nodeclaim]
            try:
                self.terminator.request(nc, f"{a.reason}: {a.detail}", forceful=True)
            except Exception as e:  # noqa: BLE001
                report.errors.append(f"instance status of NodeClaim {nc.name}: {e}")
                continue
            done.append(nc.name)
            self.decide("instance-status", f"NodeClaim {nc.name} (instance {a.instance_id}, already deleting) "
                                           f"{a.detail}: drain made forceful", nodeclaim=nc.name,
                        instanceId=a.instance_id, reason=a.reason)
        return done

    def _replace(self, nc: NodeClaim, now: float, report) -> list[str]:
        """Capacity for the node's pods before its graceful deletion, as the interruption handler launches it for a
        scheduled change (a failure is reported; the deletion goes on and its drain is then not held)."""
        try:
            out = launch_ahead(self.store, self.kube, self.claims, self.cloud, self.clock, self.logger, [nc], now,
                               f"instance-status/{nc.name}", self.decide, is_transient, self.loader_options)
        except Exception as e:  # noqa: BLE001
            report.errors.append(f"replacements for NodeClaim {nc.name}: {e}")
            return []
        report.errors.extend(out.failures)
        return list(out.launched) + list(out.duplicates)

    @staticmethod
    def _report(nc: NodeClaim, node: dict | None, a: InstanceHealthAction, replacements: list[str], report) -> None:
        labels = nc.labels
        report.disrupted.append({
            "nodeClaim": nc.name, "reason": a.reason, "nodePool": nc.nodepool_name, "node": _name(node),
            "instanceType": labels.get(wk.INSTANCE_TYPE), "zone": labels.get(wk.ZONE),
            "capacityType": labels.get(wk.CAPACITY_TYPE), "replacements": replacements, "savingsPerHour": 0.0,
            "detail": a.detail, "instanceId": a.instance_id, "categories": a.categories,
            "events": [e.code for e in a.events]})

    def _event(self, node: dict | None, a: InstanceHealthAction, now: float, report) -> None:
        if node is None:
            return
        what = "NodeClaim deleted forcefully" if a.forceful else "NodeClaim deleted, node drained"
        try:
            self.kube.create_event({**node, "apiVersion": "v1", "kind": "Node"}, INSTANCE_UNHEALTHY,
                                   f"Instance {a.instance_id}: {a.detail}; {what}", type=ev.WARNING,
                                   source=ev.SOURCE, now=format_time(now))
        except Exception as e:  # noqa: BLE001 - an explanation only
            report.errors.append(f"event {INSTANCE_UNHEALTHY} on node {_name(node)}: {e}")


def _name(node: dict | None) -> str | None:
    return ((node or {}).get("metadata") or {}).get("name")


__all__ = ["InstanceHealthChecker"]
