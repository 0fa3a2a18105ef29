"""The off-peak function: converge the cluster to what the schedules say should hold now (docs/offpeak.md).

``OffPeakController.sweep(now, name=None, dry_run=False) -> OffPeakReport``, run by EventBridge Scheduler at each
window's start and end (in the schedule's time zone) and by a periodic reconcile:

1. **Observe**: the OffPeakSchedules and NodePools (DynamoDB), the Deployments, StatefulSets, Namespaces, HPAs and
   KEDA ScaledObjects (Kubernetes), and the records (DynamoDB, kind ``OffPeakRecord``).
2. **Plan** (:func:`~karpenter_lambda.offpeak.plan_offpeak`, pure).
3. **Act**, record first: each new or changed record is written before its workload is touched; the workload is
   annotated with its original replicas, then scaled (the ``scale`` subresource); autoscalers pinned/paused;
   NodePool overrides written.  Restores scale back to the recorded count, put the autoscalers back, and only
   then delete the record.  A Kubernetes error fails only that object (reported, retried by the next run; its
   record is kept).
4. **Drain**: NodePools held at zero have their NodeClaims' deletion requested (the termination flow drains them,
   PDBs respected until the NodePool's terminationGracePeriod).
5. **Hand-off**: while a drained NodePool's window has just ended (:data:`HANDOFF_SECONDS`), every pending pod is
   sent to the pod queue as the watcher would, so the morning does not depend on anything in the cluster.
6. **Status**: each schedule's ``status`` (active, window, next window, last run); a change of ``active`` is
   reported as ``started`` / ``ended`` (the simulator's ``OffPeakStarted`` / ``OffPeakEnded``).
"""

from __future__ import annotations

import copy
import logging
import os
from dataclasses import dataclass, field
from datetime import timedelta

from ..adapters.aws.sqs import PodQueue
from ..api import labels as wk
from ..api.kube import is_daemon_pod, is_terminal, is_terminating
from ..api.labels import OFFPEAK_HELD_BY_ANNOTATION, OFFPEAK_ORIGINAL_ANNOTATION, PROJECT_API_VERSION
from ..api.objects import KubeObject
from ..api.offpeak import KIND as SCHEDULE_KIND
from ..api.times import to_datetime
from ..offpeak import DOWNSCALER_ORIGINAL, WORKLOAD_KINDS, OffPeakInput, OffPeakPlan, plan_offpeak, window_at
from . import runtime
from .base import Controller
from .termination import Terminator

log = logging.getLogger(__name__)
RECORD_KIND = "OffPeakRecord"
RECORD_API_VERSION = PROJECT_API_VERSION          # the old name, kept
HANDOFF_SECONDS = 30 * 60
#: the annotations a released workload loses (ours, and kube-downscaler's record of a workload it scaled down)
_RELEASED = {OFFPEAK_ORIGINAL_ANNOTATION: None, OFFPEAK_HELD_BY_ANNOTATION: None, DOWNSCALER_ORIGINAL: None}
DRAIN_REASON = "OffPeakDrain"


def record_name(key: str) -> str:
    """DynamoDB sort key of a record: ``Deployment/dev/web`` -> ``deployment.dev.web``."""
    return key.replace("/", ".").lower() if not key.startswith("NodePool/") else "nodepool." + key.split("/", 1)[1]


@dataclass
class OffPeakReport:
    dry_run: bool = False
    schedules: list[dict] = field(default_factory=list)
    started: list[str] = field(default_factory=list)
    ended: list[str] = field(default_factory=list)
    scaled: list[dict] = field(default_factory=list)        # WorkloadScaled: object, from, to, action, holders
    autoscalers: list[dict] = field(default_factory=list)
    nodepools: list[dict] = field(default_factory=list)
    drained: list[str] = field(default_factory=list)         # NodeClaims whose deletion was requested
    handed_off: int = 0
    skipped: list[dict] = field(default_factory=list)
    failed: list[dict] = field(default_factory=list)         # {object, error}
    errors: list[str] = field(default_factory=list)
    records: int = 0

    def to_dict(self) -> dict:
        return {"dryRun": self.dry_run, "schedules": self.schedules, "started": self.started, "ended": self.ended,
                "scaled": self.scaled, "autoscalers": self.autoscalers, "nodepools": self.nodepools,
                "drained": self.drained, "handedOff": self.handed_off, "skipped": self.skipped,
                "failed": self.failed, "errors": self.errors, "records": self.records}

    def metric_counts(self) -> dict[str, float]:
        down = sum(1 for s in self.scaled if s["action"] != "restore")
        return {"WorkloadsScaledDown": down, "WorkloadsRestored": len(self.scaled) - down,
                "OffPeakFailures": len(self.failed) + len(self.errors), "NodeClaimsDrained": len(self.drained),
                "PodsHandedOff": self.handed_off}


class OffPeakController(Controller):
    log_fields = {"sweep": "offpeak"}

    def __init__(self, store, kube, terminator=None, pod_queue=None, clock=None, logger=None):
        super().__init__(clock, logger or log)
        self.store = store
        self.kube = kube
        self.terminator = terminator
        self.pod_queue = pod_queue

    @classmethod
    def from_environment(cls, env, logger=None) -> "OffPeakController":
        url = os.environ.get("KARPENTER_LAMBDA_POD_QUEUE_URL")
        queue = PodQueue(env.client("sqs"), url, env.config.cluster, runtime.clock_proxy) if url else None
        # request() only marks the NodeClaim deleting; the lifecycle sweep (with the cloud provider) finalizes
        terminator = Terminator(env.store, env.kube, None, env.claims, runtime.clock_proxy)
        return cls(env.store, env.kube, terminator, queue, runtime.clock_proxy, logger=logger)

    # -- observe -----------------------------------------------------------------------------------
    def records(self) -> list[dict]:
        return [dict(o.spec) for o in self.store.list(RECORD_KIND)]

    def observe(self, now: float) -> OffPeakInput:
        workloads = []
        for kind, fn in (("Deployment", self.kube.list_deployments), ("StatefulSet", self.kube.list_statefulsets)):
            for w in fn():
                w.setdefault("kind", kind)
                workloads.append(w)
        return OffPeakInput(
            schedules=self.store.list(SCHEDULE_KIND), workloads=workloads, namespaces=self.kube.list_namespaces(),
            hpas=self.kube.list_hpas(), scaledobjects=self.kube.list_scaledobjects(), records=self.records(),
            nodepools=self.store.list("NodePool"), now=to_datetime(now))

    def plan(self, now: float) -> tuple[OffPeakInput, OffPeakPlan]:
        inp = self.observe(now)
        return inp, plan_offpeak(inp)

    # -- the run -----------------------------------------------------------------------------------
    def sweep(self, now: float | None = None, name: str | None = None, dry_run: bool = False) -> OffPeakReport:
        now = self.clock() if now is None else now
        report = OffPeakReport(dry_run=dry_run)
        try:
            inp, plan = self.plan(now)
        except Exception as e:                       # nothing was changed; the next run tries again
            report.errors.append(f"observe: {e}")
            self._decision("OffPeakError", f"could not read the cluster: {e}")
            return report
        if name is not None:
            plan = _only(plan, name)
            if not any(s.name == name for s in plan.schedules):
                report.errors.append(f"no OffPeakSchedule named {name!r}")
                return report
        report.schedules = [s.to_dict() for s in plan.schedules]
        report.skipped = plan.skipped
        report.records = len(inp.records)
        if dry_run:
            self._describe(plan, report)
            return report
        failed_keys = self._put_records(plan, report)
        for ch in plan.changes:
            if ch.key in failed_keys:
                continue
            try:
                self._apply(ch, report)
            except Exception as e:              # one object fails; its record stays for the next run
                failed_keys.add(ch.key)
                report.failed.append({"object": f"{ch.kind}/{ch.namespace + '/' if ch.namespace else ''}{ch.name}",
                                      "action": ch.action, "error": str(e)})
                self._decision("OffPeakFailed", f"{ch.action} {ch.kind} {ch.namespace}/{ch.name} failed: {e}",
                               object=ch.name, error=str(e))
        for key in plan.delete_records:
            if key in failed_keys:
                continue
            try:
                self.store.delete(RECORD_KIND, record_name(key))
            except Exception as e:
                report.errors.append(f"delete record {key}: {e}")
        self._drain(plan, report)
        self._handoff(inp, plan, now, report)
        self._status(inp, plan, now, report)
        return report

    def _describe(self, plan: OffPeakPlan, report: OffPeakReport) -> None:
        for ch in plan.changes:
            self._report_change(ch, report)
        report.drained = [f"NodePool/{n}" for n in plan.drain_nodepools]

    def _put_records(self, plan: OffPeakPlan, report: OffPeakReport) -> set[str]:
        failed = set()
        for rec in plan.put_records:
            doc = {"apiVersion": RECORD_API_VERSION, "kind": RECORD_KIND,
                   "metadata": {"name": record_name(rec["key"])}, "spec": rec}
            try:
                self.store.put(KubeObject(doc))
            except Exception as e:           # never act on a workload whose original is not recorded
                failed.add(rec["key"])
                report.failed.append({"object": rec["key"], "action": "record", "error": str(e)})
        return failed

    def _report_change(self, ch, report: OffPeakReport) -> None:
        obj = f"{ch.kind}/{ch.namespace}/{ch.name}" if ch.namespace else f"{ch.kind}/{ch.name}"
        entry = {"object": obj, "kind": ch.kind, "namespace": ch.namespace, "name": ch.name, "action": ch.action,
                 "from": ch.frm, "to": ch.to, "holders": list(ch.holders)}
        if ch.kind in WORKLOAD_KINDS:
            if ch.action != "forget-annotation":
                report.scaled.append(entry)
        elif ch.kind == "NodePool":
            report.nodepools.append(entry)
        else:
            report.autoscalers.append(entry)

    def _apply(self, ch, report: OffPeakReport) -> None:
        if ch.kind in WORKLOAD_KINDS:
            if ch.action in ("scale-down", "rescale"):
                held = {OFFPEAK_ORIGINAL_ANNOTATION: str(self._original(ch)),
                        OFFPEAK_HELD_BY_ANNOTATION: ",".join(ch.holders)}
                self.kube.patch_workload(ch.kind, ch.namespace, ch.name, {"metadata": {"annotations": held}})
                self.kube.scale_workload(ch.kind, ch.namespace, ch.name, ch.to)
            elif ch.action == "restore":
                self.kube.scale_workload(ch.kind, ch.namespace, ch.name, ch.to)
                self.kube.patch_workload(ch.kind, ch.namespace, ch.name, {"metadata": {"annotations": dict(_RELEASED)}})
            elif ch.action == "forget-annotation":
                self.kube.patch_workload(ch.kind, ch.namespace, ch.name, {"metadata": {"annotations": dict(_RELEASED)}})
        elif ch.kind == "HorizontalPodAutoscaler":
            self.kube.patch_hpa(ch.namespace, ch.name, ch.to)
        elif ch.kind == "ScaledObject":
            self.kube.patch_scaledobject(ch.namespace, ch.name, ch.to)
        elif ch.kind == "NodePool":
            def mutate(np):
                for k, v in ch.to.items():
                    if v is None:
                        np.spec.pop(k, None)
                    else:
                        np.spec[k] = copy.deepcopy(v)
                return np
            self.store.update("NodePool", ch.name, mutate)
        self._report_change(ch, report)
        self._decision("WorkloadScaled" if ch.kind in WORKLOAD_KINDS else "OffPeakChanged",
                       f"{ch.action} {ch.kind} {ch.namespace + '/' if ch.namespace else ''}{ch.name}: "
                       f"{ch.frm} -> {ch.to}", object=ch.name, kind=ch.kind, action=ch.action,
                       holders=list(ch.holders))

    def _original(self, ch) -> int:
        rec = self.store.get(RECORD_KIND, record_name(ch.key))
        return int((rec.spec if rec else {}).get("originalReplicas", ch.frm))

    def _drain(self, plan: OffPeakPlan, report: OffPeakReport) -> None:
        if not plan.drain_nodepools or self.terminator is None:
            return
        for nc in self.store.list("NodeClaim"):
            if nc.labels.get(wk.NODEPOOL) not in plan.drain_nodepools or nc.metadata.get("deletionTimestamp"):
                continue
            try:
                self.terminator.request(nc, DRAIN_REASON)
                report.drained.append(nc.name)
                self._decision("OffPeakDrain", f"NodeClaim {nc.name} of NodePool {nc.labels.get(wk.NODEPOOL)} "
                                               f"drained for the off-peak window", nodeclaim=nc.name)
            except Exception as e:
                report.failed.append({"object": f"NodeClaim/{nc.name}", "action": "drain", "error": str(e)})

    def _handoff_active(self, inp: OffPeakInput, plan: OffPeakPlan, now: float) -> bool:
        if plan.restored_nodepools:
            return True
        t = to_datetime(now)
        for s in inp.schedules:
            if not any(o.drain for o in s.nodepools):
                continue
            try:
                was = window_at(s.schedule, s.time_zone, s.duration_seconds, t - timedelta(seconds=HANDOFF_SECONDS))
                still = window_at(s.schedule, s.time_zone, s.duration_seconds, t)
            except (ValueError, KeyError):
                continue
            if was is not None and (still is None or still.start != was.start):
                return True
        return False

    def _handoff(self, inp: OffPeakInput, plan: OffPeakPlan, now: float, report: OffPeakReport) -> None:
        if self.pod_queue is None or not self._handoff_active(inp, plan, now):
            return
        try:
            pods = [p for p in self.kube.list_pods(field_selector="spec.nodeName=")
                    if not is_terminal(p) and not is_terminating(p) and not is_daemon_pod(p)]
            sent, problems = self.pod_queue.send_pods(pods)
        except Exception as e:
            report.errors.append(f"hand-off: {e}")
            return
        report.handed_off = sent
        report.errors.extend(problems)
        if sent:
            self._decision("OffPeakHandOff", f"{sent} pending pods sent to the pod queue after a drained window",
                           pods=sent)

    def _status(self, inp: OffPeakInput, plan: OffPeakPlan, now: float, report: OffPeakReport) -> None:
        held: dict[str, list[str]] = {}
        for rec in self.records():
            for h in rec.get("holders") or []:
                held.setdefault(h, []).append(rec["key"])
        for st in plan.schedules:
            sched = next((s for s in inp.schedules if s.name == st.name), None)
            if sched is None:
                continue
            was = bool((sched.status or {}).get("active"))
            if st.active and not was:
                report.started.append(st.name)
                self._decision("OffPeakStarted", f"OffPeakSchedule {st.name}: window started", schedule=st.name)
            elif was and not st.active:
                report.ended.append(st.name)
                self._decision("OffPeakEnded", f"OffPeakSchedule {st.name}: window ended", schedule=st.name)
            d = st.to_dict()
            patch = {"active": st.active, "window": d["window"], "next": d["next"], "lastRun": runtime.iso(now),
                     "holds": sorted(held.get(f"OffPeakSchedule/{st.name}", [])), "error": st.error}
            if {k: (sched.status or {}).get(k) for k in patch if k != "lastRun"} == {k: v for k, v in patch.items() if k != "lastRun"}:
                continue
            try:
                self.store.update_status(SCHEDULE_KIND, st.name, patch)
            except Exception as e:
                report.errors.append(f"status of OffPeakSchedule/{st.name}: {e}")


def _only(plan: OffPeakPlan, name: str) -> OffPeakPlan:
    """The plan restricted to what one schedule holds (``offpeak run NAME``)."""
    holder = f"OffPeakSchedule/{name}"
    keys = {c.key for c in plan.changes if holder in c.holders} | {r["key"] for r in plan.put_records
                                                                   if holder in (r.get("holders") or [])}
    return OffPeakPlan(
        schedules=[s for s in plan.schedules if s.name == name],
        changes=[c for c in plan.changes if c.key in keys],
        put_records=[r for r in plan.put_records if r["key"] in keys],
        delete_records=[k for k in plan.delete_records if k in keys],
        drain_nodepools=[n for n in plan.drain_nodepools if f"NodePool/{n}" in keys],
        restored_nodepools=[n for n in plan.restored_nodepools if f"NodePool/{n}" in keys],
        skipped=plan.skipped)
