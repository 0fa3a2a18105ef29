"""The provisioner: pending pods -> scheduling round -> NodeClaims -> the launcher.

``Provisioner(...).provision(pods) -> ProvisionReport``.  One round:

1. Load the cluster snapshot once (:mod:`.snapshot`: store, Kubernetes API, launch claims, priced catalog).
2. Keep the pods that still need a node: not deleted, not bound, not terminal, not owned by an apps/v1 DaemonSet
   or a v1 Node, not preempting (``status.nominatedNodeName`` set by the kube-scheduler), and not
   protected by a nomination that still holds (:func:`karpenter_lambda.scheduling.inputs.held_reservations`: its
   NodeClaim in flight, not initialized, with room for the pod next to what is bound there).
3. Solve against the snapshot's nodes, in-flight NodeClaims and NodePools (:func:`scheduling_input`); static NodePools
   (``spec.replicas``) are left out: the lifecycle sweep keeps their count (``controllers/static.py``), their nodes
   take pods as existing capacity.  Pods placed on an in-flight NodeClaim are reserved for it
   (:meth:`.launcher.Launcher.nominate`), so later rounds count them against its room.
4. Launch each NodeClaim plan through the launcher (:mod:`.launcher`): one DynamoDB transaction (limits +
   pod reservations; a duplicate plan is refused there), the NodeClaim record, CreateFleet with
   insufficient-capacity fallback.  Pods taken by a concurrent invocation or a limit changed meanwhile:
   re-plan (at most 3 rounds).
5. Tell each pod, as Karpenter's Events (:mod:`karpenter_lambda.api.events`): ``Nominated`` naming the NodeClaim or
   Node it should schedule on, or a ``FailedScheduling`` Warning with the reason.  Best effort: at most
   ``MAX_POD_EVENTS_PER_ROUND``, one per pod and round; a failed write is logged and the round stands.

Idempotency and concurrency are described in docs/provisioning.md.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable

from ..api import events as ev
from ..api.kube import daemon_owner, is_terminal, pod_key, pod_uid, scheduling_gates
from ..api.labels import NOMINATED_PODS_ANNOTATION, NOMINATED_UIDS_ANNOTATION, PRICE_ANNOTATION  # noqa: F401  (re-exported)
from ..api.text import plural
from ..api.times import format_time
from ..cloudprovider import AWSCloudProvider
from ..disruption.static import is_static
from ..scheduling import solve
from ..scheduling.inputs import (  # noqa: F401  (re-exported: scheduling_taints, EPHEMERAL_TAINT_KEYS, limits_of)
    EPHEMERAL_TAINT_KEYS,
    held_reservations,
    in_flight_nodeclaim,
    limits_of,
    scheduling_input,
    scheduling_taints,
)
from . import runtime
from .base import Controller
from .cluster_state import as_dict
from .launcher import Launched, Launcher, Throttled, launch_pending, nodeclaim_name  # noqa: F401  (re-exported)
from .snapshot import SnapshotLoader

MAX_LAUNCH_ATTEMPTS = 6
log = logging.getLogger(__name__)


@dataclass
class ProvisionReport:
    launched: list[Launched] = field(default_factory=list)
    existing: dict[str, list[str]] = field(default_factory=dict)  # pods that fit existing/in-flight capacity
    unschedulable: list[dict] = field(default_factory=list)        # {"pod": "ns/name", "reason": str}
    skipped: list[dict] = field(default_factory=list)              # {"pod", "reason"}: bound, nominated, deleted...
    duplicates: list[str] = field(default_factory=list)            # NodeClaims a previous delivery already made
    resolved: list[dict] = field(default_factory=list)             # {nodeClaim, outcome, detail}: unknown launches
    errors: list[str] = field(default_factory=list)

    @property
    def pods_scheduled(self) -> int:
        return sum(len(x.pods) for x in self.launched) + sum(len(v) for v in self.existing.values())

    @property
    def cost_per_hour(self) -> float:
        return sum(x.price for x in self.launched)

    def to_dict(self) -> dict:
        return {
            "launched": [x.to_dict() for x in self.launched],
            "existing": self.existing,
            "unschedulable": self.unschedulable,
            "skipped": self.skipped,
            "duplicates": self.duplicates,
            "resolved": self.resolved,
            "errors": self.errors,
            "costPerHour": round(self.cost_per_hour, 6),
        }


class Provisioner(Controller):
    def __init__(self, store, kube, cloud, claims=None, clock: Callable[[], float] | None = None, *, logger=None,
                 solver: Callable | None = None):
        super().__init__(clock, logger or log)
        self.store = store
        self.kube = kube
        self.cloud = cloud
        self.claims = claims
        self.solver = solver
        self.loader = SnapshotLoader(store, kube, claims, cloud, logger=self.logger)
        self.launcher = Launcher(store, claims, cloud, self.clock, self._decision)
        self._limit_retried: set[str] = set()

    @classmethod
    def from_environment(cls, env, logger=None) -> "Provisioner":
        out = cls(env.store, env.kube, AWSCloudProvider.from_environment(env), env.claims, runtime.clock_proxy,
                  logger=logger)
        out.loader.min_values_policy = env.config.min_values_policy
        out.loader.scheduler_config = env.config.scheduler_config
        return out

    # -- the round ----------------------------------------------------------------------------------
    def provision(self, pods: list[dict]) -> ProvisionReport:
        report = ProvisionReport()
        snap = self.loader.load(self.clock(), instance_types=False)
        if self._resolve_stuck_launches(snap, report):
            snap = self.loader.load(self.clock(), instance_types=False)   # records adopted, relaunched, rolled back
        held = held_reservations(snap)
        pending = self._pods_to_schedule(pods, snap, held, report)
        if not pending:
            return report
        self.loader.load_instance_types(snap)
        for _attempt in range(3):  # re-plan when a concurrent invocation took pods or limit room
            retry = self._round(pending, snap, held, report)
            if not retry:
                break
            pending = retry
            self.loader.reload_nodeclaims(snap)
            held = held_reservations(snap)
        else:
            for p in pending:
                report.unschedulable.append({"pod": pod_key(p), "reason": "conflicting concurrent provisioning; will retry"})
        self._pod_events(report, snap)
        return report

    # -- launches whose outcome is unknown (Karpenter's launch reconciler) --------------------------
    def _resolve_stuck_launches(self, snap, report: ProvisionReport) -> bool:
        """NodeClaims stuck launching (an EC2 5xx after retries, a read timeout, a crash at CreateFleet: no
        providerID, :func:`~.launcher.launch_pending`) are resolved at the start of every round, not after the
        lifecycle sweep's 5-minute backstop: the instance tagged for the NodeClaim is adopted, else the NodeClaim is
        launched again (same ClientToken base), else rolled back so its pods are planned again.  True when a record
        changed."""
        stuck = [nc for nc in snap.nodeclaims.values() if launch_pending(nc, snap.now)]
        if not stuck:
            return False
        self.loader.load_instance_types(snap)
        changed = False
        for nc in sorted(stuck, key=lambda x: x.name):
            np = snap.nodepools.get(nc.nodepool_name)
            ncls = snap.nodeclasses.get((np.node_class_ref.get("name") if np else None) or "")
            if np is None or ncls is None:
                continue   # its NodePool or EC2NodeClass is gone: the lifecycle sweep's backstop deletes it
            try:
                outcome, detail = self.launcher.resolve(nc, np, ncls, snap.resolved.get(ncls.name),
                                                        snap.instance_types.get(np.name, []))
            except Exception as ex:  # noqa: BLE001 - one stuck NodeClaim must not stop the round
                report.errors.append(f"NodeClaim {nc.name}: resolving its unknown launch: {ex}")
                continue
            if outcome == "skipped":
                continue
            changed = True
            report.resolved.append({"nodeClaim": nc.name, "outcome": outcome, "detail": detail})
            self._decision(f"launch-{outcome}", f"NodeClaim {nc.name} (launch outcome unknown): {outcome} {detail}",
                           nodeclaim=nc.name, outcome=outcome, detail=detail)
        return changed

    # -- Kubernetes Events on the pods (best effort) ------------------------------------------------
    def _pod_events(self, report: ProvisionReport, snap) -> None:
        todo: dict[str, tuple[str, str, str]] = {}   # pod key -> (type, reason, message); first outcome wins
        for x in report.launched:
            for key in x.pods:
                todo.setdefault(key, (ev.NORMAL, ev.NOMINATED, ev.nominated_message("nodeclaim", x.nodeclaim)))
        for name, keys in report.existing.items():
            kind = "node" if name in snap.node_by_name or name not in snap.nodeclaims else "nodeclaim"
            for key in keys:
                todo.setdefault(key, (ev.NORMAL, ev.NOMINATED, ev.nominated_message(kind, name)))
        for u in report.unschedulable:
            todo.setdefault(u["pod"], (ev.WARNING, ev.FAILED_SCHEDULING, ev.failed_scheduling_message(u["reason"])))
        if not todo:
            return
        pods = {pod_key(p): p for p in snap.pods_by_uid.values()}
        written, failed = 0, 0
        for key, (type_, reason, message) in todo.items():
            pod = pods.get(key)
            if pod is None:
                continue
            if written + failed >= ev.MAX_POD_EVENTS_PER_ROUND:
                self._decision("events-capped", f"{len(todo) - written - failed} pod events not written: "
                                                f"at most {ev.MAX_POD_EVENTS_PER_ROUND} per round",
                               limit=ev.MAX_POD_EVENTS_PER_ROUND)
                break
            try:
                self.kube.create_event({**pod, "apiVersion": "v1", "kind": "Pod"}, reason, message, type=type_,
                                       source=ev.SOURCE, now=format_time(snap.now))
                written += 1
            except Exception as ex:  # an explanation only: the round's decisions stand
                failed += 1
                self.logger.warning("event %s on pod %s not written: %s", reason, key, ex)
        if failed:
            self._decision("events-failed", f"{failed} of {written + failed} pod events not written", failed=failed)

    def _pods_to_schedule(self, pods, snap, held, report) -> list[dict]:
        out, seen = [], set()
        for msg_pod in pods:
            uid = pod_uid(msg_pod)
            if uid in seen:
                continue
            seen.add(uid)
            pod = snap.pods_by_uid.get(uid)
            key = pod_key(msg_pod)
            if pod is None:
                reason = "pod no longer exists"
            elif (pod.get("spec") or {}).get("nodeName"):
                reason = f"already bound to {pod['spec']['nodeName']}"
            elif is_terminal(pod) or (pod.get("metadata") or {}).get("deletionTimestamp"):
                reason = "pod is terminating or finished"
            elif (owner := daemon_owner(pod)) is not None:
                reason = "DaemonSet pod" if owner == "DaemonSet" else "static pod (owned by its Node)"
            elif (pod.get("status") or {}).get("nominatedNodeName"):   # Karpenter's IsPreempting
                reason = f"preempting: the kube-scheduler nominated it to node {pod['status']['nominatedNodeName']}"
            elif scheduling_gates(pod):   # not provisionable (Karpenter): the kube-scheduler has not tried it yet
                reason = f"waiting on scheduling gates {', '.join(scheduling_gates(pod))}"
            elif uid in held:
                reason = f"nominated to in-flight NodeClaim {held[uid]}"
            else:
                out.append(pod)
                continue
            report.skipped.append({"pod": key, "reason": reason})
            self._decision("skip", f"pod {key} skipped: {reason}", pod=key)
        return out

    def _round(self, pending, snap, held, report) -> list[dict]:
        inp, blocked = scheduling_input(snap, pending, held=held)
        # static NodePools (spec.replicas) are never provisioned for pods: their nodes stay existing capacity only
        static = sorted(x.nodepool.name for x in inp.nodepools if is_static(x.nodepool))
        if static:
            inp.nodepools = [x for x in inp.nodepools if not is_static(x.nodepool)]
            if not inp.nodepools:
                blocked = [*blocked, f"static NodePools ({', '.join(static)}) are not provisioned for pods"]
        if not inp.nodepools:
            reason = "; ".join(blocked) or "no NodePool exists"
            return self._unschedulable(pending, reason, report)
        policy = {} if snap.min_values_policy == "Strict" else {"min_values_policy": snap.min_values_policy}
        result = (self.solver or solve)(inp, **policy)
        # nominations that no longer hold may move to the in-flight NodeClaims and the new NodeClaims of this round
        takeover = {u: c for u, c in snap.reservations.items() if u not in held}
        pod_by_key = {pod_key(p): p for p in pending}
        for node_name, placed in (result.existing or {}).items():
            placed = self._nominate(node_name, placed, snap, pod_by_key, takeover, report)
            if placed:
                report.existing.setdefault(node_name, []).extend(placed)
                self._decision("existing", f"{len(placed)} pods fit on {node_name}", node=node_name, pods=placed)
        for u in result.unschedulable:
            reason = u.reason + (("; " + "; ".join(blocked)) if blocked else "")
            report.unschedulable.append({"pod": u.pod, "reason": reason})
            self._decision("unschedulable", f"pod {u.pod} unschedulable: {reason}", pod=u.pod, reason=reason)
        retry: list[dict] = []
        for plan in result.nodeclaims:
            np = snap.nodepools[plan.nodepool]
            nc = snap.nodeclasses[np.node_class_ref.get("name")]
            plan_pods = [pod_by_key[k] for k in plan.pods if k in pod_by_key]
            retry.extend(self._execute(plan, np, nc, snap.resolved.get(nc.name), plan_pods, takeover, report))
        return retry

    # -- pods placed on an in-flight NodeClaim ------------------------------------------------------
    def _nominate(self, node_name: str, placed: list[str], snap, pod_by_key, takeover, report) -> list[str]:
        """Pods the solver placed on ``node_name`` (existing capacity): when that is an in-flight NodeClaim (launched,
        not Initialized, not deleting) they are reserved for it, as its launch reserved its own pods, so the next
        rounds count them against its room (``held_reservations``) instead of offering the same room again.  A pod
        a concurrent invocation reserved meanwhile is left to it (skipped).  Returns the pods kept."""
        nc = in_flight_nodeclaim(snap, node_name)
        pods = [pod_by_key[k] for k in placed if k in pod_by_key]
        if nc is None or not pods:
            return placed
        taken = set(self.launcher.nominate(nc, pods, takeover=takeover))
        if not taken:
            return placed
        keep = []
        for k in placed:
            if k in pod_by_key and pod_uid(pod_by_key[k]) in taken:
                reason = "nominated by a concurrent provisioner"
                report.skipped.append({"pod": k, "reason": reason})
                self._decision("skip", f"pod {k} skipped: {reason}", pod=k)
            else:
                keep.append(k)
        return keep

    # -- one plan -----------------------------------------------------------------------------------
    def _execute(self, plan, np, nodeclass, resolved, plan_pods: list[dict], takeover, report) -> list[dict]:
        out = self.launcher.launch(plan, np, nodeclass, resolved, plan_pods, takeover=takeover)
        name = out.name
        if out.throttled:  # not a launch failure: fail the round so SQS redelivers the records later
            raise Throttled(out.error or out.failed or f"NodeClaim {name}: launch throttled")
        if out.duplicate:
            report.duplicates.append(name)
            self._decision("duplicate", f"NodeClaim {name} already provisioned; nothing launched", nodeclaim=name)
            return []
        if out.limit and not out.taken:
            # re-plan with the fresh usage; if nothing fits the solver explains the limit
            self._decision("retry", f"NodePool {np.name} limits changed concurrently: re-planning",
                           nodeclaim=name, detail=out.limit)
            if name in self._limit_retried:
                return self._unschedulable(plan_pods, out.limit, report)
            self._limit_retried.add(name)
            return plan_pods
        if out.taken:
            taken = set(out.taken)
            for p in plan_pods:
                if pod_uid(p) in taken:
                    report.skipped.append({"pod": pod_key(p), "reason": "nominated by a concurrent provisioner"})
            self._decision("retry", f"{len(taken)} pods of {name} taken by a concurrent invocation: re-planning the rest",
                           nodeclaim=name)
            return [p for p in plan_pods if pod_uid(p) not in taken]
        if out.launched is None:
            if out.error:
                report.errors.append(out.error)
            return self._unschedulable(plan_pods, out.failed or "nothing launched", report)
        launched = out.launched
        report.launched.append(launched)
        keys = [pod_key(p) for p in plan_pods]
        self._decision("launch", f"launched {launched.instance_type} {launched.capacity_type} in {launched.zone} "
                                 f"({launched.instance_id}) for {plural(len(keys), 'pod')} as NodeClaim {name}",
                       nodeclaim=name, nodepool=np.name, instanceId=launched.instance_id,
                       instanceType=launched.instance_type, zone=launched.zone, capacityType=launched.capacity_type,
                       pricePerHour=launched.price, pods=keys, why=getattr(plan, "reason", ""))
        return []

    def _unschedulable(self, plan_pods, reason, report) -> list:
        for p in plan_pods:
            report.unschedulable.append({"pod": pod_key(p), "reason": reason})
            self._decision("unschedulable", f"pod {pod_key(p)} unschedulable: {reason}", pod=pod_key(p), reason=reason)
        return []


__all__ = ["Provisioner", "ProvisionReport", "Launched", "NOMINATED_PODS_ANNOTATION", "NOMINATED_UIDS_ANNOTATION",
           "PRICE_ANNOTATION", "scheduling_taints", "limits_of", "nodeclaim_name", "as_dict"]
