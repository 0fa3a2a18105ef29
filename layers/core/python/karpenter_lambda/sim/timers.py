"""Timers that still change something: off-peak window edges (EventBridge Scheduler), the budget window edges
that let a blocked disruption go, a node repair's toleration ending, a NodeClaim's ``consolidateAfter`` ending and a
pod's ``karpenter.sh/do-not-disrupt`` time limit running out."""

from __future__ import annotations

import math
from datetime import timedelta

from ..api.cron import CronError
from ..api.wallclock import budget_edges
from ..api.durations import parse_duration
from ..api.times import to_datetime
from ..api.kube import is_daemon_pod, is_terminal, is_terminating
from ..api.validators import WHEN_EMPTY, WHEN_EMPTY_OR_UNDERUTILIZED
from ..disruption.budgets import budget_limit
from ..disruption.candidates import LAST_POD_EVENT, condition_time, do_not_disrupt_until, epoch
from ..disruption.emptiness import CONSOLIDATING_POLICIES, consolidate_after
from ..disruption.static import is_static
from ..disruption.repair import unhealthy_condition
from ..offpeak.window import window_at
from .offpeak import window_edges

DUE_KINDS = ("step", "offpeak", "budget", "heal")   # timers from the input (not consequences of the run: joins, ...)
BUDGET_LOOKAHEAD = 7 * 86400.0   # how far ahead a budget window edge may free a blocked disruption (one weekly cron)


class TimersMixin:
    """The :class:`~.simulator.Simulation`'s off-peak and budget timers."""

    def _schedule_offpeak(self) -> None:
        """Off-peak window edges as timers (EventBridge Scheduler): with --until every edge before it; without, the
        first window and every window that starts before the last Scenario step (later ones: :meth:`_add_wakeups`)."""
        if self.offpeak is None or not self.offpeak_schedules:
            return
        edges = window_edges(self.offpeak_schedules, self.clock.start, self.until)
        if self.until is None and self.scenario is not None and self.scenario.steps:
            last_step = max(step.at for step in self.scenario.steps)
            edges += [e for e in window_edges(self.offpeak_schedules, self.clock.start, last_step) if e[3]["start"] <= last_step]
        self._add_edges(edges)

    def _add_edges(self, edges, due: bool = True) -> bool:
        """Schedule the edges of windows not yet known (a start already past fires now); True when one was new."""
        added = False
        for at, name, edge, w in sorted(edges, key=lambda e: (e[0], e[2] != "end")):
            key = (name, round(w["start"], 3), edge)
            if key in self._edge_keys:
                continue
            self._edge_keys.add(key)
            self.offpeak_edges.append((at, name, edge, w))
            self._schedule(max(at, self.clock.elapsed), "offpeak", {"schedule": name, "edge": edge, "due": due})
            added = True
        self.offpeak_edges.sort(key=lambda e: (e[0], e[2] != "end"))
        return added

    def _windows_holding_now(self) -> list:
        """Edges of the off-peak windows that hold the current time (the end ahead; the start, when the run has not
        invoked it, now): a window started during the run is run to its end."""
        now = self.clock.datetime()
        out = []
        for s in self.offpeak_schedules:
            try:
                w = window_at(s.schedule, s.time_zone, s.duration_seconds, now)
            except (ValueError, KeyError):
                continue
            if w is None:
                continue
            info = {"schedule": s.name, "start": w.start.timestamp() - self.clock.start,
                    "end": w.end.timestamp() - self.clock.start}
            if info["start"] >= 0:
                out.append((info["start"], s.name, "start", info))
            out.append((info["end"], s.name, "end", info))
        return out

    def _add_wakeups(self) -> bool:
        """Before a quiet run stops or skips ahead: the timers that will still change something.

        * a disruption blocked by a budget window (``DisruptionBlocked`` cause ``budget``) -> a ``budget`` timer at the
          first window edge where the NodePool's budget for that reason allows more (one per NodePool, reason, edge);
        * an off-peak window holding the current time -> its end (and its start, when not invoked yet);
        * with a skip ahead, the off-peak windows starting before the skip's target.
        True when a timer was added (the loop then looks again)."""
        added = False
        if self.offpeak is not None and self.offpeak_schedules:
            added |= self._add_edges(self._windows_holding_now(), due=False)
            horizon = self._skip_target()
            if horizon is not None and horizon > self.clock.elapsed:
                ahead = window_edges(self.offpeak_schedules, self.clock.start, horizon)
                added |= self._add_edges([e for e in ahead if self.clock.elapsed < e[3]["start"] <= horizon], due=False)
        added |= self._add_budget_timers()
        added |= self._add_repair_timers()
        added |= self._add_consolidation_timers()
        added |= self._add_do_not_disrupt_timers()
        return added

    def _add_do_not_disrupt_timers(self) -> bool:
        """A ``do-not-disrupt`` timer when a pod's ``karpenter.sh/do-not-disrupt`` time limit runs out (a Go duration:
        Karpenter's ``IsDoNotDisruptActive`` lifts the block that long after the pod's ``status.startTime``,
        :func:`~karpenter_lambda.disruption.candidates.do_not_disrupt_until`), so a quiet run neither stops nor
        skips past the sweeps that the block held back (a consolidation, a drift, a static scale-down).  Pods bound
        to a NodeClaim's node, not terminal or terminating; one per pod and time.  A Node's annotation only takes
        ``"true"`` (Karpenter's ``ValidateNodeDisruptable``): no time limit, no timer.  Limits past ``--until`` (or,
        without it, past the safety limit) are left out: the run ends before them."""
        known = self.__dict__.setdefault("_dnd_timer_keys", set())
        # a pod's limit moves only with what the run reports (a pod bound, started or gone): nothing since the last look
        if self.__dict__.get("_dnd_scanned_at") == self.last_change:
            return False
        self._dnd_scanned_at = self.last_change
        horizon = self.until if self.until is not None else self._last_due + self.max_time
        nodes = {nc.status.get("nodeName") for nc in self.store.list("NodeClaim")} - {None, ""}
        added = False
        for p in self.server.store.list("pods", shared=True):
            if (p.get("spec") or {}).get("nodeName") not in nodes or is_terminal(p) or is_terminating(p):
                continue
            until = do_not_disrupt_until(p)
            if until is None or until == float("inf"):
                continue
            at = float(math.ceil(until - self.clock.start))   # whole seconds: the sweep there sees it lifted
            meta = p.get("metadata") or {}
            key = (meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}", at)
            if at <= self.clock.elapsed or at > horizon or key in known:
                continue
            known.add(key)
            self._schedule(at, "do-not-disrupt", {"pod": f"{meta.get('namespace') or 'default'}/{meta.get('name')}"})
            added = True
        return added

    def _add_consolidation_timers(self) -> bool:
        """A ``consolidatable`` timer a disruption sweep after a NodeClaim's ``consolidateAfter`` ends (counted from its
        last pod event or its initialization, as the sweeps count it), so a quiet run neither stops nor skips past the
        sweeps that may consolidate it: an empty node of a NodePool with ``consolidateAfter: 10m`` is removed before
        the run ends.  Only NodeClaims that may be consolidated: initialized, not deleting, of a NodePool whose
        policy consolidates (``WhenEmpty``: empty nodes only); one per NodeClaim and time."""
        known = self.__dict__.setdefault("_consolidation_timer_keys", set())
        # a NodeClaim's consolidatable time moves only with what the run reports (a pod bound or gone, a node
        # initialized): nothing reported since the last look, nothing new to find (and no store listing to pay for)
        if self.__dict__.get("_consolidation_scanned_at") == self.last_change:
            return False
        self._consolidation_scanned_at = self.last_change
        pools = {np.name: np for np in self.store.list("NodePool")}
        busy = {(p.get("spec") or {}).get("nodeName") for p in self.server.store.list("pods", shared=True)
                if not is_daemon_pod(p) and not is_terminal(p)}
        sweep = max([i for n, _m, i in self.scheduled if n == "consolidation"] + [60.0])
        added = False
        for nc in self.store.list("NodeClaim"):
            pool = pools.get(nc.labels.get("karpenter.sh/nodepool", ""))
            if pool is None or nc.metadata.get("deletionTimestamp") or is_static(pool):
                continue
            policy = (pool.disruption or {}).get("consolidationPolicy", WHEN_EMPTY_OR_UNDERUTILIZED)
            after = consolidate_after(pool)
            initialized = condition_time(nc, "Initialized")
            if policy not in CONSOLIDATING_POLICIES or after is None or initialized is None:
                continue
            if policy == WHEN_EMPTY and nc.status.get("nodeName") in busy:
                continue
            since = max(t for t in (epoch(nc.status.get(LAST_POD_EVENT)), initialized) if t is not None)
            at = since + after - self.clock.start
            key = (nc.name, round(at, 3))
            if at <= self.clock.elapsed or key in known:
                continue
            known.add(key)
            self._schedule(at + sweep, "consolidatable", {"nodeclaim": nc.name})
            added = True
        return added

    def _add_repair_timers(self) -> bool:
        """A ``repair`` timer when an unhealthy node's toleration ends (:mod:`karpenter_lambda.disruption.repair`), so
        a quiet run neither stops nor skips past the lifecycle sweep that repairs it; one per node and due time."""
        known = self.__dict__.setdefault("_repair_timer_keys", set())
        added = False
        for node in self.server.store.list("nodes"):
            u = unhealthy_condition(node)
            if u is None:
                continue
            at = u.due_at - self.clock.start
            key = ((node.get("metadata") or {}).get("name"), round(at, 3))
            if at <= self.clock.elapsed or key in known:
                continue
            known.add(key)
            self._schedule(at, "repair", {"node": key[0]})
            added = True
        return added

    def _add_budget_timers(self) -> bool:
        if not any(b["at"] is None for b in self._budget_blocked.values()):
            return False
        claims = {nc.name: nc for nc in self.store.list("NodeClaim")}
        pools = {np.name: np for np in self.store.list("NodePool")}
        added = False
        for name, b in list(self._budget_blocked.items()):
            if b["at"] is not None:
                continue
            nc = claims.get(name)
            pool = pools.get(nc.labels.get("karpenter.sh/nodepool", "")) if nc is not None else None
            if nc is None or pool is None or nc.metadata.get("deletionTimestamp"):
                del self._budget_blocked[name]
                continue
            total = sum(1 for c in claims.values() if c.labels.get("karpenter.sh/nodepool") == pool.name)
            horizon = self.clock.elapsed + BUDGET_LOOKAHEAD
            if self.until is not None:
                horizon = min(horizon, self.until)
            at = budget_reopens(pool.spec.get("disruption") or {}, b["reason"], total, self.clock.start,
                                self.clock.elapsed, horizon)
            if at is None:          # no window edge ahead lets it go: it stays blocked
                del self._budget_blocked[name]
                continue
            b["at"], b["nodePool"] = at, pool.name
            key = (pool.name, b["reason"], at)
            if key not in self._budget_timers:
                self._budget_timers.add(key)
                self._schedule(at, "budget", {"nodePool": pool.name, "reason": b["reason"]})
                added = True
        return added

    def _budget_changed(self, data: dict) -> None:
        """A budget window edge that lets a blocked disruption go: an event (the sweeps act on their next run)."""
        pool = self.store.get("NodePool", data["nodePool"])
        names = sorted(n for n, b in self._budget_blocked.items()
                       if b.get("nodePool") == data["nodePool"] and b["reason"] == data["reason"]
                       and b["at"] is not None and b["at"] <= self.clock.elapsed)
        for n in names:
            del self._budget_blocked[n]
        if pool is None:
            return
        total = sum(1 for c in self.store.list("NodeClaim") if c.labels.get("karpenter.sh/nodepool") == pool.name)
        limit, which = budget_limit(pool.spec.get("disruption") or {}, data["reason"], total, self.clock.now())
        allows = "unlimited (no budget applies now)" if limit is None else f"{limit} of {total} NodeClaims ({which})"
        self.emit("DisruptionBudgetChanged", f"nodepool/{pool.name}",
                  f"budget window edge: {data['reason']} disruptions allowed: {allows}; waiting: {', '.join(names) or 'none'}",
                  nodePool=pool.name, reason=data["reason"], allowed=limit, nodeClaims=names)


def duration_seconds(text) -> float | None:
    if not text or text == "Never":
        return None
    try:
        return float(parse_duration(text))
    except (ValueError, TypeError):
        return None


def budget_reopens(disruption: dict, reason: str, total: int, start: float, now: float, horizon: float) -> float | None:
    """The first budget window edge in ``(now, horizon]`` (virtual seconds since ``start``) where the budgets of
    ``spec.disruption`` allow ``reason`` more than at ``now``; None when none does (or no budget has a schedule)."""
    t0 = to_datetime(start)
    edges: set[float] = set()
    for b in disruption.get("budgets") or []:
        if not isinstance(b, dict) or b.get("schedule") is None or b.get("duration") is None:
            continue
        reasons = b.get("reasons") or []
        if reasons and reason not in reasons:
            continue
        length = duration_seconds(b["duration"])
        if length is None:
            continue
        try:   # the window's edges, in its CRON_TZ= zone when it names one (api.wallclock: one definition)
            found = budget_edges(b["schedule"], int(length), t0 + timedelta(seconds=now), t0 + timedelta(seconds=horizon))
        except (CronError, ValueError):
            continue
        edges.update(x for x in ((e - t0).total_seconds() for e in found) if now < x <= horizon)
    base, _ = budget_limit(disruption, reason, total, start + now)
    for at in sorted(edges):
        limit, _ = budget_limit(disruption, reason, total, start + at)
        if base is not None and (limit is None or limit > base):
            return at
    return None
