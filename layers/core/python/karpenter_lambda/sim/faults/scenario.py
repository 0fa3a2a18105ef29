"""The fault scenario ``bench/faults.py`` and ``tests/reliability`` run: a cluster with Deployments driven round by
round through the real handlers with faults on (:mod:`.injector`), settled with faults off, then counted from
ground truth (moto's instances, the API server's pods and nodes, the store)."""

from __future__ import annotations

import contextlib
import json
import random
import sys
import threading
from collections import Counter

from ...api.kube import instance_id_of
from ...api.labels import has_disrupted_taint
from .. import nodes as simnodes
from ..environment import LambdaContext, capture_logs, load_module, repo_root
from ..feeds import sqs_record
from ..interruption_events import spot_warning, state_change
from ..workloads import WorkloadController
from ..world import NODECLASS_YAML, World
from .injector import FaultInjector
from .plan import FaultPlan, random_plan


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
SPOT_WARNING_SECONDS = 120.0
ROUND_SECONDS = 60.0
SETTLE_JUMP = 16 * 60.0   # past the registration timeout (15 min) and the orphan GC age (30 s)
COUNTER_KEYS = ("faults_injected", "leaked_instances", "lost_pods", "stuck_pods", "stranded_taints", "budget_overruns",
                "double_launches")
LOSS_KEYS = COUNTER_KEYS[1:]


def deployment(name: str, replicas: int, cpu: str, memory: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx",
                                                           "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}}}


def _iid(provider_id: str | None) -> str:
    return instance_id_of(provider_id) or ""


class FaultRun:
    """One seed: ``run()`` returns the counters (COUNTER_KEYS) plus detail for a finding."""

    def __init__(self, seed: int, rounds: int = 24, settle_rounds: int = 40, rate: float = 0.7, verbose: bool = False):
        self.seed = seed
        self.rng = random.Random(seed)
        self.rounds = rounds
        self.settle_rounds = settle_rounds
        self.rate = rate
        self.verbose = verbose
        self.faults_on = rate > 0
        self.budget_overruns = 0
        self.overrun_detail: list = []
        self.interrupted: set[str] = set()        # instances AWS takes back (their nodes are not disruption's)
        self.reclaims: list[tuple[float, str, bool]] = []   # (due, iid, lose the state-change event)
        self.redeliver: list[tuple[str, dict]] = []        # (function, SQS event) to deliver again
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
        with World(text) as w:
            self.w = w
            self.wc = WorkloadController(w.server)
            self.deploys = {}
            for i in range(self.rng.randint(2, 4)):
                name = f"app{i}"
                self.deploys[name] = self.rng.randint(2, 8)
                self.wc.add(deployment(name, self.deploys[name], self.rng.choice(["250m", "500m", "1", "1500m"]),
                                       self.rng.choice(["256Mi", "1Gi", "2Gi"])))
            self._setup_interruption_queue()
            with FaultInjector(w) as inj:
                self.inj = inj
                for _ in range(self.rounds):
                    self._round()
                self.faults_on = False
                self._settle()
                if before_measure is not None:
                    before_measure(self)
                result = self.measure()
                result["faults"] = dict(inj.counts)
                result["faults_injected"] = inj.total
                result["crash_points"] = sorted(inj.crash_points)
                result["calls_seen"] = dict(inj.calls_seen)
                result["writes_seen"] = dict(inj.writes_seen)
                result["write_crash_points"] = sorted(inj.write_crash_points)
                result["crash_sites"] = dict(inj.crash_sites)
        return result

    def _settle(self) -> None:
        """Faults off: rounds until nothing changes (three equal rounds), then past the registration timeout and
        the GC period in one step (the scheduled functions would find nothing to do meanwhile), then rounds until
        quiet again.  At most ``settle_rounds`` rounds."""
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
            if phase == 0:
                self.w.clock.advance(SETTLE_JUMP)
        self.settled = quiet >= 2
        self.settle_count = n

    def _setup_interruption_queue(self) -> None:
        w = self.w
        self.iq_url = w.sqs.create_queue(QueueName=f"{w.cluster}-interruption", Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
        self.interruption = load_module(repo_root() / "functions" / "interruption" / "handler.py", "faults_interruption_handler")
        capture_logs(self.interruption, w.logs)

    # -- one round ---------------------------------------------------------------------------------------------
    def _plan(self, name: str):
        if not self.faults_on:
            return None
        return random_plan(self.rng, name, self.inj.calls_seen[name], self.rate, self.inj.writes_seen[name])

    def _invoke(self, name: str, fn, plan=None) -> dict:
        with self.inj.invocation(name, plan if plan is not None else self._plan(name)) as out:
            out["response"] = fn()
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
        self.inj.count("concurrent_invocations")
        return outs

    def _round(self):
        w, rng = self.w, self.rng
        self._aws_reclaims()
        self.wc.reconcile()
        w.schedule()
        if self.faults_on and rng.random() < 0.4:          # load changes: scale a Deployment
            name = rng.choice(sorted(self.deploys))
            self.deploys[name] = rng.randint(0, 10)
            self.wc.scale("Deployment", "default", name, self.deploys[name])
            self.wc.reconcile()
            w.schedule()
        if self.faults_on and rng.random() < 0.06:         # a NodePool change: every node drifts (replacements)
            self._drift_nodepool()
        self._provision()
        self._kubelets()
        self._invoke("lifecycle", w.sweep)
        self._kubelets()
        if self.faults_on and rng.random() < 0.2:
            self._concurrently([("consolidation", lambda: w.invoke("consolidation")),
                                (rng.choice(["lifecycle", "consolidation", "drift"]),
                                 lambda: w.invoke("drift") if rng.random() < 0.3 else w.sweep())])
        else:
            self._invoke("consolidation", lambda: w.invoke("consolidation"))
            self._invoke("drift", lambda: w.invoke("drift"))
        if self.faults_on and rng.random() < 0.25:
            self._interrupt()
        self._deliver_interruptions()
        self._invoke("lifecycle", w.sweep)
        self._kubelets()
        w.schedule()
        self._pod_gc()
        w.clock.advance(ROUND_SECONDS)
        return self._signature()

    def _drift_nodepool(self) -> None:
        self.generation = getattr(self, "generation", 0) + 1

        def mutate(np):
            labels = np.spec.setdefault("template", {}).setdefault("metadata", {}).setdefault("labels", {})
            labels["faults.example.com/generation"] = str(self.generation)

        self.w.store.update("NodePool", "default", mutate)

    def _provision(self) -> None:
        w, rng = self.w, self.rng
        pending = [p for p in w.server.store.list("pods") if not (p.get("spec") or {}).get("nodeName")
                   and not p["metadata"].get("deletionTimestamp")]
        todo = [r for r in self.redeliver if r[0] == "provisioner"]
        self.redeliver = [r for r in self.redeliver if r[0] != "provisioner"]
        for _fn, ev in todo:                              # SQS redelivery of records that failed or crashed
            self.inj.count("sqs_redelivery") if self.faults_on else None
            self._provision_event(ev)
        if not pending:
            return
        ev = w.sqs_event(pending)
        if self.faults_on and rng.random() < 0.15:       # duplicate delivery at once (two pollers got the batch)
            self.inj.count("sqs_duplicate")
            outs = self._concurrently([("provisioner", lambda: w.provision(ev)), ("provisioner", lambda: w.provision(ev))])
            for o in outs:
                self._after_provision(ev, o)
            return
        out = self._provision_event(ev)
        if self.faults_on and rng.random() < 0.15 and not out["crashed"]:   # at-least-once: delivered again later
            self.inj.count("sqs_duplicate")
            self._provision_event(ev)

    def _provision_event(self, ev: dict) -> dict:
        out = self._invoke("provisioner", lambda: self.w.provision(ev))
        self._after_provision(ev, out)
        return out

    def _after_provision(self, ev: dict, out: dict) -> None:
        if out["crashed"] or out["error"]:
            self.redeliver.append(("provisioner", ev))
            return
        failed = {f["itemIdentifier"] for f in (out.get("response") or {}).get("batchItemFailures", [])}
        if failed:
            self.redeliver.append(("provisioner", {"Records": [r for r in ev["Records"] if r["messageId"] in failed]}))

    def _kubelets(self) -> None:
        """Every running instance's kubelet registers a Ready Node (as userData makes it)."""
        w = self.w
        have = {(n.get("spec") or {}).get("providerID") for n in w.server.store.list("nodes")}
        for inst in w.instances(states=("running",)):
            pid = f"aws:///{inst['Placement']['AvailabilityZone']}/{inst['InstanceId']}"
            if pid not in have and inst["InstanceId"] not in self.interrupted:
                try:
                    w.join(inst, ready=True)
                except Exception as e:  # noqa: BLE001 - e.g. its NodeClaim vanished meanwhile
                    self.errors[f"join: {e}"[:120]] += 1

    def _pod_gc(self) -> None:
        names = {n["metadata"]["name"] for n in self.w.server.store.list("nodes")}
        for p in self.w.server.store.list("pods"):
            node = (p.get("spec") or {}).get("nodeName")
            if node and node not in names:
                self.w.server.store.delete("pods", p["metadata"]["name"], p["metadata"].get("namespace") or "default")

    # -- interruptions -----------------------------------------------------------------------------------------
    def _interrupt(self) -> None:
        running = [i for i in self.w.instances(states=("running",)) if i["InstanceId"] not in self.interrupted]
        if not running:
            return
        inst = self.rng.choice(running)
        iid = inst["InstanceId"]
        self.interrupted.add(iid)
        lose_state = self.rng.random() < 0.3
        self.reclaims.append((self.w.clock.now() + SPOT_WARNING_SECONDS, iid, lose_state))
        if self.rng.random() < 0.3:
            self.inj.count("eventbridge_lost")          # the warning never reaches the queue
            return
        body = json.dumps(spot_warning(iid, self.w.clock.isoformat()))
        self.w.sqs.send_message(QueueUrl=self.iq_url, MessageBody=body)
        if self.rng.random() < 0.3:
            self.inj.count("sqs_duplicate")             # EventBridge -> SQS is at-least-once
            self.w.sqs.send_message(QueueUrl=self.iq_url, MessageBody=body)

    def _aws_reclaims(self) -> None:
        now = self.w.clock.now()
        due = [r for r in self.reclaims if r[0] <= now]
        self.reclaims = [r for r in self.reclaims if r[0] > now]
        for _t, iid, lose in due:
            r = self.w.ec2.describe_instances(InstanceIds=[iid])["Reservations"]
            state = r[0]["Instances"][0]["State"]["Name"] if r else "terminated"
            if state not in ("shutting-down", "terminated"):
                self.w.ec2.terminate_instances(InstanceIds=[iid])
            for n in self.w.server.store.list("nodes"):
                if (n.get("spec") or {}).get("providerID", "").endswith("/" + iid):
                    simnodes.set_node_ready(self.w.server, n["metadata"]["name"], False)
            if lose:
                self.inj.count("eventbridge_lost")
            else:
                self.w.sqs.send_message(QueueUrl=self.iq_url, MessageBody=json.dumps(
                    state_change(iid, "shutting-down", self.w.clock.isoformat())))

    def _deliver_interruptions(self) -> None:
        w = self.w
        msgs = []
        while True:
            got = w.sqs.receive_message(QueueUrl=self.iq_url, MaxNumberOfMessages=10, VisibilityTimeout=30,
                                        AttributeNames=["All"]).get("Messages", [])
            if not got:
                break
            msgs.extend(got)
        if not msgs:
            return
        ev = {"Records": [sqs_record(m, self.iq_url, w.region) for m in msgs]}

        def call():
            with contextlib.redirect_stdout(w.logs):
                return self.interruption.handler(ev, LambdaContext(f"{w.cluster}-interruption"))

        out = self._invoke("interruption", call)
        failed = {f["itemIdentifier"] for f in (out.get("response") or {}).get("batchItemFailures", [])} \
            if not (out["crashed"] or out["error"]) else {r["messageId"] for r in ev["Records"]}
        for r in ev["Records"]:
            if r["messageId"] in failed:   # visible again at once (the queue redelivers it next round)
                w.sqs.change_message_visibility(QueueUrl=self.iq_url, ReceiptHandle=r["receiptHandle"], VisibilityTimeout=0)
                if self.faults_on:
                    self.inj.count("sqs_redelivery")
            else:
                w.sqs.delete_message(QueueUrl=self.iq_url, ReceiptHandle=r["receiptHandle"])

    # -- observation and counters ------------------------------------------------------------------------------
    def _observe(self, after: str) -> None:
        """Budget check after every invocation: nodes of the NodePool tainted for disruption (not AWS's reclaims)."""
        n = 0
        names = []
        for node in self.w.server.store.list("nodes"):
            if _iid((node.get("spec") or {}).get("providerID")) in self.interrupted:
                continue
            if has_disrupted_taint(node):
                n += 1
                names.append(node["metadata"]["name"])
        if n > BUDGET:
            self.budget_overruns += 1
            self.overrun_detail.append(f"after {after} at {self.w.clock.isoformat()}: {n} disrupting {names}")

    def _signature(self):
        w = self.w
        pods = tuple(sorted((p["metadata"]["name"], (p.get("spec") or {}).get("nodeName") or "") for p in w.server.store.list("pods")))
        insts = tuple(sorted(i["InstanceId"] for i in w.instances()))
        claims = tuple(sorted((nc.name, bool(nc.metadata.get("deletionTimestamp"))) for nc in w.store.list("NodeClaim")))
        taints = tuple(sorted(n["metadata"]["name"] for n in w.server.store.list("nodes")
                              if has_disrupted_taint(n)))
        return pods, insts, claims, taints

    def measure(self) -> dict:
        w = self.w
        resp = w.ec2.describe_instances()
        every = [i for r in resp["Reservations"] for i in r["Instances"]]
        tags = {i["InstanceId"]: {t["Key"]: t["Value"] for t in i.get("Tags") or []} for i in every}
        ours = [i for i in every if "karpenter.sh/nodepool" in tags[i["InstanceId"]]]
        per_claim = Counter(tags[i["InstanceId"]].get("karpenter.sh/nodeclaim", "") for i in ours)
        double = {k: v for k, v in per_claim.items() if k and v > 1}
        claims = w.store.list("NodeClaim")
        live_iids = {_iid(nc.status.get("providerID")) for nc in claims if not nc.metadata.get("deletionTimestamp")}
        running = {i["InstanceId"]: i for i in ours if i["State"]["Name"] in ("pending", "running")}
        leaked = sorted(iid for iid in running if iid not in live_iids)

        nodes = {n["metadata"]["name"]: n for n in w.server.store.list("nodes")}
        pods = [p for p in w.server.store.list("pods") if not p["metadata"].get("deletionTimestamp")]
        lost, stuck = {}, []
        for name in self.deploys:
            obj = w.server.store.get("deployments", name, "default") or {}
            replicas = int((obj.get("spec") or {}).get("replicas") or 0)
            mine = [p for p in pods if (p["metadata"].get("labels") or {}).get("app") == name]
            ok = pend = 0
            for p in mine:
                node = (p.get("spec") or {}).get("nodeName")
                if not node:
                    pend += 1
                    continue
                n = nodes.get(node)
                if n is not None and _iid((n.get("spec") or {}).get("providerID")) in running:
                    ok += 1
            if replicas - ok - pend > 0:
                lost[name] = replicas - ok - pend
            stuck += [p["metadata"]["name"] for p in mine if not (p.get("spec") or {}).get("nodeName")]
        by_iid = {_iid(nc.status.get("providerID")): nc for nc in claims}
        stranded = []
        for n in nodes.values():
            if not has_disrupted_taint(n):
                continue
            nc = by_iid.get(_iid((n.get("spec") or {}).get("providerID")))
            if nc is None or not nc.metadata.get("deletionTimestamp"):
                stranded.append(n["metadata"]["name"])
        out = {"seed": self.seed, "leaked_instances": len(leaked), "lost_pods": sum(lost.values()), "stuck_pods": len(stuck),
               "stranded_taints": len(stranded), "budget_overruns": self.budget_overruns,
               "double_launches": sum(v - 1 for v in double.values())}
        out["detail"] = {"leaked": leaked, "lost": lost, "stuck": stuck[:20], "stranded": stranded, "double": double,
                         "overruns": self.overrun_detail[:10], "errors": dict(self.errors.most_common(10)),
                         "settled": self.settled, "settle_rounds": getattr(self, "settle_count", 0),
                         "instances": len(running), "nodeclaims": len(claims),
                         "virtual_minutes": round(w.clock.elapsed / 60, 1)}
        return out


def run_seed(seed: int, **kw) -> dict:
    return FaultRun(seed, **kw).run()
