"""A scripted fault run that goes through every recovery path once (the mutation runs, :mod:`.mutations`).

Two Deployments, no random choices: ``app0`` (pods of 1 CPU that want a node each: required pod anti-affinity on
the hostname) gives three nodes in a first round without faults; ``app1`` (pods of 2 CPU, which fit on no node sized
for one of ``app0``'s) is scaled up to make the provisioner work while it dies at scripted points.  Every fault
comes within the first four virtual minutes, so every recovery's bound ends soon after:

| round | what | the recovery path it needs |
|---|---|---|
| 0 | ``app0``: 3 replicas, three nodes; no fault | |
| 1 | the NodePool's template changes (the three nodes drift); ``app0`` scaled to 2 (a node empties: its command deletes it) | ledger release of the gone NodeClaim's entry |
| 1 | the first drift command's replacements register but never become Ready (``kubelet_broken``, counted when its kubelet starts) | the 10-minute replacement timeout (the 15-minute registration timeout does not apply: they registered) |
| 1 | ``app1`` scaled to 1; the provisioner dies right after CreateFleet (an instance running, its NodeClaim without providerID) | adoption of the tagged instance |
| 1 | a spot warning for a node with a pod; the interruption handler's DynamoDB writes throttled (12 in a row) | the record returned in ``batchItemFailures`` and redelivered after the visibility timeout (90 s), acted on before the reclaim (round 3) |
| 2 | ``app1`` scaled to 2; the provisioner dies right after the launch-claim transaction (a claim with no NodeClaim) | stale launch-claim release |
| 2 | an instance tagged for a NodeClaim that does not exist, whose kubelet never starts (a record lost) | orphan GC by providerID |
| 3 | ``app1`` scaled to 3; the provisioner dies right before CreateFleet (a NodeClaim nothing was launched for) | the relaunch of the unknown launch (the lifecycle sweep's, or the provisioner's) once its lease is over (``Launcher.resolve``) |
| next | a ``karpenter.sh/disrupted`` taint on a broken replacement's node, the round after it registered (no command; as a failed best-effort untaint leaves) | stale disrupted-taint removal |

Then the faults stop and the run settles as any other (:meth:`FaultRun._settle`: quiet, 16 minutes in 4-minute
steps, quiet): the broken command is abandoned at 10 minutes, its replacements kept (NotReady, uninitialized).  The
order of the drift commands follows the NodeClaims' names (random), so the round of a step may move by one.  Without
a mutation every invariant holds and every loss counter is 0; with one, the run stops at the first violation of an
invariant the mutation names.
"""

from __future__ import annotations

from ...api.labels import DISRUPTED_TAINT, NODECLAIM_TAG, REPLACES_ANNOTATION, decode_replaces
from .plan import FaultPlan
from .scenario import FaultRun, deployment

TARGETED_ROUNDS = 4
APP, LOAD = "app0", "app1"
LOST_RECORD = "default-lostrecord"   # the NodeClaim named by the planted orphan instance (never existed)


def spread_deployment(replicas: int) -> dict:
    """``APP``: pods of 1 CPU, one per node (required anti-affinity on the hostname)."""
    doc = deployment(APP, replicas, "1", "1Gi")
    doc["spec"]["template"]["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": APP}}, "topologyKey": "kubernetes.io/hostname"}]}}
    return doc


class TargetedRun(FaultRun):
    def __init__(self, seed: int = 0, rounds: int = TARGETED_ROUNDS, settle_rounds: int = 30, **kw):
        super().__init__(seed, rounds=rounds, settle_rounds=settle_rounds, rate=1.0, **kw)
        self.round_no = -1
        self.scripted: dict[str, FaultPlan] = {}   # invocation name -> the plan of its next invocation this round
        self.no_kubelet: set[str] = set()          # instance ids whose kubelet never starts
        self.broken_command: tuple[str, ...] | None = None   # the NodeClaims the broken replacements replace
        self.broken: set[str] = set()              # NodeClaims of replacements whose node never becomes Ready
        self.taint_planted = False

    def _workloads(self) -> None:   # app1's pods (2 CPU) fit on no node sized for one of app0's (1 CPU)
        self.deploys[APP] = 3
        self.wc.add(spread_deployment(3))
        self.deploys[LOAD] = 0
        self.wc.add(deployment(LOAD, 0, "2", "1Gi"))

    def _chance(self, p: float) -> bool:
        return False

    def _plan(self, name: str):
        return self.scripted.pop(name, None) if self.faults_on else None

    def _no_kubelet(self, instance_id: str) -> bool:
        return instance_id in self.no_kubelet

    def _kubelet(self, inst: dict) -> bool | None:
        iid = inst["InstanceId"]
        if iid in self.no_kubelet:
            return None
        name = self._tag(inst)
        nc = self.w.store.get("NodeClaim", name) if name not in self.broken else None
        replaces = decode_replaces((nc.annotations or {}).get(REPLACES_ANNOTATION)) if nc is not None else []
        # the replacements of the first disruption command (not an interruption's) never become Ready
        if replaces and not any(self._interrupted_claim(r) for r in replaces) and \
                self.broken_command in (None, tuple(sorted(replaces))):
            self.broken_command = tuple(sorted(replaces))
            self.inj.count("kubelet_broken")
            self.broken.add(name)
        return name not in self.broken

    def _interrupted_claim(self, name: str) -> bool:
        nc = self.w.store.get("NodeClaim", name)
        return nc is not None and (nc.status.get("providerID") or "").rsplit("/", 1)[-1] in self.interrupted

    def _check(self) -> None:
        # pods the provisioner nominated to a replacement that never becomes Ready wait for it (a lasting fault)
        for uid, name in (self.w.env.claims.reservations() or {}).items():
            if name in self.broken:
                self.pod_reset[uid] = self.w.clock()
        super()._check()

    def _scale(self, name: str, replicas: int) -> None:
        self.deploys[name] = replicas
        self.event("scale")
        self.wc.scale("Deployment", "default", name, replicas)
        self.wc.reconcile()
        self.w.schedule()

    def _script(self) -> None:
        if self.broken and not self.taint_planted:   # the round after the broken replacement's node registered
            self.taint_planted = True
            self._plant_taint()
        if not self.faults_on:
            return
        self.round_no += 1
        r = self.round_no
        if r == 1:
            self._drift_nodepool()
            self._scale(APP, 2)
            self._scale(LOAD, 1)
            self.scripted["provisioner"] = FaultPlan(crash_on=("ec2", "CreateFleet"), crash_after=True)
            busy = {(p.get("spec") or {}).get("nodeName") for p in self.w.server.store.list("pods")}
            nodes = sorted(n["spec"]["providerID"].rsplit("/", 1)[-1] for n in self.w.server.store.list("nodes")
                           if n["metadata"]["name"] in busy)
            if nodes:   # a node with a pod left (not the one the scale-down emptied)
                self._interrupt(nodes[0], lose=False)
                self.scripted["interruption"] = FaultPlan(aws_errors={("dynamodb", "UpdateItem"): ["ddb_throttle", 12],
                                                                      ("dynamodb", "PutItem"): ["ddb_throttle", 12]})
        elif r == 2:
            self._scale(LOAD, 2)
            self.scripted["provisioner"] = FaultPlan(crash_on=("dynamodb", "TransactWriteItems"), crash_after=True)
            self._plant_orphan()
        elif r == 3:
            self._scale(LOAD, 3)
            self.scripted["provisioner"] = FaultPlan(crash_on=("ec2", "CreateFleet"), crash_after=False)

    @staticmethod
    def _tag(inst: dict) -> str:
        return {t["Key"]: t["Value"] for t in inst.get("Tags") or []}.get(NODECLAIM_TAG, "")

    # -- planted states ------------------------------------------------------------------------------------------
    def _plant_orphan(self) -> None:
        w = self.w
        inst = w.launched_instances(states=("running",))[0]    # launched by the provisioner: this deployment's tags
        tags = [t for t in inst.get("Tags") or [] if t["Key"] != NODECLAIM_TAG and not t["Key"].startswith("aws:")]
        out = w.ec2.run_instances(ImageId=inst["ImageId"], InstanceType=inst["InstanceType"], MinCount=1, MaxCount=1,
                                  TagSpecifications=[{"ResourceType": "instance", "Tags": tags + [
                                      {"Key": NODECLAIM_TAG, "Value": LOST_RECORD}]}])
        self.no_kubelet.add(out["Instances"][0]["InstanceId"])
        self.event("planted")

    def _plant_taint(self) -> None:
        """On the broken replacement's node (NotReady; a replacement is no command's candidate, and no command takes
        a node while one is uninitialized): a taint no command explains, for as long as the run lasts."""
        pids = {nc.status.get("providerID") for nc in self.w.store.list("NodeClaim") if nc.name in self.broken}
        nodes = [n for n in self.w.server.store.list("nodes") if (n.get("spec") or {}).get("providerID") in pids - {None}]
        if not nodes:
            return
        node = nodes[0]
        self.w.server.store.patch("nodes", node["metadata"]["name"], {"spec": {"taints": (node["spec"].get("taints") or []) + [
            dict(DISRUPTED_TAINT)]}})
        self.planted_taints.add(node["metadata"]["name"])
        self.event("planted")


def run_targeted(mutation: str | None = None, stop: bool = True, **kw) -> dict:
    """The targeted run, with ``mutation`` (a :data:`~.mutations.MUTATIONS` name) switched off: stopped as soon as
    one of the mutation's catchers fires (``stop``)."""
    from .mutations import MUTATIONS, switched_off

    if mutation is None:
        return TargetedRun(**kw).run()
    m = MUTATIONS[mutation]
    with switched_off(mutation):
        return TargetedRun(stop_on=m.caught_by if stop else (), **kw).run()
