"""The world a crash point runs in (:mod:`.crashpoints`): a :class:`~karpenter_lambda.sim.world.World` with
Deployments kept at their replicas, SQS redelivery of the step's message, what AWS does after an interruption
notice, the recovery rounds, and the end-state checks every crash point must pass."""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from typing import Callable

from ...adapters.store.claims import LaunchClaims
from ...adapters.store.ledger import DisruptionLedger
from ...api.kube import instance_id_of
from ...api.labels import has_disrupted_taint
from .. import nodes as simnodes
from ..environment import LambdaContext, capture_logs, load_module, repo_root
from ..feeds import sqs_record
from ..moto_ec2 import all_instances, unfiltered
from ..interruption_events import state_change
from ..workloads import WorkloadController
from ..world import World
from .ground_truth import LIVE_STATES, described, launched

ROUND_SECONDS = 60.0
SETTLE_JUMP = 16 * 60.0          # past the 15-minute registration timeout and the orphan GC age
MAX_ROUNDS = 12                  # per settle phase
INTERRUPTION_RECEIVES = 5        # the interruption queue keeps a message 300 s: about five deliveries a minute apart

_modules: dict[str, object] = {}


def _interruption_module():
    if "interruption" not in _modules:
        _modules["interruption"] = load_module(repo_root() / "functions" / "interruption" / "handler.py",
                                               "crashpoints_interruption_handler")
    return _modules["interruption"]


def deployment(name: str, replicas: int, cpu: str = "500m", namespace: str = "default") -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {
                                      "requests": {"cpu": cpu, "memory": "512Mi"}}}]}}}}


class CrashWorld:
    """One run of a scenario: the world, its Deployments, pending SQS deliveries and AWS's announced actions."""

    def __init__(self, w: World):
        self.w = w
        self.wc = WorkloadController(w.server)
        self.deploys: list[tuple[str, str]] = []                 # (namespace, name)
        self.redeliver: list[tuple[str, dict, int]] = []         # (function, SQS event, receives so far)
        self.aws_actions: list[tuple[float, Callable[[], None]]] = []
        self.interruption = _interruption_module()
        capture_logs(self.interruption, w.logs)
        self.iq_url = w.sqs.create_queue(QueueName=f"{w.cluster}-interruption")["QueueUrl"]
        self.settled = True
        self.errors: Counter = Counter()

    # -- workloads -------------------------------------------------------------------------------------------
    def add(self, doc: dict) -> None:
        ns = doc["metadata"].get("namespace") or "default"
        if ns != "default" and self.w.server.store.get("namespaces", ns) is None:
            self.w.server.store.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                      "metadata": {"name": ns}})
        self.wc.add(doc)
        self.deploys.append((ns, doc["metadata"]["name"]))
        self.wc.reconcile()

    def scale(self, name: str, replicas: int, namespace: str = "default") -> None:
        self.wc.scale("Deployment", namespace, name, replicas)
        self.wc.reconcile()

    # -- deliveries ------------------------------------------------------------------------------------------
    def interruption_event(self, body: dict) -> dict:
        """The Lambda SQS event of one EventBridge event sent through the interruption queue."""
        w = self.w
        w.sqs.send_message(QueueUrl=self.iq_url, MessageBody=json.dumps(body))
        msgs = w.sqs.receive_message(QueueUrl=self.iq_url, MaxNumberOfMessages=10, VisibilityTimeout=3600,
                                     AttributeNames=["All"]).get("Messages", [])
        return {"Records": [sqs_record(m, self.iq_url, w.region) for m in msgs]}

    def call(self, function: str, event: dict) -> dict:
        w = self.w
        if function == "provisioner":
            return w.provision(event)
        with contextlib.redirect_stdout(w.logs):
            return self.interruption.handler(event, LambdaContext(f"{w.cluster}-interruption"))

    def after_delivery(self, function: str, event: dict, answer: dict | None, died: bool, receives: int = 1) -> None:
        """What SQS does with the records: a crashed invocation's are all visible again, failed ones too."""
        failed = {r["messageId"] for r in event["Records"]} if died or answer is None else \
            {f["itemIdentifier"] for f in answer.get("batchItemFailures", [])}
        again = [r for r in event["Records"] if r["messageId"] in failed]
        if again and (function != "interruption" or receives < INTERRUPTION_RECEIVES):
            self.redeliver.append((function, {"Records": again}, receives))

    def deliver(self, function: str, event: dict, receives: int = 1) -> None:
        try:
            answer, died = self.call(function, event), False
        except Exception as e:  # noqa: BLE001 - a handler that raised: Lambda fails the batch, SQS redelivers
            self.errors[f"{function}: {type(e).__name__}: {e}"[:160]] += 1
            answer, died = None, True
        self.after_delivery(function, event, answer, died, receives)

    def later(self, seconds: float, action: Callable[[], None]) -> None:
        self.aws_actions.append((self.w.clock.now() + seconds, action))

    # -- what AWS does ---------------------------------------------------------------------------------------
    def reclaim(self, iid: str, state: str = "terminated") -> None:
        """AWS takes the instance back (terminated or stopped), its Node turns NotReady, EventBridge says so."""
        w = self.w
        if state == "stopped":
            w.ec2.stop_instances(InstanceIds=[iid])
        else:
            w.ec2.terminate_instances(InstanceIds=[iid])
        for n in w.server.store.list("nodes"):
            if instance_id_of((n.get("spec") or {}).get("providerID")) == iid:
                simnodes.set_node_ready(w.server, n["metadata"]["name"], False)
        event = self.interruption_event(state_change(iid, state, w.clock.isoformat()))
        self.redeliver.append(("interruption", event, 0))

    # -- rounds ----------------------------------------------------------------------------------------------
    def kubelets(self) -> None:
        w = self.w
        have = {(n.get("spec") or {}).get("providerID") for n in w.server.store.list("nodes")}
        for inst in self._instances(("running",), have):
            if f"aws:///{inst['Placement']['AvailabilityZone']}/{inst['InstanceId']}" not in have:
                try:
                    w.join(inst, ready=True)
                except Exception as e:  # noqa: BLE001 - e.g. its NodeClaim vanished meanwhile
                    self.errors[f"join: {e}"[:160]] += 1

    def pod_gc(self) -> None:
        names = {n["metadata"]["name"] for n in self.w.server.store.list("nodes")}
        for p in self.w.server.store.list("pods"):
            node = (p.get("spec") or {}).get("nodeName")
            if node and node not in names:
                self.w.server.store.delete("pods", p["metadata"]["name"], p["metadata"].get("namespace") or "default")

    def pending(self) -> list[dict]:
        return [p for p in self.w.server.store.list("pods") if not (p.get("spec") or {}).get("nodeName")
                and not p["metadata"].get("deletionTimestamp")]

    def round(self, sweeps: Callable[["CrashWorld"], None] | None = None) -> tuple:
        """One virtual minute of the deployed system."""
        w = self.w
        due = [a for a in self.aws_actions if a[0] <= w.clock.now()]
        self.aws_actions = [a for a in self.aws_actions if a[0] > w.clock.now()]
        for _t, action in due:
            action()
        self.wc.reconcile()
        w.schedule()
        todo, self.redeliver = self.redeliver, []
        for function, event, receives in todo:
            self.deliver(function, event, receives + 1)
        pending = self.pending()
        if pending:                                        # the watcher
            self.deliver("provisioner", w.sqs_event(pending))
        self.kubelets()
        w.sweep()
        if sweeps is not None:
            sweeps(self)
        self.kubelets()
        w.schedule()
        self.pod_gc()
        w.clock.advance(ROUND_SECONDS)
        return self.signature()

    def settle(self, sweeps: Callable[["CrashWorld"], None] | None = None) -> bool:
        """Rounds until two in a row look the same, then past the registration timeout, and again."""
        ok = True
        for phase in range(2):
            quiet, last = 0, None
            for _ in range(MAX_ROUNDS):
                sig = self.round(sweeps)
                quiet = quiet + 1 if sig == last else 0
                last = sig
                if quiet >= 1 and not self.aws_actions:
                    break
            else:
                ok = False
            if phase == 0:
                self.w.clock.advance(SETTLE_JUMP)
        self.settled = self.settled and ok
        return ok

    def bring_up(self) -> None:
        """Rounds until every pod is bound (the set-up of a scenario, no crash)."""
        for _ in range(6):
            self.round()
            if not self.pending():
                return
        raise RuntimeError(f"set-up: pods still pending: {[p['metadata']['name'] for p in self.pending()]}")

    def _instances(self, states: tuple[str, ...], have: set | None = None) -> list[dict]:
        """``w.instances(states)`` (what DescribeInstances answers), read from moto's backend where that is the same
        answer (no visibility delay: every instance is visible): each round looks several times.  ``have``: only the
        instances without a Node of these providerIDs are wanted, and only they get their whole DescribeInstances
        entry (the others: InstanceId and Placement.AvailabilityZone)."""
        w = self.w
        if w.ec2_visibility_delay > 0:
            return w.instances(states=states)
        found = [(i.id, i.placement.zone) for i in launched(w, states)]
        want = [iid for iid, zone in found if have is not None and f"aws:///{zone}/{iid}" not in have]
        entries = described(w, want)
        return [entries.get(iid) or {"InstanceId": iid, "Placement": {"AvailabilityZone": zone}} for iid, zone in found]

    def signature(self) -> tuple:
        w = self.w
        pods = tuple(sorted((p["metadata"]["name"], (p.get("spec") or {}).get("nodeName") or "")
                            for p in w.server.store.list("pods")))
        insts = tuple(sorted(i["InstanceId"] for i in self._instances(LIVE_STATES)))
        claims = tuple(sorted((nc.name, bool(nc.metadata.get("deletionTimestamp")))
                              for nc in w.store.list("NodeClaim")))
        taints = tuple(sorted(n["metadata"]["name"] for n in w.server.store.list("nodes") if has_disrupted_taint(n)))
        return pods, insts, claims, taints, len(self.ledger().entries()), len(self.redeliver)

    # -- the end state ---------------------------------------------------------------------------------------
    def ledger(self) -> DisruptionLedger:
        env = self.w.env
        return DisruptionLedger(env.dynamodb, env.config.cluster, env.config.state_table)

    def node_of(self, nodeclaim_name: str) -> dict | None:
        nc = self.w.store.get("NodeClaim", nodeclaim_name)
        iid = instance_id_of((nc.status.get("providerID") if nc else None))
        for n in self.w.server.store.list("nodes"):
            if iid and instance_id_of((n.get("spec") or {}).get("providerID")) == iid:
                return n
        return None


def end_state_problems(cw: CrashWorld) -> list[str]:
    """What must hold after any crash and the recovery; each problem names what it found."""
    w = cw.w
    out: list[str] = [] if cw.settled else ["did not settle"]
    with unfiltered():   # ground truth: every instance (every page), visible to DescribeInstances yet or not
        every = all_instances(w.ec2)
    tags = {i["InstanceId"]: {t["Key"]: t["Value"] for t in i.get("Tags") or []} for i in every}
    ours = [i for i in every if "karpenter.sh/nodepool" in tags[i["InstanceId"]]]
    claims = w.store.list("NodeClaim")
    live = {instance_id_of(nc.status.get("providerID")) for nc in claims if not nc.metadata.get("deletionTimestamp")}
    running = {i["InstanceId"] for i in ours if i["State"]["Name"] in ("pending", "running")}
    alive = {i["InstanceId"] for i in ours if i["State"]["Name"] in ("pending", "running", "stopping", "stopped")}
    leaked = sorted(alive - live)
    if leaked:
        out.append(f"leaked instances {leaked}")
    stuck = sorted(nc.name for nc in claims if nc.metadata.get("deletionTimestamp"))
    if stuck:
        out.append(f"NodeClaims still deleting {stuck}")
    unlaunched = sorted(nc.name for nc in claims if instance_id_of(nc.status.get("providerID")) not in running)
    if unlaunched:
        out.append(f"NodeClaims without a running instance {unlaunched}")
    per_claim = Counter(tags[i["InstanceId"]].get("karpenter.sh/nodeclaim", "") for i in ours)
    double = {k: v for k, v in per_claim.items() if k and v > 1}
    if double:
        out.append(f"more than one instance for NodeClaims {double}")
    nodes = {n["metadata"]["name"]: n for n in w.server.store.list("nodes")}
    dead = sorted(name for name, n in nodes.items()
                  if instance_id_of((n.get("spec") or {}).get("providerID")) not in running)
    if dead:
        out.append(f"Nodes of no running instance {dead}")
    pods = [p for p in w.server.store.list("pods") if not p["metadata"].get("deletionTimestamp")]
    for ns, name in cw.deploys:
        obj = w.server.store.get("deployments", name, ns) or {}
        want = int((obj.get("spec") or {}).get("replicas") or 0)
        mine = [p for p in pods if (p["metadata"].get("namespace") or "default") == ns
                and (p["metadata"].get("labels") or {}).get("app") == name]
        ok = sum(1 for p in mine if (p.get("spec") or {}).get("nodeName") in nodes and instance_id_of(
            (nodes[p["spec"]["nodeName"]].get("spec") or {}).get("providerID")) in running)
        stuck = sum(1 for p in mine if not (p.get("spec") or {}).get("nodeName"))
        if ok < want:
            out.append(f"lost pods: {ns}/{name} {ok} of {want} running" + (f", {stuck} pending" if stuck else ""))
    by_iid = {instance_id_of(nc.status.get("providerID")): nc for nc in claims}
    stranded = sorted(n["metadata"]["name"] for n in nodes.values() if has_disrupted_taint(n) and not (
        (nc := by_iid.get(instance_id_of((n.get("spec") or {}).get("providerID")))) is not None
        and nc.metadata.get("deletionTimestamp")))
    if stranded:
        out.append(f"stranded karpenter.sh/disrupted taints on {stranded}")
    held = sorted(f"{e.nodeclaim} ({e.reason}, {e.sweep})" for e in cw.ledger().entries().values())
    if held:
        out.append(f"budget slots held: {held}")
    out.extend(usage_problems(cw))
    return out


def usage_problems(cw: CrashWorld) -> list[str]:
    """The NodePool usage counters equal the sum of the launch claims, and the claims are the live NodeClaims'."""
    env = cw.w.env
    claims = LaunchClaims(env.dynamodb, env.config.cluster, env.config.state_table)
    nodeclaims: dict[str, set[str]] = {}
    for nc in cw.w.store.list("NodeClaim"):
        nodeclaims.setdefault(nc.nodepool_name, set()).add(nc.name)
    out = []
    for pool, (totals, by_claim) in sorted(claims.all_usage().items()):
        summed: Counter = Counter()
        for c in by_claim.values():
            summed.update({k: int(v) for k, v in (c.get("resources") or {}).items()})
        diff = {k: (totals.get(k, 0), summed.get(k, 0)) for k in set(totals) | set(summed)
                if totals.get(k, 0) != summed.get(k, 0)}
        if diff:
            out.append(f"NodePool {pool} usage differs from its claims (usage, claims): {diff}")
        gone = sorted(set(by_claim) - nodeclaims.get(pool, set()))
        if gone:
            out.append(f"NodePool {pool} usage holds claims of gone NodeClaims {gone}")
        uncounted = sorted(nodeclaims.get(pool, set()) - set(by_claim))
        if uncounted:
            out.append(f"NodePool {pool}: NodeClaims without a launch claim {uncounted}")
    return out
