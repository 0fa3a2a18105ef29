"""The lifecycle sweep (every minute): NodeClaim registration and initialization, liveness, garbage collection.

``Lifecycle(...).sweep(now) -> LifecycleReport``:

* **Registered**: a Node with the NodeClaim's providerID exists.  The NodePool's template labels,
  the NodeClaim's labels, annotations and taints are applied to the Node (startup taints come from the
  kubelet's registration flags and are not re-added: the sweep polls, so an agent may already have
  removed them -- except for a Custom AMI family, whose userData is the user's: its startup taints are added
  too, as Karpenter's syncNode; a Node labelled ``karpenter.sh/do-not-sync-taints=true`` gets no taint at
  all), ``karpenter.sh/unregistered`` is removed, the Node gets
  ``karpenter.sh/registered=true`` and the NodeClaim ``status.nodeName``.  The Node is updated with an
  optimistic lock: the taints are computed from a fresh read and patched with its ``resourceVersion``
  (409 Conflict: read again, retry), so a taint an agent removed meanwhile is never put back.
* **Initialized**: the Node is Ready, none of the NodeClaim's startup taints nor a known ephemeral taint
  (``scheduling.inputs.is_ephemeral_taint``) remain and every resource the NodeClaim requests is non-zero in the
  Node's allocatable (Karpenter's RequestedResourcesRegistered; our volume counts aside); the Node gets
  ``karpenter.sh/initialized=true``.
* **Adoption**: a NodeClaim without providerID (a crash, timeout or DynamoDB error between CreateFleet and
  marking it Launched) is matched with this deployment's live instance tagged ``karpenter.sh/nodeclaim=<its
  name>``: the instance is written on it (providerID, type/zone/capacity-type labels, capacity, price) as the
  launcher would have.  Only when no such instance exists 5 minutes after the last launch attempt is the NodeClaim
  deleted (the backstop).
* **Unknown launches** (Karpenter's launch reconciler): a NodeClaim without providerID and no instance tagged for it
  whose launch outcome is unknown, or whose launcher's lease (2 minutes) is over (a crash at CreateFleet), is
  resolved by :meth:`.launcher.Launcher.resolve` in this sweep -- launched again with its launch token, or rolled
  back when nothing can launch -- whether or not pods are pending (the next provisioning round does the same when
  it comes first; the resolver's conditional take keeps the two from launching it twice).
* **Liveness**: launched but not registered within 15 minutes -> terminate the instance, delete the
  NodeClaim (deletion honours the finalizer: :mod:`.termination`).
* **Node deletion** (``kubectl delete node``): registration puts Karpenter's ``karpenter.sh/termination`` finalizer
  on the Node (and a sweep on a registered Node without it), so a deletion only marks it deleting; the sweep then
  marks its NodeClaim deleting (:func:`.lifecycle_gc.request_node_deletions`, reason ``NodeDeleted``, before the
  capacity for user deletions), and the termination flow drains it, terminates the instance and removes the
  finalizer.  A deleting Node with the finalizer and no NodeClaim is drained and released
  (:func:`.lifecycle_gc.finalize_orphan_nodes`).  A registered NodeClaim whose Node is gone without it (deleted
  before it had the finalizer; confirmed by a read of it by name) while its instance runs is deleted with it,
  instance terminated.
* **Garbage collection** (by providerID): this deployment's instances (``karpenter-lambda.io/cluster=<name>``,
  :data:`~karpenter_lambda.api.labels.OWNER_TAG`) that no NodeClaim's providerID names and no NodeClaim without
  providerID may still adopt, older than 30 s, are terminated.  A NodeClaim whose instance is terminated is
  deleted (with its Node); a registered one whose instance no longer shows in the tag-filtered list is looked up
  by id and, still running, terminated first (never a delete that leaves the instance running).  Launch claims
  (NodePool usage, pod reservations) of deleted NodeClaims are released, also stale ones left by a crash.
* **Dead interruption budget slots**: a rebalance replacement's slot in the disruption ledger whose NodeClaim is
  still not deleting 5 minutes after it was taken (the delivery died and no redelivery resumed it) is released
  (:func:`.interrupt.release_stale_reservations`).
* **EC2NodeClass deletion**: launch templates of EC2NodeClasses that no longer exist (and that no NodeClaim or
  live instance uses), and the instance profile this project created for them, are deleted.
* **Node repair** (:mod:`.repair`, on unless ``KARPENTER_LAMBDA_NODE_REPAIR=false``): a node unhealthy past its
  toleration (Ready False/Unknown 30 min, ...) has its NodeClaim deleted forcefully, unless more than 20% of its
  NodePool is unhealthy.  **Instance status checks** (:mod:`.instance_health`, on unless
  ``KARPENTER_LAMBDA_INSTANCE_STATUS_CHECKS=false``; every sweep, a quiet one too): one DescribeInstanceStatus for
  the NodeClaims' instances; impaired for 120 s -> deleted forcefully, a scheduled EC2 event -> replaced and drained
  as a scheduled change.  **Static NodePools** (:mod:`.static`): each ``spec.replicas`` NodePool is brought to its
  count (launch, or delete the least disruptive).  **NodePool deletion** (:mod:`.nodepool_deleted`): the
  NodeClaims of a NodePool that no longer exists are deleted gracefully, as Kubernetes' garbage collector does
  Karpenter's.  All four come before the per-NodeClaim work, so their deletions start in the same sweep; each
  deletion is one ``disrupted`` entry of the report.
* **Deletion**: every NodeClaim marked deleting (``deletionTimestamp``) is finalized (:class:`.termination.Terminator`),
  after the others (a replacement Initialized in this sweep counts for the drain it holds): drained -- a scheduled
  change's, a deleted NodePool's or a user's deletion only once the NodeClaims replacing it (``replaces``) are
  Initialized, at most ``REPLACEMENT_TIMEOUT`` after their launch (:func:`waiting_replacements`) -- then the instance
  terminated, then Node and record removed once EC2 reports the instance terminated or NotFound (a shutting-down
  one is waited for; an instance missing from the sweep's tag-filtered listing is asked for by id first).

EC2 is reached only through the cloud provider (:mod:`karpenter_lambda.cloudprovider`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from ..api import labels as wk
from ..api.conditions import make_condition, set_condition
from ..api.labels import NODECLAIM_TAG
from ..api.objects import NodeClaim, NodePool
from ..api.quantity import parse_resource_list
from ..api.times import to_epoch
from ..cloudprovider import GONE_STATES, AWSCloudProvider, instance_state, instance_tags
from . import runtime
from .base import Controller
from .cluster_state import as_dict, instance_id_of, node_allocatable, node_ready
from .launcher import Launcher, launch_pending
from .manual_launch import sweep as manual_nodeclaim_step
from .lifecycle_gc import request_node_deletions, terminate_orphans
from ..scheduling.inputs import is_ephemeral_taint
from .nodepool_deleted import NodePoolDeletion
from .quiet_lifecycle import CHECKED, SKIPPED, QuietLifecycle
from .instance_health import InstanceHealthChecker
from .repair import NodeRepairer
from .static import StaticCapacity
from .sweep_shortcuts import SweepMarker, enabled as shortcuts_enabled
from .interrupt import is_transient
from .leaving import launch_ahead
from . import disruption_exec
from .termination import (NODE_DELETED, Terminator, add_termination_finalizer, holds_for_replacements, user_deletion,
                          with_termination_finalizer)

LAUNCH_TIMEOUT = 5 * 60
STALE_CLAIM_AGE = 5 * 60
log = logging.getLogger(__name__)


# NODE_DELETED (termination.py): the reason a NodeClaim whose Node was deleted goes with it


@dataclass
class LifecycleReport:
    registered: list[dict] = field(default_factory=list)     # {nodeClaim, node}
    initialized: list[dict] = field(default_factory=list)    # {nodeClaim, node}
    terminated: list[dict] = field(default_factory=list)     # {instanceId, nodeClaim, reason}
    deleted: list[dict] = field(default_factory=list)        # {nodeClaim, reason}
    released: list[str] = field(default_factory=list)        # launch claims released without a NodeClaim
    errors: list[str] = field(default_factory=list)
    draining: list[str] = field(default_factory=list)        # deleting NodeClaims whose node still has pods to drain
    evicted: list[dict] = field(default_factory=list)        # {pod, node, how}: evicted, or deleted at the deadline
    adopted: list[dict] = field(default_factory=list)        # {nodeClaim, instanceId}: launched, record completed here
    cleaned: list[dict] = field(default_factory=list)        # {nodeClass, launchTemplates, instanceProfile}
    released_slots: list[str] = field(default_factory=list)  # NodeClaims whose dead interruption budget slot was freed
    # {nodeClaim, reason (Unhealthy | Overprovisioned | NodePoolDeleted), nodePool, node, instanceType, zone, capacityType, replacements,
    #  savingsPerHour, detail}: deletions decided here (node repair, static scale down), one NodeClaimDisrupted each
    disrupted: list[dict] = field(default_factory=list)
    repair_blocked: list[dict] = field(default_factory=list)  # {nodeClaim, node, nodePool, unhealthy, nodes, allowed}
    static_launched: list[dict] = field(default_factory=list)  # {nodeClaim, nodePool, instanceType, zone, ...}
    resolved: list[dict] = field(default_factory=list)       # {nodeClaim, outcome, detail}: unknown launches resolved
    # {nodeClaim, replacements}: capacity launched ahead for the pods of a NodeClaim the user deleted (leaving.py)
    launched_ahead: list[dict] = field(default_factory=list)
    # {nodeClaim, node, replacements}: drains waiting for the replacements launched ahead of them to initialize
    held: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("registered", "initialized", "terminated", "deleted", "released", "errors",
                                              "draining", "evicted", "adopted", "cleaned", "released_slots",
                                              "disrupted", "repair_blocked", "static_launched", "resolved",
                                              "launched_ahead", "held")}


def _cond(nc: NodeClaim, type_: str) -> dict | None:
    return nc.condition(type_)


def replacements_of(nodeclaims) -> dict[str, list[NodeClaim]]:
    """{NodeClaim name: the NodeClaims replacing it} (their ``replaces`` annotation)."""
    out: dict[str, list[NodeClaim]] = {}
    for nc in nodeclaims:
        for old in wk.decode_replaces((nc.annotations or {}).get(wk.REPLACES_ANNOTATION)):
            out.setdefault(old, []).append(nc)
    return out


def waiting_replacements(replacements, now: float) -> list[str]:
    """The names of ``replacements`` a drain still waits for: not Initialized, not deleting, launched less than
    ``REPLACEMENT_TIMEOUT`` ago (a replacement that never initializes holds a drain no longer than it holds a
    disruption command)."""
    return sorted(r.name for r in replacements
                  if not r.is_true("Initialized") and not r.metadata.get("deletionTimestamp")
                  and now - (to_epoch(r.metadata.get("creationTimestamp")) or now) < disruption_exec.REPLACEMENT_TIMEOUT)


class Lifecycle(Controller):
    def __init__(self, store, cloud, kube, cluster_name: str, claims=None, clock=None, logger=None,
                 registration_timeout: float = 15 * 60, orphan_min_age: float = 30.0, node_repair: bool = True,
                 shortcuts: QuietLifecycle | None = None, instance_status_checks: bool = True):
        super().__init__(clock, logger or log)
        self.store = store
        self.cloud = cloud
        self.kube = kube
        self.cluster_name = cluster_name
        self.claims = claims
        self.registration_timeout = registration_timeout
        self.orphan_min_age = orphan_min_age
        self.terminator = Terminator(store, kube, cloud, claims, self.clock, self._decision)
        self.repairer = NodeRepairer(kube, self.terminator, self._decision) if node_repair else None
        self.instance_health = InstanceHealthChecker(store, kube, cloud, claims, self.terminator, self.clock,
                                                     self._decision, self.logger) if instance_status_checks else None
        self._health: tuple[object, bool] | None = None   # (the sweep's report, acted): the checks run once a sweep
        self.static = StaticCapacity(store, kube, cloud, claims, self.terminator, self.clock, self._decision, self.logger)
        self.nodepool_deletion = NodePoolDeletion(store, kube, self.terminator, self._decision, claims=claims,
                                                  cloud=cloud, clock=self.clock, logger=self.logger)
        self.shortcuts = shortcuts   # skip while nothing is under way and nothing changed (quiet_lifecycle)
        # the snapshot settings of the capacity launched ahead (leaving.launch_ahead): from_environment sets them
        self.loader_options: dict = {}
        self._replacing: dict[str, list[NodeClaim]] = {}   # the sweep's replacements_of

    @classmethod
    def from_environment(cls, env, logger=None) -> "Lifecycle":
        shortcuts = None
        if shortcuts_enabled():
            from ..adapters.store.ledger import DisruptionLedger
            shortcuts = QuietLifecycle(env.store, env.kube, env.claims,
                                       DisruptionLedger(env.dynamodb, env.config.cluster, env.config.state_table),
                                       SweepMarker(env.dynamodb, env.config.cluster, env.config.state_table))
        out = cls(env.store, AWSCloudProvider.from_environment(env), env.kube, env.config.cluster, claims=env.claims,
                  clock=runtime.clock_proxy, logger=logger, registration_timeout=env.config.registration_timeout,
                  orphan_min_age=env.config.orphan_min_age, node_repair=env.config.node_repair, shortcuts=shortcuts,
                  instance_status_checks=env.config.instance_status_checks)
        out.set_loader_options(min_values_policy=env.config.min_values_policy,
                               scheduler_config=env.config.scheduler_config)
        return out

    def set_loader_options(self, **options) -> None:
        """The snapshot settings (``SnapshotLoader`` keywords) of every replacement solve this function makes."""
        self.loader_options = dict(options)
        for part in (self.instance_health, self.nodepool_deletion):
            if part is not None:
                part.loader_options = self.loader_options

    # -- EC2 (through the cloud provider) -----------------------------------------------------------
    def _instances(self) -> dict[str, dict]:
        return self.cloud.list_instances()

    def _terminate(self, instance_id: str, nodeclaim: str | None, reason: str, report: LifecycleReport) -> None:
        try:
            self.cloud.terminate([instance_id])
        except Exception as e:
            report.errors.append(f"terminate {instance_id}: {e}")
            return
        report.terminated.append({"instanceId": instance_id, "nodeClaim": nodeclaim, "reason": reason})
        self._decision("terminate", f"terminated {instance_id} ({reason})", instanceId=instance_id,
                       nodeclaim=nodeclaim, reason=reason)

    def _delete_nodeclaim(self, nc: NodeClaim, reason: str, report: LifecycleReport, node: dict | None = None,
                          instance: dict | None = None) -> None:
        """Request the deletion (finalizer honoured) and take it as far as it goes now."""
        self.terminator.request(nc, reason)
        nc = self.store.get("NodeClaim", nc.name) or nc
        if self.terminator.finalize(nc, node, instance, report.errors) == "deleted":
            report.deleted.append({"nodeClaim": nc.name, "reason": reason})
            self._decision("delete", f"deleted NodeClaim {nc.name}: {reason}", nodeclaim=nc.name, reason=reason)

    # -- the sweep -------------------------------------------------------------------------------
    def sweep(self, now: float | None = None) -> LifecycleReport:
        now = self.clock() if now is None else now
        report = LifecycleReport()
        seen, instances = self.shortcuts.observe() if self.shortcuts is not None else None, None
        if seen is not None:   # quiet_lifecycle: skip, or list the instances first, or run in full
            action, _why = self.shortcuts.decide(seen, now)
            # EC2's instance status checks are polled every sweep, quiet or not (as Karpenter's, every minute)
            if action != "full" and self._check_instances(seen.nodes, {nc.name: nc for nc in seen.nodeclaims}, now, report):
                action = "full"
            if action == "check":
                instances = self._instances()
            if action == "skip" or (action == "check" and self.shortcuts.instances_unchanged(seen, instances, now)):
                self._decision("unchanged", SKIPPED if action == "skip" else CHECKED)
                return report
        nodeclaims = {nc.name: nc for nc in (seen.nodeclaims if seen is not None else self.store.list("NodeClaim"))}
        nodepools = {np.name: np for np in (seen.nodepools if seen is not None else self.store.list("NodePool"))}
        nodes = seen.nodes if seen is not None else [as_dict(n) for n in self.kube.list_nodes()]
        node_by_provider = {(n.get("spec") or {}).get("providerID"): n for n in nodes if (n.get("spec") or {}).get("providerID")}
        instances = self._instances() if instances is None else instances
        if self._repair_and_static(nodes, nodeclaims, nodepools, now, report):
            nodeclaims = {nc.name: nc for nc in self.store.list("NodeClaim")}

        self._replacing = replacements_of(nodeclaims.values())
        # the deleting ones last: a drain waiting for a replacement sees it Initialized in the sweep that does it
        for nc in sorted(nodeclaims.values(), key=lambda x: bool(x.metadata.get("deletionTimestamp"))):
            try:
                self._reconcile(nc, nodepools.get(nc.nodepool_name), node_by_provider, instances, now, report)
            except Exception as e:  # one broken NodeClaim must not stop the sweep
                report.errors.append(f"NodeClaim {nc.name}: {e}")
                self.logger.exception(f"lifecycle of NodeClaim {nc.name} failed")

        current = terminate_orphans(self, nodeclaims, instances, now, report, nodes)
        self._cleanup_nodeclasses(current, instances, report)

        # launch claims left without a NodeClaim (a crash between commit and write, or a deletion elsewhere)
        if self.claims is not None:
            existing = {nc.name for nc in self.store.list("NodeClaim")}
            for nodepool, (_totals, claims) in self.claims.all_usage().items():
                for name, claim in claims.items():
                    if name in existing or now - float(claim.get("at", now)) < STALE_CLAIM_AGE:
                        continue
                    if self.claims.release(nodepool, name):
                        report.released.append(name)
                        self._decision("release", f"released stale launch claim {name}", nodeclaim=name)
        self._release_stale_slots(now, report)
        if seen is not None:
            self.shortcuts.record(seen, instances, report, now)
        return report

    def _repair_and_static(self, nodes, nodeclaims, nodepools, now: float, report: LifecycleReport) -> bool:
        """The instance status checks, node repair, then the static NodePools' counts; True when a NodeClaim was
        created or marked deleting.
        A failure of either is reported and the rest of the sweep goes on."""
        changed = self._check_instances(nodes, nodeclaims, now, report)
        changed |= request_node_deletions(self, nodes, nodeclaims, report)   # kubectl delete node: before the capacity
        if self.repairer is not None:
            try:
                claims = {nc.name: nc for nc in self.store.list("NodeClaim")} if changed else nodeclaims
                changed |= bool(self.repairer.run(nodes, claims, now, report))
            except Exception as e:  # noqa: BLE001
                report.errors.append(f"node repair: {e}")
                self.logger.exception("lifecycle: node repair failed")
        try:
            claims = {nc.name: nc for nc in self.store.list("NodeClaim")} if changed else nodeclaims
            changed |= self.static.run(nodepools, claims, now, report)
        except Exception as e:  # noqa: BLE001
            report.errors.append(f"static NodePools: {e}")
            self.logger.exception("lifecycle: static NodePools failed")
        try:
            claims = {nc.name: nc for nc in self.store.list("NodeClaim")} if changed else nodeclaims
            changed |= self.nodepool_deletion.run(claims, nodepools, nodes, now, report)
        except Exception as e:  # noqa: BLE001
            report.errors.append(f"NodeClaims of deleted NodePools: {e}")
            self.logger.exception("lifecycle: NodeClaims of deleted NodePools failed")
        try:
            claims = {nc.name: nc for nc in self.store.list("NodeClaim")} if changed else nodeclaims
            changed |= self._capacity_for_user_deletions(claims, now, report)
        except Exception as e:  # noqa: BLE001
            report.errors.append(f"capacity ahead of NodeClaims deleted by the user: {e}")
            self.logger.exception("lifecycle: capacity ahead of NodeClaims deleted by the user failed")
        return changed

    def _check_instances(self, nodes, nodeclaims: dict, now: float, report: LifecycleReport) -> bool:
        """The EC2 instance status checks (:mod:`.instance_health`), once per sweep; True when a NodeClaim was marked
        deleting (or its drain made forceful).  A failure is reported and the rest of the sweep goes on."""
        if self.instance_health is None:
            return False
        if self._health is not None and self._health[0] is report:
            return self._health[1]
        acted = False
        try:
            acted = bool(self.instance_health.run(nodes, nodeclaims, now, report))
        except Exception as e:  # noqa: BLE001
            report.errors.append(f"instance status checks: {e}")
            self.logger.exception("lifecycle: instance status checks failed")
        self._health = (report, acted)
        return acted

    def _capacity_for_user_deletions(self, nodeclaims: dict, now: float, report: LifecycleReport) -> bool:
        """A NodeClaim the user deleted (``karpenter-lambda delete nodeclaim``, as ``kubectl delete nodeclaim``) gets
        capacity for its pods before its drain, as Karpenter's provisioner counts a deleting node's pods as pending
        (``leaving.py``); once, while no NodeClaim replaces it (the deterministic names make a repeat launch
        nothing).  True when a NodeClaim was launched."""
        replaced = {old for nc in nodeclaims.values()
                    for old in wk.decode_replaces((nc.annotations or {}).get(wk.REPLACES_ANNOTATION))}
        going = [nc for nc in nodeclaims.values() if nc.metadata.get("deletionTimestamp") and nc.name not in replaced
                 and user_deletion((nc.annotations or {}).get(wk.DELETION_REASON_ANNOTATION))]
        launched = False
        for nc in sorted(going, key=lambda x: x.name):
            out = launch_ahead(self.store, self.kube, self.claims, self.cloud, self.clock, self.logger, [nc], now,
                               f"deleted/{nc.name}", self._decision, is_transient, self.loader_options)
            report.errors.extend(out.failures)
            if out.launched or out.duplicates:
                report.launched_ahead.append({"nodeClaim": nc.name, "replacements": out.launched + out.duplicates})
            launched |= bool(out.launched)
        return launched

    def _release_stale_slots(self, now: float, report: LifecycleReport) -> None:
        """Disruption-budget slots the interruption handler took for a rebalance replacement and never completed
        (its delivery crashed or timed out and no redelivery resumed it): released after
        :data:`~.interrupt.STALE_RESERVATION_AGE`, so a NodePool's budget is not held until the node dies."""
        ddb = getattr(self.claims, "ddb", None)
        if ddb is None:
            return
        from ..adapters.store.ledger import DisruptionLedger
        from .interrupt import release_stale_reservations
        try:
            ledger = DisruptionLedger(ddb, self.claims.cluster, self.claims.table)
            report.released_slots.extend(release_stale_reservations(ledger, self.store, now, decide=self._decision))
        except Exception as e:  # noqa: BLE001 - the next sweep tries again
            report.errors.append(f"stale interruption budget slots: {e}")

    def _reconcile(self, nc: NodeClaim, np: NodePool | None, node_by_provider, instances, now, report) -> None:
        pid = nc.status.get("providerID")
        if nc.metadata.get("deletionTimestamp"):
            if self._finalize_deleting(nc, node_by_provider.get(pid) if pid else None, instances, report, now):
                return
        created = to_epoch(nc.metadata.get("creationTimestamp")) or now
        if manual_nodeclaim_step(self, nc, np, node_by_provider, instances, now, report):   # launch, adopt, expire
            return
        if not pid:
            if self._adopt(nc, np, instances, now, report) or self._resolve_launch(nc, np, now, report):
                return
            # the backstop (an unknown launch is resolved above, or by the next provisioning round): 5 minutes after
            # the last launch attempt (a relaunch moves the Launched condition)
            attempt = max(created, to_epoch((_cond(nc, "Launched") or {}).get("lastTransitionTime")) or created)
            if now - attempt > LAUNCH_TIMEOUT:
                self._delete_nodeclaim(nc, "launch did not complete within 5m and no instance is tagged for it", report)
            return
        iid = instance_id_of(pid)
        inst = instances.get(iid)
        node = node_by_provider.get(pid)
        state = ((inst or {}).get("State") or {}).get("Name")
        if state in GONE_STATES or (inst is None and nc.is_true("Registered")):
            if node is not None and node_ready(node):
                # As Karpenter's garbage collection: while the Node still reports Ready its kubelet is running,
                # whatever EC2 says (eventual consistency); wait for the Node to go NotReady.
                self._decision("wait", f"instance {iid} is {state or 'gone'} but node {node['metadata']['name']} is still Ready",
                               nodeclaim=nc.name, instanceId=iid)
                return
            if inst is None:
                # missing from the tag-filtered list (tags changed, eventual consistency): look it up by id and
                # terminate it if it still runs -- deleting the NodeClaim alone would leave it running
                inst = self.cloud.describe([iid]).get(iid)
                if inst is not None and instance_state(inst) not in GONE_STATES:
                    self._terminate(iid, nc.name, "its NodeClaim's instance is missing from the tag-filtered list", report)
                    inst = self.cloud.describe([iid]).get(iid)
                    if inst is not None and instance_state(inst) not in GONE_STATES:
                        return  # not terminated (an error is reported): keep the NodeClaim, try again next sweep
            self._delete_nodeclaim(nc, f"instance {iid} is {state or 'gone'}", report, node, inst)
            return
        if inst is None and node is None:
            # Not (yet) in DescribeInstances: EC2 is eventually consistent and a just-launched instance can be
            # missing from a tag-filtered describe for a while.  Like Karpenter, an unregistered NodeClaim is not
            # garbage collected on the cloud provider's word alone: the registration timeout below handles it.
            launched = to_epoch((_cond(nc, "Launched") or {}).get("lastTransitionTime")) or created
            if now - launched > self.registration_timeout:
                self._delete_nodeclaim(nc, f"instance {iid} not found and not registered within "
                                           f"{int(self.registration_timeout // 60)}m", report, node)
            return
        if node is None:
            launched = to_epoch((_cond(nc, "Launched") or {}).get("lastTransitionTime")) or created
            if nc.is_true("Registered") and self._node_deleted(nc):
                # its Node was deleted (kubectl delete node) while the instance runs: as Karpenter, deleting the
                # node deletes its NodeClaim -- the instance is terminated, not left running unmanaged
                self._delete_nodeclaim(nc, f"{NODE_DELETED}: node {nc.status.get('nodeName')} was deleted", report,
                                       None, inst)
                return
            if not nc.is_true("Registered") and now - launched > self.registration_timeout:
                self._terminate(iid, nc.name, f"not registered within {int(self.registration_timeout // 60)}m", report)
                self._delete_nodeclaim(nc, "registration timeout", report, None, self.cloud.describe([iid]).get(iid))
            return
        node_name = node["metadata"]["name"]
        if not nc.is_true("Registered"):
            self._register(nc, np, node, now, report)
            nc = self.store.get("NodeClaim", nc.name) or nc
            node = as_dict(self.kube.get_node(node_name)) or node
        if nc.is_true("Registered") and not nc.is_true("Initialized"):
            self._maybe_initialize(nc, node, now, report)
        if nc.is_true("Registered") and add_termination_finalizer(node) is not None:
            self.kube.update_node(node_name, add_termination_finalizer)   # registered before nodes got the finalizer

    def _node_deleted(self, nc: NodeClaim) -> bool:
        """Is the Node a registered NodeClaim joined as gone?  Asked by name (a 404), not concluded from the listing."""
        name = nc.status.get("nodeName")
        if not name:
            return False
        try:
            return self.kube.get_node(name) is None
        except Exception:  # noqa: BLE001 - unknown: the next sweep asks again
            return False

    def _adopt(self, nc: NodeClaim, np: NodePool | None, instances: dict, now: float, report) -> bool:
        """A NodeClaim without providerID: adopt this deployment's live instance tagged for it, if there is one."""
        if not hasattr(self.cloud, "instances_of"):
            return False
        found = {i: d for i, d in instances.items() if instance_tags(d).get(NODECLAIM_TAG) == nc.name}
        found.update(self.cloud.instances_of(nc.name))  # by its tag: also what the sweep's listing missed
        live = sorted((d for d in found.values() if instance_state(d) not in GONE_STATES
                       and getattr(self.cloud, "owns", lambda _d: True)(d)),
                      key=lambda d: (str(d.get("LaunchTime") or ""), d["InstanceId"]))
        if not live:
            return False
        desc = live[0]
        it = self._instance_type(nc, np, desc.get("InstanceType"))
        inst = Launcher(self.store, self.claims, self.cloud, self.clock, self._decision).adopt(
            nc.name, nc.nodepool_name, desc, it)
        report.adopted.append({"nodeClaim": nc.name, "instanceId": inst.instance_id})
        self._decision("adopt", f"NodeClaim {nc.name} adopted instance {inst.instance_id} ({inst.instance_type} "
                                f"{inst.capacity_type} {inst.zone}): launched but never recorded",
                       nodeclaim=nc.name, instanceId=inst.instance_id)
        return True

    def _resolve_launch(self, nc: NodeClaim, np: NodePool | None, now: float, report) -> bool:
        """A NodeClaim whose launch must be resolved now (:func:`.launcher.launch_pending`; no instance is tagged for
        it: :meth:`_adopt` came first): launched again, or rolled back, by :meth:`.launcher.Launcher.resolve`.  True
        when the record changed.  Instance types without NodeOverlays (a relaunch only needs the NodeClaim's own
        types and their offerings)."""
        if np is None or not launch_pending(nc, now):
            return False
        ref = (nc.spec.get("nodeClassRef") or {}).get("name") or np.node_class_ref.get("name")
        nodeclass = self.store.get("EC2NodeClass", ref) if ref else None
        if nodeclass is None:
            return False   # its EC2NodeClass is gone: the 5-minute backstop deletes it
        resolved, problem = self.cloud.resolve(nodeclass)
        if resolved is None or problem:
            report.errors.append(f"NodeClaim {nc.name}: unknown launch not resolved: EC2NodeClass {ref}: {problem}")
            return False
        types = self.cloud.instance_types(nodeclass, resolved, self.cloud.unavailable_offerings())
        outcome, detail = Launcher(self.store, self.claims, self.cloud, self.clock, self._decision).resolve(
            nc, np, nodeclass, resolved, types)
        if outcome == "skipped":
            return False
        report.resolved.append({"nodeClaim": nc.name, "outcome": outcome, "detail": detail})
        self._decision(f"launch-{outcome}", f"NodeClaim {nc.name} (launch outcome unknown): {outcome} {detail}",
                       nodeclaim=nc.name, outcome=outcome, detail=detail)
        return True

    def _instance_type(self, nc: NodeClaim, np: NodePool | None, name: str | None):
        """The catalog entry of an adopted instance's type (capacity, allocatable, price); None when unknown."""
        try:
            ref = (nc.spec.get("nodeClassRef") or {}).get("name") or (np.node_class_ref.get("name") if np else None)
            nodeclass = self.store.get("EC2NodeClass", ref) if ref else None
            if nodeclass is None or not name:
                return None
            resolved, _problem = self.cloud.resolve(nodeclass)
            if resolved is None:
                return None
            return next((t for t in self.cloud.instance_types(nodeclass, resolved, set()) if t.name == name), None)
        except Exception as e:  # noqa: BLE001 - adoption goes on without capacity and price
            self.logger.warning(f"NodeClaim {nc.name}: instance type {name} not found in the catalog: {e}")
            return None

    def _cleanup_nodeclasses(self, nodeclaims: dict, instances: dict, report) -> None:
        """Launch templates and instance profiles of deleted EC2NodeClasses that nothing uses any more."""
        if not hasattr(self.cloud, "cleanup_nodeclasses"):
            return
        try:
            existing = {c.name for c in self.store.list("EC2NodeClass")}
            in_use = {nc.labels.get(wk.EC2NODECLASS) or (nc.spec.get("nodeClassRef") or {}).get("name")
                      for nc in nodeclaims.values()}
            in_use |= {instance_tags(d).get(wk.EC2NODECLASS) for d in instances.values()
                       if instance_state(d) not in GONE_STATES}
            cleaned = self.cloud.cleanup_nodeclasses(existing, {n for n in in_use if n})
        except Exception as e:  # noqa: BLE001
            report.errors.append(f"EC2NodeClass cleanup: {e}")
            return
        for c in cleaned:
            report.cleaned.append(c)
            self._decision("cleanup", f"EC2NodeClass {c['nodeClass']} is deleted: removed launch templates "
                                      f"{', '.join(c['launchTemplates']) or '-'} and instance profile "
                                      f"{c.get('instanceProfile') or '-'}", nodeclass=c["nodeClass"],
                           launchTemplates=c["launchTemplates"], instanceProfile=c.get("instanceProfile"))

    def _finalize_deleting(self, nc: NodeClaim, node, instances, report, now: float) -> bool:
        """A NodeClaim marked deleting: hand it to the termination flow.  True when the sweep is done with it."""
        iid = instance_id_of(nc.status.get("providerID"))
        inst = instances.get(iid) if iid else None
        reason = (nc.annotations or {}).get(wk.DELETION_REASON_ANNOTATION) or "deletion requested"
        wait_for = ()
        if holds_for_replacements(reason):
            wait_for = waiting_replacements(self._replacing.get(nc.name, ()), now)
            if wait_for:   # as stored now: this sweep may have initialized them a moment ago
                fresh = [self.store.get("NodeClaim", n) for n in wait_for]
                wait_for = waiting_replacements([r for r in fresh if r is not None], now)
        outcome = self.terminator.finalize(nc, node, inst, report.errors, wait_for=wait_for)
        report.evicted.extend(self.terminator.actions)
        self.terminator.actions.clear()
        report.held.extend(self.terminator.holds)
        self.terminator.holds.clear()
        if outcome == "draining":
            report.draining.append(nc.name)
        elif outcome == "deleted":
            report.deleted.append({"nodeClaim": nc.name, "reason": reason})
            self._decision("delete", f"deleted NodeClaim {nc.name}: {reason}", nodeclaim=nc.name, reason=reason)
        return True

    def _register(self, nc: NodeClaim, np: NodePool | None, node: dict, now: float, report) -> None:
        name = node["metadata"]["name"]
        labels = dict(np.template_labels) if np is not None else {}
        labels.update(nc.labels)
        labels[wk.NODE_REGISTERED] = "true"
        annotations = dict(np.template_annotations) if np is not None else {}
        annotations.update({k: v for k, v in nc.annotations.items() if not k.startswith(wk.PROJECT)})
        # Karpenter's syncNode merges the NodeClaim's taints and startup taints onto the Node, unless the Node carries
        # karpenter.sh/do-not-sync-taints=true (the AWS provider sets it through the kubelet's labels for every AMI
        # family but Custom).  Here the same: the kubelet of a non-Custom family registers with the taints and startup
        # taints and that label (our userData: adapters/aws/userdata.py), so nothing is synced; on a node launched
        # without the label (before 2026-12-07) only the regular taints are ensured -- a startup taint missing at
        # registration was already removed by its agent (this sweep polls, Karpenter watches), and re-adding it would
        # block the node forever.  A Custom AMI's userData is the user's own: both are added, as Karpenter
        # does (racy with an agent that removes its taint early, as upstream: such a node sets the label).  Computed
        # from a fresh read and written with its resourceVersion (409: read again), never from the sweep's listing.
        wanted = list(nc.spec.get("taints") or [])
        if self._custom_ami(nc, np):
            wanted += list(nc.spec.get("startupTaints") or [])

        def change(fresh: dict) -> dict:
            current = (fresh.get("spec") or {}).get("taints") or []
            have = {(t.get("key"), t.get("effect")) for t in current}
            taints = [t for t in current if t.get("key") != wk.UNREGISTERED_TAINT_KEY]
            if ((fresh.get("metadata") or {}).get("labels") or {}).get(wk.NODE_DO_NOT_SYNC_TAINTS) != "true":
                for t in wanted:
                    if (t.get("key"), t.get("effect")) not in have:
                        have.add((t.get("key"), t.get("effect")))
                        taints.append(t)
            return {"metadata": {"labels": dict(labels), "annotations": dict(annotations)}, "spec": {"taints": taints}}

        if self.kube.update_node(name, with_termination_finalizer(change)) is None:
            return  # the Node went away meanwhile

        def mutate(obj):
            obj.status["nodeName"] = name
            set_condition(obj.status, make_condition("Registered", "True", "Registered", f"node {name} joined", now))
            return obj

        self.store.update("NodeClaim", nc.name, mutate)
        report.registered.append({"nodeClaim": nc.name, "node": name})
        self._decision("register", f"NodeClaim {nc.name} registered as node {name}", nodeclaim=nc.name, node=name)

    def _custom_ami(self, nc: NodeClaim, np: NodePool | None) -> bool:
        """Is the NodeClaim's EC2NodeClass of the Custom AMI family (no amiFamily nor alias is Custom too, as
        Karpenter's ``AMIFamily()``)?  False when the EC2NodeClass is unknown."""
        ref = (nc.spec.get("nodeClassRef") or {}).get("name") or (np.node_class_ref.get("name") if np else None)
        nodeclass = self.store.get("EC2NodeClass", ref) if ref else None
        return nodeclass is not None and (nodeclass.ami_family or "Custom") == "Custom"

    def _maybe_initialize(self, nc: NodeClaim, node: dict, now: float, report) -> None:
        name = node["metadata"]["name"]
        if not node_ready(node):
            return
        startup = {(t.get("key"), t.get("effect")) for t in nc.spec.get("startupTaints") or []}
        taints = (node.get("spec") or {}).get("taints") or []
        if any((t.get("key"), t.get("effect")) in startup for t in taints):
            return
        # ... nor a known ephemeral taint (not-ready, the cloud provider's uninitialized, the Node Readiness
        # Controller's readiness.k8s.io/*): Karpenter's KnownEphemeralTaintsRemoved
        if any(is_ephemeral_taint(t) for t in taints if isinstance(t, dict)):
            return
        # Karpenter's RequestedResourcesRegistered: every resource the NodeClaim requests (non-zero) is non-zero in
        # the Node's allocatable (a device plugin registers an extended resource after the kubelet; hugepages need
        # the node's configuration).  Our volume counts (attachable-volumes-csi-<driver>) are CSINode limits, not
        # allocatable: Karpenter's NodeClaim never requests them.
        requested = parse_resource_list((nc.spec.get("resources") or {}).get("requests") or {})
        alloc = node_allocatable(node)
        for res, amount in requested.items():
            if amount > 0 and wk.volume_driver(res) is None and alloc.get(res, 0) <= 0:
                return  # not registered yet
        self.kube.patch_node(name, {"metadata": {"labels": {wk.NODE_INITIALIZED: "true"}}})

        def mutate(obj):
            set_condition(obj.status, make_condition("Initialized", "True", "Initialized", f"node {name} is ready", now))
            set_condition(obj.status, make_condition("Ready", "True", "Ready", "", now))
            obj.status["allocatable"] = (node.get("status") or {}).get("allocatable") or obj.status.get("allocatable")
            return obj

        self.store.update("NodeClaim", nc.name, mutate)
        report.initialized.append({"nodeClaim": nc.name, "node": name})
        self._decision("initialize", f"NodeClaim {nc.name} initialized (node {name} Ready)", nodeclaim=nc.name, node=name)
