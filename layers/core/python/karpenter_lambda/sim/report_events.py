"""What the handlers report (``controllers.runtime.REPORT_HOOKS``), as simulation events: one
``NodeClaimLaunched`` per launch, one ``NodeClaimDisrupted`` per disruption, and the rest."""

from __future__ import annotations

import json

from ..api.kube import instance_id_of
from ..api.labels import PRICE_ANNOTATION, REPLACES_ANNOTATION, decode_replaces
from ..api.text import plural


class ReportEventsMixin:
    """The :class:`~.simulator.Simulation`'s report hook."""

    def _on_report(self, kind: str, report) -> None:
        if kind == "provision":
            for x in report.launched:
                self._launched.add(x.nodeclaim)
                self._disrupted.discard(x.nodeclaim)
                self.emit("NodeClaimLaunched", f"nodeclaim/{x.nodeclaim}",
                          f"{x.instance_type} {x.capacity_type} in {x.zone} ${x.price:.4f}/h ({x.instance_id}) for {plural(len(x.pods), 'pod')}")
                for pod in x.pods:  # an earlier "unschedulable" no longer holds
                    self.reasons.pop(pod, None)
            for pods in report.existing.values():
                for pod in pods:
                    self.reasons.pop(pod, None)
            for u in report.unschedulable:
                if self.reasons.get(u["pod"]) != u["reason"]:
                    self.emit("PodUnschedulable", f"pod/{u['pod']}", u["reason"])
                self.reasons[u["pod"]] = u["reason"]
            for d in report.duplicates:
                self.emit("DuplicateSkipped", f"nodeclaim/{d}", "already provisioned: nothing launched")
            for node, pods in report.existing.items():
                self.emit("PodsNominated", f"node/{node}", f"{plural(len(pods), 'pod')} fit existing or in-flight capacity")
        elif kind == "lifecycle":
            self._on_lifecycle_disruptions(report)   # NodeClaimDisrupted comes before the NodeClaimDeleted below
            for r in report.registered:
                self.emit("NodeClaimRegistered", f"nodeclaim/{r['nodeClaim']}", f"node {r['node']} registered")
            for r in report.initialized:
                self.emit("NodeClaimInitialized", f"nodeclaim/{r['nodeClaim']}", f"node {r['node']} initialized")
            for r in report.terminated:
                self.emit("InstanceTerminated", f"instance/{r['instanceId']}", r["reason"])
            for r in report.deleted:
                self._budget_blocked.pop(r["nodeClaim"], None)
                self.emit("NodeClaimDeleted", f"nodeclaim/{r['nodeClaim']}", r["reason"])
            for r in getattr(report, "evicted", []):
                self.emit("PodEvicted", f"pod/{r['pod']}", f"evicted from node {r['node']} ({r.get('how', 'eviction')})")
            told = self.__dict__.setdefault("_held_told", set())
            for h in getattr(report, "held", []):
                if h["nodeClaim"] not in told:   # once per NodeClaim: the hold lasts a sweep or a few
                    told.add(h["nodeClaim"])
                    self.emit("DrainWaiting", f"nodeclaim/{h['nodeClaim']}",
                              f"drain of node {h['node']} waits for replacement(s) {', '.join(h['replacements'])} to "
                              f"initialize", replacements=list(h["replacements"]))
            if getattr(report, "draining", None):
                self.last_change = self.clock.elapsed   # a drain in progress is activity, even when quiet
        elif kind == "disruption":
            self._on_disruption(report)
        elif kind == "interruption":
            self._on_interruption(report)
        elif kind == "offpeak":
            self._on_offpeak(report)

    def _on_lifecycle_disruptions(self, report) -> None:
        """One ``NodeClaimDisrupted`` per NodeClaim the lifecycle sweep deleted for a reason (node repair:
        ``Unhealthy``; static scale down: ``Overprovisioned``); ``NodeRepairBlocked`` once per NodeClaim whose repair
        its NodePool's health blocks."""
        keys = ("reason", "nodePool", "instanceType", "zone", "capacityType", "replacements", "savingsPerHour")
        # capacity launched ahead of a deletion is announced first, with the reason it replaces for (as interruption)
        for d in getattr(report, "disrupted", []):
            for r in d.get("replacements") or []:
                self._announce_launch(r, [d["nodeClaim"]], d["reason"])
        for a in getattr(report, "launched_ahead", []):
            for r in a.get("replacements") or []:
                self._announce_launch(r, [a["nodeClaim"]], "replacement")
        for d in getattr(report, "disrupted", []):
            self._emit_disrupted(d["nodeClaim"], f"{d['reason']}: {d.get('instanceType')} {d.get('capacityType')} in "
                                 f"{d.get('zone')} ({d.get('detail')})", **{k: d.get(k) for k in keys})
        told = self.__dict__.setdefault("_repair_blocked_told", set())
        for b in getattr(report, "repair_blocked", []):
            if b["nodeClaim"] not in told:
                told.add(b["nodeClaim"])
                self.emit("NodeRepairBlocked", f"nodeclaim/{b['nodeClaim']}",
                          f"node {b['node']} not repaired: {b['unhealthy']} of {b['nodes']} nodes of NodePool "
                          f"{b['nodePool']} are unhealthy (at most {b['allowed']})", nodePool=b["nodePool"])

    def _announce_launch(self, name: str, replaces: list[str] | None = None, reason: str | None = None, nc=None) -> None:
        """``NodeClaimLaunched`` for a NodeClaim no report announced (replacements: extra keys ``replaces``, ``reason``)."""
        if name in self._launched:
            return
        nc = nc if nc is not None else self.store.get("NodeClaim", name)
        if nc is None or not nc.status.get("providerID"):
            return
        self._launched.add(name)
        self._disrupted.discard(name)
        labels = nc.labels
        price = float(nc.annotations.get(PRICE_ANNOTATION) or 0.0)
        msg = (f"{labels.get('node.kubernetes.io/instance-type')} {labels.get('karpenter.sh/capacity-type')} in "
               f"{labels.get('topology.kubernetes.io/zone')} ${price:.4f}/h ({instance_id_of(nc.status['providerID'])})")
        extra = {}
        if replaces:
            msg += f" replacing {', '.join(replaces)}" + (f" ({reason})" if reason else "")
            extra = {"replaces": list(replaces), "reason": reason}
        self.emit("NodeClaimLaunched", f"nodeclaim/{name}", msg, **extra)

    def _announce_unreported_launches(self, claims: list) -> None:
        """Every launch is an event: a NodeClaim that no report announced (whoever launched it) is announced here."""
        for nc in claims:
            if nc.name in self._launched or not nc.status.get("providerID"):
                continue
            replaces = decode_replaces(nc.annotations.get(REPLACES_ANNOTATION))
            reason = next((self._disruption_reasons[r] for r in replaces if r in self._disruption_reasons), None)
            self._announce_launch(nc.name, replaces, reason or ("replacement" if replaces else None), nc=nc)

    def _emit_disrupted(self, name: str, message: str, **extra) -> bool:
        """``NodeClaimDisrupted`` once per NodeClaim and disruption (a second report of it is not an event)."""
        if name in self._disrupted:
            return False
        self._disrupted.add(name)
        self._budget_blocked.pop(name, None)
        self.emit("NodeClaimDisrupted", f"nodeclaim/{name}", message, **extra)
        return True

    def _on_interruption(self, report) -> None:
        for d in report.disrupted:
            for r in d.get("replacements") or []:
                self._announce_launch(r, [d["nodeClaim"]], d["reason"])
            keys = ("reason", "nodePool", "instanceType", "zone", "capacityType", "replacements")
            reps = f"; replacements {', '.join(d['replacements'])}" if d.get("replacements") else ""
            self._emit_disrupted(d["nodeClaim"],
                                 f"{d['reason']}: {d.get('instanceType')} {d.get('capacityType')} in {d.get('zone')}{reps}",
                                 **{k: d.get(k) for k in keys}, savingsPerHour=0.0)
        for d in report.deleted:
            if d["nodeClaim"] in self._disrupted:   # disrupted (above or earlier) and its instance gone: deleted at once
                self.emit("NodeClaimDeleted", f"nodeclaim/{d['nodeClaim']}", f"{d['reason']}: removed at once")
            else:
                self._emit_disrupted(d["nodeClaim"], f"{d['reason']}: removed at once", reason=d["reason"],
                                     replacements=[], savingsPerHour=0.0)
        for r in report.rebalance:
            self.emit("RebalanceRecommended", f"nodeclaim/{r.get('nodeClaim')}",
                      "recorded; replaced ahead (the NodePool opts in)" if r.get("replace") else
                      "recorded, not replaced (see InterruptionIgnored)" if r.get("optedIn") else
                      "recorded (the NodePool does not opt in)", replace=bool(r.get("replace")))
        for x in report.ignored:
            self.emit("InterruptionIgnored", f"instance/{x.get('instanceId')}", x.get("reason", ""))
        for e in report.errors:
            self.emit("InterruptionError", f"instance/{e.get('instanceId')}", str(e.get("error")))

    def _on_offpeak(self, report) -> None:
        for name in report.started:
            self.emit("OffPeakStarted", f"offpeakschedule/{name}", "window started: workloads scaled down, "
                      "NodePool overrides applied", schedule=name)
        for s in report.scaled:
            kind, _, rest = s["object"].partition("/")
            self.emit("WorkloadScaled", f"{kind.lower()}/{rest}",
                      f"{s['action']}: {s['from']} -> {s['to']} replicas ({', '.join(s['holders']) or 'restored'})",
                      **{"from": s["from"], "to": s["to"], "action": s["action"], "holders": s["holders"]})
        for n in report.nodepools:
            self.emit("NodePoolOverridden" if n["action"] != "restore" else "NodePoolRestored", f"nodepool/{n['name']}",
                      f"{n['action']}: {json.dumps(n['to'], sort_keys=True)}", action=n["action"])
        for name in report.drained:
            self.emit("NodeClaimDrained", f"nodeclaim/{name}", "off-peak: the NodePool is held at zero")
            nc = self.store.get("NodeClaim", name)
            if nc is not None:   # a disruption as any other: its one NodeClaimDisrupted (docs/simulator.md)
                labels = nc.labels
                self._emit_disrupted(name, f"OffPeakDrain: {labels.get('node.kubernetes.io/instance-type')} "
                                           f"{labels.get('karpenter.sh/capacity-type')} in "
                                           f"{labels.get('topology.kubernetes.io/zone')} (off-peak window)",
                                     reason="OffPeakDrain", nodePool=labels.get("karpenter.sh/nodepool"),
                                     instanceType=labels.get("node.kubernetes.io/instance-type"),
                                     zone=labels.get("topology.kubernetes.io/zone"),
                                     capacityType=labels.get("karpenter.sh/capacity-type"), replacements=[],
                                     savingsPerHour=0.0)
        if report.handed_off:
            self.emit("PodsHandedOff", "offpeak", f"{report.handed_off} pending pods sent to the pod queue "
                      "(the watcher may have been on a drained node)", pods=report.handed_off)
        for name in report.ended:
            self.emit("OffPeakEnded", f"offpeakschedule/{name}", "window ended: workloads and NodePools restored",
                      schedule=name)
        for f in report.failed:
            self.emit("OffPeakFailed", f["object"], f"{f['action']}: {f['error']}")

    def _on_disruption(self, report) -> None:
        for p in report.proposed:
            self._disruption_reasons[p["nodeClaim"]] = p["reason"]
        for f in report.failed:   # a command abandoned with part of its replacements launched (e.g. an expiration,
            # never proposed): they are announced with the reason they were launched for, then deleted
            self._disruption_reasons.setdefault(f["nodeClaim"], f["reason"])
        for r in report.replacing:
            lead = r["nodeClaim"]
            reason = r.get("reason") or self._disruption_reasons.get(lead) or next(
                (self._disruption_reasons[n] for n in r.get("nodeClaims") or [] if n in self._disruption_reasons), None)
            for name in r["replacements"]:
                self._announce_launch(name, list(r.get("nodeClaims") or [lead]), reason)
        for d in report.disrupted:
            for name in d["replacements"]:   # launched by an earlier sweep: announced then (or now, if it was missed)
                self._announce_launch(name, [d["nodeClaim"]], d["reason"])
            keys = ("reason", "nodePool", "instanceType", "zone", "capacityType", "replacements", "savingsPerHour")
            reps = f"; replaced by {', '.join(d['replacements'])}" if d["replacements"] else ""
            self._emit_disrupted(d["nodeClaim"], f"{d['reason']}: {d['instanceType']} {d['capacityType']} in {d['zone']}"
                                 f"{' (' + d['detail'] + ')' if d.get('detail') else ''}{reps}", **{k: d[k] for k in keys})
        for b in report.blocked:
            self.emit("DisruptionBlocked", f"nodeclaim/{b['nodeClaim']}", f"{b['reason']}: {b['message']}",
                      reason=b["cause"], disruption=b["reason"])
            if b["cause"] == "budget" and b["nodeClaim"] not in self._disrupted:
                self._budget_blocked[b["nodeClaim"]] = {"reason": b["reason"], "at": None}
        for f in report.failed:
            self.emit("DisruptionFailed", f"nodeclaim/{f['nodeClaim']}", f"{f['reason']}: {f['why']}", reason=f["reason"])
        for c in report.cancelled:
            self.emit("DisruptionCancelled", f"nodeclaim/{c['nodeClaim']}", f"{c['reason']}: {c['why']}", reason=c["reason"])
        if report.proposed or report.replacing:
            self.last_change = self.clock.elapsed
