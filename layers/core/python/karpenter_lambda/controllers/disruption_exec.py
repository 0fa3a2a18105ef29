"""In-flight disruptions: one step of each recorded command per sweep (the state machine of docs/disruption.md).

A command (one or several candidates, e.g. a multi-node consolidation) is recorded as one ledger entry per
candidate sharing ``Entry.command``; every step applies to the whole group:

``proposed`` -(>= the validation delay: :func:`~karpenter_lambda.disruption.plan.revalidate`, else cancelled)->
taint every candidate ``karpenter.sh/disrupted:NoSchedule`` and launch the replacements through the
:class:`~.launcher.Launcher` (deterministic names: a retried step finds them) -> ``replacing`` -(every replacement
Initialized, and the last look finds a place for every pod, :meth:`Executor._before_drain`)-> request every
candidate's deletion -> ``deleting`` (the lifecycle sweep drains and terminates; the entry is released once its
NodeClaim is gone).  Expiration enters at :meth:`Executor.carry` in the sweep that decided it (no budget, no 15 s
wait).  A replacement that fails to launch or is deleted before it
initializes: the taints are removed, the nodes kept, the launched replacements abandoned, the reason recorded --
except for an expiration whose NodeClaim has a ``terminationGracePeriod``: Karpenter's maximum node lifetime is
``expireAfter + terminationGracePeriod`` (it deletes the NodeClaim at expiry), so its deletion is requested anyway,
and every expiration's deletion carries that bound as its deadline (``karpenter.sh/nodeclaim-termination-timestamp``,
:func:`lifetime_deadline`): waiting for the replacements never pushes the node past it.

No path leaves a candidate tainted without an in-flight entry: a cancellation on re-validation removes the taint (a
crashed earlier step may have set it); an exception while tainting or launching removes it before the error goes up
(the entry stays ``proposed``: the next sweep re-validates, and the deterministic names find what was launched); a
command whose replacements are not all Initialized ``REPLACEMENT_TIMEOUT`` (10 min, as Karpenter) after they were
launched is abandoned: taints removed, budget slots released, the replacements left running (consolidation removes
them if they are not needed).  :meth:`Executor.remove_stale_taints` clears any ``karpenter.sh/disrupted`` taint left
on a node with no in-flight entry and no deletion in progress.
"""

from __future__ import annotations

import hashlib

from ..adapters.store.ledger import DELETING, PROPOSED, REPLACING, Entry
from ..api import events as ev
from ..api.labels import DISRUPTED_TAINT, REPLACES_ANNOTATION, encode_replaces, has_disrupted_taint
from ..api.times import format_time
from ..disruption.candidates import make_candidate
from ..api.durations import DurationError, parse_duration
from ..disruption.context import SnapshotCaches, SweepContext
from ..disruption.expiration import expires_at
from ..disruption.plan import revalidate
from ..disruption.replace import removal_plan
from ..disruption.types import DRIFTED, EXPIRED

REPLACEMENT_TIMEOUT = 10 * 60.0   # seconds a command waits for its replacements to initialize (Karpenter: 10 min)


class Executor:
    def __init__(self, sweep):
        self.s = sweep   # the DisruptionSweep: store, kube, ledger, launcher, terminator, decide, methods

    # -- entry point --------------------------------------------------------------------------------
    def advance(self, group: list[Entry], snap, live: dict, report, seq: dict | None = None,
                caches: SnapshotCaches | None = None) -> bool:
        """One step for a command's entries; False when they were released (cancelled or failed).

        ``seq`` (commands one sweep planned in sequence, each on the snapshot as if the earlier ones were carried
        out): ``{"snap": the snapshot with the earlier commands of the sequence that went ahead carried out,
        "caches": its SnapshotCaches, "members": every NodeClaim of the sequence}``; the command is re-validated on
        that snapshot and, when it goes ahead, carried out on it for the next (``SweepContext.derive``).
        ``caches``: the SnapshotCaches of ``snap`` (shared with the sweep's plan)."""
        names = [e.nodeclaim for e in group]
        if any(snap.nodeclaims[n].metadata.get("deletionTimestamp") for n in names):
            if any(e.state != DELETING for e in group):
                self._start_deletion(group, snap, report)
            return True
        state = group[0].state
        if state == PROPOSED:
            if snap.now - group[0].proposed_at < self.s.validation_delay:
                return True
            return self._execute(group, snap, live, report, seq, caches)
        if state == REPLACING:
            return self._check_replacements(group, snap, live, report)
        self._start_deletion(group, snap, report)   # DELETING without deletion timestamps: a crash in between
        return True

    # -- steps -------------------------------------------------------------------------------------
    def _execute(self, group: list[Entry], snap, live: dict, report, seq: dict | None = None,
                 caches: SnapshotCaches | None = None) -> bool:
        lead = group[0]
        view = seq["snap"] if seq else snap
        method = self.s.method_for(lead, view)   # a static NodePool's drift: StaticDrift
        mine = {e.nodeclaim for e in group}
        # later commands of the same sequence were still there when this one was planned: not excluded
        later = {n for n in (seq or {}).get("members", ()) if n not in mine and n in live and live[n].state == PROPOSED}
        ctx = SweepContext(view, {n: x.nodepool for n, x in live.items() if n not in later},
                           caches=seq.get("caches") if seq else caches, leaving=self.older(group, live))
        cmd, why = revalidate(view, method, [e.nodeclaim for e in group], ctx, planned_price=lead.planned_price)
        if cmd is not None and seq is not None and cmd.option is not None:
            after = ctx.derive(cmd.option)
            seq["snap"], seq["caches"] = after.snapshot, after.caches
        if cmd is None:
            self._untaint(group, snap, only_tainted=True)   # an earlier, interrupted step may have tainted them
            for e in group:
                self.s.ledger.release(e)
                report.cancelled.append({"nodeClaim": e.nodeclaim, "reason": e.reason, "why": why})
            self.s._decision("cancel", f"{lead.reason} of {', '.join(e.nodeclaim for e in group)} cancelled on "
                                       f"re-validation: {why}", nodeclaims=[e.nodeclaim for e in group], reason=lead.reason)
            return False
        return self.carry(cmd, group, snap, report)

    @staticmethod
    def older(group: list[Entry], live: dict) -> set[str]:
        """The in-flight NodeClaims of commands proposed before this one: their pods are placed before its own
        (they were planned first, and every later command was planned around them); the later ones are left out
        of the capacity only (``disruption.replace``)."""
        lead = group[0]
        mine = {e.nodeclaim for e in group}
        at = (lead.proposed_at, lead.command or lead.nodeclaim)
        return {n for n, x in live.items() if n not in mine and (x.proposed_at, x.command or x.nodeclaim) < at}

    def carry(self, cmd, group: list[Entry], snap, report) -> bool:
        """Carry out a command that holds on ``snap``: taint its candidates, launch its replacements (the pods that
        have no other place get one) -> ``replacing``; with none to launch, request the deletion at once.  False
        when a replacement failed (the command is released)."""
        lead = group[0]
        names: list[str] = []
        try:
            for c in cmd.candidates:
                self.taint(c.node_name, add=True)
            for e in group:
                e.savings_per_hour = cmd.savings_per_hour / max(1, len(group))
                if cmd.detail:   # what is carried out (a planned replace may go ahead as a delete: said so)
                    e.detail = cmd.detail
            if not cmd.replacements:
                self._start_deletion(group, snap, report)
                return True
            for i, plan in enumerate(cmd.replacements):
                name, problem, limit = self._launch(lead, [e.nodeclaim for e in group], i, plan, snap)
                if problem and limit and cmd.forceful:
                    # expiration is forceful: a NodePool limit that leaves no room for the replacement while the old
                    # node still counts does not keep the node (Karpenter launches nothing for it at all)
                    self.s._decision("replacement-skipped", f"{lead.reason} of {', '.join(e.nodeclaim for e in group)}: "
                                                            f"replacement {name} refused ({problem}); expiring without it",
                                     reason=lead.reason)
                    continue
                if problem:
                    self._fail(group, snap, names, f"replacement {name or plan.nodepool} did not launch: {problem}",
                               report)
                    return False
                names.append(name)
        except Exception:
            # the entry stays proposed (the next sweep re-validates); the nodes must not stay tainted meanwhile
            if not any(e.state == DELETING for e in group):
                self._untaint(group, snap, names=[c.node_name for c in cmd.candidates])
            raise
        if not names:
            self._start_deletion(group, snap, report)
            return True
        if lead.reason == EXPIRED and all((nc := snap.nodeclaims.get(e.nodeclaim)) is not None
                                          and lifetime_deadline(nc, snap) is not None for e in group):
            # a lifetime bound (expireAfter + terminationGracePeriod): the deletion is requested now, as Karpenter
            # deletes an expired NodeClaim at once, so the drain keeps its grace window; the drain waits for the
            # replacements for at most half the time to the deadline (termination.HOLD_FOR_REPLACEMENTS).  Waiting
            # for them to initialize first left the drain a second before the deadline: pods force-deleted, no PDB
            for e in group:
                e.replacements = names
            self._start_deletion(group, snap, report)
            self.s._decision("replace", f"{', '.join(e.nodeclaim for e in group)}: launched replacements "
                                        f"{', '.join(names)}; expired with a terminationGracePeriod: deleting now, "
                                        f"the drain waits for them", nodeclaims=[e.nodeclaim for e in group],
                             replacements=names)
            return True
        for e in group:
            e.state, e.replacements, e.since = REPLACING, names, snap.now
            self.s.ledger.advance(e)
        report.replacing.append({"nodeClaim": lead.nodeclaim, "nodeClaims": [e.nodeclaim for e in group],
                                 "replacements": names, "reason": lead.reason})
        for e in group:
            self._node_event(e, snap, report, ev.DISRUPTION_LAUNCHING, ev.disruption_launching_message(e.reason))
        self.s._decision("replace", f"{', '.join(e.nodeclaim for e in group)}: launched replacements "
                                    f"{', '.join(names)}; draining once they are initialized",
                         nodeclaims=[e.nodeclaim for e in group], replacements=names)
        return True

    def static_drift(self, lead: Entry, snap) -> bool:
        """Is this a static NodePool's drift (:mod:`karpenter_lambda.disruption.static_drift`)?  Its replacement is
        the NodePool's template, launched within ``limits.nodes`` with the old node still counted (Karpenter's
        ``ReserveNodeCount``), the old node drained once it is Initialized with no pod question, and a replacement
        that fails is not kept (nothing ever consolidates a static NodePool)."""
        return bool(getattr(self.s.method_for(lead, snap), "static_only", False))

    def _launch(self, lead: Entry, members: list[str], i: int, plan, snap) -> tuple[str, str, bool]:
        """(the replacement's name, why it did not launch or "", whether a NodePool limit refused it)."""
        nodepool = snap.nodepools.get(plan.nodepool)
        if nodepool is None:
            return "", f"NodePool {plan.nodepool} is gone", False
        nodeclass = snap.nodeclasses.get(nodepool.node_class_ref.get("name", ""))
        resolved = snap.resolved.get(nodeclass.name) if nodeclass is not None else None
        if nodeclass is None or resolved is None:
            return "", f"EC2NodeClass of NodePool {nodepool.name} is not resolved", False
        key = lead.command or lead.nodeclaim
        digest = hashlib.sha256(f"replace:{key}:{lead.proposed_at}:{i}".encode()).hexdigest()[:10]
        name = f"{nodepool.name}-{digest}"
        out = self.s.launcher.launch(plan, nodepool, nodeclass, resolved, [], name=name,
                                     annotations={REPLACES_ANNOTATION: encode_replaces(members)},
                                     replacing=None if self.static_drift(lead, snap) else members)
        if out.launched is not None or out.duplicate:
            return name, "", False
        return name, out.limit or out.failed or "launch refused", bool(out.limit)

    def _check_replacements(self, group: list[Entry], snap, live: dict, report) -> bool:
        reps = group[0].replacements
        found = [snap.nodeclaims.get(r) for r in reps]
        gone = [r for r, x in zip(reps, found) if x is None or x.metadata.get("deletionTimestamp")]
        if gone:
            self._fail(group, snap, [], f"replacement {', '.join(gone)} was deleted before it initialized", report)
            return False
        if all(x.is_true("Initialized") for x in found):
            return self._before_drain(group, snap, live, report)
        waited = snap.now - (group[0].since or group[0].proposed_at)
        if waited >= REPLACEMENT_TIMEOUT:
            late = [r for r, x in zip(reps, found) if not x.is_true("Initialized")]
            # Karpenter's rule: the command is abandoned, the replacements stay (consolidation decides about them)
            kept = "replacements deleted (static NodePool)" if self.static_drift(group[0], snap) else "replacements kept"
            self._fail(group, snap, [], f"replacement {', '.join(late)} not initialized within "
                                        f"{int(REPLACEMENT_TIMEOUT // 60)}m ({int(waited)}s); {kept}", report)
            return False
        return True

    def _before_drain(self, group: list[Entry], snap, live: dict, report) -> bool:
        """The last look before the drain, every replacement Initialized: does every pod of the candidates still
        have a place on the Initialized nodes (its replacements included) now?  The cluster moved on since the
        plan (pods bound to the room it counted on, another command's pods).  Yes: the deletion is requested.
        Pods that would need a new node: drift and expiration launch it and wait again (the 10-minute rule still
        counts from the first launch); a consolidation is abandoned instead (one more node would undo its saving),
        as is any graceful command whose pods would have no place at all.  Expiration is forceful: pods that no
        node could take do not hold it."""
        lead = group[0]
        cands = []
        for e in group:
            nc = snap.nodeclaims.get(e.nodeclaim)
            np = snap.nodepools.get(e.nodepool)
            if nc is None or np is None:
                self._start_deletion(group, snap, report)
                return True
            cands.append(make_candidate(snap, nc, snap.node_of_nodeclaim(e.nodeclaim), np))
        if not any(c.reschedulable for c in cands) or self.static_drift(lead, snap):
            # a static drift asks no pod question (Karpenter's StaticDrift): its replacement is the template's
            self._start_deletion(group, snap, report)
            return True
        forceful = lead.reason == EXPIRED
        ctx = SweepContext(snap, {n: x.nodepool for n, x in live.items()}, leaving=self.older(group, live))
        result, _ = removal_plan(snap, cands, ctx, initialized_only=True)
        if result.unschedulable and not forceful:
            pod, why = next(iter(sorted(result.unschedulable.items())))
            self._fail(group, snap, [], f"pod {pod} would have no place after the drain ({why}); replacements kept",
                       report)
            return False
        if not result.new_nodeclaims:
            self._start_deletion(group, snap, report)
            return True
        if lead.reason not in (DRIFTED, EXPIRED):
            self._fail(group, snap, [], f"{len(result.new_nodeclaims)} more node(s) needed since the plan "
                                        f"(pod {result.new_nodeclaims[0].pods[0] if result.new_nodeclaims[0].pods else '?'}); "
                                        f"replacements kept", report)
            return False
        names = list(lead.replacements)
        for plan in result.new_nodeclaims:
            name, problem, limit = self._launch(lead, [e.nodeclaim for e in group], len(names), plan, snap)
            if problem and limit and forceful:
                continue
            if problem:
                self._fail(group, snap, [], f"replacement {name or plan.nodepool} did not launch: {problem}; "
                                            f"replacements kept", report)
                return False
            names.append(name)
        if names == list(lead.replacements):   # nothing could be launched (limits) and expiration is forceful
            self._start_deletion(group, snap, report)
            return True
        added = names[len(lead.replacements):]
        for e in group:
            e.replacements = names
            self.s.ledger.advance(e)
        report.replacing.append({"nodeClaim": lead.nodeclaim, "nodeClaims": [e.nodeclaim for e in group],
                                 "replacements": added, "reason": lead.reason})
        self.s._decision("replace", f"{', '.join(e.nodeclaim for e in group)}: pods without a place since the plan; "
                                    f"launched {', '.join(added)}; draining once they are initialized",
                         nodeclaims=[e.nodeclaim for e in group], replacements=added)
        return True

    def _untaint(self, group: list[Entry], snap, names: list[str] | None = None, only_tainted: bool = False) -> None:
        nodes = set(names or [])
        for e in group:
            node = snap.node_of_nodeclaim(e.nodeclaim)
            if node is not None and (has_disrupted_taint(node) or not only_tainted):
                nodes.add((node.get("metadata") or {}).get("name"))
        for name in sorted(n for n in nodes if n):
            try:
                self.taint(name, add=False)
            except Exception as ex:   # best effort: remove_stale_taints retries on the next sweep
                self.s.logger.warning(f"removing the disrupted taint of node {name} failed: {ex}")

    def remove_stale_taints(self, snap, report) -> list[str]:
        """Remove ``karpenter.sh/disrupted`` from nodes with no in-flight entry (of any sweep) and no deletion in
        progress (NodeClaim or Node): left by a crash, a lost release, an older version.  Checked against the
        ledger and the store as they are now, so a command or a deletion that started after the snapshot keeps
        its taint."""
        stale = []
        for name, nc in sorted(snap.nodeclaims.items()):
            node = snap.node_of_nodeclaim(name)
            if node is None or not has_disrupted_taint(node) or nc.metadata.get("deletionTimestamp") \
                    or (node.get("metadata") or {}).get("deletionTimestamp"):
                continue
            stale.append((name, node["metadata"]["name"]))
        if not stale:
            return []
        live = self.s.ledger.entries()
        removed = []
        for name, node_name in stale:
            fresh = self.s.store.get("NodeClaim", name)
            if name in live or fresh is None or fresh.metadata.get("deletionTimestamp"):
                continue
            self.taint(node_name, add=False)
            removed.append(node_name)
            self.s._decision("untaint", f"node {node_name} (NodeClaim {name}): stale {DISRUPTED_TAINT['key']} taint "
                                        f"removed (no disruption in flight, not deleting)", node=node_name, nodeclaim=name)
        return removed

    def _fail(self, group: list[Entry], snap, launched: list[str], why: str, report) -> None:
        if group[0].reason == EXPIRED and all(
                (nc := snap.nodeclaims.get(e.nodeclaim)) is not None and lifetime_deadline(nc, snap) is not None
                for e in group):
            # the lifetime bound (expireAfter + terminationGracePeriod) stands: expiring without the replacements (those
            # launched stay: they may still come up, and the pods need a place), as Karpenter expires without any
            self.s._decision("replacement-failed", f"{group[0].reason} of {', '.join(e.nodeclaim for e in group)}: "
                                                   f"{why}; expiring anyway (expireAfter + terminationGracePeriod is "
                                                   f"the node's maximum lifetime)", reason=group[0].reason)
            for e in group:
                kept = [r for r in e.replacements if r in snap.nodeclaims
                        and not snap.nodeclaims[r].metadata.get("deletionTimestamp")]
                e.replacements = list(dict.fromkeys(kept + list(launched)))
            self._start_deletion(group, snap, report)
            return
        self._untaint(group, snap)
        if self.static_drift(group[0], snap):   # no consolidation removes a static NodeClaim: no replacement is kept
            launched = list(dict.fromkeys(list(launched) + [r for e in group for r in e.replacements]))
        for name in launched:   # a partial set of replacements is not kept
            nc = self.s.store.get("NodeClaim", name)
            if nc is not None:
                self.s.terminator.request(nc, f"replacement for {', '.join(e.nodeclaim for e in group)} abandoned")
        for e in group:
            self.s.ledger.release(e)
            report.failed.append({"nodeClaim": e.nodeclaim, "reason": e.reason, "why": why})
        self.s._decision("replacement-failed", f"{group[0].reason} of {', '.join(e.nodeclaim for e in group)} "
                                               f"abandoned, nodes kept: {why}", reason=group[0].reason)

    def _start_deletion(self, group: list[Entry], snap, report) -> None:
        for e in group:
            nc = snap.nodeclaims.get(e.nodeclaim)
            if nc is not None and not nc.metadata.get("deletionTimestamp"):
                deadline = lifetime_deadline(nc, snap) if e.reason == EXPIRED else None
                self.s.terminator.request(nc, f"{e.reason}: {e.detail}" if e.detail else e.reason, deadline=deadline)
            if e.state != DELETING:
                self._deleting(e, snap, report)

    def _deleting(self, e: Entry, snap, report) -> None:
        e.state, e.since = DELETING, snap.now
        self.s.ledger.advance(e)
        report.disrupted.append({"nodeClaim": e.nodeclaim, "reason": e.reason, "nodePool": e.nodepool,
                                 "instanceType": e.instance_type, "zone": e.zone, "capacityType": e.capacity_type,
                                 "replacements": list(e.replacements), "savingsPerHour": round(e.savings_per_hour, 6),
                                 "detail": e.detail})
        self._node_event(e, snap, report, ev.DISRUPTION_TERMINATING, ev.disruption_terminating_message(e.reason))
        self.s._decision("disrupt", f"{e.reason} NodeClaim {e.nodeclaim}: deletion requested"
                                    + (f" (replaced by {', '.join(e.replacements)})" if e.replacements else ""),
                         nodeclaim=e.nodeclaim, reason=e.reason, replacements=e.replacements,
                         savingsPerHour=e.savings_per_hour)

    def _node_event(self, e: Entry, snap, report, reason: str, message: str) -> None:
        """Karpenter's decision Event on the candidate's Node (best effort: the command goes on regardless)."""
        node = snap.node_of_nodeclaim(e.nodeclaim)
        if node is None:
            return
        try:
            self.s.kube.create_event({**node, "apiVersion": "v1", "kind": "Node"}, reason, message, source=ev.SOURCE,
                                     now=format_time(snap.now))
        except Exception as ex:
            report.errors.append(f"event {reason} on node {(node.get('metadata') or {}).get('name')}: {ex}")

    def taint(self, node_name: str | None, add: bool) -> None:
        if not node_name:
            return
        if add:
            self.s.kube.patch_node_taints(node_name, add=[dict(DISRUPTED_TAINT)])
        else:
            self.s.kube.patch_node_taints(node_name, remove=[dict(DISRUPTED_TAINT)])


def lifetime_deadline(nc, snap) -> float | None:
    """An expiring NodeClaim's forced end: its expiry (creation + ``expireAfter``) + its ``terminationGracePeriod``,
    Karpenter's maximum node lifetime ("the sum of the two fields"); None without either (no bound)."""
    tgp = nc.spec.get("terminationGracePeriod")
    pool = snap.nodepools.get(nc.nodepool_name)
    expiry = expires_at(nc, pool) if pool is not None else None
    if not tgp or expiry is None:
        return None
    try:
        return expiry + parse_duration(tgp)
    except DurationError:
        return None
