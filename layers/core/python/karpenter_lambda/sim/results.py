"""The result of a simulation, the ``simulate --json`` document: NodeClaims, pending pods and why, events, the cost
timeline, workloads' replica history and the off-peak savings."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..api.kube import pod_key, scheduling_gates
from ..api.labels import NOMINATED_PODS_ANNOTATION, PRICE_ANNOTATION
from ..controllers.runtime import iso
from . import cost_meter
from .offpeak import offpeak_summary


@dataclass
class SimEvent:
    time: float        # virtual seconds since the start
    type: str
    object: str
    message: str
    extra: dict = field(default_factory=dict)   # event-specific keys (NodeClaimDisrupted: reason, nodePool, ...)

    def to_dict(self) -> dict:
        return {"time": round(self.time, 3), "type": self.type, "object": self.object, "message": self.message,
                **self.extra}


@dataclass
class SimulationResult:
    nodeclaims: list[dict] = field(default_factory=list)
    unschedulable: list[dict] = field(default_factory=list)
    events: list[SimEvent] = field(default_factory=list)
    cost_per_hour: float = 0.0
    elapsed: float = 0.0          # virtual seconds simulated
    wall_seconds: float = 0.0
    pods_total: int = 0
    pods_bound: int = 0
    stopped_because: str = ""
    cost_timeline: list[dict] = field(default_factory=list)   # [{time, costPerHour, nodes}] each time NodeClaims change
    workloads: list[dict] = field(default_factory=list)       # [{kind, namespace, name, replicas, history}] at the end
    start_time: str = ""                                      # the virtual clock's start (RFC 3339)
    offpeak: list[dict] = field(default_factory=list)         # per simulated off-peak window: costs and savings
    control_plane_cost: dict | None = None                    # what the functions cost to run (sim/cost.py)
    gated: list[dict] = field(default_factory=list)           # [{pod, gates}]: held back by scheduling gates

    def to_dict(self) -> dict:
        return {
            "nodeClaims": self.nodeclaims,
            "unschedulable": self.unschedulable,
            "costPerHour": round(self.cost_per_hour, 6),
            "events": [e.to_dict() for e in self.events],
            "simulatedSeconds": round(self.elapsed, 3),
            "pods": {"total": self.pods_total, "bound": self.pods_bound},
            "stoppedBecause": self.stopped_because,
            "costTimeline": self.cost_timeline,
            "workloads": self.workloads,
            "startTime": self.start_time,
            "offpeak": self.offpeak,
            **({"controlPlaneCost": self.control_plane_cost} if self.control_plane_cost is not None else {}),
            "gated": self.gated,
        }


class ResultsMixin:
    """The :class:`~.simulator.Simulation`'s bookkeeping for its result."""

    def _track_cost(self) -> None:
        """One costTimeline entry each time the set of NodeClaims changes (read again only after a DynamoDB write)."""
        writes = cost_meter.dynamodb_writes()
        if writes is not None and writes == getattr(self, "_cost_writes", None):
            return   # nothing was written since the last look: the same NodeClaims
        self._cost_writes = writes
        listed = self.store.list("NodeClaim")
        self._announce_unreported_launches(listed)
        claims = {nc.name: float(nc.annotations.get(PRICE_ANNOTATION) or 0.0) for nc in listed}
        if getattr(self, "_cost_names", None) == set(claims):
            return
        self._cost_names = set(claims)
        self.cost_timeline.append({"time": round(self.clock.elapsed, 3), "costPerHour": round(sum(claims.values()), 6),
                                   "nodes": len(claims)})

    def _track_replicas(self) -> None:
        if not getattr(self, "_cost_attached", False):
            # the first kube-scheduler pass of the loop: the functions are loaded, none has run yet
            self._cost_attached = True
            cost_meter.attach(self)
        for w in self.workload_controller.replicas():
            key = (w["kind"], w["namespace"], w["name"])
            hist = self.replica_history.setdefault(key, [])
            if not hist or hist[-1]["replicas"] != w["replicas"]:
                hist.append({"time": round(self.clock.elapsed, 3), "replicas": w["replicas"]})

    def _result(self, reason: str) -> SimulationResult:
        pods = self.server.store.list("pods")
        by_node: dict[str, list[str]] = {}
        pending = []
        gated = []   # not unschedulable: waiting, by design, for their scheduling gates to be removed
        for p in pods:
            key = pod_key(p)
            nn = (p.get("spec") or {}).get("nodeName")
            if nn:
                by_node.setdefault(nn, []).append(key)
            elif scheduling_gates(p):
                gated.append({"pod": key, "gates": scheduling_gates(p)})
            else:
                pending.append(key)
        claims = []
        cost = 0.0
        for nc in sorted(self.store.list("NodeClaim"), key=lambda n: n.name):
            price = float(nc.annotations.get(PRICE_ANNOTATION) or 0.0)
            cost += price
            node = nc.status.get("nodeName")
            nominated = json.loads(nc.annotations.get(NOMINATED_PODS_ANNOTATION) or "[]")
            claims.append({
                "name": nc.name,
                "nodePool": nc.labels.get("karpenter.sh/nodepool", ""),
                "instanceType": nc.labels.get("node.kubernetes.io/instance-type", ""),
                "zone": nc.labels.get("topology.kubernetes.io/zone", ""),
                "capacityType": nc.labels.get("karpenter.sh/capacity-type", ""),
                "pricePerHour": round(price, 6),
                "nodeName": node,
                "pods": sorted(by_node.get(node, [])) if node else sorted(nominated),
                "providerID": nc.status.get("providerID"),
                "ready": nc.is_true("Initialized"),
            })
        nominated_to = {}
        for nc in self.store.list("NodeClaim"):
            for k in json.loads(nc.annotations.get(NOMINATED_PODS_ANNOTATION) or "[]"):
                nominated_to[k] = nc.name
        sched_msg = {}
        for p in pods:
            for c in (p.get("status") or {}).get("conditions") or []:
                if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("message"):
                    sched_msg[pod_key(p)] = c["message"]

        def pending_reason(k: str) -> str:
            if k in self.reasons:
                return self.reasons[k]
            msg = sched_msg.get(k)
            if k in nominated_to:
                return f"nominated to NodeClaim {nominated_to[k]}, not bound yet" + (f" (kube-scheduler: {msg})" if msg else "")
            if msg:
                return f"kube-scheduler: {msg}"
            return "pending: no provisioning decision yet"

        unsched = [{"pod": k, "reason": pending_reason(k)} for k in sorted(pending)]
        bound = sum(len(v) for v in by_node.values())
        meter = getattr(self, "cost_meter", None)
        control_plane = None
        if meter is not None:
            meter.detach()
            control_plane = meter.report(self.clock.elapsed)
        self.emit("Done", "simulation", f"{reason}: {bound}/{len(pods)} pods bound, {len(claims)} NodeClaims, ${cost:.4f}/h")
        return SimulationResult(nodeclaims=claims, unschedulable=unsched, events=list(self.events), cost_per_hour=cost,
                                elapsed=self.clock.elapsed, pods_total=len(pods), pods_bound=bound, stopped_because=reason,
                                cost_timeline=list(self.cost_timeline), workloads=self._workloads_result(),
                                start_time=iso(self.clock.start), offpeak=self._offpeak_result(),
                                control_plane_cost=control_plane, gated=sorted(gated, key=lambda g: g["pod"]))

    def _workloads_result(self) -> list[dict]:
        self._track_replicas()
        return [{**w, "history": self.replica_history.get((w["kind"], w["namespace"], w["name"]), [])}
                for w in self.workload_controller.replicas()]

    def _offpeak_result(self) -> list[dict]:
        return offpeak_summary(self.offpeak_edges, self.cost_timeline, self.clock.elapsed)
