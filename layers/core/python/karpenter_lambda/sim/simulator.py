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

The :class:`Simulation` is put together from one module per job: :mod:`.environment` (moto, the local API, the
clock: shared with the test :mod:`.world`), :mod:`.loop` (the event loop and the nodes joining), :mod:`.timers`
(off-peak and budget window edges), :mod:`.feeds` (watcher, SQS and EventBridge into the functions),
:mod:`.interruptions` (the faults a Scenario injects), :mod:`.report_events` (handler reports as events) and
:mod:`.results` (the ``--json`` document).
"""

from __future__ import annotations

import dataclasses
import gc
import io
import threading
import time
from pathlib import Path
from typing import Callable, Mapping

from ..adapters.store import Store
from ..api.manifests import CAPACITY_BUFFER_HINT, load_files
from ..api.scenario import KIND as SCENARIO, ScenarioError, parse_scenario
from ..api.text import plural
from ..api.admission import KINDS as ADMISSION_KINDS, Admission, refusal_hint
from ..api.workloads import WORKLOAD_KINDS, Workloads, add_claim_volumes, expand
from ..controllers import runtime
from ..controllers.manual_nodeclaims import requested as requested_nodeclaim
from .clock import VirtualClock
from .environment import LambdaContext, SimEnvironment, SimulationError, load_module, repo_root
from .feeds import MAX_RECEIVES, FeedsMixin, sqs_record
from .heap import run_collector_settings, settle_heap
from .interruptions import SPOT_WARNING_SECONDS, InterruptionsMixin
from .loop import BATCH_IDLE, BATCH_MAX, UNREGISTERED, LoopMixin, _strip
from .report_events import ReportEventsMixin
from .results import ResultsMixin, SimEvent, SimulationResult
from .timers import BUDGET_LOOKAHEAD, DUE_KINDS, TimersMixin, budget_reopens
from .workloads import WorkloadController

# the safety limit of a run without --until: it stops this long (virtual) after the last timer that was due (the
# start, a Scenario step, an off-peak window edge, a budget window edge), whatever keeps happening
DEFAULT_MAX_TIME = 6 * 3600.0
# other kinds the simulated API server keeps (PodDisruptionBudgets are honoured by its eviction API; storage is
# bound and provisioned by sim/storage.py and the kube-scheduler; Namespaces' labels are what a pod (anti-)affinity
# term's namespaceSelector selects; Services select the pods a default topology spread counts, docs/simulator.md),
# created in this order
STORED_KINDS = {"Namespace": "namespaces", "RuntimeClass": "runtimeclasses", "LimitRange": "limitranges", "PriorityClass": "priorityclasses",
                "StorageClass": "storageclasses",
                "PersistentVolume": "persistentvolumes",
                "PersistentVolumeClaim": "persistentvolumeclaims", "PodDisruptionBudget": "poddisruptionbudgets",
                "Service": "services"}

# the names this module has always offered (tests, bench and the interruption world import some of them)
_LambdaContext = LambdaContext
_sqs_record = sqs_record
__all__ = ["Simulation", "SimulationError", "SimulationResult", "SimEvent", "STORED_KINDS", "DEFAULT_MAX_TIME",
           "BATCH_IDLE", "BATCH_MAX", "MAX_RECEIVES", "SPOT_WARNING_SECONDS", "DUE_KINDS", "BUDGET_LOOKAHEAD",
           "UNREGISTERED", "budget_reopens", "load_module", "repo_root", "_LambdaContext", "_sqs_record"]


class Simulation(LoopMixin, TimersMixin, FeedsMixin, InterruptionsMixin, ReportEventsMixin, ResultsMixin):
    def __init__(self, files, until: float | None = None, *, cluster: str = "sim-cluster", region: str = "us-east-1",
                 k8s_version: str = "1.31", join_delay: float = 30.0, ready_delay: float = 15.0,
                 lifecycle_interval: float = 60.0, max_time: float = DEFAULT_MAX_TIME,
                 progress: Callable[[str], None] | None = None, on_event: Callable[[SimEvent], None] | None = None,
                 setup_hook: Callable[["Simulation"], None] | None = None, handler_logs: io.TextIOBase | None = None,
                 function_env: Mapping[str, str] | None = None, scheduler_config=None, loaded=None):
        self.files = [str(f) for f in files]
        # ``loaded``: the files as the CLI already loaded them (api.manifests.LoadResult: stdin included, the kinds
        # nothing reads left out); None: ``files`` are loaded here
        self.loaded = loaded
        self.function_env = dict(function_env or {})   # deployment settings for the functions (SimEnvironment)
        # the cluster's kube-scheduler configuration (api/scheduler_config.SchedulerConfig, or None): its default
        # topology spread constraints are applied by the simulated kube-scheduler and given to the functions as
        # KARPENTER_LAMBDA_SCHEDULER_CONFIG (set after the environment's scrub), as a deployment configures both
        self.scheduler_config = scheduler_config
        self.default_spread: tuple = tuple(getattr(scheduler_config, "default_constraints", None) or ())
        if scheduler_config is not None:
            from ..api.scheduler_config import SCHEDULER_CONFIG_ENV

            self.function_env[SCHEDULER_CONFIG_ENV] = scheduler_config.to_json()
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
        self._ec2 = None                       # the simulated kubelets' EC2 client (reads userData), made in run
        self._receives: dict[str, int] = {}
        self._watched: dict[str, str] = {}            # pod key -> the interrupted node it ran on
        self._displaced: dict[str, float] = {}        # pod key -> since when it has had no node
        self.cost_timeline: list[dict] = []
        self.scenario = None
        self.offpeak_schedules: list = []
        self.overlays: list = []
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

    # -- set-up ---------------------------------------------------------------------------------
    def _load(self):
        res = self.loaded
        if res is None:
            for f in self.files:
                if not Path(f).exists():
                    raise SimulationError(f"{f}: no such file")
            res = load_files(self.files, allow_other_kinds=True)
        if res.issues:
            raise SimulationError("invalid manifests:\n" + "\n".join(str(i) for i in res.issues))
        self.scenario = None
        problems = []
        for i, obj in enumerate(res.objects):   # a Scenario's errors name its file and document
            if obj.kind != SCENARIO:
                continue
            f, index = res.origins[i] if i < len(res.origins) else ("<input>", i)
            if self.scenario is not None:
                problems.append(f"{f}:{index}: Scenario/{obj.name}: only one Scenario document per simulation")
                continue
            try:
                self.scenario = parse_scenario(obj.doc, f, index)
            except ScenarioError as e:
                problems.append(str(e))
                continue
            if any(step.action == "capacity" for step in self.scenario.steps):   # names the simulated EC2 lacks
                from ..adapters.aws import moto_catalog
                from ..catalog.zones import default_zones
                from .capacity import step_problems

                prefix = f"{f}:{index}: {SCENARIO}/{obj.name}: "
                problems += [prefix + p for p in step_problems(
                    self.scenario, self.region, default_zones(self.region),
                    (t["InstanceType"] for t in moto_catalog.instance_types()))]
        known = set(WORKLOAD_KINDS) | {"NodePool", "EC2NodeClass", "NodeClaim", "OffPeakSchedule", "NodeOverlay", SCENARIO} | set(STORED_KINDS)
        for o in res.objects:
            if o.kind == "CapacityBuffer":
                problems.append(f"{o.kind}/{o.name}: {CAPACITY_BUFFER_HINT}")
            elif o.kind not in known:
                problems.append(f"{o.kind}/{o.name}: simulate does not know the kind {o.kind!r} "
                                f"(known: NodePool, EC2NodeClass, NodeOverlay, OffPeakSchedule, Scenario, {', '.join(sorted(WORKLOAD_KINDS))}, "
                                f"{', '.join(sorted(STORED_KINDS))})")
        if problems:
            raise SimulationError("invalid input:\n" + "\n".join(problems))
        nodepools = res.of_kind("NodePool")
        nodeclasses = res.of_kind("EC2NodeClass")
        others = [o for o in res.objects if o.kind in WORKLOAD_KINDS]
        self.stored = sorted((o for o in res.objects if o.kind in STORED_KINDS), key=lambda o: list(STORED_KINDS).index(o.kind))
        self.offpeak_schedules = res.of_kind("OffPeakSchedule")
        self.overlays = res.of_kind("NodeOverlay")
        self.given_nodeclaims = res.of_kind("NodeClaim")   # manual NodeClaims: stored, launched by the lifecycle sweep
        self.workload_docs = [o.doc for o in others]
        wl = Workloads()
        for i, o in enumerate(res.objects):   # each named by its file, document and line, as validate names it
            if o.kind in WORKLOAD_KINDS:
                file, index = res.origins[i] if i < len(res.origins) else ("<input>", i)
                before = len(wl.issues)
                expand(o.doc, file, index, wl)
                wl.issues[before:] = [dataclasses.replace(x, line=x.line or res.line_of(i, x.path))
                                      for x in wl.issues[before:]]
        add_claim_volumes(wl.pods, self.workload_docs)   # a StatefulSet's volumeClaimTemplates (their claims: sim/workloads.py)
        # the simulated API server's admission (api/admission.py) would refuse such pods: said up front
        chain = Admission.of(o.doc for o in res.objects)
        refused = {}
        for pod in wl.pods:
            _, problem = chain.admit(pod)
            if problem:
                owner = ((pod["metadata"].get("ownerReferences") or [{}])[0]).get("name") or pod["metadata"]["name"]
                refused.setdefault((pod["metadata"].get("namespace") or "default", owner), problem)
        if refused:
            raise SimulationError("invalid input: the API server would refuse these pods:\n" + "\n".join(
                f"pods of {ns}/{owner}: {problem}{refusal_hint(problem)}" for (ns, owner), problem in sorted(refused.items())))
        if wl.issues:
            raise SimulationError("invalid workloads:\n" + "\n".join(
                f"{x} (line {x.line})" if x.line else str(x) for x in wl.issues))
        if not nodepools:
            raise SimulationError("no NodePool in the input: add a karpenter.sh/v1 NodePool (see examples/demo/)")
        return nodepools, nodeclasses, wl

    def run(self) -> SimulationResult:
        with run_collector_settings():
            return self._run()

    def _run(self) -> SimulationResult:
        started = time.perf_counter()
        nodepools, nodeclasses, wl = self._load()
        if self.scenario is not None and self.scenario.start_time is not None:
            self.clock = VirtualClock(self.scenario.start_time)
        stop = threading.Event()
        with SimEnvironment(self.clock, nodeclasses, cluster=self.cluster, region=self.region,
                            k8s_version=self.k8s_version, uid_seed="karpenter-lambda-simulate", isolate=True,
                            progress=self.progress, function_env=self.function_env) as env:
            env.callback(stop.set)     # the watcher stops before the API server it watches
            server = self.server = env.server
            account = self.account = env.account
            store = Store(self.cluster, table_name=account.state_table, region=self.region, clock=self.clock.datetime)
            self.store = store
            for obj in list(nodeclasses) + list(nodepools) + list(self.offpeak_schedules) + list(self.overlays):
                store.put(obj)
            for obj in self.given_nodeclaims:   # as `apply` stores them (controllers/manual_nodeclaims.py)
                store.put(requested_nodeclaim(obj))
            for obj in self.stored:   # Namespaces first, before any object of theirs
                if obj.kind == "Namespace":
                    if server.store.get("namespaces", obj.name) is None:
                        server.store.create("namespaces", _strip(obj.doc))
                    else:   # one the API server starts with (default, kube-system, ...): its labels
                        server.store.patch("namespaces", obj.name, {"metadata": {"labels": obj.metadata.get("labels") or {}}})
            for ds in wl.daemonsets:
                server.store.create("daemonsets", _strip(ds), (ds.get("metadata") or {}).get("namespace") or "default")
            for obj in self.stored:   # the pods' admission reads them: stored first
                if obj.kind in ADMISSION_KINDS:
                    server.store.create(STORED_KINDS[obj.kind], _strip(obj.doc), obj.metadata.get("namespace") or "default")
            for pod in wl.pods:
                server.store.create("pods", _strip(pod), pod["metadata"].get("namespace") or "default")
            for obj in self.stored:
                if obj.kind not in ADMISSION_KINDS and obj.kind != "Namespace":
                    server.store.create(STORED_KINDS[obj.kind], _strip(obj.doc), obj.metadata.get("namespace") or "default")
            self.workload_controller = WorkloadController(server, region=self.region)
            for doc in self.workload_docs:
                # a Pod given in the files is held too (a step may delete it; nothing recreates a bare Pod); a
                # DaemonSet's pods are the loop's, per node
                if doc.get("kind") != "DaemonSet":
                    self.workload_controller.add(doc)
            for step in (self.scenario.steps if self.scenario is not None else []):
                self._schedule(step.at, "step", {"step": step})
            self.pods_total = len(wl.pods)
            self.emit("Applied", "manifests", f"{plural(len(nodepools), 'NodePool')}, {plural(len(nodeclasses), 'EC2NodeClass', 'EC2NodeClasses')}, "
                                              f"{plural(len(wl.pods), 'pod')}, {plural(len(wl.daemonsets), 'DaemonSet')}"
                                              + (f", {plural(len(self.given_nodeclaims), 'NodeClaim')}" if self.given_nodeclaims else ""))
            if self.setup_hook:
                self.setup_hook(self)
            root = repo_root()
            self._load_functions(root)
            self._schedule_offpeak()
            runtime.REPORT_HOOKS.append(self._on_report)
            watcher_thread, self.watcher_stats = self._start_watcher(server, account, stop, root)
            settle_heap()
            try:
                reason = self._loop()
            finally:
                gc.unfreeze()    # everything settle_heap set aside goes back to the collector
                runtime.REPORT_HOOKS.remove(self._on_report)
            result = self._result(reason)
            stop.set()
            watcher_thread.join(timeout=5)
            result.wall_seconds = time.perf_counter() - started
            return result
