"""A scripted fault run that goes through every recovery path once (the mutation runs, :mod:`.mutations`).

One Deployment (3 pods of 1 CPU), no random choices; the faults and events come at fixed rounds:

| round | what | the recovery path it needs |
|---|---|---|
| 0 | the provisioner dies right before CreateFleet (a NodeClaim nothing was launched for) | relaunch of the unknown launch (``Launcher.resolve``) |
| 1 | scale to 5; the provisioner dies right after the launch-claim transaction (a claim with no NodeClaim) | stale launch-claim release |
| 2 | scale to 7; the provisioner dies right after CreateFleet (instance running, NodeClaim without providerID) | adoption of the tagged instance |
| 3 | an instance tagged for a NodeClaim that does not exist, whose kubelet never starts (a record lost) | orphan GC by providerID |
| 3 | a spot warning for the first recorded node; the interruption handler's DynamoDB writes throttled (12 in a row) | the record returned in ``batchItemFailures`` and redelivered after the visibility timeout (90 s) |
| 6 | the NodePool's template changes (every node drifts); the first replacement's kubelet never starts | the 10-minute replacement timeout; ledger release of the replaced NodeClaims |
| 7 | a ``karpenter.sh/disrupted`` taint on a node launched after the change (no command; as a failed best-effort untaint leaves) | stale disrupted-taint removal |

A replacement whose kubelet never starts is a fault that lasts until its instance is gone (the 15-minute
registration timeout): pods the provisioner nominated to it wait as long, so while it runs every pod's pending clock
restarts (``pods_reset``).  Then the faults stop and the run settles as any other (:meth:`FaultRun._settle`): the invariants' bounds count from
the last of these.  Without a mutation every invariant holds and every loss counter is 0.
"""

from __future__ import annotations

from ...api.labels import DISRUPTED_TAINT, NODECLAIM_TAG, REPLACES_ANNOTATION
from .plan import FaultPlan
from .scenario import FaultRun, deployment

TARGETED_ROUNDS = 8


class TargetedRun(FaultRun):
    def __init__(self, seed: int = 0, rounds: int = TARGETED_ROUNDS, settle_rounds: int = 30, **kw):
        super().__init__(seed, rounds=rounds, settle_rounds=settle_rounds, rate=1.0, **kw)
        self.round_no = -1
        self.scripted: dict[str, FaultPlan] = {}   # invocation name -> the plan of its next invocation this round
        self.no_kubelet: set[str] = set()          # instance ids whose kubelet never starts
        self.break_next_replacement = False
        self.broken: set[str] = set()              # replacements whose kubelet never starts (a lasting fault)

    def _workloads(self) -> None:
        self.deploys["app0"] = 3
        self.wc.add(deployment("app0", 3, "1", "1Gi"))

    def _chance(self, p: float) -> bool:
        return False

    def _plan(self, name: str):
        return self.scripted.pop(name, None) if self.faults_on else None

    def _kubelet_starts(self, inst: dict) -> bool:
        iid = inst["InstanceId"]
        if iid in self.no_kubelet:
            return False
        if self.break_next_replacement:
            tags = {t["Key"]: t["Value"] for t in inst.get("Tags") or []}
            nc = self.w.store.get("NodeClaim", tags.get(NODECLAIM_TAG, ""))
            if nc is not None and (nc.annotations or {}).get(REPLACES_ANNOTATION):
                self.break_next_replacement = False
                self.no_kubelet.add(iid)
                self.inj.count("kubelet_broken")
                self.broken.add(iid)
                return False
        return True

    def _check(self) -> None:
        if self.broken and any(i["InstanceId"] in self.broken for i in self.w.instances()):
            self.pods_reset = self.w.clock()
        super()._check()

    def _scale(self, replicas: int) -> None:
        self.deploys["app0"] = replicas
        self.event("scale")
        self.wc.scale("Deployment", "default", "app0", replicas)
        self.wc.reconcile()
        self.w.schedule()

    def _script(self) -> None:
        if not self.faults_on:
            return
        self.round_no += 1
        r = self.round_no
        if r == 0:
            self.scripted["provisioner"] = FaultPlan(crash_on=("ec2", "CreateFleet"), crash_after=False)
        elif r == 1:
            self._scale(5)
            self.scripted["provisioner"] = FaultPlan(crash_on=("dynamodb", "TransactWriteItems"), crash_after=True)
        elif r == 2:
            self._scale(7)
            self.scripted["provisioner"] = FaultPlan(crash_on=("ec2", "CreateFleet"), crash_after=True)
        elif r == 3:
            self._plant_orphan()
            recorded = {nc.status.get("providerID", "").rsplit("/", 1)[-1] for nc in self.w.store.list("NodeClaim")}
            running = sorted(i["InstanceId"] for i in self.w.instances(states=("running",)) if i["InstanceId"] in recorded)
            if running:
                self._interrupt(running[0], lose=False)
                self.scripted["interruption"] = FaultPlan(aws_errors={("dynamodb", "UpdateItem"): ["ddb_throttle", 12],
                                                                      ("dynamodb", "PutItem"): ["ddb_throttle", 12]})
        elif r == 6:   # after the bounds of rounds 0-2 (a pod nominated to a NodeClaim that never registers waits)
            self.break_next_replacement = True
            self._drift_nodepool()
        elif r == 7:
            self._plant_taint()

    # -- planted states ------------------------------------------------------------------------------------------
    def _plant_orphan(self) -> None:
        w = self.w
        inst = w.instances(states=("running",))[0]    # launched by the provisioner: this deployment's tags
        tags = [t for t in inst.get("Tags") or [] if t["Key"] != NODECLAIM_TAG and not t["Key"].startswith("aws:")]
        out = w.ec2.run_instances(ImageId=inst["ImageId"], InstanceType=inst["InstanceType"], MinCount=1, MaxCount=1,
                                  TagSpecifications=[{"ResourceType": "instance", "Tags": tags + [
                                      {"Key": NODECLAIM_TAG, "Value": "default-lostrecord"}]}])
        self.no_kubelet.add(out["Instances"][0]["InstanceId"])
        self.event("planted")

    def _plant_taint(self) -> None:
        w = self.w
        claims = {nc.status.get("providerID"): nc for nc in w.store.list("NodeClaim")   # not deleting, not drifted
                  if nc.status.get("providerID") and not nc.metadata.get("deletionTimestamp") and not nc.is_true("Drifted")}
        nodes = sorted((n for n in w.server.store.list("nodes") if (n.get("spec") or {}).get("providerID") in claims
                        and n["spec"]["providerID"].rsplit("/", 1)[-1] not in self.interrupted),
                       key=lambda n: n["metadata"]["name"])
        if not nodes:
            return
        node = nodes[-1]
        w.server.store.patch("nodes", node["metadata"]["name"], {"spec": {"taints": (node["spec"].get("taints") or []) + [
            dict(DISRUPTED_TAINT)]}})
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
