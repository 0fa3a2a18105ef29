"""Static NodePools (``spec.replicas``), kept at their count from the lifecycle sweep (every minute): Karpenter's
static provisioning and deprovisioning controllers.  The decisions are pure (:mod:`karpenter_lambda.disruption.static`);
here they are carried out:

* **scale up**: each missing NodeClaim is launched through the :class:`~.launcher.Launcher` (launch claims with
  ``limits.nodes``, the record, CreateFleet) with no pods, sized by the NodePool alone;
* a NodeClaim being replaced by a static drift (:mod:`karpenter_lambda.disruption.static_drift`: its replacement, of
  the same NodePool, names it in ``karpenter-lambda.io/replaces``) still counts for the scale up and not for the
  scale down, so neither another NodeClaim is launched for it nor its replacement taken for an excess;
* **scale down**: the NodeClaims chosen are deleted as Karpenter does (graceful: the drain evicts and honours
  PodDisruptionBudgets and ``terminationGracePeriod``), each one a ``disrupted`` entry of the lifecycle report with
  reason ``Overprovisioned`` and a ``DisruptionTerminating`` Event on its Node.

Why the lifecycle sweep: the provisioner only runs when pods are pending, and a static NodePool must reach its count
with no pod at all; the sweep already lists NodePools and NodeClaims every minute, so a NodePool at its count costs
nothing more (the snapshot, and the catalog, are loaded only when a count is off).
"""

from __future__ import annotations

from typing import Callable

from ..api import events as ev
from ..api import labels as wk
from ..api.objects import NodeClaim, NodePool
from ..api.times import format_time
from ..disruption.static import OVERPROVISIONED, plan_static, replicas_of, static_counts, static_nodeclaim_plan
from . import runtime
from .launcher import Launcher, nodeclaim_name
from .snapshot import SnapshotLoader
from .termination import Terminator


class StaticCapacity:
    def __init__(self, store, kube, cloud, claims, terminator: Terminator, clock: Callable[[], float],
                 decide: Callable[..., None], logger):
        self.store = store
        self.kube = kube
        self.cloud = cloud
        self.claims = claims
        self.terminator = terminator
        self.clock = clock
        self.decide = decide
        self.logger = logger

    @staticmethod
    def off_count(nodepools: dict[str, NodePool], nodeclaims: dict[str, NodeClaim]) -> list[str]:
        """Static NodePools to bring to their count (cheap: no snapshot): fewer NodeClaims not being deleted than
        ``replicas``, or more of them not being replaced either (a NodeClaim a static drift's replacement replaces
        is pending disruption: it and its replacement are not an excess, as Karpenter's static deprovisioning counts
        only its running NodeClaims)."""
        out = []
        for np in nodepools.values():
            want = replicas_of(np)
            if want is None or np.metadata.get("deletionTimestamp"):
                continue
            mine = [nc for nc in nodeclaims.values() if nc.labels.get(wk.NODEPOOL) == np.name]
            active, running = static_counts(mine)
            if active < want or running > want:
                out.append(np.name)
        return out

    def run(self, nodepools: dict[str, NodePool], nodeclaims: dict[str, NodeClaim], now: float, report) -> bool:
        """Bring every static NodePool to its count; True when a NodeClaim was launched or marked deleting."""
        if not self.off_count(nodepools, nodeclaims):
            return False
        loader = SnapshotLoader(self.store, self.kube, self.claims, self.cloud, logger=self.logger)
        snap = loader.load(now, instance_types=False)
        decisions = plan_static(snap)
        changed = False
        if any(d.launch for d in decisions):
            loader.load_instance_types(snap)
        for d in decisions:
            if d.limited:
                self.decide("static-limited", f"static NodePool {d.nodepool}: {d.active} of {d.replicas} replicas; "
                                              f"{d.limited}", nodepool=d.nodepool, replicas=d.replicas, active=d.active)
            for i in range(d.launch):
                changed |= self._launch(snap, d, i, report)
            for name in d.remove:
                changed |= self._remove(snap, d, name, report)
        return changed

    def _launch(self, snap, d, i: int, report) -> bool:
        np = snap.nodepools[d.nodepool]
        ncls = snap.nodeclasses.get(np.node_class_ref.get("name", ""))
        problem = snap.nodepool_problems.get(np.name)
        if ncls is None or problem or np.name not in snap.instance_types:
            report.errors.append(problem or f"static NodePool {np.name}: EC2NodeClass not found")
            return False
        name = nodeclaim_name(np.name, [], attempt=f"static:{runtime.attempt_stamp(snap.now)}:{i}")
        plan = static_nodeclaim_plan(np, snap.instance_types[np.name], name, snap.daemonsets)
        if plan is None:
            report.errors.append(f"static NodePool {np.name}: no instance type its requirements allow is offered")
            return False
        out = Launcher(self.store, self.claims, self.cloud, self.clock, self.decide).launch(
            plan, np, ncls, snap.resolved.get(ncls.name), [], name=name)
        if out.launched is None:
            why = out.limit or out.failed or out.error or ("already launched" if out.duplicate else "nothing launched")
            if not out.duplicate:
                report.errors.append(f"static NodePool {np.name}: NodeClaim {name}: {why}")
            return False
        x = out.launched
        report.static_launched.append({"nodeClaim": name, "nodePool": np.name, "instanceType": x.instance_type,
                                       "zone": x.zone, "capacityType": x.capacity_type, "instanceId": x.instance_id})
        self.decide("static-launch", f"static NodePool {np.name} ({d.active + i + 1}/{d.replicas}): launched "
                                     f"{x.instance_type} {x.capacity_type} in {x.zone} ({x.instance_id}) as NodeClaim "
                                     f"{name}", nodeclaim=name, nodepool=np.name, instanceId=x.instance_id)
        return True

    def _remove(self, snap, d, name: str, report) -> bool:
        nc = snap.nodeclaims[name]
        why = f"{OVERPROVISIONED}: static NodePool {d.nodepool} has {d.active} NodeClaims for {d.replicas} replicas"
        try:
            self.terminator.request(nc, why)
        except Exception as e:  # noqa: BLE001 - the next sweep tries again
            report.errors.append(f"static scale down of NodeClaim {name}: {e}")
            return False
        labels = nc.labels
        node = snap.node_of_nodeclaim(name)
        report.disrupted.append({
            "nodeClaim": name, "reason": OVERPROVISIONED, "nodePool": d.nodepool,
            "node": ((node or {}).get("metadata") or {}).get("name"), "instanceType": labels.get(wk.INSTANCE_TYPE),
            "zone": labels.get(wk.ZONE), "capacityType": labels.get(wk.CAPACITY_TYPE), "replacements": [],
            "savingsPerHour": 0.0, "detail": f"replicas {d.replicas}"})
        self.decide("static-scale-down", f"static NodePool {d.nodepool}: NodeClaim {name} deleted ({d.active} for "
                                         f"{d.replicas} replicas)", nodeclaim=name, nodepool=d.nodepool)
        if node is not None:
            try:
                self.kube.create_event({**node, "apiVersion": "v1", "kind": "Node"}, ev.DISRUPTION_TERMINATING,
                                       ev.disruption_terminating_message(OVERPROVISIONED), source=ev.SOURCE,
                                       now=format_time(snap.now))
            except Exception as e:  # noqa: BLE001 - an explanation only
                report.errors.append(f"event {ev.DISRUPTION_TERMINATING} on node {node['metadata']['name']}: {e}")
        return True
