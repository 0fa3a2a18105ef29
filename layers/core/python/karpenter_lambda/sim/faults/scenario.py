"""The fault scenario ``bench/faults.py`` and ``tests/reliability`` run: a cluster with Deployments driven round by
round through the real handlers with faults on (:mod:`.injector`), settled with faults off, then counted from
ground truth (moto's instances, the API server's pods and nodes, the store).  The invariants (:mod:`.invariants`)
are checked after every round; the pod and interruption queues are moto's SQS on the virtual clock with the stack's
settings (:mod:`.queues`); every invocation dies at its function's Lambda timeout on the virtual clock."""

from __future__ import annotations

import json
import random
import sys
import threading
from collections import Counter

from ...api.kube import instance_id_of
from ...api.labels import has_disrupted_taint
from ..aws import DEFAULT_EC2_VISIBILITY_DELAY
from ..environment import capture_logs, load_module, repo_root
from ..workloads import WorkloadController
from ..world import NODECLASS_YAML, World
from .ground_truth import described, launched, measure, signature
from .injector import FaultInjector
from .invariants import Invariants
from .plan import FaultPlan, random_plan
from .queues import SimQueue, function_timeouts, sqs_on_clock, stack_queues
from .spot import SPOT_WARNING_SECONDS, SpotInterruptions  # noqa: F401  (re-exported)


# ==================================================================================================================
# The scenario: a cluster with Deployments, driven round by round through the real handlers with faults on, then
# settled with faults off, then counted from ground truth (moto's instances, the API server's pods and nodes, the store).
# ==================================================================================================================

MANIFESTS = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      requirements:
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64"]
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["spot", "on-demand"]
        - key: karpenter.k8s.aws/instance-family
          operator: In
          values: ["m5", "c5", "m6i"]
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      expireAfter: 720h
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 30s
    budgets: [{nodes: "%(budget)d"}]
  limits:
    cpu: "%(cpu_limit)d"
---
""" + NODECLASS_YAML

BUDGET = 2
CPU_LIMIT = 1000
ROUND_SECONDS = 60.0
SETTLE_JUMP = 16 * 60.0   # past the registration timeout (15 min) and the orphan GC age (30 s)
JUMP_STEP = 4 * 60.0      # ... in steps, a round after each (the invariants see each step)
COUNTER_KEYS = ("faults_injected", "leaked_instances", "lost_pods", "stuck_pods", "stranded_taints", "budget_overruns",
                "double_launches")
LOSS_KEYS = COUNTER_KEYS[1:]


class StopRun(Exception):
    """A counter named in ``FaultRun.stop_on`` fired: the run has shown what it was run for (a mutation caught)."""


def deployment(name: str, replicas: int, cpu: str, memory: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx",
                                                           "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}}}


def _iid(provider_id: str | None) -> str:
    return instance_id_of(provider_id) or ""


class FaultRun(SpotInterruptions):
    """One seed: ``run()`` returns the counters (COUNTER_KEYS) plus detail for a finding.  The World runs with EC2's
    eventual consistency (``ec2_visibility_delay``, 5 s by default: a launched instance is missing from
    DescribeInstances that long; the kubelets do not wait for it)."""

    def __init__(self, seed: int, rounds: int = 24, settle_rounds: int = 40, rate: float = 0.7, verbose: bool = False,
                 stop_on: tuple[str, ...] = (), ec2_visibility_delay: float = DEFAULT_EC2_VISIBILITY_DELAY,
                 settle_jump: float = SETTLE_JUMP):
        self.seed = seed
        self.settle_jump = settle_jump   # the settle's jump past the timeouts, in JUMP_STEP steps (0: none)
        self.ec2_visibility_delay = ec2_visibility_delay
        self.stop_on = set(stop_on)   # invariant names (or "budget_overruns"): stop the run as soon as one fires
        self.stopped: str | None = None
        self.last_event_at = 0.0      # virtual time of the latest scenario event that moves work (reclaim, scale, ...)
        self.pod_reset: dict[str, float] = {}   # pod uid -> the last fault of a provisioner invocation that planned it
        self.pods_reset = 0.0                   # the last fault that delays every pod (lifecycle, a broken kubelet)
        self.rng = random.Random(seed)
        self.rounds = rounds
        self.settle_rounds = settle_rounds
        self.rate = rate
        self.verbose = verbose
        self.faults_on = rate > 0
        self.budget_overruns = 0
        self.overrun_detail: list = []
        self.interrupted: set[str] = set()        # instances AWS takes back (their nodes are not disruption's)
        self.planted_taints: set[str] = set()     # nodes a run tainted itself (a fault, not a disruption)
        self.reclaims: list[tuple[float, str, bool]] = []   # (due, iid, lose the state-change event)
        self.errors: Counter = Counter()
        self.settled = False

    # -- set-up ------------------------------------------------------------------------------------------------
    def run(self, before_measure=None) -> dict:
        """``before_measure(self)`` runs after the settle, before the counters (tests plant losses with it)."""
        saved = sys.stdout
        try:
            return self._run(before_measure)
        finally:
            sys.stdout = saved   # handlers redirect stdout; two at once in threads can leave it redirected

    def _run(self, before_measure) -> dict:
        text = MANIFESTS % {"budget": BUDGET, "cpu_limit": CPU_LIMIT}
        with World(text, ec2_visibility_delay=self.ec2_visibility_delay) as w:
            self.w = w
            self.wc = WorkloadController(w.server)
            self.deploys = {}
            self._workloads()
            root = repo_root()
            self.timeouts = function_timeouts(root)
            with sqs_on_clock(w.clock), FaultInjector(w, self.timeouts) as inj:
                self.inj = inj
                self._setup_queues(stack_queues(root))
                self.invariants = Invariants(w)
                self.last_event_at = w.clock()
                try:
                    self._setup()
                    for _ in range(self.rounds):
                        self._round()
                    self.faults_on = False
                    self._settle()
                except StopRun as stop:
                    self.stopped = str(stop)
                if before_measure is not None:
                    before_measure(self)
                result = self.measure()
                result["faults"] = dict(inj.counts)
                result["faults_injected"] = inj.total
                result["retries"] = dict(inj.retries)
                result["scenario_events"] = dict(inj.events)
                result["invariant_violations"] = dict(self.invariants.counts)
                result["violations"] = [v.to_dict() for v in self.invariants.violations[:20]]
                result["stopped"] = self.stopped
                result["dead_letters"] = {q.settings.name: q.depth(dlq=True) for q in (self.pod_queue, self.iq)}
                result["crash_points"] = sorted(inj.crash_points)
                result["calls_seen"] = dict(inj.calls_seen)
                result["writes_seen"] = dict(inj.writes_seen)
                result["write_crash_points"] = sorted(inj.write_crash_points)
                result["crash_sites"] = dict(inj.crash_sites)
        return result

    def _settle(self) -> None:
        """Faults off: rounds until nothing changes (three equal rounds), then past the registration timeout and
        the GC period in 4-minute steps, a round after each (the scheduled functions would find nothing
        else to do meanwhile; the invariants see each step), then rounds until quiet again.  At most
        ``settle_rounds`` rounds; ``settle_jump`` 0: no jump (quiet once)."""
        self.faults_on = False
        n = 0
        for phase in range(2):
            quiet, last = 0, None
            while n < self.settle_rounds:
                sig = self._round()
                n += 1
                quiet = quiet + 1 if sig == last else 0
                last = sig
                if quiet >= 2:
                    break
            if phase == 0:   # 16 minutes on, in 4-minute steps with a round after each (the invariants see each)
                if self.settle_jump <= 0:
                    break
                for _ in range(int(self.settle_jump // JUMP_STEP) - 1):
                    self.w.clock.advance(JUMP_STEP - ROUND_SECONDS)
                    self._round()
                    n += 1
                self.w.clock.advance(JUMP_STEP - ROUND_SECONDS)
        self.settled = quiet >= 2
        self.settle_count = n

    def _workloads(self) -> None:
        for i in range(self.rng.randint(2, 4)):
            name = f"app{i}"
            self.deploys[name] = self.rng.randint(2, 8)
            self.wc.add(deployment(name, self.deploys[name], self.rng.choice(["250m", "500m", "1", "1500m"]),
                                   self.rng.choice(["256Mi", "1Gi", "2Gi"])))

    def _setup(self) -> None:
        """Before the first round (a targeted run plants its states here)."""

    def _script(self) -> None:
        """At the start of every round (a targeted run's scripted events)."""

    def _chance(self, p: float) -> bool:
        """A random scenario choice of the fault phase (a targeted run scripts its own instead)."""
        return self.faults_on and self.rng.random() < p

    def _setup_queues(self, settings) -> None:
        w = self.w
        self.pod_queue = SimQueue(w.sqs, settings["pod"], f"{w.cluster}-faults", w.region)
        self.iq = SimQueue(w.sqs, settings["interruption"], f"{w.cluster}-faults", w.region)
        self.interruption = load_module(repo_root() / "functions" / "interruption" / "handler.py", "faults_interruption_handler")
        capture_logs(self.interruption, w.logs)

    def event(self, kind: str) -> None:
        """A scenario event that moves work (the invariants' bounds count from the latest one, as from a fault)."""
        self.inj.event(kind)
        self.last_event_at = self.w.clock()

    def last_disturbance(self) -> float:
        return max(self.last_event_at, self.inj.last_fault_at or 0.0)

    def _check(self) -> None:
        self.invariants.check(self.last_disturbance(), self.pod_reset, self.pods_reset)
        fired = [n for n in self.stop_on if self.invariants.counts.get(n) or (n == "budget_overruns" and self.budget_overruns)]
        if fired:
            raise StopRun(", ".join(sorted(fired)))

    # -- one round ---------------------------------------------------------------------------------------------
    def _plan(self, name: str):
        if not self.faults_on:
            return None
        return random_plan(self.rng, name, self.inj.calls_seen[name], self.rate, self.inj.writes_seen[name],
                           timeout=self.timeouts.get(name))

    def _invoke(self, name: str, fn, plan=None) -> dict:
        before, started = self.inj.total, self.w.clock()
        with self.inj.invocation(name, plan if plan is not None else self._plan(name)) as out:
            out["response"] = fn()
        out["faulted"] = self.inj.total > before or out["crashed"]
        # a lifecycle fault delays every pod; so does a hung call (the clock moved while no other function ran: in
        # this world the round waits for it, where Lambda would have gone on invoking the others)
        if (out["faulted"] and name == "lifecycle") or self.w.clock() > started:
            self.pods_reset = self.w.clock()
        if out["error"] and not out["crashed"]:
            self.errors[f"{name}: {out['error'][:120]}"] += 1
        self._observe(name)
        return out

    def _concurrently(self, calls: list[tuple[str, callable]]) -> list[dict]:
        """Two invocations at once (threads); each under its own plan."""
        plans = [self._plan(n) for n, _ in calls]
        outs: list = [None] * len(calls)

        def go(i):
            outs[i] = self._invoke(calls[i][0], calls[i][1], plans[i] or FaultPlan())

        saved = sys.stdout
        threads = [threading.Thread(target=go, args=(i,)) for i in range(len(calls))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        sys.stdout = saved        # redirect_stdout is not thread-safe: two handlers at once may leave it swapped
        self.inj.event("concurrent_invocations")
        return outs

    def _round(self):
        w, rng = self.w, self.rng
        self._aws_reclaims()
        self.wc.reconcile()
        w.schedule()
        self._script()
        if self._chance(0.4):                              # load changes: scale a Deployment
            name = rng.choice(sorted(self.deploys))
            self.deploys[name] = rng.randint(0, 10)
            self.event("scale")
            self.wc.scale("Deployment", "default", name, self.deploys[name])
            self.wc.reconcile()
            w.schedule()
        if self._chance(0.06):                             # a NodePool change: every node drifts (replacements)
            self._drift_nodepool()
        self._provision()
        self._kubelets()
        self._invoke("lifecycle", w.sweep)
        self._kubelets()
        if self._chance(0.2):
            self._concurrently([("consolidation", lambda: w.invoke("consolidation")),
                                (rng.choice(["lifecycle", "consolidation", "drift"]),
                                 lambda: w.invoke("drift") if rng.random() < 0.3 else w.sweep())])
        else:
            self._invoke("consolidation", lambda: w.invoke("consolidation"))
            self._invoke("drift", lambda: w.invoke("drift"))
        if self._chance(0.25):
            self._interrupt()
        self._deliver_interruptions()
        self._invoke("lifecycle", w.sweep)
        self._kubelets()
        w.schedule()
        self._pod_gc()
        w.clock.advance(ROUND_SECONDS / 2)
        self._deliver_interruptions()     # Lambda polls the queue all the time: a record made visible again mid-round
        w.schedule()
        self._check()
        w.clock.advance(ROUND_SECONDS / 2)
        return self._signature()

    def _drift_nodepool(self) -> None:
        self.generation = getattr(self, "generation", 0) + 1
        self.event("nodepool_change")

        def mutate(np):
            labels = np.spec.setdefault("template", {}).setdefault("metadata", {}).setdefault("labels", {})
            labels["faults.example.com/generation"] = str(self.generation)

        self.w.store.update("NodePool", "default", mutate)

    def _provision(self) -> None:
        """The watcher sends every pending pod (its 60 s resync: one round); Lambda's event source polls the pod queue
        (records a failed invocation left come back after the visibility timeout, then to the DLQ)."""
        w = self.w
        pending = [p for p in w.server.store.list("pods") if not (p.get("spec") or {}).get("nodeName")
                   and not p["metadata"].get("deletionTimestamp")]
        for p in pending:
            self.pod_queue.send(w.message_body(p))
        while True:
            before = (self.pod_queue.redelivered, self.pod_queue.depth(dlq=True))
            ev = self.pod_queue.poll()
            self._count_queue(self.pod_queue, before)
            if ev is None:
                return
            held = self._held()
            uids = [json.loads(r["body"]).get("pod", {}).get("metadata", {}).get("uid", "") for r in ev["Records"]]
            before_faults = self.inj.total
            if self._chance(0.15):   # two pollers got the batch (at-least-once delivery)
                self.inj.count("sqs_duplicate")
                outs = self._concurrently([("provisioner", lambda: w.provision(ev)), ("provisioner", lambda: w.provision(ev))])
                self.pod_queue.settle(ev, outs[0] if not (outs[0]["crashed"] or outs[0]["error"]) else outs[1])
                self._reset_pods(uids, held, before_faults)
                continue
            out = self._invoke("provisioner", lambda: w.provision(ev))
            self.pod_queue.settle(ev, out)
            self._reset_pods(uids, held, before_faults)
            if not out["crashed"] and self._chance(0.15):   # the same records sent again
                self.inj.count("sqs_duplicate")
                for r in ev["Records"]:
                    self.pod_queue.send(r["body"])

    def _held(self) -> set[str]:
        """Pods nominated to an in-flight NodeClaim (launched or launching, not Initialized, not deleting): the
        provisioner leaves them alone, so its faults do not delay them."""
        claims = {nc.name: nc for nc in self.w.store.list("NodeClaim")}
        out = set()
        for uid, name in (self.w.env.claims.reservations() or {}).items():
            nc = claims.get(name)
            if nc is not None and not nc.metadata.get("deletionTimestamp") and not nc.is_true("Initialized"):
                out.add(uid)
        return out

    def _reset_pods(self, uids: list[str], held: set[str], before_faults: int) -> None:
        if self.inj.total > before_faults:
            now = self.w.clock()
            for u in uids:
                if u and u not in held:
                    self.pod_reset[u] = now

    def _count_queue(self, q: SimQueue, before: tuple[int, int]) -> None:
        if q.redelivered > before[0]:
            self.inj.retry("sqs_redelivery", q.redelivered - before[0])
        dead = q.depth(dlq=True) - before[1]
        if dead > 0:
            self.inj.retry("sqs_dead_letter", dead)

    def _kubelets(self) -> None:
        """Every running instance's kubelet registers a Node (as userData makes it; it does not wait for
        DescribeInstances to show the instance), Ready unless :meth:`_kubelet` says otherwise."""
        w = self.w
        have = {(n.get("spec") or {}).get("providerID") for n in w.server.store.list("nodes")}
        # the running instances (moto's, every round) and the DescribeInstances entries of those without a Node whose
        # kubelet may start
        new = [i.id for i in launched(w, ("running",))
               if f"aws:///{i.placement.zone}/{i.id}" not in have and i.id not in self.interrupted
               and not self._no_kubelet(i.id)]
        entries = described(w, new)
        for iid in new:
            inst = entries[iid]
            ready = self._kubelet(inst)
            if ready is None:
                continue
            try:
                w.join(inst, ready=ready)
            except Exception as e:  # noqa: BLE001 - e.g. its NodeClaim vanished meanwhile
                self.errors[f"join: {e}"[:120]] += 1

    def _kubelet(self, inst: dict) -> bool | None:
        """This instance's kubelet: None when it never starts, else whether its Node becomes Ready (a targeted run
        breaks some)."""
        return True

    def _no_kubelet(self, instance_id: str) -> bool:
        """This instance's kubelet never starts, known from its id alone (:meth:`_kubelet` is not asked)."""
        return False

    def _pod_gc(self) -> None:
        names = {n["metadata"]["name"] for n in self.w.server.store.list("nodes")}
        for p in self.w.server.store.list("pods"):
            node = (p.get("spec") or {}).get("nodeName")
            if node and node not in names:
                self.w.server.store.delete("pods", p["metadata"]["name"], p["metadata"].get("namespace") or "default")

    # -- observation and counters ------------------------------------------------------------------------------
    def _observe(self, after: str) -> None:
        """Budget check after every invocation: nodes of the NodePool tainted for disruption (not AWS's reclaims, not
        a taint the run planted itself: a stale taint is the stranded-taint invariant's, not a disruption)."""
        n = 0
        names = []
        for node in self.w.server.store.list("nodes"):
            if _iid((node.get("spec") or {}).get("providerID")) in self.interrupted \
                    or node["metadata"]["name"] in self.planted_taints:
                continue
            if has_disrupted_taint(node):
                n += 1
                names.append(node["metadata"]["name"])
        if n > BUDGET:
            self.budget_overruns += 1
            self.overrun_detail.append(f"after {after} at {self.w.clock.isoformat()}: {n} disrupting {names}")

    def _signature(self):
        return signature(self.w)

    def measure(self) -> dict:
        return measure(self)


def run_seed(seed: int, **kw) -> dict:
    return FaultRun(seed, **kw).run()
