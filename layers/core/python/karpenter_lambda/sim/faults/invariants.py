"""Invariants of the fault run, checked after every round from ground truth (issue 29 item 2), not once at the end.

Each invariant looks at the cluster as it is (moto's instances, the API server's pods and nodes, the store, the
launch claims and the disruption ledger in DynamoDB) and names the things that break it now.  A thing may break it
for a while after a fault (the recovery takes a sweep or a lease); it is a **violation** when it still breaks it
``bound`` seconds after the later of when it was first seen and the latest disturbance (an injected fault, or a
scenario event that moves work: a reclaim, a scale, a NodePool change, a planted state).  So during the faults
the invariants are lenient, and once the faults stop every recovery must finish within its bound.  Each violation
is recorded once per thing, with the virtual time and the details.

| invariant | breaks it | bound after the last disturbance |
|---|---|---|
| ``pending_bound`` | a pod pending (not bound, not deleting) | launch-to-ready (one round here) + 3 min, after the pod's last fault (below) |
| ``one_instance_per_nodeclaim`` | a NodeClaim tag on two live instances | none (at once) |
| ``ledger_progress`` | a ledger entry in one state (proposed / replacing / deleting) or naming a gone NodeClaim; the ledger's per-NodePool count unequal to its entries | validation delay / replacement timeout / none, + 3 min; the count at once |
| ``usage_matches_claims`` | a NodePool's usage totals unequal to the sum of its launch claims (at once); a claim whose NodeClaim does not exist | the stale-claim age (5 min) + 3 min |
| ``disrupted_taint_has_command`` | a Node tainted ``karpenter.sh/disrupted`` with no ledger entry and no deletion of its NodeClaim | 3 min |
| ``no_leaked_instance`` | this deployment's live instance no NodeClaim runs on | the orphan age (30 s) + 3 min; tagged for a NodeClaim without providerID (adoptable): the launch lease (2 min) + 3 min |
| ``launch_resolved`` | a NodeClaim whose launch must be resolved (:func:`~karpenter_lambda.controllers.launcher.launch_pending`: no providerID, not deleting, its outcome marked unknown or its launcher's 2-minute lease over) and still is | two lifecycle periods (2 min) after it became so (Karpenter's launch reconciler retries within seconds; the 5-minute backstop is not a resolution) |
| ``interruption_acted_before_ack`` | an interruption message acknowledged (deleted from the queue) while its instance's NodeClaim is not deleting | none (checked at the acknowledgement, :meth:`Invariants.acknowledged`) |
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

from ...adapters.store.ledger import DELETING, PROPOSED, REPLACING, DisruptionLedger
from ...api.kube import instance_id_of
from ...api.labels import NODECLAIM_TAG, OWNER_TAG, has_disrupted_taint
from ...api.times import to_epoch
from ...controllers.disrupt import VALIDATION_DELAY
from ...controllers.disruption_exec import REPLACEMENT_TIMEOUT
from ...controllers.launcher import LAUNCH_LEASE, OUTCOME_UNKNOWN, launch_pending
from ...controllers.lifecycle import STALE_CLAIM_AGE
from .ground_truth import instance_states

GRACE = 180.0               # "at most 3 minutes beyond" (issue 29 item 2)
LAUNCH_TO_READY = 60.0      # the fault world's kubelets join Ready in the round their instance runs (one round)
ORPHAN_AGE = 30.0           # the lifecycle sweep's orphan_min_age default
LAUNCH_RESOLVE = 2 * 60.0   # two lifecycle periods (the sweep runs every minute and resolves an unknown launch)
NAMES = ("pending_bound", "one_instance_per_nodeclaim", "ledger_progress", "usage_matches_claims",
         "disrupted_taint_has_command", "no_leaked_instance", "interruption_acted_before_ack", "launch_resolved")
LIVE = ("pending", "running")


@dataclass
class Violation:
    invariant: str
    key: str
    at: float            # virtual seconds since the run's start
    detail: str

    def to_dict(self) -> dict:
        return {"invariant": self.invariant, "key": self.key, "at": round(self.at, 1), "detail": self.detail}


class Invariants:
    """``check(last_disturbance)`` after every round; ``acknowledged(body)`` when an interruption record is deleted."""

    def __init__(self, world, enabled: tuple[str, ...] = NAMES):
        self.w = world
        self.enabled = set(enabled)
        self.first_seen: dict[tuple[str, str], float] = {}
        self.violations: list[Violation] = []
        self.counts: Counter = Counter({n: 0 for n in NAMES})
        self._reported: set[tuple[str, str]] = set()
        env = world.env
        self.claims = env.claims
        self.ledger = DisruptionLedger(env.dynamodb, env.config.cluster, env.config.state_table)

    # -- recording ---------------------------------------------------------------------------------------------
    def _violate(self, name: str, key: str, detail: str) -> None:
        if (name, key) in self._reported or name not in self.enabled:
            return
        self._reported.add((name, key))
        self.counts[name] += 1
        self.violations.append(Violation(name, key, self.w.clock.elapsed, detail))

    def _suspect(self, seen: set, name: str, key: str, since: float | None, bound: float, last: float,
                 detail: str) -> None:
        """``key`` breaks ``name`` now: a violation once it has for ``bound`` past ``since``/first sight and ``last``."""
        seen.add((name, key))
        first = self.first_seen.setdefault((name, key), self.w.clock() if since is None else since)
        if self.w.clock() - max(first, last) > bound:
            self._violate(name, key, detail)

    @property
    def held(self) -> bool:
        return not any(self.counts.values())

    # -- the checks --------------------------------------------------------------------------------------------
    def check(self, last_disturbance: float, pod_reset: dict[str, float] | None = None, pods_reset: float = 0.0) -> None:
        """``last_disturbance``: the latest fault or scenario event.  A pod's pending clock counts from the later of
        its creation, ``pod_reset[uid]`` (a fault hit a provisioner invocation that had to plan it) and
        ``pods_reset`` (a fault that delays every pod: the lifecycle sweep's, a kubelet that never starts); other
        events do not delay a pod (a reclaim, a scale, a drift make new pods)."""
        w = self.w
        now = w.clock()
        seen: set = set()
        instances = instance_states(w)   # ground truth: every instance, visible to DescribeInstances yet or not
        tags = {i["InstanceId"]: {t["Key"]: t["Value"] for t in i.get("Tags") or []} for i in instances}
        ours = [i for i in instances if OWNER_TAG in tags[i["InstanceId"]] and i["State"]["Name"] in LIVE]
        claims = {nc.name: nc for nc in w.store.list("NodeClaim")}
        nodes = w.server.store.list("nodes")
        entries = self.ledger.entries()

        # pending_bound
        for p in w.server.store.list("pods"):
            meta = p["metadata"]
            if (p.get("spec") or {}).get("nodeName") or meta.get("deletionTimestamp"):
                continue
            key = f"{meta.get('namespace') or 'default'}/{meta['name']}"
            created = to_epoch(meta.get("creationTimestamp")) or now
            since = max((pod_reset or {}).get(meta.get("uid") or "", 0.0), pods_reset)
            self._suspect(seen, "pending_bound", key, created, LAUNCH_TO_READY + GRACE, since,
                          f"pod {key} pending since {round(created - w.clock.start)}s (now {round(now - w.clock.start)}s)")

        # one_instance_per_nodeclaim
        per_claim = Counter(tags[i["InstanceId"]].get(NODECLAIM_TAG, "") for i in ours)
        for name, n in per_claim.items():
            if name and n > 1:
                ids = sorted(i["InstanceId"] for i in ours if tags[i["InstanceId"]].get(NODECLAIM_TAG) == name)
                self._violate("one_instance_per_nodeclaim", name, f"NodeClaim {name} has {n} live instances {ids}")

        # ledger_progress
        bound = {PROPOSED: VALIDATION_DELAY + GRACE, REPLACING: REPLACEMENT_TIMEOUT + GRACE, DELETING: GRACE}
        for name, e in entries.items():
            if name not in claims:
                self._suspect(seen, "ledger_progress", f"{name}:gone", None, GRACE, last_disturbance,
                              f"ledger entry of gone NodeClaim {name} ({e.reason}, {e.state}) not released")
            else:
                self._suspect(seen, "ledger_progress", f"{name}:{e.state}:{e.since or e.proposed_at}", None,
                              bound.get(e.state, GRACE), last_disturbance,
                              f"ledger entry {name} ({e.reason}, {e.sweep}) stuck in {e.state}")
        for pool, count in self._ledger_counts().items():
            have = sum(1 for e in entries.values() if e.nodepool == pool)
            if count != have:
                self._violate("ledger_progress", f"count:{pool}:{count}:{have}",
                              f"ledger count of NodePool {pool} is {count} with {have} entries")

        # usage_matches_claims
        if self.claims is not None:
            for pool, (totals, pool_claims) in self.claims.all_usage().items():
                summed: Counter = Counter()
                for c in pool_claims.values():
                    summed.update({k: int(v) for k, v in (c.get("resources") or {}).items()})
                diff = {k: (totals.get(k, 0), summed.get(k, 0)) for k in set(totals) | set(summed)
                        if int(totals.get(k, 0)) != int(summed.get(k, 0))}
                if diff:
                    self._violate("usage_matches_claims", f"totals:{pool}:{json.dumps(diff, sort_keys=True)}",
                                  f"NodePool {pool} usage != sum of its claims: {diff}")
                for cname in pool_claims:
                    if cname not in claims:
                        self._suspect(seen, "usage_matches_claims", f"{pool}/{cname}", None, STALE_CLAIM_AGE + GRACE,
                                      last_disturbance, f"launch claim {cname} of NodePool {pool}: no NodeClaim")

        # disrupted_taint_has_command
        by_iid = {instance_id_of(nc.status.get("providerID")): nc for nc in claims.values() if nc.status.get("providerID")}
        for n in nodes:
            if not has_disrupted_taint(n):
                continue
            nc = by_iid.get(instance_id_of((n.get("spec") or {}).get("providerID")))
            if nc is not None and (nc.metadata.get("deletionTimestamp") or nc.name in entries):
                continue
            name = n["metadata"]["name"]
            self._suspect(seen, "disrupted_taint_has_command", name, None, GRACE, last_disturbance,
                          f"node {name} tainted karpenter.sh/disrupted, NodeClaim {nc.name if nc else '-'} "
                          f"neither deleting nor in the ledger")

        # no_leaked_instance
        launched_on = {instance_id_of(nc.status.get("providerID")) for nc in claims.values()
                       if nc.status.get("providerID") and not nc.metadata.get("deletionTimestamp")}
        for i in ours:
            iid = i["InstanceId"]
            if iid in launched_on:
                continue
            owner = claims.get(tags[iid].get(NODECLAIM_TAG, ""))
            if owner is not None and not owner.status.get("providerID") and not owner.metadata.get("deletionTimestamp"):
                # its NodeClaim may still adopt it: within the launcher's lease (the next provisioning round adopts)
                self._suspect(seen, "no_leaked_instance", iid, None, LAUNCH_LEASE + GRACE, last_disturbance,
                              f"instance {iid} tagged for NodeClaim {owner.name}, which has not adopted it")
                continue
            if owner is not None and owner.metadata.get("deletionTimestamp") and \
                    instance_id_of(owner.status.get("providerID")) == iid:
                continue   # being terminated by its NodeClaim's deletion
            launch = to_epoch(i.get("LaunchTime")) or now
            self._suspect(seen, "no_leaked_instance", iid, launch, ORPHAN_AGE + GRACE, last_disturbance,
                          f"instance {iid} ({tags[iid].get(NODECLAIM_TAG, 'no NodeClaim tag')}) runs for no NodeClaim")

        # launch_resolved: counted from when the launch became pending (a new attempt is a new key)
        for nc in claims.values():
            if not launch_pending(nc, now):
                continue
            cond = nc.condition("Launched") or {}
            at = to_epoch(cond.get("lastTransitionTime")) or to_epoch(nc.metadata.get("creationTimestamp")) or now
            since = at if cond.get("reason") == OUTCOME_UNKNOWN else at + LAUNCH_LEASE
            self._suspect(seen, "launch_resolved", f"{nc.name}:{cond.get('lastTransitionTime')}", since, LAUNCH_RESOLVE,
                          last_disturbance, f"NodeClaim {nc.name}: launch {cond.get('reason')} since "
                          f"{round(at - w.clock.start)}s, neither launched nor rolled back")

        for k in [k for k in self.first_seen if k not in seen]:   # no longer broken: forget it
            del self.first_seen[k]

    def _ledger_counts(self) -> dict[str, int]:
        led = self.ledger
        resp = led.ddb.query(TableName=led.table, KeyConditionExpression="pk = :pk",
                             ExpressionAttributeValues={":pk": {"S": f"{led.cluster}#DisruptionInFlight"}},
                             ConsistentRead=True)
        return {it["sk"]["S"]: int(it.get("n", {"N": "0"})["N"]) for it in resp.get("Items", [])}

    def acknowledged(self, body: str) -> None:
        """An interruption record was deleted from its queue: the instance it names must be handled by now (its
        NodeClaim deleting or gone).  Messages about other instances, or states not acted on, are exempt."""
        try:
            doc = json.loads(body)
        except ValueError:
            return
        detail = doc.get("detail") or {}
        iid = detail.get("instance-id")
        kind = doc.get("detail-type", "")
        if not iid or (kind == "EC2 Instance State-change Notification" and detail.get("state") not in
                       ("stopping", "stopped", "shutting-down", "terminated")):
            return
        for nc in self.w.store.list("NodeClaim"):
            if instance_id_of(nc.status.get("providerID")) == iid and not nc.metadata.get("deletionTimestamp"):
                self._violate("interruption_acted_before_ack", f"{iid}:{doc.get('id', '')}",
                              f"{kind} for {iid} acknowledged while NodeClaim {nc.name} is not deleting")
