"""The event loop on virtual time: the kube-scheduler pass, SQS batches, timers (joins, Ready, Scenario steps,
window edges) and the scheduled functions, with quiet stretches skipped; the KWOK-like nodes joining."""

from __future__ import annotations

import heapq
import json

import boto3
import yaml

from ..api.durations import format_duration
from ..api.manifests import load_text
from ..api.scenario import parse_duration as step_duration
from ..api.kube import pod_key
from ..api.text import plural
from ..api.updates import nodepool_update_errors
from ..api.workloads import WORKLOAD_KINDS, expand
from ..controllers.runtime import parse_iso
from . import capacity, kubelet, kubescheduler, moto_ec2, storage, taint_eviction
from . import nodes as simnodes
from .nodes import NOT_READY_TAINT, UNREACHABLE_TAINT
from .clock import format_elapsed
from .environment import SimulationError
from .timers import DUE_KINDS, duration_seconds

UNREGISTERED = simnodes.UNREGISTERED_TAINT   # kubelet registers with it (userData)
BATCH_IDLE = 1.0
BATCH_MAX = 10.0


class LoopMixin:
    """The :class:`~.simulator.Simulation`'s loop and timers."""

    def _schedule(self, at: float, kind: str, data: dict) -> None:
        self._seq += 1
        heapq.heappush(self._timers, (at, self._seq, kind, data))

    def _loop(self) -> str:
        sqs = boto3.client("sqs", region_name=self.region)
        ec2 = boto3.client("ec2", region_name=self.region)
        batch: list[dict] = []
        batch_first = batch_last = None
        next_run = {name: interval for name, _mod, interval in self.scheduled}
        # launched before the run: not its launches (a manual NodeClaim of the input, launched by the sweep, is)
        self._launched |= {nc.name for nc in self.store.list("NodeClaim") if nc.status.get("providerID")}
        while True:
            self._kube_scheduler_pass()
            self._wait_watcher()
            got = self._receive(sqs)
            if got:
                now = self.clock.elapsed
                batch.extend(got)
                batch_first = now if batch_first is None else batch_first
                batch_last = now
            self._discover_instances()
            # what happens next, in virtual time (no scheduled function at all: a tick per lifecycle interval)
            next_sweep = min(next_run.values(), default=self.clock.elapsed + self.lifecycle_interval)
            candidates = [next_sweep]
            if batch:
                candidates.append(min(batch_last + BATCH_IDLE, batch_first + BATCH_MAX))
            if self._timers:
                candidates.append(self._timers[0][0])
            t_next = min(candidates)
            if self.until is not None and t_next > self.until:
                self.clock.advance_to(self.clock.start + self.until)
                return f"reached --until {format_elapsed(self.until)}"
            due = self._last_due
            if self._timers and self._is_due(self._timers[0]) and self._timers[0][0] <= t_next:
                due = max(due, self._timers[0][0])       # a timer due now: what it changes is no runaway
            if self.until is None and t_next > due + self.max_time:
                return (f"stopped at the {format_elapsed(self.max_time)} safety limit (no timer due since "
                        f"+{format_elapsed(self._last_due)})")
            quiet = self.clock.elapsed - self.last_change
            if not batch and t_next == next_sweep and quiet >= self.lifecycle_interval:
                if self._add_wakeups():   # timers that will still change something (budget / off-peak windows)
                    continue
                if not self._timers and self.until is None and not self._deletions_under_way():
                    return "nothing changed for a full lifecycle interval"
                idle = self._idle_skip()
                jump = self._skip_target() if quiet >= idle else None
                if jump is not None and jump - self.clock.elapsed > idle:
                    # quiet: nothing to do until the next timer (or --until); the sweeps resume then
                    self.progress(f"quiet since {format_elapsed(self.last_change)}: skipping to {format_elapsed(jump)}")
                    for name in next_run:
                        next_run[name] = max(next_run[name], jump)
                    self.clock.advance_to(self.clock.start + jump)
                    continue
            self.clock.advance_to(self.clock.start + t_next)
            if batch and t_next >= min(batch_last + BATCH_IDLE, batch_first + BATCH_MAX):
                self._invoke_provisioner(sqs, batch)
                batch, batch_first, batch_last = [], None, None
                continue
            if self._timers and self._timers[0][0] <= t_next:
                while self._timers and self._timers[0][0] <= self.clock.elapsed:
                    _, _, kind, data = heapq.heappop(self._timers)
                    self._fire(kind, data)
                continue
            ran = False
            for name, mod, interval in self.scheduled:
                if next_run[name] <= t_next:
                    if ran:   # the kube-scheduler acts within milliseconds, between two functions too
                        self._kube_scheduler_pass()
                    self._invoke_scheduled(name, mod)
                    next_run[name] += interval
                    ran = True

    def _deletions_under_way(self) -> bool:
        """A NodeClaim marked deleting is still there: its deletion finishes at the next lifecycle sweep (an empty
        node removed in the sweep after the last one), so the run does not end between the two.  (A drain that
        stays blocked keeps the run going by itself: the lifecycle reports it draining.)"""
        return any(nc.metadata.get("deletionTimestamp") for nc in self.store.list("NodeClaim"))

    def _kube_scheduler_pass(self) -> None:
        self._collect_orphan_pods()
        self._track_displaced()
        self._track_replicas()
        volumes = storage.bound_claims(self.server.store)
        changed = self.workload_controller.reconcile()
        if changed:
            self.emit("WorkloadsReconciled", "workloads", f"{plural(changed, 'pod')} created or deleted to match the replicas")

        before = {p["metadata"]["uid"]: p for p in self.server.store.list("pods", shared=True)}
        kubescheduler.schedule_pending(self.server, default_spread=getattr(self, "default_spread", ()))
        self._volume_events(volumes)
        after = self.server.store.list("pods", shared=True)
        for p in after:
            uid = p["metadata"]["uid"]
            key = pod_key(p)
            old = before.get(uid) or {}
            node = (p.get("spec") or {}).get("nodeName")
            if node and not (old.get("spec") or {}).get("nodeName"):
                self.emit("PodBound", f"pod/{key}", f"bound to {node}")
            elif not node and _unschedulable(p) and not _unschedulable(old):
                self.emit("PodPending", f"pod/{key}", "Unschedulable: no node fits; the watcher forwards it")
        self._track_displaced()

    def _volume_events(self, before: dict) -> None:
        """A ``VolumeBound`` event per claim bound since ``before`` (``storage.bound_claims``)."""
        for (ns, name), (pv, zone, driver) in sorted(storage.bound_claims(self.server.store).items()):
            if before.get((ns, name), (None,))[0] != pv:
                self.emit("VolumeBound", f"pvc/{ns}/{name}", f"bound to PV {pv}" + (f" in {zone}" if zone else "")
                          + (f", provisioned by {driver}" if driver else ""), volume=pv, zone=zone)

    @staticmethod
    def _is_due(timer) -> bool:
        """A timer from the input (a step, an off-peak edge known from the start, a budget edge): the safety limit
        counts from the last one. Window edges found while running (:meth:`_add_wakeups`) do not move it, so
        back-to-back windows cannot keep a run going for ever."""
        return timer[2] in DUE_KINDS and timer[3].get("due", True)

    def _idle_skip(self) -> float:
        """Quiet this long => no consolidation can still be waiting: the longest consolidateAfter (the off-peak
        overrides' too) plus two disruption sweeps (propose, then act after the 15 s validation) and a lifecycle
        interval; at least 5 minutes."""
        waits = [duration_seconds((np.spec.get("disruption") or {}).get("consolidateAfter")) for np in self.store.list("NodePool")]
        waits += [duration_seconds((o.disruption or {}).get("consolidateAfter")) for s in self.offpeak_schedules for o in s.nodepools]
        longest = max([w for w in waits if w is not None] + [0.0])
        sweeps = max([i for n, _m, i in self.scheduled if n in ("consolidation", "drift")] + [60.0])
        self.idle_skip = max(300.0, longest + 2 * sweeps + self.lifecycle_interval)
        return self.idle_skip

    def _skip_target(self) -> float | None:
        """Where a quiet stretch may jump to: the next timer (or --until), earlier when a NodeClaim expires before it
        (``expireAfter`` must act on time, so the sweeps run again a lifecycle interval before the expiry)."""
        targets = ([self._timers[0][0]] if self._timers else []) + ([self.until] if self.until is not None else [])
        if not targets:
            return None
        target = min(targets)
        expire = {np.name: duration_seconds(np.expire_after) for np in self.store.list("NodePool")}
        for nc in self.store.list("NodeClaim"):
            ttl = expire.get(nc.labels.get("karpenter.sh/nodepool", ""))
            born = parse_iso(nc.metadata.get("creationTimestamp"))
            if ttl is None or born is None:
                continue
            expiry = born + ttl - self.clock.start
            if expiry + 2 * self.lifecycle_interval > self.clock.elapsed:     # not yet acted on
                target = min(target, max(self.clock.elapsed, expiry - self.lifecycle_interval))
        return target

    def _discover_instances(self) -> None:
        # what runs (the world's truth), visible to the controllers yet or not
        running = moto_ec2.instance_launches(self.region, {f"tag:kubernetes.io/cluster/{self.cluster}": ["owned"],
                                                           "instance-state-name": ["pending", "running"]})
        for iid, launch_time in running:
            if iid in self._joined:
                continue
            self._joined.add(iid)
            launched = launch_time - self.clock.start
            self._schedule(max(launched, self.clock.elapsed) + self.join_delay, "join", {"instance": {"InstanceId": iid}})

    def _fire(self, kind: str, data: dict) -> None:
        if self._is_due((None, None, kind, data)):
            self._last_due = max(self._last_due, self.clock.elapsed)
        if kind == "step":
            self._step(data["step"])
        elif kind == "budget":
            self._budget_changed(data)
        elif kind == "join":
            self._join(data["instance"])
        elif kind == "reclaim":
            self._reclaim(data["instance"])
        elif kind == "offpeak":
            self.emit("OffPeakInvoked", f"offpeakschedule/{data['schedule']}",
                      f"EventBridge Scheduler: window {data['edge']}", edge=data["edge"])
            self._invoke_scheduled("offpeak", self.offpeak)
        elif kind == "heal":
            if self.server.store.get("nodes", data["node"]) is not None:
                simnodes.set_node_condition(self.server, data["node"], data["condition"], "True", "Recovered")
                self.emit("NodeHealthy", f"node/{data['node']}", f"{data['condition']}=True again",
                          condition=data["condition"])
        elif kind in ("repair", "consolidatable", "do-not-disrupt"):
            # a toleration, a consolidateAfter or a pod's do-not-disrupt time limit has ended: the sweeps run now,
            # a lifecycle interval at least
            self.last_change = self.clock.elapsed
        elif kind == "noexecute":
            self._taint_evictions(data)
        elif kind == "ready":
            name = data["node"]
            if self.server.store.get("nodes", name) is None:
                return
            simnodes.set_node_ready(self.server, name, True)
            if data.get("startup_taints"):
                simnodes.remove_startup_taints(self.server, name, data["startup_taints"])
            self.emit("NodeReady", f"node/{name}", "kubelet Ready" + (", startup taints removed" if data.get("startup_taints") else ""))

    def _step(self, step) -> None:
        """A Scenario step on the virtual clock (api/scenario.py lists the actions)."""
        a = step.args
        self.emit("ScenarioStep", f"step/{step.index}", step.describe())
        try:
            if step.action == "scale":
                self.workload_controller.scale(a["kind"], a.get("namespace") or "default", a["name"], a["replicas"])
            elif step.action == "delete":
                if a["kind"] in ("NodePool", "EC2NodeClass"):
                    if not self.store.delete(a["kind"], a["name"]):
                        raise KeyError(f"{a['kind']} {a['name']} does not exist")
                else:
                    self.workload_controller.delete(a["kind"], a.get("namespace") or "default", a["name"])
            elif step.action == "apply":
                self._apply(a)
            elif step.action == "releaseAMI":
                release = self.account.release_ami(a["family"])
                self.emit("AMIReleased", f"ami/{a['family']}", f"{a['family']}@latest now resolves to release {release}")
            elif step.action == "interrupt":
                self._interrupt(a)
            elif step.action == "nodeUnhealthy":
                self._node_unhealthy(a)
            elif step.action == "capacity":
                self._capacity(a)
        except KeyError as e:
            raise SimulationError(f"Scenario step {step.index} ({step.describe()}): {e.args[0]}") from None
        changed = self.workload_controller.reconcile()
        if changed:
            self.emit("WorkloadsReconciled", "workloads", f"{plural(changed, 'pod')} created or deleted to match the replicas")

    def _capacity(self, a: dict) -> None:
        """A Scenario ``capacity`` step: EC2's capacity rule (sim/capacity.py); each CreateFleet it shapes from now on
        is an ``InsufficientCapacity`` event."""
        rule, message = capacity.apply_step(self.region, a)
        extra = {"capacityType": rule.capacity_type, "available": rule.available}
        extra.update({k: list(a[k]) for k in ("instanceTypes", "zones") if a.get(k)})
        self.emit("CapacityChanged", f"capacity/{rule.capacity_type}", message, **extra)

        def told(answer: dict) -> None:
            launched = list(answer["launched"]) if answer["launched"] else None
            self.emit("InsufficientCapacity", f"nodeclaim/{answer['nodeClaim'] or '?'}", capacity.describe_answer(answer),
                      capacityType=answer["capacityType"], offerings=len(answer["errors"]), launched=launched)

        capacity.set_hook(self.region, told)

    def _node_unhealthy(self, a: dict) -> None:
        """A Scenario ``nodeUnhealthy`` step: the condition set on the chosen nodes (and set back after ``duration``)."""
        if a.get("node"):
            if self.server.store.get("nodes", a["node"]) is None:   # gone, or never there: nothing to act on
                self.emit("NodeUnhealthySkipped", f"node/{a['node']}", f"no node {a['node']} in the cluster now")
                return
            names = [a["node"]]
        else:
            claims = sorted((nc for nc in self.store.list("NodeClaim")
                             if nc.labels.get("karpenter.sh/nodepool") == a["nodePool"] and nc.status.get("nodeName")
                             and not nc.metadata.get("deletionTimestamp")),
                            key=lambda nc: (nc.metadata.get("creationTimestamp") or "", nc.name))
            names = [nc.status["nodeName"] for nc in claims
                     if self.server.store.get("nodes", nc.status["nodeName"]) is not None][: a.get("count", 1)]
            if not names:   # as an ``interrupt`` step with nothing to hit: told, and the run goes on
                self.emit("NodeUnhealthySkipped", f"nodepool/{a['nodePool']}",
                          f"NodePool {a['nodePool']} has no registered node")
                return
        cond, status = a.get("condition", "Ready"), a.get("status", "False")
        for name in names:
            simnodes.set_node_condition(self.server, name, cond, status, "KubeletNotReady" if cond == "Ready" else "Simulated",
                                        "set by the Scenario")
            self.emit("NodeUnhealthy", f"node/{name}", f"{cond}={status}", condition=cond, status=status)
            if cond == "Ready" and status != "True":
                key = NOT_READY_TAINT["key"] if status == "False" else UNREACHABLE_TAINT["key"]
                self._schedule(self.clock.elapsed + taint_eviction.DEFAULT_TOLERATION_SECONDS, "noexecute",
                               {"node": name, "taint": {"key": key, "effect": "NoExecute"}, "since": self.clock.elapsed})
            if a.get("duration") is not None:
                self._schedule(self.clock.elapsed + step_duration(a["duration"]), "heal", {"node": name, "condition": cond})

    def _taint_evictions(self, data: dict) -> None:
        """The node controller's taint-based eviction (:mod:`.taint_eviction`): the pods of a node still not Ready
        whose toleration of its NoExecute taint is up are deleted; their workloads make new pending pods."""
        name, taint, since = data["node"], data["taint"], data["since"]
        node = self.server.store.get("nodes", name)
        if node is None or not any(t.get("key") == taint["key"] and t.get("effect") == "NoExecute"
                                   for t in (node.get("spec") or {}).get("taints") or ()):
            return   # gone, or Ready again
        pods = [p for p in self.server.store.list("pods", shared=True) if (p.get("spec") or {}).get("nodeName") == name]
        waited = self.clock.elapsed - since
        now, later = taint_eviction.due(pods, taint, waited)
        for p in now:
            meta = p["metadata"]
            self.server.store.delete("pods", meta["name"], meta.get("namespace") or "default")
            self.emit("PodEvicted", f"pod/{meta.get('namespace') or 'default'}/{meta['name']}",
                      f"deleted from node {name} by the node controller: {taint['key']}:NoExecute for "
                      f"{format_duration(int(waited))} (its toleration's time is up)", node=name, how="taint")
        if later is not None:
            self._schedule(since + later, "noexecute", data)
        if now:
            changed = self.workload_controller.reconcile()
            if changed:
                self.emit("WorkloadsReconciled", "workloads", f"{plural(changed, 'pod')} created or deleted to match the replicas")
            self.last_change = self.clock.elapsed

    def _collect_orphan_pods(self) -> None:
        """Kubernetes' pod garbage collector: pods bound to a Node that no longer exists are deleted."""
        names = {n["metadata"]["name"] for n in self.server.store.list("nodes", shared=True)}
        for p in self.server.store.list("pods", shared=True):
            node = (p.get("spec") or {}).get("nodeName")
            if node and node not in names:
                self.server.store.delete("pods", p["metadata"]["name"], p["metadata"].get("namespace") or "default")

    def _apply(self, doc: dict) -> None:
        res = load_text(yaml.safe_dump(doc), "<scenario apply>", allow_other_kinds=True)
        if res.issues:
            raise SimulationError("Scenario apply: " + "; ".join(str(i) for i in res.issues))
        for obj in res.objects:
            if obj.kind == "NodePool":
                current = self.store.get("NodePool", obj.name)
                problems = nodepool_update_errors(current.doc, obj.doc) if current is not None else []
                if problems:   # (validate and the run's pre-check refuse it first: api/crosscheck.py)
                    raise SimulationError(f"Scenario apply: NodePool/{obj.name}: {problems[0].message}")
                self.store.apply(obj)
            elif obj.kind in ("EC2NodeClass", "NodeOverlay"):
                self.store.apply(obj)
            elif obj.kind in WORKLOAD_KINDS and obj.kind != "DaemonSet":
                old = self.workload_controller.get(obj.kind, obj.metadata.get("namespace") or "default", obj.name)
                self.workload_controller.add(obj.doc)
                if old is None and obj.kind in ("Pod", "Job", "CronJob"):
                    for pod in expand(obj.doc).pods:
                        self.server.store.create("pods", _strip(pod), pod["metadata"].get("namespace") or "default")
            else:
                raise SimulationError(f"Scenario apply: {obj.kind}/{obj.name}: only NodePool, EC2NodeClass, NodeOverlay and "
                                      f"workloads can be applied")

    def _join(self, inst: dict) -> None:
        """The instance's kubelet registers its Node (:func:`.kubelet.register`: capacity from the instance type,
        labels, taints and max-pods from its userData; no NodeClaim needed, as on a real node)."""
        iid = inst["InstanceId"]
        cur = moto_ec2.instance_entry(self.region, iid)   # the kubelet runs on the instance: no DescribeInstances
        if cur is None or cur["State"]["Name"] not in ("pending", "running"):
            return
        if self._ec2 is None:
            self._ec2 = boto3.client("ec2", region_name=self.region)
        node, boot = kubelet.register(self.server, self.store, self.region, cur, self._ec2, now=self.clock.isoformat())
        name = node["metadata"]["name"]
        self.emit("NodeJoined", f"node/{name}", f"{cur['InstanceType']} {iid} joined (not Ready yet)")
        self._schedule(self.clock.elapsed + self.ready_delay, "ready", {"node": name, "startup_taints": boot.startup_taints})


def _strip(obj: dict) -> dict:
    d = json.loads(json.dumps(obj))
    d.pop("status", None)
    meta = d.setdefault("metadata", {})
    for k in ("resourceVersion", "creationTimestamp"):
        meta.pop(k, None)
    return d


def _unschedulable(pod: dict) -> bool:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return c.get("status") == "False" and c.get("reason") == "Unschedulable"
    return False
