"""The embedded environment: the REAL handlers on moto + a local Kubernetes API, on a virtual clock.

``Simulation(files, until=None).run() -> SimulationResult``

Set-up (inside ``moto.mock_aws``): the manifests are loaded and validated; NodePools and EC2NodeClasses go
to the DynamoDB store, workloads are expanded into pods (DaemonSets kept as DaemonSets) and created in the
local Kubernetes API (:mod:`.kubeapi`); the account is seeded (:mod:`.aws`: VPC/subnets/security groups
matching the EC2NodeClasses, node role, EKS AMIs + SSM alias parameters, an EKS cluster whose endpoint is
the local API, tables, pod queue); the real watcher (``watcher/karpenter_lambda_watcher``) runs in a
thread against the local API and sends to the SQS queue.

Loop, on virtual time (:class:`.clock.VirtualClock`; the controllers read it through
``controllers.runtime.set_clock``):

1. the simulated kube-scheduler (:mod:`.kubescheduler`) binds pending pods where they fit and marks the
   others ``PodScheduled=False/Unschedulable`` -- which the watcher forwards to SQS (real time, waited for);
2. SQS messages are received into a batch that closes after 1 s idle or 10 s (virtual) -- Karpenter's
   batching window -- and the provisioner handler (``functions/provisioner/handler.py``, imported by path)
   is invoked with a real SQS event; failed records are redelivered, after 5 receives dead-lettered;
3. instances launched in moto join as Nodes ``join_delay`` virtual seconds after launch (KWOK-like:
   :mod:`.nodes`, labels and taints from the NodeClaim as the kubelet's userData flags would give) and turn
   Ready ``ready_delay`` seconds later (startup taints removed, as an agent would);
4. every scheduled function of ``functions/registry.json`` (the registry the CDK stack deploys: the lifecycle sweep,
   later the disruption sweeps) runs on its schedule in virtual time (:mod:`.functions`); the lifecycle interval
   can be overridden (``lifecycle_interval``).

It stops at exactly ``until`` virtual seconds when given (always); otherwise when nothing changed for a full
lifecycle interval and no timer is left -- a disruption blocked by a budget window waits for the window edge that
lets it go, an off-peak window holding the time for its end (:meth:`Simulation._add_wakeups`) -- or at the safety
limit, ``max_time`` after the last timer from the input that was due.  Quiet stretches jump to the next timer
(:meth:`Simulation._skip_target`).  Every launch is a ``NodeClaimLaunched`` event (replacements with ``replaces``
and ``reason``), every disruption one ``NodeClaimDisrupted`` per NodeClaim.  See docs/simulator.md.
"""

from __future__ import annotations

import contextlib
import heapq
import importlib.util
import io
import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..api.text import plural
from .clock import VirtualClock, format_elapsed

UNREGISTERED = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}  # kubelet registers with it (userData)
BATCH_IDLE = 1.0
BATCH_MAX = 10.0
MAX_RECEIVES = 5
SPOT_WARNING_SECONDS = 120.0   # EC2 reclaims a spot instance two minutes after the interruption warning
# the safety limit of a run without --until: it stops this long (virtual) after the last timer that was due (the
# start, a Scenario step, an off-peak window edge, a budget window edge), whatever keeps happening
DEFAULT_MAX_TIME = 6 * 3600.0
DUE_KINDS = ("step", "offpeak", "budget")   # timers from the input (not consequences of the run: joins, Ready, ...)
BUDGET_LOOKAHEAD = 7 * 86400.0   # how far ahead a budget window edge may free a blocked disruption (one weekly cron)
# other kinds the simulated API server keeps (PodDisruptionBudgets are honoured by its eviction API)
STORED_KINDS = {"PodDisruptionBudget": "poddisruptionbudgets"}


class SimulationError(Exception):
    """Bad input or a broken environment: the message says what to fix."""


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
        }


def repo_root() -> Path:
    """The checkout holding ``functions/`` (the package lives at layers/core/python/karpenter_lambda)."""
    env = os.environ.get("KARPENTER_LAMBDA_REPO")
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "functions" / "provisioner" / "handler.py").exists():
            return parent
    return here.parents[4]


def load_module(path: Path, name: str):
    if not path.exists():
        raise SimulationError(f"cannot find {path}: run from a checkout of karpenter-lambda (or set KARPENTER_LAMBDA_REPO)")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class _LambdaContext:
    def __init__(self, name: str):
        self.function_name = name
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:{name}"
        self.memory_limit_in_mb = 512
        self.aws_request_id = "sim"
        self.log_group_name = f"/aws/lambda/{name}"
        self.log_stream_name = "sim"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


class Simulation:
    def __init__(self, files, until: float | None = None, *, cluster: str = "sim-cluster", region: str = "us-east-1",
                 k8s_version: str = "1.31", join_delay: float = 30.0, ready_delay: float = 15.0,
                 lifecycle_interval: float = 60.0, max_time: float = DEFAULT_MAX_TIME,
                 progress: Callable[[str], None] | None = None, on_event: Callable[[SimEvent], None] | None = None,
                 setup_hook: Callable[["Simulation"], None] | None = None, handler_logs: io.TextIOBase | None = None):
        self.files = [str(f) for f in files]
        self.until = until
        self.cluster = cluster
        self.region = region
        self.k8s_version = k8s_version
        self.join_delay = join_delay
        self.ready_delay = ready_delay
        self.lifecycle_interval = lifecycle_interval
        self.max_time = max_time
        self.progress = progress or (lambda msg: None)
        self.on_event = on_event
        self.setup_hook = setup_hook
        self.handler_logs = handler_logs
        self.clock = VirtualClock()
        self.events: list[SimEvent] = []
        self.last_change = 0.0
        self.reasons: dict[str, str] = {}      # pod key -> last unschedulable reason
        self._timers: list[tuple[float, int, str, dict]] = []
        self._seq = 0
        self._joined: set[str] = set()         # instance ids that have (or will get) a node
        self._receives: dict[str, int] = {}
        self._watched: dict[str, str] = {}            # pod key -> the interrupted node it ran on
        self._displaced: dict[str, float] = {}        # pod key -> since when it has had no node
        self.cost_timeline: list[dict] = []
        self.scenario = None
        self.offpeak_schedules: list = []
        self.offpeak_edges: list = []
        self.replica_history: dict[tuple[str, str, str], list[dict]] = {}
        self.idle_skip = 1800.0     # quiet this long (virtual s) with only a far timer ahead: jump to it (_idle_skip)
        self._last_due = 0.0        # virtual time of the last timer due (step, window edge): the safety limit counts from it
        self._edge_keys: set = set()                  # off-peak (schedule, window start, edge) scheduled
        self._budget_blocked: dict[str, dict] = {}    # NodeClaim -> {reason, at, nodePool}: blocked by a budget
        self._budget_timers: set = set()              # (NodePool, reason, at) scheduled
        self._launched: set[str] = set()              # NodeClaims with their NodeClaimLaunched event
        self._disrupted: set[str] = set()             # NodeClaims with their NodeClaimDisrupted event
        self._disruption_reasons: dict[str, str] = {}  # NodeClaim -> reason of its proposed disruption

    # -- events -------------------------------------------------------------------------------
    def emit(self, type_: str, obj: str, message: str, **extra) -> None:
        ev = SimEvent(self.clock.elapsed, type_, obj, message, dict(extra))
        self.events.append(ev)
        self.last_change = self.clock.elapsed
        if self.on_event:
            self.on_event(ev)

    def _schedule(self, at: float, kind: str, data: dict) -> None:
        self._seq += 1
        heapq.heappush(self._timers, (at, self._seq, kind, data))

    # -- set-up ---------------------------------------------------------------------------------
    def _load(self):
        from ..api.manifests import load_files
        from ..api.scenario import KIND as SCENARIO, ScenarioError, parse_scenario
        from ..api.workloads import WORKLOAD_KINDS, expand_all

        for f in self.files:
            if not Path(f).exists():
                raise SimulationError(f"{f}: no such file")
        res = load_files(self.files, allow_other_kinds=True)
        if res.issues:
            raise SimulationError("invalid manifests:\n" + "\n".join(str(i) for i in res.issues))
        self.scenario = None
        problems = []
        for f in self.files:  # per file, so a Scenario's errors name its file and document
            for i, obj in enumerate(load_files([f], allow_other_kinds=True).objects):
                if obj.kind != SCENARIO:
                    continue
                if self.scenario is not None:
                    problems.append(f"{f}:{i}: Scenario/{obj.name}: only one Scenario document per simulation")
                    continue
                try:
                    self.scenario = parse_scenario(obj.doc, f, i)
                except ScenarioError as e:
                    problems.append(str(e))
        known = set(WORKLOAD_KINDS) | {"NodePool", "EC2NodeClass", "NodeClaim", "OffPeakSchedule", SCENARIO} | set(STORED_KINDS)
        for o in res.objects:
            if o.kind not in known:
                problems.append(f"{o.kind}/{o.name}: simulate does not know the kind {o.kind!r} "
                                f"(known: NodePool, EC2NodeClass, OffPeakSchedule, Scenario, {', '.join(sorted(WORKLOAD_KINDS))}, "
                                f"{', '.join(sorted(STORED_KINDS))})")
        if problems:
            raise SimulationError("invalid input:\n" + "\n".join(problems))
        nodepools = res.of_kind("NodePool")
        nodeclasses = res.of_kind("EC2NodeClass")
        others = [o for o in res.objects if o.kind in WORKLOAD_KINDS]
        self.stored = [o for o in res.objects if o.kind in STORED_KINDS]
        self.offpeak_schedules = res.of_kind("OffPeakSchedule")
        self.workload_docs = [o.doc for o in others]
        wl = expand_all(others)
        if wl.issues:
            raise SimulationError("invalid workloads:\n" + "\n".join(str(i) for i in wl.issues))
        if not nodepools:
            raise SimulationError("no NodePool in the input: add a karpenter.sh/v1 NodePool (see examples/demo/)")
        return nodepools, nodeclasses, wl

    def run(self) -> SimulationResult:
        from moto import mock_aws

        started = time.perf_counter()
        nodepools, nodeclasses, wl = self._load()
        if self.scenario is not None and self.scenario.start_time is not None:
            self.clock = VirtualClock(self.scenario.start_time)
        saved_env = dict(os.environ)
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
        os.environ["AWS_DEFAULT_REGION"] = self.region
        # nothing from the user's shell may point the simulation elsewhere: endpoints (any AWS_ENDPOINT_URL*),
        # profiles, or a deployment's KARPENTER_LAMBDA_* settings (kube endpoint, Kubernetes version, ...)
        for var in list(os.environ):
            if var in ("AWS_PROFILE", "AWS_CONFIG_FILE") or var.startswith("AWS_ENDPOINT_URL") or (
                    var.startswith("KARPENTER_LAMBDA_") and var != "KARPENTER_LAMBDA_REPO"):
                os.environ.pop(var, None)
        stop = threading.Event()
        watcher_thread = None
        server = None
        try:
            with mock_aws(), self._moto_clock():
                from ..controllers import environment, runtime
                from .aws import SimAccount
                from .kubeapi import KubeAPIServer

                server = KubeAPIServer(clock=self.clock, k8s_version=self.k8s_version, uid_seed="karpenter-lambda-simulate")
                url = server.start()
                self.server = server
                self.progress(f"local Kubernetes API at {url}; seeding moto")
                account = SimAccount(self.cluster, self.region, self.k8s_version).create(nodeclasses, url)
                self.account = account
                os.environ.update(account.environment())
                runtime.set_clock(self.clock)
                environment.reset()
                from ..adapters.store import Store

                store = Store(self.cluster, table_name=account.state_table, region=self.region)
                self.store = store
                for obj in list(nodeclasses) + list(nodepools) + list(self.offpeak_schedules):
                    store.put(obj)
                for ds in wl.daemonsets:
                    server.store.create("daemonsets", _strip(ds), (ds.get("metadata") or {}).get("namespace") or "default")
                for pod in wl.pods:
                    server.store.create("pods", _strip(pod), pod["metadata"].get("namespace") or "default")
                for obj in self.stored:
                    server.store.create(STORED_KINDS[obj.kind], _strip(obj.doc), obj.metadata.get("namespace") or "default")
                from .workloads import WorkloadController

                self.workload_controller = WorkloadController(server)
                for doc in self.workload_docs:
                    if doc.get("kind") not in ("DaemonSet", "Pod"):
                        self.workload_controller.add(doc)
                for step in (self.scenario.steps if self.scenario is not None else []):
                    self._schedule(step.at, "step", {"step": step})
                self.pods_total = len(wl.pods)
                self.emit("Applied", "manifests", f"{plural(len(nodepools), 'NodePool')}, {plural(len(nodeclasses), 'EC2NodeClass', 'EC2NodeClasses')}, "
                                                  f"{plural(len(wl.pods), 'pod')}, {plural(len(wl.daemonsets), 'DaemonSet')}")
                if self.setup_hook:
                    self.setup_hook(self)
                root = repo_root()
                self._load_functions(root)
                self._schedule_offpeak()
                runtime.REPORT_HOOKS.append(self._on_report)
                watcher_thread, self.watcher_stats = self._start_watcher(server, account, stop, root)
                try:
                    reason = self._loop()
                finally:
                    runtime.REPORT_HOOKS.remove(self._on_report)
                result = self._result(reason)
                stop.set()
                if watcher_thread is not None:
                    watcher_thread.join(timeout=5)
                result.wall_seconds = time.perf_counter() - started
                return result
        finally:
            stop.set()
            if server is not None:
                server.stop()
            from ..controllers import environment, runtime

            runtime.set_clock(None)
            environment.reset()
            os.environ.clear()
            os.environ.update(saved_env)

    def _load_functions(self, root: Path) -> None:
        """Every function of the registry, on its trigger: the pod queue feeds the provisioner, schedules run sweeps."""
        from .functions import load_functions

        self.scheduled: list[tuple[str, object, float]] = []   # (name, module, interval seconds)
        self.provisioner = None
        self.offpeak = None
        self.interruption = None
        for fn in load_functions(root):
            mod = load_module(fn.handler_path, f"sim_{fn.name}_handler")
            self._capture_logs(mod)
            if fn.queue == "pod":
                self.provisioner = mod
            elif fn.queue == "interruption":
                self.interruption = mod   # fed by Scenario `interrupt` steps (real-shaped EventBridge events)
            elif fn.queue is not None:
                self.progress(f"function {fn.name}: queue {fn.queue!r} has no simulated source yet; not invoked")
            if fn.interval_seconds is not None:
                interval = self.lifecycle_interval if fn.name == "lifecycle" else fn.interval_seconds
                self.scheduled.append((fn.name, mod, interval))
            if fn.name == "lifecycle":
                self.lifecycle = mod
            if fn.name == "offpeak":
                self.offpeak = mod
        if self.provisioner is None:
            raise SimulationError("functions/registry.json: no function reads the pod queue")

    @contextlib.contextmanager
    def _moto_clock(self):
        """moto stamps instance launch times with its own utcnow(): make it virtual."""
        import moto.ec2.models.instances as inst

        original = inst.utcnow
        inst.utcnow = self.clock.utcnow_naive
        try:
            yield
        finally:
            inst.utcnow = original

    def _capture_logs(self, mod) -> None:
        """Powertools loggers hold the stdout of their import time: point them at the log sink."""
        logger = getattr(mod, "logger", None)
        handler = getattr(logger, "registered_handler", None)
        if handler is not None and hasattr(handler, "setStream"):
            handler.setStream(self.handler_logs if self.handler_logs is not None else io.StringIO())

    def _start_watcher(self, server, account, stop, root):
        path = root / "watcher"
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
        from karpenter_lambda_watcher import watcher as w

        import boto3

        stats = w.Stats()
        sqs = boto3.client("sqs", region_name=self.region)
        api = server.api_client()
        t = threading.Thread(target=w.run, name="sim-watcher", daemon=True,
                             args=(api, sqs, account.queue_url, self.cluster, stop),
                             kwargs={"flush_interval": 0.02, "stats": stats, "watch_timeout": 3600})
        t.start()
        stats.wait_for(lambda s: s.lists >= 1, timeout=10)
        return t, stats

    # -- the loop -------------------------------------------------------------------------------
    def _loop(self) -> str:
        import boto3

        sqs = boto3.client("sqs", region_name=self.region)
        ec2 = boto3.client("ec2", region_name=self.region)
        batch: list[dict] = []
        batch_first = batch_last = None
        next_run = {name: interval for name, _mod, interval in self.scheduled}
        self._launched |= {nc.name for nc in self.store.list("NodeClaim")}   # there before the run: not its launches
        while True:
            self._kube_scheduler_pass()
            self._wait_watcher()
            got = self._receive(sqs)
            if got:
                now = self.clock.elapsed
                batch.extend(got)
                batch_first = now if batch_first is None else batch_first
                batch_last = now
            self._discover_instances(ec2)
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
                if not self._timers and self.until is None:
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

    def _kube_scheduler_pass(self) -> None:
        from . import kubescheduler

        self._collect_orphan_pods()
        self._track_displaced()
        self._track_replicas()
        changed = self.workload_controller.reconcile()
        if changed:
            self.emit("WorkloadsReconciled", "workloads", f"{plural(changed, 'pod')} created or deleted to match the replicas")

        before = {p["metadata"]["uid"]: p for p in self.server.store.list("pods")}
        kubescheduler.schedule_pending(self.server)
        after = self.server.store.list("pods")
        for p in after:
            uid = p["metadata"]["uid"]
            key = f"{p['metadata'].get('namespace') or 'default'}/{p['metadata']['name']}"
            old = before.get(uid) or {}
            node = (p.get("spec") or {}).get("nodeName")
            if node and not (old.get("spec") or {}).get("nodeName"):
                self.emit("PodBound", f"pod/{key}", f"bound to {node}")
            elif not node and _unschedulable(p) and not _unschedulable(old):
                self.emit("PodPending", f"pod/{key}", "Unschedulable: no node fits; the watcher forwards it")
        self._track_displaced()

    def _wait_watcher(self, settle: float = 0.08, limit: float = 5.0) -> None:
        """Real time: let the watcher notice pod changes and flush them to SQS."""
        stats = self.watcher_stats
        deadline = time.monotonic() + limit
        last = None
        while time.monotonic() < deadline:
            snap = stats.as_dict()
            if snap == last:
                return
            last = snap
            time.sleep(settle)

    def _receive(self, sqs) -> list[dict]:
        out = []
        while True:
            resp = sqs.receive_message(QueueUrl=self.account.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0,
                                       VisibilityTimeout=3600, AttributeNames=["All"], MessageAttributeNames=["All"])
            msgs = resp.get("Messages", [])
            if not msgs:
                return out
            out.extend(msgs)

    def _invoke_provisioner(self, sqs, batch: list[dict]) -> None:
        records = [_sqs_record(m, self.account.queue_url, self.region) for m in batch]
        self.emit("ProvisionerInvoked", "function/provisioner", f"SQS batch of {len(records)} messages")
        try:
            response = self._call(self.provisioner.handler, {"Records": records}, "provisioner")
        finally:
            self._surface_pod_events()
        failed = {f["itemIdentifier"] for f in (response or {}).get("batchItemFailures", [])}
        for m in batch:
            mid = m["MessageId"]
            if mid in failed:
                n = self._receives[mid] = self._receives.get(mid, 0) + 1
                if n >= MAX_RECEIVES:
                    sqs.delete_message(QueueUrl=self.account.queue_url, ReceiptHandle=m["ReceiptHandle"])
                    sqs.send_message(QueueUrl=self.account.dlq_url, MessageBody=m["Body"])
                    self.emit("MessageDeadLettered", f"message/{mid}", f"failed {n} times: moved to the DLQ")
                else:
                    sqs.change_message_visibility(QueueUrl=self.account.queue_url, ReceiptHandle=m["ReceiptHandle"],
                                                  VisibilityTimeout=0)
                    self.emit("RecordFailed", f"message/{mid}", "reported in batchItemFailures: will be redelivered")
                continue
            sqs.delete_message(QueueUrl=self.account.queue_url, ReceiptHandle=m["ReceiptHandle"])

    def _surface_pod_events(self) -> None:
        """The provisioner's new pod Events in the local API server (``Nominated``, ``FailedScheduling``) as
        ``PodNominated`` / ``PodFailedScheduling``: one line per distinct message, naming its pods (``pods``); a pod's
        outcome repeated by a later round is not repeated."""
        from ..api import events as kev

        seen = self.__dict__.setdefault("_pod_events_seen", set())
        types = {kev.NOMINATED: "PodNominated", kev.FAILED_SCHEDULING: "PodFailedScheduling"}
        groups: dict[tuple[str, str], list[str]] = {}
        for e in self.server.store.list("events"):
            meta, ref = e.get("metadata") or {}, e.get("involvedObject") or {}
            ident = (meta.get("namespace"), meta.get("name"))
            if ident in seen or ref.get("kind") != "Pod" or e.get("reason") not in types:
                continue
            seen.add(ident)
            key = f"{ref.get('namespace') or 'default'}/{ref.get('name')}"
            last = self.__dict__.setdefault("_pod_event_last", {})
            if last.get(key) == (e["reason"], e.get("message")):   # a redelivery repeating the same outcome
                continue
            last[key] = (e["reason"], e.get("message"))
            groups.setdefault((types[e["reason"]], e.get("message") or ""), []).append(key)
        for (type_, message), pods in groups.items():
            pods = sorted(set(pods))
            obj = f"pod/{pods[0]}" if len(pods) == 1 else f"pods/{len(pods)}"
            self.emit(type_, obj, message if len(pods) == 1 else f"{len(pods)} pods: {message}", pods=pods)

    def _invoke_scheduled(self, name: str, mod) -> None:
        event = {"version": "0", "id": "sim", "detail-type": "Scheduled Event", "source": "aws.events",
                 "time": self.clock.isoformat(), "region": self.region, "resources": [], "detail": {}}
        self._call(mod.handler, event, name)

    def _track_cost(self) -> None:
        """One costTimeline entry each time the set of NodeClaims changes."""
        from ..controllers.provision import PRICE_ANNOTATION

        listed = self.store.list("NodeClaim")
        self._announce_unreported_launches(listed)
        claims = {nc.name: float(nc.annotations.get(PRICE_ANNOTATION) or 0.0) for nc in listed}
        if getattr(self, "_cost_names", None) == set(claims):
            return
        self._cost_names = set(claims)
        self.cost_timeline.append({"time": round(self.clock.elapsed, 3), "costPerHour": round(sum(claims.values()), 6),
                                   "nodes": len(claims)})

    def _call(self, fn, event, name):
        try:
            return self._call_handler(fn, event, name)
        finally:
            self._track_cost()

    def _call_handler(self, fn, event, name):
        import logging

        sink = self.handler_logs if self.handler_logs is not None else io.StringIO()
        # the package's own loggers (e.g. "on-demand prices: Pricing API failed ... bundled table") go with the
        # handler logs, as they would to CloudWatch, not to the user's terminal
        pkg_log, log_handler = logging.getLogger("karpenter_lambda"), logging.StreamHandler(sink)
        pkg_log.addHandler(log_handler)
        try:
            with contextlib.redirect_stdout(sink):
                return fn(event, _LambdaContext(f"{self.cluster}-{name}"))
        finally:
            pkg_log.removeHandler(log_handler)

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
            if getattr(report, "draining", None):
                self.last_change = self.clock.elapsed   # a drain in progress is activity, even when quiet
        elif kind == "disruption":
            self._on_disruption(report)
        elif kind == "interruption":
            self._on_interruption(report)
        elif kind == "offpeak":
            self._on_offpeak(report)

    # -- launches and disruptions: one NodeClaimLaunched per launch, one NodeClaimDisrupted per disruption ---------
    def _announce_launch(self, name: str, replaces: list[str] | None = None, reason: str | None = None, nc=None) -> None:
        """``NodeClaimLaunched`` for a NodeClaim no report announced (replacements: extra keys ``replaces``, ``reason``)."""
        from ..api.kube import instance_id_of
        from ..controllers.provision import PRICE_ANNOTATION

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
        from ..scheduling.inputs import REPLACES_ANNOTATION

        for nc in claims:
            if nc.name in self._launched or not nc.status.get("providerID"):
                continue
            raw = nc.annotations.get(REPLACES_ANNOTATION)
            replaces: list[str] = []
            if raw:
                try:
                    value = json.loads(raw)
                    replaces = [str(v) for v in value] if isinstance(value, list) else [str(raw)]
                except ValueError:
                    replaces = [raw]
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
            self.emit("RebalanceRecommended", f"nodeclaim/{r.get('nodeClaim')}", "recorded (the NodePool does not opt in)")
        for x in report.ignored:
            self.emit("InterruptionIgnored", f"instance/{x.get('instanceId')}", x.get("reason", ""))
        for e in report.errors:
            self.emit("InterruptionError", f"instance/{e.get('instanceId')}", str(e.get("error")))

    def _schedule_offpeak(self) -> None:
        """Off-peak window edges as timers (EventBridge Scheduler): with --until every edge before it; without, the
        first window and every window that starts before the last Scenario step (later ones: :meth:`_add_wakeups`)."""
        from .offpeak import window_edges

        if self.offpeak is None or not self.offpeak_schedules:
            return
        edges = window_edges(self.offpeak_schedules, self.clock.start, self.until)
        if self.until is None and self.scenario is not None and self.scenario.steps:
            last_step = max(step.at for step in self.scenario.steps)
            edges += [e for e in window_edges(self.offpeak_schedules, self.clock.start, last_step) if e[3]["start"] <= last_step]
        self._add_edges(edges)

    @staticmethod
    def _is_due(timer) -> bool:
        """A timer from the input (a step, an off-peak edge known from the start, a budget edge): the safety limit
        counts from the last one. Window edges found while running (:meth:`_add_wakeups`) do not move it, so
        back-to-back windows cannot keep a run going for ever."""
        return timer[2] in DUE_KINDS and timer[3].get("due", True)

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
        from ..disruption.offpeak_window import window_at

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
                from .offpeak import window_edges

                ahead = window_edges(self.offpeak_schedules, self.clock.start, horizon)
                added |= self._add_edges([e for e in ahead if self.clock.elapsed < e[3]["start"] <= horizon], due=False)
        added |= self._add_budget_timers()
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
        from ..disruption.budgets import budget_limit

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

    def _idle_skip(self) -> float:
        """Quiet this long => no consolidation can still be waiting: the longest consolidateAfter (the off-peak
        overrides' too) plus two disruption sweeps (propose, then act after the 15 s validation) and a lifecycle
        interval; at least 5 minutes."""
        waits = [_seconds((np.spec.get("disruption") or {}).get("consolidateAfter")) for np in self.store.list("NodePool")]
        waits += [_seconds((o.disruption or {}).get("consolidateAfter")) for s in self.offpeak_schedules for o in s.nodepools]
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
        expire = {np.name: _seconds(np.expire_after) for np in self.store.list("NodePool")}
        from ..controllers.runtime import parse_iso

        for nc in self.store.list("NodeClaim"):
            ttl = expire.get(nc.labels.get("karpenter.sh/nodepool", ""))
            born = parse_iso(nc.metadata.get("creationTimestamp"))
            if ttl is None or born is None:
                continue
            expiry = born + ttl - self.clock.start
            if expiry + 2 * self.lifecycle_interval > self.clock.elapsed:     # not yet acted on
                target = min(target, max(self.clock.elapsed, expiry - self.lifecycle_interval))
        return target

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
        if report.handed_off:
            self.emit("PodsHandedOff", "offpeak", f"{report.handed_off} pending pods sent to the pod queue "
                      "(the watcher may have been on a drained node)", pods=report.handed_off)
        for name in report.ended:
            self.emit("OffPeakEnded", f"offpeakschedule/{name}", "window ended: workloads and NodePools restored",
                      schedule=name)
        for f in report.failed:
            self.emit("OffPeakFailed", f["object"], f"{f['action']}: {f['error']}")

    def _track_replicas(self) -> None:
        for w in self.workload_controller.replicas():
            key = (w["kind"], w["namespace"], w["name"])
            hist = self.replica_history.setdefault(key, [])
            if not hist or hist[-1]["replicas"] != w["replicas"]:
                hist.append({"time": round(self.clock.elapsed, 3), "replicas": w["replicas"]})

    def _on_disruption(self, report) -> None:
        for p in report.proposed:
            self._disruption_reasons[p["nodeClaim"]] = p["reason"]
        for r in report.replacing:
            lead = r["nodeClaim"]
            reason = self._disruption_reasons.get(lead) or next(
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

    # -- nodes (KWOK-like) ------------------------------------------------------------------------
    def _discover_instances(self, ec2) -> None:
        from ..controllers.runtime import parse_iso

        resp = ec2.describe_instances(Filters=[{"Name": f"tag:kubernetes.io/cluster/{self.cluster}", "Values": ["owned"]},
                                               {"Name": "instance-state-name", "Values": ["pending", "running"]}])
        for r in resp.get("Reservations", []):
            for inst in r.get("Instances", []):
                iid = inst["InstanceId"]
                if iid in self._joined:
                    continue
                self._joined.add(iid)
                launched = inst["LaunchTime"].timestamp() - self.clock.start
                self._schedule(max(launched, self.clock.elapsed) + self.join_delay, "join", {"instance": inst})

    def _fire(self, kind: str, data: dict) -> None:
        from . import nodes as simnodes

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
        except KeyError as e:
            raise SimulationError(f"Scenario step {step.index} ({step.describe()}): {e.args[0]}") from None
        changed = self.workload_controller.reconcile()
        if changed:
            self.emit("WorkloadsReconciled", "workloads", f"{plural(changed, 'pod')} created or deleted to match the replicas")

    # -- interruptions ---------------------------------------------------------------------------------
    def _interrupt(self, a: dict) -> None:
        """AWS's events for the N oldest NodeClaims of the NodePool, through the interruption queue to the real
        handler; a spot instance is reclaimed by EC2 two minutes after its warning, drained or not."""
        import boto3

        from ..api.kube import instance_id_of
        from .interruption_events import events_for

        if self.interruption is None:
            raise KeyError("functions/registry.json has no function reading the interruption queue")
        claims = [nc for nc in self.store.list("NodeClaim")
                  if nc.labels.get("karpenter.sh/nodepool") == a["nodePool"] and nc.status.get("providerID")
                  and not nc.metadata.get("deletionTimestamp")]
        claims.sort(key=lambda nc: (nc.metadata.get("creationTimestamp") or "", nc.name))
        chosen = claims[: a.get("count", 1)]
        if not chosen:
            raise KeyError(f"NodePool {a['nodePool']} has no running NodeClaim to interrupt")
        iids = {instance_id_of(nc.status["providerID"]): nc for nc in chosen}
        sqs = boto3.client("sqs", region_name=self.region)
        url = self.account.interruption_queue_url
        for nc in chosen:
            self.emit("InterruptionReceived", f"nodeclaim/{nc.name}", f"{a['kind']} for {instance_id_of(nc.status['providerID'])}",
                      kind=a["kind"])
            node = nc.status.get("nodeName") or ""
            for p in self.server.store.list("pods"):
                if (p.get("spec") or {}).get("nodeName") == node and node:
                    self._watched[f"{p['metadata'].get('namespace') or 'default'}/{p['metadata']['name']}"] = node
        for ev in events_for(a["kind"], list(iids), self.clock.isoformat(), a.get("state")):
            sqs.send_message(QueueUrl=url, MessageBody=json.dumps(ev))
        msgs = []
        while True:
            got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=300,
                                      AttributeNames=["All"]).get("Messages", [])
            if not got:
                break
            msgs.extend(got)
        response = self._call(self.interruption.handler, {"Records": [_sqs_record(m, url, self.region) for m in msgs]},
                              "interruption")
        failed = {f["itemIdentifier"] for f in (response or {}).get("batchItemFailures", [])}
        for m in msgs:
            if m["MessageId"] not in failed:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
            else:
                self.emit("RecordFailed", f"message/{m['MessageId']}", "interruption record failed: redelivered by SQS")
        if a["kind"] == "SpotInterruption":
            for iid in iids:
                self._schedule(self.clock.elapsed + SPOT_WARNING_SECONDS, "reclaim", {"instance": iid})

    def _reclaim(self, iid: str) -> None:
        """EC2 takes the spot instance back: terminated, its kubelet gone (the Node turns NotReady)."""
        import boto3

        from . import nodes as simnodes

        ec2 = boto3.client("ec2", region_name=self.region)
        r = ec2.describe_instances(InstanceIds=[iid])["Reservations"]
        state = r[0]["Instances"][0]["State"]["Name"] if r else "terminated"
        if state not in ("shutting-down", "terminated"):
            ec2.terminate_instances(InstanceIds=[iid])
        self.emit("SpotInstanceReclaimed", f"instance/{iid}",
                  f"EC2 reclaimed the spot instance {SPOT_WARNING_SECONDS:.0f}s after its warning (was {state})")
        for n in self.server.store.list("nodes"):
            if (n.get("spec") or {}).get("providerID", "").endswith("/" + iid):
                simnodes.set_node_ready(self.server, n["metadata"]["name"], False)

    def _collect_orphan_pods(self) -> None:
        """Kubernetes' pod garbage collector: pods bound to a Node that no longer exists are deleted."""
        names = {n["metadata"]["name"] for n in self.server.store.list("nodes")}
        for p in self.server.store.list("pods"):
            node = (p.get("spec") or {}).get("nodeName")
            if node and node not in names:
                self.server.store.delete("pods", p["metadata"]["name"], p["metadata"].get("namespace") or "default")

    def _track_displaced(self) -> None:
        """Pods of interrupted nodes: when they lost their node, and (PodsDisplaced) how long until a node again."""
        if not self._watched:
            return
        bound = {f"{p['metadata'].get('namespace') or 'default'}/{p['metadata']['name']}": (p.get("spec") or {}).get("nodeName")
                 for p in self.server.store.list("pods")}
        for key, old in list(self._watched.items()):
            node = bound.get(key)
            if node and node != old:
                since = self._displaced.pop(key, None)
                del self._watched[key]
                if since is not None and self.clock.elapsed > since:
                    secs = round(self.clock.elapsed - since, 3)
                    self.emit("PodsDisplaced", f"pod/{key}", f"no node for {secs:.0f}s after the interruption (now on {node})",
                              seconds=secs)
            elif node != old and key not in self._displaced:
                self._displaced[key] = self.clock.elapsed

    def _apply(self, doc: dict) -> None:
        from ..api.manifests import load_text
        from ..api.workloads import WORKLOAD_KINDS

        import yaml

        res = load_text(yaml.safe_dump(doc), "<scenario apply>", allow_other_kinds=True)
        if res.issues:
            raise SimulationError("Scenario apply: " + "; ".join(str(i) for i in res.issues))
        for obj in res.objects:
            if obj.kind in ("NodePool", "EC2NodeClass"):
                self.store.apply(obj)
            elif obj.kind in WORKLOAD_KINDS and obj.kind != "DaemonSet":
                old = self.workload_controller.get(obj.kind, obj.metadata.get("namespace") or "default", obj.name)
                self.workload_controller.add(obj.doc)
                if old is None and obj.kind in ("Pod", "Job", "CronJob"):
                    from ..api.workloads import expand

                    for pod in expand(obj.doc).pods:
                        self.server.store.create("pods", _strip(pod), pod["metadata"].get("namespace") or "default")
            else:
                raise SimulationError(f"Scenario apply: {obj.kind}/{obj.name}: only NodePool, EC2NodeClass and workloads can be applied")

    def _join(self, inst: dict) -> None:
        from ..api.quantity import parse_resource_list
        from ..controllers.cluster_state import provider_id
        from . import nodes as simnodes

        import boto3

        ec2 = boto3.client("ec2", region_name=self.region)
        iid = inst["InstanceId"]
        cur = ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]
        if cur["State"]["Name"] not in ("pending", "running"):
            return
        tags = {t["Key"]: t["Value"] for t in cur.get("Tags") or []}
        ncname = tags.get("karpenter.sh/nodeclaim")
        nc = self.store.get("NodeClaim", ncname) if ncname else None
        zone = cur["Placement"]["AvailabilityZone"]
        labels, taints, startup, capacity, allocatable = {}, [], [], {}, None
        if nc is not None:
            labels = {k: v for k, v in nc.labels.items()}
            taints = list(nc.spec.get("taints") or [])
            startup = list(nc.spec.get("startupTaints") or [])
            capacity = dict(nc.status.get("capacity") or {})
            allocatable = dict(nc.status.get("allocatable") or {}) or None
        if not capacity:
            capacity = {"cpu": "2", "memory": "4Gi", "pods": "29"}
        name = cur.get("PrivateDnsName") or f"ip-{iid}.{self.region}.compute.internal"
        arch = labels.get("kubernetes.io/arch", "amd64")
        node = simnodes.make_node(name, provider_id(zone, iid), cur["InstanceType"], zone, capacity, allocatable,
                                  labels, taints + startup + [UNREGISTERED], ready=False, arch=arch, now=self.clock.isoformat())
        simnodes.join_node(self.server, node)
        self.emit("NodeJoined", f"node/{name}", f"{cur['InstanceType']} {iid} joined (not Ready yet)")
        self._schedule(self.clock.elapsed + self.ready_delay, "ready", {"node": name, "startup_taints": startup})

    # -- result -----------------------------------------------------------------------------------
    def _result(self, reason: str) -> SimulationResult:
        from ..controllers.provision import NOMINATED_PODS_ANNOTATION, PRICE_ANNOTATION

        pods = self.server.store.list("pods")
        by_node: dict[str, list[str]] = {}
        pending = []
        for p in pods:
            key = f"{p['metadata'].get('namespace') or 'default'}/{p['metadata']['name']}"
            nn = (p.get("spec") or {}).get("nodeName")
            if nn:
                by_node.setdefault(nn, []).append(key)
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
                    sched_msg[f"{p['metadata'].get('namespace') or 'default'}/{p['metadata']['name']}"] = c["message"]

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
        self.emit("Done", "simulation", f"{reason}: {bound}/{len(pods)} pods bound, {len(claims)} NodeClaims, ${cost:.4f}/h")
        from ..controllers.runtime import iso

        return SimulationResult(nodeclaims=claims, unschedulable=unsched, events=list(self.events), cost_per_hour=cost,
                                elapsed=self.clock.elapsed, pods_total=len(pods), pods_bound=bound, stopped_because=reason,
                                cost_timeline=list(self.cost_timeline), workloads=self._workloads_result(),
                                start_time=iso(self.clock.start), offpeak=self._offpeak_result())

    def _workloads_result(self) -> list[dict]:
        self._track_replicas()
        return [{**w, "history": self.replica_history.get((w["kind"], w["namespace"], w["name"]), [])}
                for w in self.workload_controller.replicas()]

    def _offpeak_result(self) -> list[dict]:
        from .offpeak import offpeak_summary

        return offpeak_summary(self.offpeak_edges, self.cost_timeline, self.clock.elapsed)


def _strip(obj: dict) -> dict:
    d = json.loads(json.dumps(obj))
    d.pop("status", None)
    meta = d.setdefault("metadata", {})
    for k in ("resourceVersion", "creationTimestamp"):
        meta.pop(k, None)
    return d


def _seconds(text) -> float | None:
    from ..api.durations import parse_duration

    if not text or text == "Never":
        return None
    try:
        return float(parse_duration(text))
    except (ValueError, TypeError):
        return None


def budget_reopens(disruption: dict, reason: str, total: int, start: float, now: float, horizon: float) -> float | None:
    """The first budget window edge in ``(now, horizon]`` (virtual seconds since ``start``) where the budgets of
    ``spec.disruption`` allow ``reason`` more than at ``now``; None when none does (or no budget has a schedule)."""
    from datetime import datetime, timedelta, timezone

    from ..api.cron import CronError, parse_cron
    from ..disruption.budgets import budget_limit

    t0 = datetime.fromtimestamp(start, tz=timezone.utc)
    edges: set[float] = set()
    for b in disruption.get("budgets") or []:
        if not isinstance(b, dict) or b.get("schedule") is None or b.get("duration") is None:
            continue
        reasons = b.get("reasons") or []
        if reasons and reason not in reasons:
            continue
        length = _seconds(b["duration"])
        try:
            cron = parse_cron(b["schedule"])
        except CronError:
            continue
        if length is None:
            continue
        # active in [hit, hit + duration): the edges are the hits and the hits + duration
        hit = cron.next_after(t0 + timedelta(seconds=now - length))
        for _ in range(2000):
            if hit is None:
                break
            at = (hit - t0).total_seconds()
            if at > horizon:
                break
            edges.update(x for x in (at, at + length) if now < x <= horizon)
            hit = cron.next_after(hit)
    base, _ = budget_limit(disruption, reason, total, start + now)
    for at in sorted(edges):
        limit, _ = budget_limit(disruption, reason, total, start + at)
        if base is not None and (limit is None or limit > base):
            return at
    return None


def _unschedulable(pod: dict) -> bool:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return c.get("status") == "False" and c.get("reason") == "Unschedulable"
    return False


def _sqs_record(m: dict, queue_url: str, region: str) -> dict:
    """The record shape Lambda's SQS event source delivers."""
    name = queue_url.rstrip("/").rsplit("/", 1)[-1]
    return {
        "messageId": m["MessageId"],
        "receiptHandle": m["ReceiptHandle"],
        "body": m["Body"],
        "attributes": m.get("Attributes") or {"ApproximateReceiveCount": "1", "SentTimestamp": str(int(time.time() * 1000)),
                                              "SenderId": "AIDASIM", "ApproximateFirstReceiveTimestamp": str(int(time.time() * 1000))},
        "messageAttributes": m.get("MessageAttributes") or {},
        "md5OfBody": m.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": f"arn:aws:sqs:{region}:123456789012:{name}",
        "awsRegion": region,
    }
