"""The disruption sweeps (drift; consolidation), one step of each in-flight disruption per invocation.

``DisruptionSweep(..., kind="drift"|"consolidation").sweep(now) -> DisruptionReport``, every
``disruptionIntervalMinutes``:

1. **Observe** (written to the NodeClaims, so the next invocation knows): the drift sweep marks each NodeClaim's
   ``Drifted`` condition (kind + message, set when first seen: "earliest drift first" orders by it); the
   consolidation sweep keeps ``status.lastPodEventTime`` (the time the node's set of pods last changed, as seen by
   comparing with ``status.podFingerprint`` of the previous invocation).
2. **Advance** this sweep's in-flight disruptions (:mod:`karpenter_lambda.adapters.store.ledger`), one step each; any crash leaves an
   entry the next invocation continues:
   ``proposed`` -(>= 15 s later: :func:`~karpenter_lambda.disruption.plan.revalidate` on this snapshot; cancelled
   if it no longer holds)-> taint ``karpenter.sh/disrupted:NoSchedule``, launch the replacements through the
   :class:`~.launcher.Launcher` -> ``replacing`` -(every replacement Initialized)-> request the NodeClaim's deletion
   (:class:`~.termination.Terminator`: the lifecycle sweep drains and terminates) -> ``deleting`` -> released once
   the NodeClaim is gone.  A replacement that fails to launch, is deleted before it initializes, or is not
   Initialized within 10 minutes: the taint is removed, the node kept, the budget slot released, the reason recorded.
   Then any ``karpenter.sh/disrupted`` taint on a node with no in-flight entry and no deletion is removed.
3. **Plan** (:func:`~karpenter_lambda.disruption.plan.plan_sweep`, pure) and **record**: expiration (forceful) is
   recorded outside the budgets and carried out at once (its replacements launched, the deletion requested when they
   are Initialized, or at once when it needs none); each graceful command is reserved in the ledger, conditionally
   on its budget.
4. **Explain**: each blocked node's cause is written to ``status.disruptionBlocked`` and reported once per cause.
   A ``Balanced`` NodePool's scored moves (:mod:`karpenter_lambda.disruption.balanced`) are counted in
   ``report.scored`` (metrics ``ConsolidationMovesApproved`` / ``ConsolidationMovesRejected``); the candidates' Nodes
   get a ``ConsolidationApproved`` event when the move is proposed, ``ConsolidationRejected`` when it is refused
   (once per node and cause, as every block), each with the score.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field

from ..adapters.store.ledger import DisruptionLedger, Entry
from ..api import events as ev
from ..api import labels as wk
from ..api.conditions import make_condition, set_condition
from ..api.labels import REPLACES_ANNOTATION
from ..api.times import format_time
from ..disruption.balanced import BLOCK_BALANCED
from ..disruption.budgets import count_nodes, reservation_limit
from ..disruption.candidates import LAST_POD_EVENT, make_candidate
from ..disruption.context import SnapshotCaches, SweepContext
from ..disruption.drift import Drift, drift_reason
from ..disruption.emptiness import Emptiness, consolidatable_in
from ..disruption.expiration import Expiration
from ..disruption.plan import plan_sweep
from ..disruption.repack import Repack
from ..disruption.static import is_static
from ..disruption.static_drift import StaticDrift
from ..disruption.types import EMPTY, EXPIRED, UNDERUTILIZED, Command
from ..disruption.underutilized import MultiNodeConsolidation, SingleNodeConsolidation
from . import runtime
from .base import Controller
from ..cloudprovider import AWSCloudProvider
from .disruption_exec import Executor
from .launcher import Launcher
from .snapshot import SnapshotLoader
from .quiet_drift import QuietDrift
from .sweep_shortcuts import QuietSweeps, SweepMarker, enabled as shortcuts_enabled
from .termination import TERMINATION_STATUS, Terminator

log = logging.getLogger(__name__)
VALIDATION_DELAY = 15.0
SEQUENCE_PREFIX = "seq-"   # Entry.command of commands one sweep planned in sequence: "seq-<batch>-<order>"
BLOCKED_STATUS = "disruptionBlocked"
POD_FINGERPRINT = "podFingerprint"
# Karpenter's order (controller.go): StaticDrift before Drift; each takes the other's NodePools out (spec.replicas)
SWEEP_METHODS = {"drift": (Expiration(), StaticDrift(), Drift()),
                 "consolidation": (Emptiness(), MultiNodeConsolidation(), SingleNodeConsolidation(), Repack())}
SKIPPED_MESSAGE = {"consolidation": "cluster unchanged since a sweep that found nothing: skipped",
                   "drift": "drift and expiration inputs unchanged since a sweep that found nothing: skipped"}
# the method that re-validates an in-flight entry, by its reason: the first of each reason, static NodePools'
# methods (StaticDrift) aside: an entry of a static NodePool is theirs (``DisruptionSweep.method_for``)
METHOD_BY_REASON = {m.reason: m for ms in SWEEP_METHODS.values() for m in reversed(ms)
                    if not getattr(m, "static_only", False)}
STATIC_METHOD_BY_REASON = {m.reason: m for ms in SWEEP_METHODS.values() for m in reversed(ms)
                           if getattr(m, "static_only", False)}


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
    untainted: list[str] = field(default_factory=list)    # nodes whose stale karpenter.sh/disrupted taint was removed
    # Balanced NodePools: every move this sweep scored, approved or rejected ({"nodeClaims", "reason", "decision",
    # "nodePool", "score", "threshold", "savingsFraction", "disruptionFraction"})
    scored: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("sweep", "disrupted", "proposed", "replacing", "cancelled", "failed",
                                              "blocked", "drifted", "errors", "untainted", "scored")}

    def metric_counts(self) -> dict[str, float]:
        return {"NodesDisrupted": len(self.disrupted), "DisruptionsProposed": len(self.proposed),
                "DisruptionsCancelled": len(self.cancelled), "DisruptionReplacementFailures": len(self.failed),
                "DisruptionErrors": len(self.errors),
                "ConsolidationMovesApproved": sum(1 for s in self.scored if s["decision"] == "approved"),
                "ConsolidationMovesRejected": sum(1 for s in self.scored if s["decision"] == "rejected")}


def _fingerprint(pods: list[dict]) -> str:
    uids = sorted(((p.get("metadata") or {}).get("uid") or "") for p in pods)
    return hashlib.sha256("\n".join(uids).encode()).hexdigest()[:16]


class DisruptionSweep(Controller):
    def __init__(self, store, kube, cloud, claims, ledger: DisruptionLedger, kind: str, clock=None, logger=None,
                 validation_delay: float = VALIDATION_DELAY, shortcuts: QuietSweeps | QuietDrift | None = None):
        if kind not in SWEEP_METHODS:
            raise ValueError(f"unknown disruption sweep {kind!r}: expected one of {sorted(SWEEP_METHODS)}")
        super().__init__(clock, logger or log)
        self.log_fields = {"sweep": kind}   # every decision line says which sweep
        self.store, self.kube, self.cloud, self.claims, self.ledger = store, kube, cloud, claims, ledger
        self.kind = kind
        self.methods = list(SWEEP_METHODS[kind])
        self.validation_delay = validation_delay
        self.loader = SnapshotLoader(store, kube, claims, cloud, self.logger)
        self.terminator = Terminator(store, kube, cloud, claims, self.clock, self._decision)
        self.launcher = Launcher(store, claims, cloud, self.clock, self._decision)
        self.method_by_reason = METHOD_BY_REASON
        self.static_method_by_reason = STATIC_METHOD_BY_REASON
        self.executor = Executor(self)
        # Karpenter's SpotToSpotConsolidation feature gate (runtime.Config.spot_to_spot_consolidation)
        self.spot_to_spot = True
        # skip while nothing changed since a quiet sweep: consolidation (sweep_shortcuts), drift (quiet_drift)
        self.shortcuts: QuietSweeps | QuietDrift | None = shortcuts

    def method_for(self, entry: Entry, snap):
        """The method an in-flight entry is re-validated with: a static NodePool's drift is StaticDrift's (Karpenter
        registers both under the reason Drifted), any other its reason's."""
        np = snap.nodepools.get(entry.nodepool)
        if np is not None and is_static(np) and entry.reason in self.static_method_by_reason:
            return self.static_method_by_reason[entry.reason]
        return self.method_by_reason[entry.reason]

    @classmethod
    def from_environment(cls, env, kind: str, logger=None) -> "DisruptionSweep":
        ledger = DisruptionLedger(env.dynamodb, env.config.cluster, env.config.state_table)
        cloud = AWSCloudProvider.from_environment(env)
        shortcuts = None
        if shortcuts_enabled():
            marker = SweepMarker(env.dynamodb, env.config.cluster, env.config.state_table)
            config = env.config.scheduler_config
            shortcuts = (QuietSweeps(env.store, env.kube, ledger, marker, kind,
                                     default_spread=bool(config is not None and config.default_constraints))
                         if kind == "consolidation" else
                         QuietDrift(env.store, env.kube, ledger, marker, cloud))
        out = cls(env.store, env.kube, cloud, env.claims, ledger, kind,
                  runtime.clock_proxy, logger=logger, shortcuts=shortcuts)
        out.loader.min_values_policy = env.config.min_values_policy
        out.loader.scheduler_config = env.config.scheduler_config
        out.spot_to_spot = env.config.spot_to_spot_consolidation
        return out

    # -- the sweep ---------------------------------------------------------------------------------
    def sweep(self, now: float | None = None) -> DisruptionReport:
        now = self.clock() if now is None else now
        report = DisruptionReport(self.kind)
        observed = self.shortcuts.observe() if self.shortcuts is not None else None
        if observed is not None and observed.unchanged(now):
            self._decision("unchanged", SKIPPED_MESSAGE[self.kind])
            return report
        if observed is not None:
            self.shortcuts.complete(observed)
        snap = self.loader.load(now, pdbs=True, prefetched=observed.prefetched if observed is not None else None)
        snap.spot_to_spot_consolidation = self.spot_to_spot
        wrote = 0
        if self.kind == "drift":
            self._mark_drift(snap, report)
        else:
            wrote = self._track_pod_events(snap, report)
        live: dict[str, Entry] = {}
        for name, e in (observed.entries if observed is not None else self.ledger.entries()).items():
            if name not in snap.nodeclaims:
                self.ledger.release(e)
            else:
                live[name] = e
        groups: dict[str, list[Entry]] = {}
        for name, e in sorted(live.items()):
            if e.sweep == self.kind:
                groups.setdefault(e.command or name, []).append(e)
        caches = SnapshotCaches()   # of ``snap``: shared by the re-validations and the plan below
        seq: dict[str, dict] = {}   # commands planned in sequence by one sweep: re-validated in that order
        for key, group in groups.items():
            if key.startswith(SEQUENCE_PREFIX):
                batch = key.rsplit("-", 1)[0]
                seq.setdefault(batch, {"snap": snap, "caches": caches, "members": set()})["members"].update(
                    e.nodeclaim for e in group)
        order = [k for k in groups if not k.startswith(SEQUENCE_PREFIX)] + sorted(k for k in groups if k.startswith(SEQUENCE_PREFIX))
        for key in order:
            group = groups[key]
            try:
                ctx = seq.get(key.rsplit("-", 1)[0]) if key.startswith(SEQUENCE_PREFIX) else None
                if not self.executor.advance(group, snap, live, report, seq=ctx, caches=caches):
                    for e in group:
                        live.pop(e.nodeclaim, None)
            except Exception as ex:  # one disruption's failure must not stop the others
                report.errors.append(f"{', '.join(e.nodeclaim for e in group)}: {ex}")
                self.logger.exception(f"disruption {key} failed")
        try:
            report.untainted = self.executor.remove_stale_taints(snap, report)
        except Exception as ex:   # best effort: the next sweep tries again
            report.errors.append(f"removing stale disrupted taints: {ex}")
            self.logger.exception("removing stale disrupted taints failed")
        budgets = SweepContext(snap, {n: e.nodepool for n, e in live.items()}, caches=caches)
        plan = plan_sweep(snap, self.methods, budgets)
        batch = hashlib.sha256(f"{self.kind}:{snap.now}".encode()).hexdigest()[:10] if plan.sequential else ""
        for i, cmd in enumerate(plan.commands):
            try:
                if cmd.forceful:
                    self._expire(cmd, snap, live, report)
                else:
                    self._propose(cmd, snap, budgets, live, report,
                                  key=f"{SEQUENCE_PREFIX}{batch}-{i:04d}" if batch else None)
            except Exception as ex:
                report.errors.append(f"{cmd.reason} {cmd.names}: {ex}")
                self.logger.exception(f"disruption command {cmd.names} failed")
        self._record_blocked(plan.blocked, snap, report)
        self._record_scores(plan, report)
        if observed is not None and not wrote:
            self.shortcuts.record(observed, snap, report)
        return report

    def _record_scores(self, plan, report) -> None:
        """The Balanced scores of this sweep's moves: the approved commands, the rejected single nodes."""
        for cmd in plan.commands:
            if cmd.score is not None:
                report.scored.append({"nodeClaims": cmd.names, "reason": cmd.reason, "decision": "approved",
                                      **cmd.score.to_dict()})
        for b in plan.blocked:
            if b.score is not None and b.cause == BLOCK_BALANCED:
                report.scored.append({"nodeClaims": [b.nodeclaim], "reason": b.reason, "decision": "rejected",
                                      **b.score.to_dict()})

    # -- a dry run (karpenter-lambda disruption plan) ----------------------------------------------
    def preview(self, now: float | None = None) -> list[dict]:
        """What the next drift and consolidation sweeps would decide, per NodeClaim, and why; writes nothing."""
        now = self.clock() if now is None else now
        snap = self.loader.load(now, pdbs=True)
        snap.spot_to_spot_consolidation = self.spot_to_spot
        live = {n: e for n, e in self.ledger.entries().items() if n in snap.nodeclaims}
        rows: dict[str, dict] = {}
        for n, e in live.items():
            rows[n] = {"decision": "in flight", "reason": e.reason, "cause": "", "detail": f"{e.state}: {e.detail}".rstrip(": "),
                       "replacements": list(e.replacements), "savingsPerHour": round(e.savings_per_hour, 6)}
        budgets = SweepContext(snap, {n: e.nodepool for n, e in live.items()})
        acting: list[str] = []   # the consolidation sweep's methods with a decision (it stops at the first)
        for kind in ("drift", "consolidation"):
            plan = plan_sweep(snap, list(SWEEP_METHODS[kind]), budgets)
            if kind == "consolidation":
                acting = list(dict.fromkeys(cmd.reason for cmd in plan.commands))
            for cmd in plan.commands:
                for c in cmd.candidates:
                    rows.setdefault(c.name, {"decision": "disrupt", "reason": cmd.reason, "cause": "", "detail": cmd.detail,
                                             "replacements": [p.instance_type for p in cmd.replacements],
                                             "savingsPerHour": round(cmd.savings_per_hour / len(cmd.candidates), 6),
                                             "balancedScore": cmd.score.to_dict() if cmd.score is not None else None})
                    budgets.exclude.add(c.name)
            for b in plan.blocked:
                rows.setdefault(b.nodeclaim, {"decision": "blocked", "reason": b.reason, "cause": b.cause,
                                              "detail": b.message, "replacements": [], "savingsPerHour": 0.0,
                                              "balancedScore": b.score.to_dict() if b.score is not None else None})
        out = []
        for name, nc in sorted(snap.nodeclaims.items()):
            row = rows.get(name)
            if row is None:
                why = []
                np = snap.nodepools.get(nc.labels.get(wk.NODEPOOL, ""))
                node = snap.node_of_nodeclaim(name)
                if nc.metadata.get("deletionTimestamp"):
                    reason = (nc.annotations or {}).get(wk.DELETION_REASON_ANNOTATION)
                    term = nc.status.get(TERMINATION_STATUS) or {}
                    why.append(f"deleting ({reason})" if reason else "deleting")
                    if term.get("waitingFor") and not term.get("startedAt"):
                        why.append(f"drain waits for replacement(s) {', '.join(term['waitingFor'])} to initialize")
                    elif term.get("startedAt") and not term.get("drainedAt"):
                        why.append("draining")
                elif node is None or not nc.is_true("Initialized"):
                    why.append("not initialized")
                elif np is not None:
                    left = consolidatable_in(make_candidate(snap, nc, node, np), snap)
                    policy = (np.disruption or {}).get("consolidationPolicy", "WhenEmptyOrUnderutilized")
                    why.append("not drifted, not expired")
                    why.append("consolidation off (consolidateAfter Never)" if left is None else
                               f"consolidateAfter {int(left)}s left" if left > 0 else
                               # the sweep carries out its first method with a decision and looks no further
                               f"{policy}: not looked at by the next sweep, which carries out {', '.join(acting)} "
                               f"first" if acting else
                               f"{policy}: nothing to gain")
                row = {"decision": "keep", "reason": "", "cause": "", "detail": "; ".join(why), "replacements": [],
                       "savingsPerHour": 0.0, "balancedScore": None}
            out.append({"nodeClaim": name, "nodePool": nc.labels.get(wk.NODEPOOL, ""),
                        "instanceType": nc.labels.get(wk.INSTANCE_TYPE, ""),
                        "capacityType": nc.labels.get(wk.CAPACITY_TYPE, ""),
                        "pricePerHour": float((nc.annotations or {}).get(wk.PRICE_ANNOTATION) or 0.0),
                        **row})
        return out

    # -- observations -----------------------------------------------------------------------------
    def _mark_drift(self, snap, report) -> None:
        for name, nc in list(snap.nodeclaims.items()):
            if nc.metadata.get("deletionTimestamp"):
                continue
            found = drift_reason(nc, snap)
            has = nc.condition("Drifted")
            if found and not (has and has.get("status") == "True" and has.get("reason") == found[0]):
                cond = make_condition("Drifted", "True", found[0], found[1], snap.now)
                if has and has.get("status") == "True":   # drifted since then (another kind now): the time stays
                    cond["lastTransitionTime"] = has.get("lastTransitionTime")
                snap.nodeclaims[name] = self._set_condition(name, cond)
                report.drifted.append({"nodeClaim": name, "kind": found[0], "message": found[1]})
                self._decision("drifted", f"NodeClaim {name} drifted: {found[1]}", nodeclaim=name, drift=found[0])
            elif not found and has:
                snap.nodeclaims[name] = self._set_condition(name, None, remove="Drifted")

    def _set_condition(self, name: str, cond: dict | None, remove: str | None = None):
        def mutate(obj):
            set_condition(obj.status, cond, remove=remove)
            return obj

        return self.store.update("NodeClaim", name, mutate)

    def _track_pod_events(self, snap, report) -> int:
        """How many NodeClaims it updated."""
        wrote = 0
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
                obj.status[LAST_POD_EVENT] = format_time(snap.now)
                return obj

            snap.nodeclaims[name] = self.store.update("NodeClaim", name, mutate)
            wrote += 1
        return wrote

    # -- new decisions ----------------------------------------------------------------------------
    def _expire(self, cmd: Command, snap, live: dict, report) -> None:
        """Expiration: recorded in flight outside the budgets (forceful) and carried out at once -- the replacements
        its pods need launched, the deletion requested once they are Initialized (``Executor.carry``), or at once
        when they need none."""
        group = []
        for c in cmd.candidates:
            entry = Entry(nodeclaim=c.name, nodepool=c.nodepool_name, reason=EXPIRED, sweep=self.kind,
                          proposed_at=snap.now, since=snap.now,
                          planned_price=round(sum(p.price for p in cmd.replacements), 6) if cmd.replacements else None,
                          detail=cmd.detail, instance_type=c.instance_type, zone=c.zone, capacity_type=c.capacity_type)
            if not self.ledger.reserve(entry, None):   # recorded meanwhile by an overlapping invocation
                continue
            live[c.name] = entry
            group.append(entry)
        if len(group) != len(cmd.candidates):
            return
        if not self.executor.carry(cmd, group, snap, report):
            for e in group:
                live.pop(e.nodeclaim, None)

    def _propose(self, cmd: Command, snap, budgets: SweepContext, live: dict, report, key: str | None = None) -> None:
        planned = round(sum(p.price for p in cmd.replacements), 6) if cmd.replacements else None
        sequential = key is not None
        key = key or hashlib.sha256(f"{','.join(sorted(cmd.names))}:{snap.now}".encode()).hexdigest()[:12]
        reserved: list[Entry] = []
        for c in cmd.candidates:
            recorded = {n for n, e in live.items() if e.nodepool == c.nodepool_name}
            max_before = reservation_limit(budgets.allowance(c.nodepool_name, cmd.reason),
                                           count_nodes(snap, c.nodepool_name, recorded))
            entry = Entry(nodeclaim=c.name, nodepool=c.nodepool_name, reason=cmd.reason, sweep=self.kind,
                          proposed_at=snap.now, since=snap.now, planned_price=planned,
                          savings_per_hour=round(cmd.savings_per_hour / len(cmd.candidates), 6), detail=cmd.detail,
                          instance_type=c.instance_type, zone=c.zone, capacity_type=c.capacity_type,
                          command=key if len(cmd.candidates) > 1 or sequential else "")
            if not self.ledger.reserve(entry, max_before):
                for e in reserved:   # all of a command or none of it
                    self.ledger.release(e)
                    live.pop(e.nodeclaim, None)
                self._record_blocked_one({"nodeClaim": c.name, "cause": "budget", "reason": cmd.reason,
                                          "message": f"budget {cmd.reason}: taken by a concurrent sweep"}, snap, report)
                return
            live[c.name] = entry
            reserved.append(entry)
        for e in reserved:
            report.proposed.append({"nodeClaim": e.nodeclaim, "reason": cmd.reason, "detail": cmd.detail,
                                    "replacements": len(cmd.replacements), "command": e.command or e.nodeclaim})
        self._decision("propose", f"{cmd.reason} {', '.join(cmd.names)} ({cmd.detail or 'no detail'}); "
                                  f"re-validated in {int(self.validation_delay)}s",
                       nodeclaims=cmd.names, reason=cmd.reason, replacements=len(cmd.replacements),
                       **({"score": cmd.score.to_dict()} if cmd.score is not None else {}))
        if cmd.score is not None:   # Balanced: the approved move's score on each candidate's Node (best effort)
            for c in cmd.candidates:
                if c.node is None:
                    continue
                try:
                    self.kube.create_event({**c.node, "apiVersion": "v1", "kind": "Node"}, ev.CONSOLIDATION_APPROVED,
                                           f"{cmd.reason}: {cmd.score.text()}", source=ev.SOURCE,
                                           now=format_time(snap.now))
                except Exception as ex:
                    report.errors.append(f"event on node {c.node_name}: {ex}")

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
        causes = list(prev.get("causes") or [])
        # at most once per node, disruption reason and cause: a PDB told for Underutilized is told again for Drifted
        # (another method, another sweep), not at every sweep
        told = list(prev.get("seen") or [f"{prev.get('reason')}/{c}" for c in causes])
        key = f"{b['reason']}/{b['cause']}"
        if key in told:
            return
        entry = {**b, "at": format_time(snap.now), "causes": causes + [c for c in [b["cause"]] if c not in causes],
                 "seen": told + [key]}
        entry.pop("nodeClaim", None)

        def mutate(obj):
            obj.status[BLOCKED_STATUS] = entry
            return obj

        try:
            snap.nodeclaims[nc.name] = self.store.update("NodeClaim", nc.name, mutate)
        except Exception as ex:  # the explanation is best effort; the decision stands
            report.errors.append(f"NodeClaim {nc.name}: record blocked: {ex}")
        report.blocked.append(b)
        node = snap.node_of_nodeclaim(nc.name)
        if node is not None:   # the explanation on the Node too, as Karpenter's events (best effort)
            try:
                kind = (ev.CONSOLIDATION_REJECTED if b["cause"] == BLOCK_BALANCED else
                        ev.UNCONSOLIDATABLE if b["reason"] in (EMPTY, UNDERUTILIZED) else ev.DISRUPTION_BLOCKED)
                self.kube.create_event({**node, "apiVersion": "v1", "kind": "Node"}, kind,
                                       f"{b['reason']}: {b['message']}", source="karpenter-lambda",
                                       now=format_time(snap.now))
            except Exception as ex:
                report.errors.append(f"event on node {(node.get('metadata') or {}).get('name')}: {ex}")
        self._decision("blocked", f"NodeClaim {nc.name} not disrupted ({b['reason']}): {b['message']}",
                       nodeclaim=nc.name, cause=b["cause"], reason=b["reason"])


__all__ = ["DisruptionReport", "DisruptionSweep", "METHOD_BY_REASON", "REPLACES_ANNOTATION", "STATIC_METHOD_BY_REASON",
           "SWEEP_METHODS"]
