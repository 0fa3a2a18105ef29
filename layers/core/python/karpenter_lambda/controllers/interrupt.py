"""The interruption controller: EventBridge events about EC2 instances -> the NodeClaims they concern.

``Interruption(store, kube, cloud, claims, clock, logger).handle(messages) -> InterruptionReport``; the messages come
from :mod:`.interruption_messages`.  Per kind (docs/interruption.md), as Karpenter's interruption controller:

* **SpotInterruption** -- mark the (type, zone, spot) offering unavailable in the ICE cache, then at once launch
  replacement capacity for the node's reschedulable pods (and the pods nominated to it): ``simulate_removal`` with the
  node as the candidate on a snapshot whose catalog is loaded *after* the mark, each new NodeClaim through the
  :class:`~.launcher.Launcher`; then taint the node (``karpenter.sh/disrupted:NoSchedule``, Karpenter v1's cordon)
  and request the NodeClaim's deletion (:class:`~.termination.Terminator`: drain, then the instance); the drain's
  first step (evictions of the first group) runs in the same invocation, as the 2-minute notice leaves no time to
  wait for the lifecycle sweep.  No waiting for the replacements to initialize: the instance is going away.
* **ScheduledChange** (AWS Health, EC2 ``scheduledChange``, every affected instance) and **StateChange** to
  ``stopping``/``stopped``/``shutting-down``: replacement capacity at once as for a spot warning (``_going_away``:
  Karpenter's provisioner counts a deleting node's pods as pending), then request deletion, then taint (in that
  order, so a sweep's stale-taint cleanup never sees the taint on a NodeClaim not yet deleting); the lifecycle sweep
  drains; ``terminated``: the NodeClaim is removed at once (``Terminator.finalize``, which first drains a Node still
  Ready); other states are acknowledged and ignored.
* **RebalanceRecommendation** -- recorded (``rebalance``; the handler's ``RebalanceRecommendations`` metric) and
  nothing else, unless the NodePool carries ``karpenter-lambda.io/rebalance-replace: "true"``: then, within the
  NodePool's disruption budget, replacement first, then deletion.  The budget is taken through the sweeps' ledger
  (:class:`~karpenter_lambda.adapters.store.ledger.DisruptionLedger`, the same conditional reservation, reason
  ``RebalanceRecommendation``: budgets without ``reasons`` apply), so the sweeps and the interruption handler
  together never exceed it; the entry lives until the NodeClaim is gone.  A redelivery resumes the handler's own
  entry (a delivery that died after reserving); an entry whose NodeClaim is still not deleting
  :data:`STALE_RESERVATION_AGE` after it was taken is released (:func:`release_stale_reservations`, also called by
  the lifecycle sweep).
* **CapacityReservationInterruption** -- mark the reservation unavailable (ICE cache entry
  ``(<reservation id>, <zone>, "reserved")``, with the spot marks: before the catalog is read), replacement capacity
  at once, request deletion, taint.

Instances without a NodeClaim (not this cluster's, or already gone) are acknowledged and dropped.  Redelivery and
out-of-order events act on the NodeClaim's state: a deleting NodeClaim is not requested again, a gone one is dropped,
and replacements have deterministic names (a second launch of the same one is refused by the launch claims), so
nothing happens twice.  An exception while acting is reported in ``errors`` and its event id in ``retry`` (the
handler returns those records in ``batchItemFailures``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable

from ..adapters.store.ledger import DELETING, DisruptionLedger, Entry
from ..api import labels as wk
from ..api.kube import instance_id_of
from ..api.labels import DELETION_REASON_ANNOTATION, DISRUPTED_TAINT, REBALANCE_ANNOTATION, REPLACES_ANNOTATION, has_disrupted_taint
from ..disruption.budgets import count_nodes, nodepool_allowance, reservation_limit
from ..disruption.candidates import graceful_blockers, make_candidate
from ..disruption.context import SweepContext
from . import interruption_messages as im
from . import runtime
from .base import Controller
from ..cloudprovider import AWSCloudProvider
from .launcher import Launcher
from .leaving import launch_for_leaving
from .snapshot import SnapshotLoader
from .termination import TERMINATION_STATUS, Terminator, holds_for_replacements
from .transient import TRANSIENT_CODES, is_transient  # noqa: F401  (importable from here, as before)

RESERVED = "reserved"
INTERRUPTION_SWEEP = "interruption"   # Entry.sweep of the ledger slots this handler takes (rebalance replacements)
# A rebalance slot whose NodeClaim is still not marked deleting this long after it was taken belongs to a delivery
# that died (crash, timeout) and was not resumed by a redelivery: the interruption queue keeps a message 300 s
# (docs/interruption.md), so after that no redelivery can come.  It is released (the budget is not held until the
# node dies); the sweeps' stale-taint cleanup then removes a taint the dead delivery may have set.
STALE_RESERVATION_AGE = 5 * 60.0
ACTED_STATES = {"stopping": "InstanceStopped", "stopped": "InstanceStopped", "shutting-down": "InstanceTerminated",
                "terminated": "InstanceTerminated"}
REASONS = {im.SPOT_INTERRUPTION: "SpotInterrupted", im.SCHEDULED_CHANGE: "ScheduledChange",
           im.CAPACITY_RESERVATION_INTERRUPTION: "CapacityReservationInterrupted",
           im.REBALANCE_RECOMMENDATION: "RebalanceRecommendation"}
INTERRUPTION_REASONS = frozenset(REASONS.values()) | frozenset(ACTED_STATES.values())
log = logging.getLogger(__name__)


def release_stale_reservations(ledger: DisruptionLedger, store, now: float, entries: dict | None = None,
                               decide: Callable[..., None] | None = None) -> list[str]:
    """Release the interruption handler's ledger slots whose owner died: entries of :data:`INTERRUPTION_SWEEP`
    whose NodeClaim is not marked deleting (checked on a fresh read) :data:`STALE_RESERVATION_AGE` after they were
    taken.  A slot whose NodeClaim is deleting stays (it counts until the NodeClaim is gone, as every disruption);
    a slot whose NodeClaim is gone is released by the sweeps.  Returns the NodeClaims released."""
    released = []
    for name, e in sorted((entries if entries is not None else ledger.entries()).items()):
        if e.sweep != INTERRUPTION_SWEEP or now - (e.since or e.proposed_at) < STALE_RESERVATION_AGE:
            continue
        nc = store.get("NodeClaim", name)
        if nc is not None and nc.metadata.get("deletionTimestamp"):
            continue
        if ledger.release(e):
            released.append(name)
            if decide is not None:
                decide("release", f"NodeClaim {name}: {e.reason} budget slot released (taken "
                                  f"{int(now - (e.since or e.proposed_at))}s ago by an interruption delivery that "
                                  f"did not complete; no deletion requested)", nodeclaim=name, reason=e.reason)
    for name in released:
        if entries is not None:
            entries.pop(name, None)
    return released


@dataclass
class InterruptionReport:
    received: list[dict] = field(default_factory=list)     # {messageId, eventId, kind, instanceId, nodeClaim}
    disrupted: list[dict] = field(default_factory=list)    # {nodeClaim, reason, nodePool, instanceType, zone, ...}
    ignored: list[dict] = field(default_factory=list)      # {messageId, kind, instanceId, nodeClaim, reason}
    errors: list[dict] = field(default_factory=list)       # {messageId, eventId, instanceId, error, transient}
    deleted: list[dict] = field(default_factory=list)      # {nodeClaim, reason}: removed at once (terminated)
    unavailable: list[dict] = field(default_factory=list)  # {instanceType|capacityReservationId, zone, capacityType}
    rebalance: list[dict] = field(default_factory=list)    # rebalance recommendations recorded
    malformed: list[dict] = field(default_factory=list)    # {messageId, error, errorClass} (filled by the handler)
    retry: list[str] = field(default_factory=list)         # event ids to redeliver

    @property
    def replacements(self) -> list[str]:
        return [r for d in self.disrupted for r in d.get("replacements", [])]

    def to_dict(self) -> dict:
        keys = ("received", "disrupted", "ignored", "errors", "deleted", "unavailable", "rebalance", "malformed", "retry")
        return {k: getattr(self, k) for k in keys}

    def metric_counts(self) -> dict[str, float]:
        # Interruptions (the dashboard's graph): received events about one of this deployment's NodeClaims
        return {"InterruptionMessagesReceived": len(self.received),
                "Interruptions": sum(1 for r in self.received if r.get("nodeClaim")), "NodesDisrupted": len(self.disrupted),
                "RebalanceRecommendations": len(self.rebalance), "ReplacementsLaunched": len(self.replacements),
                "InterruptionMessagesMalformed": len(self.malformed), "InterruptionErrors": len(self.errors)}


class Interruption(Controller):
    def __init__(self, store, kube, cloud, claims=None, clock: Callable[[], float] | None = None, logger=None, *,
                 unavailable=None, ledger: DisruptionLedger | None = None):
        super().__init__(clock, logger or log)
        self.store, self.kube, self.cloud, self.claims = store, kube, cloud, claims
        if ledger is None and claims is not None and getattr(claims, "ddb", None) is not None:
            ledger = DisruptionLedger(claims.ddb, claims.cluster, claims.table)
        self.ledger = ledger
        self.unavailable = unavailable if unavailable is not None else getattr(cloud, "unavailable", None)
        self.loader = SnapshotLoader(store, kube, claims, cloud, logger=self.logger)
        self.launcher = Launcher(store, claims, cloud, self.clock, self._decision)
        self.terminator = Terminator(store, kube, cloud, claims, self.clock, self._decision)

    @classmethod
    def from_environment(cls, env, logger=None) -> "Interruption":
        out = cls(env.store, env.kube, AWSCloudProvider.from_environment(env), env.claims, runtime.clock_proxy, logger)
        out.loader.min_values_policy = env.config.min_values_policy
        out.loader.scheduler_config = env.config.scheduler_config
        return out

    # -- the batch -----------------------------------------------------------------------------------------
    def handle(self, messages: list) -> InterruptionReport:
        report = InterruptionReport()
        # a state change to a state not acted on (pending, running: the rule leaves them out, a queue fed otherwise
        # may not) is acknowledged without loading the cluster, as Karpenter's no-op messages are
        idle = [m for m in messages if m.kind == im.STATE_CHANGE and (m.state or "") not in ACTED_STATES]
        for m in idle:
            for iid in m.instance_ids or [None]:
                report.ignored.append({"messageId": m.message_id, "eventId": m.id, "kind": m.kind, "instanceId": iid,
                                       "nodeClaim": None, "reason": f"instance state {m.state}: nothing to do"})
        messages = [m for m in messages if m not in idle]
        snap = self.loader.load(self.clock(), instance_types=False) if any(m.instance_ids for m in messages) else None
        self._catalog = False
        mark_failed: set[tuple[str, str]] = set()
        for m in messages:  # the offerings first: the catalog for the replacements is loaded after the marks
            if m.kind not in (im.SPOT_INTERRUPTION, im.CAPACITY_RESERVATION_INTERRUPTION):
                continue
            for iid in m.instance_ids:
                nc = self._owner(snap, iid)
                mark = (lambda: self._mark_spot(nc, report)) if m.kind == im.SPOT_INTERRUPTION else \
                    (lambda: self._mark_reservation(iid, nc, report))
                if nc is not None and not self._try(report, m, iid, mark):
                    mark_failed.add((m.id, iid))
        for m in messages:
            if not m.instance_ids:
                report.ignored.append({"messageId": m.message_id, "eventId": m.id, "kind": m.kind, "instanceId": None,
                                       "nodeClaim": None, "reason": m.note or "the event names no EC2 instance"})
            for iid in m.instance_ids:
                nc = self._owner(snap, iid)
                report.received.append({"messageId": m.message_id, "eventId": m.id, "kind": m.kind, "instanceId": iid,
                                        "nodeClaim": nc.name if nc else None})
                if nc is None:
                    self._ignore(report, m, iid, None, "no NodeClaim has this instance (not this cluster's, or gone)")
                    continue
                self._try(report, m, iid, lambda: self._act(m, iid, nc, snap, report, (m.id, iid) in mark_failed))
        report.retry = sorted({e["eventId"] for e in report.errors})
        return report

    def _try(self, report, m, iid, fn) -> bool:
        try:
            fn()
            return True
        except Exception as e:  # noqa: BLE001 - one instance's failure must not stop the others
            self._error(report, m, iid, e)
            return False

    def _error(self, report, m, iid, e) -> None:
        transient = is_transient(e)
        report.errors.append({"messageId": m.message_id, "eventId": m.id, "kind": m.kind, "instanceId": iid,
                              "error": str(e), "transient": transient})
        self.logger.warning(f"interruption {m.kind} for {iid} failed (will be retried): {e}",
                            extra={"messageId": m.message_id, "instanceId": iid, "transient": transient})

    def _ignore(self, report, m, iid, nc, reason: str, **extra) -> None:
        report.ignored.append({"messageId": m.message_id, "eventId": m.id, "kind": m.kind, "instanceId": iid,
                               "nodeClaim": nc.name if nc else None, "reason": reason, **extra})
        self._decision("ignore", f"{m.kind} for {iid}: {reason}", instanceId=iid, kind=m.kind)

    @staticmethod
    def _owner(snap, iid: str):
        for nc in snap.nodeclaims.values():
            if instance_id_of(nc.status.get("providerID")) == iid:
                return nc
        return None

    # -- per kind ----------------------------------------------------------------------------------------------
    def _act(self, m, iid, nc, snap, report, mark_failed: bool) -> None:
        deleting = bool(nc.metadata.get("deletionTimestamp"))
        if m.kind == im.REBALANCE_RECOMMENDATION:
            self._rebalance(m, iid, nc, snap, report, deleting)
            return
        if m.kind == im.STATE_CHANGE:
            reason = ACTED_STATES.get(m.state or "")
            if reason is None:
                self._ignore(report, m, iid, nc, f"instance state {m.state}: nothing to do")
                return
            if m.state == "terminated":
                self._remove_now(m, iid, nc, snap, report, reason, deleting)
                return
        elif m.kind in (im.SPOT_INTERRUPTION, im.SCHEDULED_CHANGE, im.CAPACITY_RESERVATION_INTERRUPTION):
            reason = REASONS[m.kind]
        else:
            self._ignore(report, m, iid, nc, m.note or f"{m.kind}: nothing to do")
            return
        self._going_away(m, iid, nc, snap, report, reason, mark_failed, deleting)

    def _going_away(self, m, iid, nc, snap, report, reason: str, mark_failed: bool, deleting: bool) -> None:
        """The instance is going away (a spot warning, a scheduled change, a stop, a shutdown, a reclaimed
        reservation): replacement capacity for its pods at once, then the deletion and the taint.

        Karpenter's interruption controller only deletes the NodeClaim, and its provisioner then counts the pods of
        deleting nodes as pending (``provisioner.go``: ``nodes.Deleting().ReschedulablePods``), so their capacity
        launches before they are evicted; here nothing provisions for pods still bound, so the handler launches it.
        Without it a drain that a PodDisruptionBudget paces sends the pods to the provisioner a few at a time, each
        group waiting a node's launch-to-ready time on a node sized for that group alone.  A redelivery retries a
        failed replacement (deterministic names: only what is missing launches); a NodeClaim already deleting for
        another reason (a drift, a consolidation) has its replacements already."""
        ours = (nc.annotations or {}).get(DELETION_REASON_ANNOTATION) == reason
        replaced, unschedulable = [], []
        errors = len(report.errors)
        if not mark_failed and (not deleting or ours):
            try:
                replaced, unschedulable = self._replace(m, iid, nc, snap, report)
            except Exception as e:  # noqa: BLE001 - the instance goes anyway: its deletion is not held back
                # working the replacement out failed (the catalog, the unavailable offerings' cache, a simulation):
                # reported as a failed launch is (the event is retried, the redelivery launches what is missing)
                self._error(report, m, iid, e)
                self._catalog = False   # the redelivery, or the next instance of this batch, loads it again
        # a spot warning's drain starts now, unless a replacement launch failed: then with the redelivery that
        # retries it (draining first would leave that retry nothing to replace)
        drain = len(report.errors) == errors
        if deleting:
            self._ensure_taint(nc, snap)
            self._ignore(report, m, iid, nc, "NodeClaim already deleting", replacements=replaced)
            node = snap.node_of_nodeclaim(nc.name)
            if m.kind == im.SPOT_INTERRUPTION and ours and drain and node is not None:
                self._drain_now(nc, node["metadata"]["name"], iid)
            elif m.kind != im.SCHEDULED_CHANGE and node is not None and self._held(nc):
                # a deletion whose drain waits for its replacements (a scheduled change, a deleted NodePool, the
                # user's), and now this instance is going (a spot warning, a stop, a reclaimed reservation): the drain
                # starts now, the wait is over (a drain once started is never held again)
                self._drain_now(nc, node["metadata"]["name"], iid, m.kind)
            return
        self._disrupt(m, iid, nc, snap, report, reason, replaced, unschedulable, drain=drain)

    def _rebalance(self, m, iid, nc, snap, report, deleting: bool) -> None:
        pool = nc.nodepool_name
        np = snap.nodepools.get(pool)
        opted = np is not None and str((np.annotations or {}).get(REBALANCE_ANNOTATION, "")).lower() == "true"
        report.rebalance.append({"messageId": m.message_id, "instanceId": iid, "nodeClaim": nc.name, "nodePool": pool,
                                 "replace": opted and not deleting, "optedIn": opted})
        if not opted:
            self._ignore(report, m, iid, nc, f"rebalance recommendation recorded; NodePool {pool} does not opt in "
                                             f"({REBALANCE_ANNOTATION}: \"true\")")
            return
        if deleting:
            self._ignore(report, m, iid, nc, "NodeClaim already deleting")
            return
        # a rebalance recommendation is advice, not a notice: the replacement is a voluntary disruption, held by what
        # holds the others (a do-not-disrupt node or pod; with a terminationGracePeriod the drain honours the pods)
        blockers = graceful_blockers(make_candidate(snap, nc, snap.node_of_nodeclaim(nc.name), np), snap, eventual=True)
        if blockers:
            report.rebalance[-1]["replace"] = False
            self._ignore(report, m, iid, nc, f"rebalance replacement blocked: {blockers[0][1]}")
            return
        entry, why = self._reserve_budget(nc, np, snap, m)
        if entry is None:
            report.rebalance[-1]["replace"] = False
            self._ignore(report, m, iid, nc, f"rebalance replacement blocked by the disruption budget ({why})")
            return
        try:
            replaced, unschedulable = self._replace(m, iid, nc, snap, report)
            self._disrupt(m, iid, nc, snap, report, REASONS[m.kind], replaced, unschedulable)
        except Exception:
            if entry is not True and not (self.store.get("NodeClaim", nc.name) or nc).metadata.get("deletionTimestamp"):
                self.ledger.release(entry)   # nothing started: the budget slot goes back
            raise

    def _reserve_budget(self, nc, np, snap, m=None):
        """Take one slot of the NodePool's disruption budget in the sweeps' ledger: (entry, "") or (None, why).
        ``True`` instead of an entry when there is no ledger (no state table): the allowance is computed only, by
        the same rule and counts (nothing recorded in flight).

        The slot this handler already holds for the NodeClaim (a delivery that crashed or timed out between the
        reservation and the deletion request) is resumed, not refused: the redelivery completes the disruption
        (the replacements' names are deterministic, the deletion request is idempotent).  Slots of the handler
        whose owner died and that nothing resumed are released after :data:`STALE_RESERVATION_AGE` (here and by
        the lifecycle sweep, :func:`release_stale_reservations`)."""
        reason = REASONS[im.REBALANCE_RECOMMENDATION]
        pool = np.name
        if self.ledger is None:
            allowance, _count = nodepool_allowance(snap, pool, reason)
            return (True, "") if allowance.allowed > 0 else (None, allowance.message)
        entries = self.ledger.entries()
        mine = entries.get(nc.name)
        if mine is not None and mine.sweep == INTERRUPTION_SWEEP:
            self._decision("resume", f"NodeClaim {nc.name}: resuming the rebalance disruption reserved at "
                                     f"{mine.since or mine.proposed_at:.0f} ({mine.command or 'earlier delivery'})",
                           nodeclaim=nc.name, command=mine.command)
            return mine, ""
        release_stale_reservations(self.ledger, self.store, snap.now, entries, decide=self._decision)
        live = {n: e for n, e in entries.items() if n in snap.nodeclaims}
        if nc.name in live:
            return None, f"already being disrupted ({live[nc.name].reason}, {live[nc.name].sweep})"
        budgets = SweepContext(snap, {n: e.nodepool for n, e in live.items()})
        recorded = {n for n, e in live.items() if e.nodepool == pool}
        allowance = budgets.allowance(pool, reason)
        count = count_nodes(snap, pool, recorded)
        entry = Entry(nodeclaim=nc.name, nodepool=pool, reason=reason, sweep=INTERRUPTION_SWEEP, state=DELETING,
                      proposed_at=snap.now, since=snap.now, detail="rebalance recommendation",
                      command=f"interruption/{m.id}" if m is not None else "interruption",
                      instance_type=nc.labels.get(wk.INSTANCE_TYPE, ""), zone=nc.labels.get(wk.ZONE, ""),
                      capacity_type=nc.labels.get(wk.CAPACITY_TYPE, ""))
        if self.ledger.reserve(entry, reservation_limit(allowance, count)):
            return entry, ""
        return None, (f"{budgets.message(pool, reason)}: {len(recorded)} in flight, {count.external} NotReady or "
                      f"deleting" if allowance.limit is not None else "taken by a concurrent disruption")

    # -- actions -------------------------------------------------------------------------------------------------
    def _mark_spot(self, nc, report) -> None:
        it, zone = nc.labels.get(wk.INSTANCE_TYPE), nc.labels.get(wk.ZONE)
        if not it or not zone or self.unavailable is None:
            return
        self.unavailable.mark(it, zone, wk.CAPACITY_TYPE_SPOT, "SpotInterruption")
        report.unavailable.append({"instanceType": it, "zone": zone, "capacityType": wk.CAPACITY_TYPE_SPOT,
                                   "nodeClaim": nc.name, "reason": "SpotInterruption"})
        self._decision("unavailable", f"offering {it} {zone} spot marked unavailable (spot interruption of {nc.name})",
                       nodeclaim=nc.name, instanceType=it, zone=zone)

    def _mark_reservation(self, iid: str, nc, report) -> None:
        rid = nc.labels.get(wk.CAPACITY_RESERVATION_ID)
        zone = nc.labels.get(wk.ZONE)
        if not rid or not zone:
            inst = self.cloud.describe([iid]).get(iid) or {}
            rid = rid or inst.get("CapacityReservationId")
            zone = zone or (inst.get("Placement") or {}).get("AvailabilityZone")
        if not rid or self.unavailable is None:
            return
        self.unavailable.mark(rid, zone or "any", RESERVED, "CapacityReservationInterruption")
        report.unavailable.append({"capacityReservationId": rid, "zone": zone or "any", "capacityType": RESERVED,
                                   "nodeClaim": nc.name, "reason": "CapacityReservationInterruption"})
        self._decision("unavailable", f"capacity reservation {rid} marked unavailable", nodeclaim=nc.name,
                       capacityReservationId=rid)

    def _disrupt(self, m, iid, nc, snap, report, reason: str, replacements=(), unschedulable=(), drain=False) -> None:
        """Request the NodeClaim's deletion, then taint the node (Karpenter v1's cordon); the drain follows.

        In that order: the sweeps' stale-taint cleanup (``Executor.remove_stale_taints``) leaves the taint of a
        NodeClaim marked deleting alone, so a taint set only after the deletion mark can never be taken for a
        stale one by a concurrent sweep (tainting first left a window in which it could be removed)."""
        node = snap.node_of_nodeclaim(nc.name)
        # a scheduled change's start (days ahead, as AWS announces them) is the drain's deadline: by then the pods are
        # gone, deleted if a PodDisruptionBudget still holds them (a start already past sets none)
        start = m.start if m.kind == im.SCHEDULED_CHANGE else None
        updated = self.terminator.request(nc, reason, deadline=start if start and start > self.clock() else None)
        if updated is None:
            self._ignore(report, m, iid, nc, "NodeClaim gone")
            return
        snap.nodeclaims[nc.name] = updated
        if node is not None:
            self.kube.patch_node_taints(node["metadata"]["name"], add=[dict(DISRUPTED_TAINT)])
        if drain and m.kind == im.SPOT_INTERRUPTION and node is not None:
            self._drain_now(updated, node["metadata"]["name"], iid)
        report.disrupted.append(self._entry(m, iid, nc, node, reason, replacements, unschedulable))
        self._decision("disrupt", f"NodeClaim {nc.name} deleting: {reason} ({len(replacements)} replacements)",
                       nodeclaim=nc.name, reason=reason, instanceId=iid, replacements=list(replacements))

    def _ensure_taint(self, nc, snap) -> None:
        """A redelivery for a NodeClaim this handler marked deleting: the taint that follows the deletion mark in
        :meth:`_disrupt` is set if the earlier delivery failed (or died) before it (idempotent)."""
        if (nc.annotations or {}).get(DELETION_REASON_ANNOTATION) not in INTERRUPTION_REASONS:
            return
        node = snap.node_of_nodeclaim(nc.name)
        if node is not None and not has_disrupted_taint(node):
            self.kube.patch_node_taints(node["metadata"]["name"], add=[dict(DISRUPTED_TAINT)])

    @staticmethod
    def _held(nc) -> bool:
        """Is ``nc`` deleting for a reason whose drain waits for its replacements, that drain not started yet?"""
        term = nc.status.get(TERMINATION_STATUS) or {}
        return holds_for_replacements((nc.annotations or {}).get(DELETION_REASON_ANNOTATION)) and not term.get("startedAt")

    def _drain_now(self, nc, node_name: str, iid: str, kind: str = im.SPOT_INTERRUPTION) -> None:
        """The drain's first step in this invocation (two minutes' notice: no waiting for the lifecycle sweep).
        Best effort: a failure is logged and the lifecycle sweep carries on the drain; the instance is not
        terminated here (the sweep does it once the node is drained)."""
        what = "the spot warning" if kind == im.SPOT_INTERRUPTION else f"the {kind} notice"
        try:
            node = self.kube.get_node(node_name)   # as it is now: tainted a moment ago
            if node is None:
                return
            outcome = self.terminator.drain(nc, node)
            self._decision("drain", f"NodeClaim {nc.name}: drain started at {what} ({outcome})",
                           nodeclaim=nc.name, instanceId=iid, outcome=outcome)
        except Exception as e:   # noqa: BLE001 - the deletion is requested; the lifecycle sweep drains
            self.logger.warning(f"drain of NodeClaim {nc.name} at {what} failed (the lifecycle sweep "
                                f"continues it): {e}", extra={"nodeClaim": nc.name, "instanceId": iid})

    def _remove_now(self, m, iid, nc, snap, report, reason: str, deleting: bool) -> None:
        node = snap.node_of_nodeclaim(nc.name)
        if not deleting:
            nc = self.terminator.request(nc, reason) or nc
        inst = self.cloud.describe([iid]).get(iid)
        errors: list[str] = []
        outcome = self.terminator.finalize(nc, node, inst, errors)
        if errors:
            raise RuntimeError("; ".join(errors))
        if outcome == "deleted":
            snap.nodeclaims.pop(nc.name, None)
            report.deleted.append({"nodeClaim": nc.name, "reason": reason})
        else:
            snap.nodeclaims[nc.name] = self.store.get("NodeClaim", nc.name) or nc
        if not deleting:
            report.disrupted.append(self._entry(m, iid, nc, node, reason, (), ()))
        else:
            self._ignore(report, m, iid, nc, f"NodeClaim already deleting; {outcome}")
        self._decision("remove", f"NodeClaim {nc.name}: instance {iid} terminated; {outcome}", nodeclaim=nc.name,
                       instanceId=iid)

    def _entry(self, m, iid, nc, node, reason, replacements, unschedulable) -> dict:
        labels = nc.labels
        return {"nodeClaim": nc.name, "reason": reason, "nodePool": nc.nodepool_name,
                "instanceType": labels.get(wk.INSTANCE_TYPE), "zone": labels.get(wk.ZONE),
                "capacityType": labels.get(wk.CAPACITY_TYPE), "replacements": list(replacements),
                "unschedulable": list(unschedulable), "instanceId": iid, "messageId": m.message_id, "kind": m.kind,
                "node": (node or {}).get("metadata", {}).get("name")}

    # -- replacement capacity ----------------------------------------------------------------------------------
    def _replace(self, m, iid, nc, snap, report) -> tuple[list[str], list[dict]]:
        """Launch what the node's pods (and the pods nominated to it) need if it went away; (names, unschedulable)
        (:func:`~.leaving.launch_for_leaving`).

        A launch failure is reported in ``errors`` (the event is retried: the deterministic names make the retry
        launch only what is still missing) and does not stop the deletion that follows."""
        if not self._catalog:
            self.loader.load_instance_types(snap)
            self._catalog = True
        out = launch_for_leaving(snap, [nc], self.launcher, f"interrupted/{nc.name}", self._decision, is_transient)
        for failure in out.failures:
            self._error(report, m, iid, RuntimeError(failure))
        if out.launched:
            self.loader.reload_nodeclaims(snap)  # the next candidate of the batch sees them as in-flight capacity
        return out.launched, out.unschedulable


__all__ = ["Interruption", "InterruptionReport", "is_transient", "release_stale_reservations", "REBALANCE_ANNOTATION",
           "REPLACES_ANNOTATION", "ACTED_STATES", "REASONS"]
