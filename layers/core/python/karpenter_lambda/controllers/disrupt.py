"""The disruption sweeps (drift; consolidation), one step of each in-flight disruption per invocation.

``DisruptionSweep(..., kind="drift"|"consolidation").sweep(now) -> DisruptionReport``, every
``disruptionIntervalMinutes``:

1. **Observe** (written to the NodeClaims, so the next invocation knows): the drift sweep marks each NodeClaim's
   ``Drifted`` condition (kind + message, set when first seen: "earliest drift first" orders by it); the
   consolidation sweep keeps ``status.lastPodEventTime`` (the time the node's set of pods last changed, as seen by
   comparing with ``status.podFingerprint`` of the previous invocation).
2. **Advance** this sweep's in-flight disruptions (:mod:`.disruption_state`), one step each; any crash leaves an
   entry the next invocation continues:
   ``proposed`` -(>= 15 s later: :func:`~karpenter_lambda.disruption.plan.revalidate` on this snapshot; cancelled
   if it no longer holds)-> taint ``karpenter.sh/disrupted:NoSchedule``, launch the replacements through the
   :class:`~.launcher.Launcher` -> ``replacing`` -(every replacement Initialized)-> request the NodeClaim's deletion
   (:class:`~.termination.Terminator`: the lifecycle sweep drains and terminates) -> ``deleting`` -> released once
   the NodeClaim is gone.  A replacement that fails to launch, or is deleted before it initializes: the taint is
   removed, the node kept, the reason recorded.
3. **Plan** (:func:`~karpenter_lambda.disruption.plan.plan_sweep`, pure) and **record**: expiration (forceful)
   requests the deletion at once; each graceful command is reserved in the ledger, conditionally on its budget.
4. **Explain**: each blocked node's cause is written to ``status.disruptionBlocked`` and reported once per cause.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field

from ..disruption.candidates import LAST_POD_EVENT
from ..disruption.drift import Drift, drift_reason
from ..disruption.emptiness import Emptiness
from ..disruption.expiration import Expiration
from ..disruption.plan import SweepBudgets, external_disrupting, plan_sweep, revalidate
from ..disruption.types import DRIFTED, EXPIRED, Command
from ..scheduling.reschedule import DISRUPTED_TAINT
from . import runtime
from .cloudprovider import AWSCloudProvider
from .disruption_state import DELETING, PROPOSED, REPLACING, DisruptionLedger, Entry
from .launcher import Launcher
from .snapshot import SnapshotLoader
from .termination import Terminator

log = logging.getLogger(__name__)
VALIDATION_DELAY = 15.0
BLOCKED_STATUS = "disruptionBlocked"
POD_FINGERPRINT = "podFingerprint"
REPLACES_ANNOTATION = "karpenter-lambda.io/replaces"
SWEEP_METHODS = {"drift": (Expiration(), Drift()), "consolidation": (Emptiness(),)}
METHOD_BY_REASON = {m.reason: m for ms in SWEEP_METHODS.values() for m in ms}


@dataclass
class DisruptionReport:
    sweep: str
    disrupted: list[dict] = field(default_factory=list)   # deletion requested: the NodeClaimDisrupted events
    proposed: list[dict] = field(default_factory=list)
    replacing: list[dict] = field(default_factory=list)
    cancelled: list[dict] = field(default_factory=list)
    failed: list[dict] = field(default_factory=list)      # replacements that did not come up
    blocked: list[dict] = field(default_factory=list)     # new (node, cause) pairs only
    drifted: list[dict] = field(default_factory=list)     # newly marked Drifted
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("sweep", "disrupted", "proposed", "replacing", "cancelled", "failed",
                                              "blocked", "drifted", "errors")}

    def metric_counts(self) -> dict[str, float]:
        return {"NodesDisrupted": len(self.disrupted), "DisruptionsProposed": len(self.proposed),
                "DisruptionsCancelled": len(self.cancelled), "DisruptionReplacementFailures": len(self.failed),
                "DisruptionErrors": len(self.errors)}


def _fingerprint(pods: list[dict]) -> str:
    uids = sorted(((p.get("metadata") or {}).get("uid") or "") for p in pods)
    return hashlib.sha256("\n".join(uids).encode()).hexdigest()[:16]


class DisruptionSweep:
    def __init__(self, store, kube, cloud, claims, ledger: DisruptionLedger, kind: str, clock=None, logger=None,
                 validation_delay: float = VALIDATION_DELAY):
        if kind not in SWEEP_METHODS:
            raise ValueError(f"unknown disruption sweep {kind!r}: expected one of {sorted(SWEEP_METHODS)}")
        self.store, self.kube, self.cloud, self.claims, self.ledger = store, kube, cloud, claims, ledger
        self.kind = kind
        self.methods = list(SWEEP_METHODS[kind])
        self.clock = clock or runtime.clock_proxy
        self.logger = logger or log
        self.validation_delay = validation_delay
        self.loader = SnapshotLoader(store, kube, claims, cloud, self.logger)
        self.terminator = Terminator(store, kube, cloud, claims, self.clock, self._decision)
        self.launcher = Launcher(store, claims, cloud, self.clock, self._decision)

    @classmethod
    def from_environment(cls, env, kind: str, logger=None) -> "DisruptionSweep":
        ledger = DisruptionLedger(env.dynamodb, env.config.cluster, env.config.state_table)
        return cls(env.store, env.kube, AWSCloudProvider.from_environment(env), env.claims, ledger, kind,
                   runtime.clock_proxy, logger=logger)

    def _decision(self, decision: str, message: str, **fields) -> None:
        extra = {"decision": decision, "sweep": self.kind, **fields}
        try:
            self.logger.info(message, extra=extra)
        except TypeError:
            self.logger.info("%s %s", message, json.dumps(extra, default=str))

    # -- the sweep ---------------------------------------------------------------------------------
    def sweep(self, now: float | None = None) -> DisruptionReport:
        now = self.clock() if now is None else now
        report = DisruptionReport(self.kind)
        snap = self.loader.load(now, pdbs=True)
        if self.kind == "drift":
            self._mark_drift(snap, report)
        else:
            self._track_pod_events(snap, report)
        live: dict[str, Entry] = {}
        for name, e in self.ledger.entries().items():
            if name not in snap.nodeclaims:
                self.ledger.release(e)
            else:
                live[name] = e
        for name, e in sorted(live.items()):
            if e.sweep != self.kind:
                continue
            try:
                if not self._advance(e, snap, live, report):
                    live.pop(name, None)
            except Exception as ex:  # one disruption's failure must not stop the others
                report.errors.append(f"NodeClaim {name}: {ex}")
                self.logger.exception(f"disruption of NodeClaim {name} failed")
        budgets = SweepBudgets(snap, {n: e.nodepool for n, e in live.items()})
        budgets.busy_nodepools = {e.nodepool for e in live.values()
                                  if e.reason == DRIFTED and e.state != DELETING and e.planned_price is not None}
        plan = plan_sweep(snap, self.methods, budgets)
        for cmd in plan.commands:
            try:
                if cmd.forceful:
                    self._expire(cmd, snap, report)
                else:
                    self._propose(cmd, snap, budgets, live, report)
            except Exception as ex:
                report.errors.append(f"{cmd.reason} {cmd.names}: {ex}")
                self.logger.exception(f"disruption command {cmd.names} failed")
        self._record_blocked(plan.blocked, snap, report)
        return report

    # -- observations -----------------------------------------------------------------------------
    def _mark_drift(self, snap, report) -> None:
        for name, nc in list(snap.nodeclaims.items()):
            if nc.metadata.get("deletionTimestamp"):
                continue
            found = drift_reason(nc, snap)
            has = nc.condition("Drifted")
            if found and not (has and has.get("status") == "True" and has.get("reason") == found[0]):
                cond = {"type": "Drifted", "status": "True", "reason": found[0], "message": found[1],
                        "lastTransitionTime": (has or {}).get("lastTransitionTime") if has and has.get("status") == "True" else runtime.iso(snap.now)}
                snap.nodeclaims[name] = self._set_condition(name, cond)
                report.drifted.append({"nodeClaim": name, "kind": found[0], "message": found[1]})
                self._decision("drifted", f"NodeClaim {name} drifted: {found[1]}", nodeclaim=name, drift=found[0])
            elif not found and has:
                snap.nodeclaims[name] = self._set_condition(name, None, remove="Drifted")

    def _set_condition(self, name: str, cond: dict | None, remove: str | None = None):
        def mutate(obj):
            t = remove or cond["type"]
            conds = [c for c in obj.status.get("conditions") or [] if c.get("type") != t]
            if cond is not None:
                conds.append(cond)
            obj.status["conditions"] = conds
            return obj

        return self.store.update("NodeClaim", name, mutate)

    def _track_pod_events(self, snap, report) -> None:
        for name, nc in list(snap.nodeclaims.items()):
            node = snap.node_of_nodeclaim(name)
            if node is None or nc.metadata.get("deletionTimestamp"):
                continue
            fp = _fingerprint(snap.pods_of_nodeclaim(name))
            if nc.status.get(POD_FINGERPRINT) == fp:
                continue
            # The pods changed since the previous sweep saw them (or this is the first look): the change happened
            # at most one interval ago; counting from now never consolidates early.

            def mutate(obj, fp=fp):
                obj.status[POD_FINGERPRINT] = fp
                obj.status[LAST_POD_EVENT] = runtime.iso(snap.now)
                return obj

            snap.nodeclaims[name] = self.store.update("NodeClaim", name, mutate)

    # -- new decisions ----------------------------------------------------------------------------
    def _event(self, c, reason: str, replacements: list[str], savings: float, detail: str) -> dict:
        return {"nodeClaim": c.name, "reason": reason, "nodePool": c.nodepool_name, "instanceType": c.instance_type,
                "zone": c.zone, "capacityType": c.capacity_type, "replacements": list(replacements),
                "savingsPerHour": round(savings, 6), "detail": detail}

    def _expire(self, cmd: Command, snap, report) -> None:
        for c in cmd.candidates:
            self.terminator.request(c.nodeclaim, f"{EXPIRED}: {cmd.detail}")
            self._taint(c.node_name, add=True)
            report.disrupted.append(self._event(c, EXPIRED, [], 0.0, cmd.detail))
            self._decision("disrupt", f"NodeClaim {c.name} expired: {cmd.detail}", nodeclaim=c.name, reason=EXPIRED)

    def _propose(self, cmd: Command, snap, budgets: SweepBudgets, live: dict, report) -> None:
        planned = None
        if cmd.replacements:
            planned = round(sum(p.price for p in cmd.replacements), 6)
        for c in cmd.candidates:
            limit = budgets.limit(c.nodepool_name, cmd.reason)
            recorded = {n for n, e in live.items() if e.nodepool == c.nodepool_name}
            max_before = None if limit is None else limit - external_disrupting(snap, c.nodepool_name, recorded) - 1
            entry = Entry(nodeclaim=c.name, nodepool=c.nodepool_name, reason=cmd.reason, sweep=self.kind,
                          proposed_at=snap.now, since=snap.now, planned_price=planned,
                          savings_per_hour=cmd.savings_per_hour, detail=cmd.detail, instance_type=c.instance_type,
                          zone=c.zone, capacity_type=c.capacity_type)
            if not self.ledger.reserve(entry, max_before):
                report_blocked = {"nodeClaim": c.name, "cause": "budget", "reason": cmd.reason,
                                  "message": f"budget {cmd.reason}: taken by a concurrent sweep"}
                self._record_blocked_one(report_blocked, snap, report)
                continue
            live[c.name] = entry
            report.proposed.append({"nodeClaim": c.name, "reason": cmd.reason, "detail": cmd.detail,
                                    "replacements": len(cmd.replacements)})
            self._decision("propose", f"{cmd.reason} NodeClaim {c.name} ({cmd.detail or 'no detail'}); "
                                      f"re-validated in {int(self.validation_delay)}s",
                           nodeclaim=c.name, reason=cmd.reason, replacements=len(cmd.replacements))

    # -- in-flight disruptions --------------------------------------------------------------------
    def _advance(self, e: Entry, snap, live: dict, report) -> bool:
        """One step; False when the entry was released (cancelled or failed)."""
        nc = snap.nodeclaims[e.nodeclaim]
        if nc.metadata.get("deletionTimestamp"):
            if e.state != DELETING:
                self._deleting(e, snap, report)
            return True
        if e.state == PROPOSED:
            if snap.now - e.proposed_at < self.validation_delay:
                return True
            return self._execute(e, snap, live, report)
        if e.state == REPLACING:
            return self._check_replacements(e, snap, report)
        self._start_deletion(e, snap, report)   # DELETING without a deletion timestamp: a crash in between
        return True

    def _execute(self, e: Entry, snap, live: dict, report) -> bool:
        method = METHOD_BY_REASON[e.reason]
        budgets = SweepBudgets(snap, {n: x.nodepool for n, x in live.items()})
        cmd, why = revalidate(snap, method, [e.nodeclaim], budgets, planned_price=e.planned_price)
        if cmd is None:
            self.ledger.release(e)
            report.cancelled.append({"nodeClaim": e.nodeclaim, "reason": e.reason, "why": why})
            self._decision("cancel", f"{e.reason} of NodeClaim {e.nodeclaim} cancelled on re-validation: {why}",
                           nodeclaim=e.nodeclaim, reason=e.reason)
            return False
        c = cmd.candidates[0]
        self._taint(c.node_name, add=True)
        if not cmd.replacements:
            e.savings_per_hour = cmd.savings_per_hour
            self._start_deletion(e, snap, report)
            return True
        names = []
        for i, plan in enumerate(cmd.replacements):
            name, problem = self._launch_replacement(e, i, plan, snap)
            if problem:
                self._fail(e, c.node_name, names, f"replacement {name} did not launch: {problem}", report)
                return False
            names.append(name)
        e.state, e.replacements, e.since = REPLACING, names, snap.now
        e.savings_per_hour = cmd.savings_per_hour
        self.ledger.advance(e)
        report.replacing.append({"nodeClaim": e.nodeclaim, "replacements": names})
        self._decision("replace", f"NodeClaim {e.nodeclaim}: launched replacements {', '.join(names)}; draining "
                                  f"once they are initialized", nodeclaim=e.nodeclaim, replacements=names)
        return True

    def _launch_replacement(self, e: Entry, i: int, plan, snap) -> tuple[str, str]:
        nodepool = snap.nodepools.get(plan.nodepool)
        if nodepool is None:
            return "", f"NodePool {plan.nodepool} is gone"
        nodeclass = snap.nodeclasses.get(nodepool.node_class_ref.get("name", ""))
        resolved = snap.resolved.get(nodeclass.name) if nodeclass is not None else None
        if nodeclass is None or resolved is None:
            return "", f"EC2NodeClass of NodePool {nodepool.name} is not resolved"
        digest = hashlib.sha256(f"replace:{e.nodeclaim}:{e.proposed_at}:{i}".encode()).hexdigest()[:10]
        name = f"{nodepool.name}-{digest}"
        out = self.launcher.launch(plan, nodepool, nodeclass, resolved, [], name=name,
                                   annotations={REPLACES_ANNOTATION: e.nodeclaim})
        if out.launched is not None or out.duplicate:
            return name, ""
        return name, out.limit or out.failed or "launch refused"

    def _check_replacements(self, e: Entry, snap, report) -> bool:
        reps = [snap.nodeclaims.get(r) for r in e.replacements]
        gone = [r for r, x in zip(e.replacements, reps) if x is None or x.metadata.get("deletionTimestamp")]
        if gone:
            self._fail(e, (snap.node_of_nodeclaim(e.nodeclaim) or {}).get("metadata", {}).get("name"), [],
                       f"replacement {', '.join(gone)} was deleted before it initialized", report)
            return False
        if all(x.is_true("Initialized") for x in reps):
            self._start_deletion(e, snap, report)
        return True

    def _fail(self, e: Entry, node_name: str | None, launched: list[str], why: str, report) -> None:
        self._taint(node_name, add=False)
        for name in launched:   # a partial set of replacements is not kept
            nc = self.store.get("NodeClaim", name)
            if nc is not None:
                self.terminator.request(nc, f"replacement for {e.nodeclaim} abandoned")
        self.ledger.release(e)
        report.failed.append({"nodeClaim": e.nodeclaim, "reason": e.reason, "why": why})
        self._decision("replacement-failed", f"{e.reason} of NodeClaim {e.nodeclaim} abandoned, node kept: {why}",
                       nodeclaim=e.nodeclaim, reason=e.reason)

    def _start_deletion(self, e: Entry, snap, report) -> None:
        nc = snap.nodeclaims[e.nodeclaim]
        self.terminator.request(nc, f"{e.reason}: {e.detail}" if e.detail else e.reason)
        self._deleting(e, snap, report)

    def _deleting(self, e: Entry, snap, report) -> None:
        e.state, e.since = DELETING, snap.now
        self.ledger.advance(e)
        report.disrupted.append({"nodeClaim": e.nodeclaim, "reason": e.reason, "nodePool": e.nodepool,
                                 "instanceType": e.instance_type, "zone": e.zone, "capacityType": e.capacity_type,
                                 "replacements": list(e.replacements), "savingsPerHour": round(e.savings_per_hour, 6),
                                 "detail": e.detail})
        self._decision("disrupt", f"{e.reason} NodeClaim {e.nodeclaim}: deletion requested"
                                  + (f" (replaced by {', '.join(e.replacements)})" if e.replacements else ""),
                       nodeclaim=e.nodeclaim, reason=e.reason, replacements=e.replacements,
                       savingsPerHour=e.savings_per_hour)

    def _taint(self, node_name: str | None, add: bool) -> None:
        if not node_name:
            return
        if add:
            self.kube.patch_node_taints(node_name, add=[dict(DISRUPTED_TAINT)])
        else:
            self.kube.patch_node_taints(node_name, remove=[dict(DISRUPTED_TAINT)])

    # -- explanations -----------------------------------------------------------------------------
    def _record_blocked(self, blocked, snap, report) -> None:
        seen = set()
        for b in blocked:
            if b.nodeclaim in seen:
                continue
            seen.add(b.nodeclaim)
            self._record_blocked_one({"nodeClaim": b.nodeclaim, "cause": b.cause, "reason": b.reason,
                                      "message": b.message}, snap, report)

    def _record_blocked_one(self, b: dict, snap, report) -> None:
        nc = snap.nodeclaims.get(b["nodeClaim"])
        if nc is None:
            return
        prev = nc.status.get(BLOCKED_STATUS) or {}
        seen = list(prev.get("causes") or [])
        if b["cause"] in seen:   # at most once per node and cause
            return
        entry = {**b, "at": runtime.iso(snap.now), "causes": seen + [b["cause"]]}
        entry.pop("nodeClaim", None)

        def mutate(obj):
            obj.status[BLOCKED_STATUS] = entry
            return obj

        try:
            snap.nodeclaims[nc.name] = self.store.update("NodeClaim", nc.name, mutate)
        except Exception as ex:  # the explanation is best effort; the decision stands
            report.errors.append(f"NodeClaim {nc.name}: record blocked: {ex}")
        report.blocked.append(b)
        self._decision("blocked", f"NodeClaim {nc.name} not disrupted ({b['reason']}): {b['message']}",
                       nodeclaim=nc.name, cause=b["cause"], reason=b["reason"])


__all__ = ["DisruptionReport", "DisruptionSweep", "METHOD_BY_REASON", "SWEEP_METHODS"]
