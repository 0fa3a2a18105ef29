"""The one loader of the cluster snapshot (:class:`karpenter_lambda.api.snapshot.ClusterSnapshot`).

``SnapshotLoader(store, kube, claims, cloud).load(now) -> ClusterSnapshot``, once per invocation: NodePools,
EC2NodeClasses and NodeClaims from the store; nodes, pods, DaemonSets and PDBs from the Kubernetes API (and, with
Karpenter's scheduler config, the Services and workload controllers that select the pods; for a DaemonSet without
a pod, the LimitRanges and RuntimeClasses its template is admitted with: ``load_daemonsets``); pod
nominations and NodePool usage from the launch claims; each NodePool's instance types (priced, minus offerings
marked unavailable) from the cloud provider, whose EC2NodeClass resolution is written back to the
EC2NodeClass status when it changed, with the stored NodeOverlays applied (``catalog.overlay``: prices and extended
resources; an overlay's ValidationSucceeded/Ready conditions say whether it conflicts).  Provisioning, the sweeps
and ``plan`` all decide on this one snapshot.
"""

from __future__ import annotations

import json
import logging

from ..adapters.kube.client import KubeError
from ..api import labels as L
from ..api.admission import Admission
from ..api.conditions import get_condition, make_condition, set_condition
from ..api.kube import is_daemon_pod, is_terminal
from ..api.objects import AWS_GROUP
from ..api.snapshot import ClusterSnapshot
from ..catalog.overlay import OverlayResult, apply_overlays_by_nodepool
from ..scheduling.default_spread import apply_default_spread, controller_ref
from ..scheduling.nodeclaim import counted_daemonsets, live_daemon_pods
from ..scheduling.predicates import has_namespace_selector
from ..scheduling.volumes import apply_volumes, has_claims
from .cluster_state import as_dict
from .transient import TransientError, is_transient

log = logging.getLogger(__name__)


class SnapshotLoader:
    def __init__(self, store, kube, claims=None, cloud=None, logger=None, min_values_policy: str = "Strict",
                 scheduler_config=None):
        self.min_values_policy = min_values_policy   # runtime.Config.min_values_policy: every solve on the snapshot
        # runtime.Config.scheduler_config (api.scheduler_config.SchedulerConfig or None): the default topology spread
        self.scheduler_config = scheduler_config
        self.store = store
        self.kube = kube
        self.claims = claims
        self.cloud = cloud
        self.logger = logger or log
        self._resolved: dict[str, tuple] = {}

    def load(self, now: float, *, instance_types: bool = True, pdbs: bool = False, prefetched=None) -> ClusterSnapshot:
        """``prefetched`` (:class:`.sweep_shortcuts.Prefetched`): the store objects and Kubernetes lists already read
        this invocation, used instead of reading them again."""
        snap = ClusterSnapshot(now=now, min_values_policy=self.min_values_policy)
        pre = prefetched
        stored = (lambda kind: pre.store[kind]) if pre is not None else self.store.list
        snap.nodepools = {np.name: np for np in stored("NodePool") if not np.metadata.get("deletionTimestamp")}
        snap.nodeclasses = {nc.name: nc for nc in stored("EC2NodeClass")}
        snap.nodeclaims = {nc.name: nc for nc in stored("NodeClaim")}
        snap.pods = [as_dict(p) for p in (pre.pods if pre is not None else self.kube.list_pods())]
        snap.nodes = [as_dict(n) for n in (pre.nodes if pre is not None else self.kube.list_nodes())]
        snap.daemonsets = [as_dict(d) for d in (pre.daemonsets if pre is not None else self.kube.list_daemonsets())]
        self.load_daemonsets(snap)
        if pdbs:
            snap.pdbs = [as_dict(p) for p in (pre.pdbs if pre is not None else self.kube.list_pdbs())]
        self.load_namespaces(snap)
        self.load_storage(snap)
        self.load_default_spread(snap)
        self.refresh_claims(snap)
        if instance_types and self.cloud is not None:
            self.load_instance_types(snap)
        return snap

    def load_daemonsets(self, snap: ClusterSnapshot) -> None:
        """The DaemonSets as their overhead is counted (``scheduling.nodeclaim.counted_daemonsets``, Karpenter's
        ``getDaemonSetPods``): a DaemonSet's newest pod among the snapshot's, which carries what the admission gave
        it (a RuntimeClass's overhead, a LimitRange's default requests); for one without a pod yet (new, or running on
        no node) its template admitted as its pods will be, with the LimitRanges (all namespaces) and, when such a
        template names a RuntimeClass, the RuntimeClasses -- listed only then (a cluster whose DaemonSets all run pays
        no call).  A list that fails is logged and taken as empty (the template then counts as it is)."""
        live = live_daemon_pods(snap.daemonsets, snap.pods)
        bare = [ds for ds in snap.daemonsets
                if ((ds.get("metadata") or {}).get("namespace") or "default", (ds.get("metadata") or {}).get("name"))
                not in live]
        admission = None
        if bare:
            why = "for the overhead of a DaemonSet without a pod, counting its template without them"
            snap.limitranges = self._selecting("LimitRanges", self.kube.list_limitranges, "v1", "LimitRange", why)
            if any((((ds.get("spec") or {}).get("template") or {}).get("spec") or {}).get("runtimeClassName")
                   for ds in bare):
                snap.runtimeclasses = self._selecting("RuntimeClasses", self.kube.list_runtimeclasses, "node.k8s.io/v1",
                                                      "RuntimeClass", why)
            admission = Admission.of(snap.limitranges + snap.runtimeclasses)
        snap.daemonsets = counted_daemonsets(snap.daemonsets, snap.pods, admission, live=live)

    def load_namespaces(self, snap: ClusterSnapshot) -> None:
        """The Namespace objects, read only when a pod's (anti-)affinity term has a non-empty namespaceSelector (the
        namespaces it selects are those its labels match: Karpenter's ``buildNamespaceList``)."""
        if any(has_namespace_selector(p) for p in snap.pods):
            snap.namespaces = [as_dict(x) for x in self.kube.list_namespaces()]

    def load_storage(self, snap: ClusterSnapshot) -> None:
        """Claims, volumes, StorageClasses and CSINodes, read only when a pod uses a claim (a cluster without
        persistent volumes pays no call), then what they ask of the pods' nodes (``scheduling.volumes``)."""
        if any(has_claims(p) for p in snap.pods):
            snap.pvcs = [as_dict(x) for x in self.kube.list_pvcs()]
            snap.pvs = [as_dict(x) for x in self.kube.list_pvs()]
            snap.storageclasses = [as_dict(x) for x in self.kube.list_storageclasses()]
            snap.csinodes = [as_dict(x) for x in self.kube.list_csinodes()]
        apply_volumes(snap)

    def load_default_spread(self, snap: ClusterSnapshot) -> None:
        """Karpenter's ``podTopologySpread.defaultConstraints`` (``scheduler_config``) on the pods that declare no
        topologySpreadConstraints, with the selector deduced from what selects each pod
        (``scheduling.default_spread``).  Only with the setting are Services (all namespaces) listed, and a workload
        controller kind (ReplicaSets, StatefulSets, ReplicationControllers) only when such a pod's controller is one:
        a cluster without the setting pays no call.  A list that fails is logged and taken as empty, as upstream
        (scheduling goes on with the selector the other lists give)."""
        config = self.scheduler_config
        snap.default_spread = tuple(config.default_constraints) if config is not None else ()
        if snap.default_spread:
            # the pods apply_default_spread may default, and the kinds of their controllers
            bare = [p for p in snap.pods if not (p.get("spec") or {}).get("topologySpreadConstraints")
                    and not is_daemon_pod(p) and not is_terminal(p)]
            owners = {ref.get("kind") for p in bare if (ref := controller_ref(p)) is not None}
            if bare:
                snap.services = self._selecting("Services", self.kube.list_services, "v1", "Service")
            controllers: list[dict] = []
            for kind, api_version, lister in (("ReplicaSet", "apps/v1", self.kube.list_replicasets),
                                              ("StatefulSet", "apps/v1", self.kube.list_statefulsets),
                                              ("ReplicationController", "v1", self.kube.list_replicationcontrollers)):
                if kind in owners:
                    controllers.extend(self._selecting(f"{kind}s", lister, api_version, kind))
            snap.workload_controllers = controllers
        apply_default_spread(snap)

    def _selecting(self, what: str, lister, api_version: str, kind: str,
                   why: str = "for the default topology spread constraints, deducing the pods' selectors without them"
                   ) -> list[dict]:
        """``lister()``'s items with their ``apiVersion``/``kind`` (list items carry neither); a failure is logged
        (``why``: what they were for, what is done without them) and taken as none (a 404, a resource the server
        does not serve, quietly)."""
        try:
            items = [as_dict(x) for x in lister()]
        except KubeError as e:
            if e.status != 404:
                self.logger.warning(f"could not list {what} {why}: {e}")
            return []
        for x in items:
            x["apiVersion"], x["kind"] = api_version, kind
        return items

    def refresh_claims(self, snap: ClusterSnapshot) -> None:
        """Re-read the nominations, usage and NodeClaims (after a concurrent invocation changed them)."""
        if self.claims is not None:
            snap.reservations = self.claims.reservations()
            snap.usage = {name: totals for name, (totals, _c) in self.claims.all_usage().items()}
        # and what was derived from the NodeClaims (consolidatable / inside consolidateAfter, per node)
        for attr in ("reserved_by_claim", "_claim_by_node", "_node_by_claim", "_consolidatable", "_window_nodes"):
            snap.__dict__.pop(attr, None)

    def reload_nodeclaims(self, snap: ClusterSnapshot) -> None:
        snap.nodeclaims = {nc.name: nc for nc in self.store.list("NodeClaim")}
        self.refresh_claims(snap)

    def resolve(self, nodeclass):
        """(resolved, problem) once per loader, with the status written back to the store when it changed."""
        hit = self._resolved.get(nodeclass.name)
        if hit is not None:
            return hit
        resolved, problem = self.cloud.resolve(nodeclass)
        if resolved is None and problem and is_transient(problem):
            # throttled or a 5xx while reading subnets, security groups, AMIs: the EC2NodeClass is not known to be
            # broken, so nothing is decided on it (not "not ready", no unschedulable pods): the caller's record or
            # sweep is retried (not remembered either: the next call asks again)
            raise TransientError(f"EC2NodeClass {nodeclass.name} could not be resolved: {problem}")
        if resolved is not None:
            status = resolved.status_patch()
            try:
                current = self.store.get("EC2NodeClass", nodeclass.name)
                if current is not None and _status_differs(current.status, status):
                    self.store.update_status("EC2NodeClass", nodeclass.name, status)
            except Exception as e:
                self.logger.warning(f"could not write EC2NodeClass {nodeclass.name} status: {e}")
        self._resolved[nodeclass.name] = (resolved, problem)
        return resolved, problem

    def load_instance_types(self, snap: ClusterSnapshot) -> None:
        """Each NodePool's instance types from the cloud provider, with the NodeOverlays applied (once: the
        overlays always start from the provider's types, so a second call does not adjust prices twice)."""
        unavailable = self.cloud.unavailable_offerings()
        base: dict[str, list] = {}
        for np in snap.nodepools.values():
            ref = np.node_class_ref
            group = str(ref.get("group", "")).split("/", 1)[0]   # validation lets "karpenter.k8s.aws/v1" through
            if (group, ref.get("kind")) != (AWS_GROUP, "EC2NodeClass"):
                snap.nodepool_problems[np.name] = (f"NodePool {np.name}: nodeClassRef {ref.get('group')}/{ref.get('kind')} "
                                                   f"{ref.get('name')!r} is not an EC2NodeClass ({AWS_GROUP}): karpenter-lambda "
                                                   f"launches EC2 instances only")
                continue
            nc = snap.nodeclasses.get(ref.get("name", ""))
            if nc is None:
                snap.nodepool_problems[np.name] = f"NodePool {np.name}: EC2NodeClass {ref.get('name')!r} not found"
                continue
            resolved, problem = self.resolve(nc)
            if resolved is not None:
                snap.resolved[nc.name] = resolved
            if problem:
                snap.nodepool_problems[np.name] = f"NodePool {np.name}: EC2NodeClass {nc.name} not ready: {problem}"
                continue
            base[np.name] = self.cloud.instance_types(nc, resolved, unavailable)
        snap.instance_types.update(self.apply_overlays(snap, base))

    def apply_overlays(self, snap: ClusterSnapshot, base: dict[str, list]) -> dict[str, list]:
        """``base`` (NodePool -> the provider's instance types) with the stored NodeOverlays applied; each overlay's
        status says whether it applies or conflicts (written only when that changed)."""
        overlays = self.store.list("NodeOverlay") if base else []
        if not overlays:
            return base
        result = _overlaid(base, snap, overlays)
        for name, why in result.conflicts.items():
            self.logger.warning(f"NodeOverlay {name} not applied: {why}")
        self._write_overlay_status(overlays, result, snap.now)
        return result.instance_types

    def _write_overlay_status(self, overlays: list, result: OverlayResult, now: float) -> None:
        for ov in overlays:
            why = result.conflicts.get(ov.name)
            ok = why is None
            # as Karpenter's status conditions: a True condition's reason is its type, a conflict's is Conflict
            reason, message = (L.CONDITION_VALIDATION_SUCCEEDED, "") if ok else ("Conflict", why)
            current = get_condition(ov.status, L.CONDITION_VALIDATION_SUCCEEDED)
            if current is not None and (current.get("status") == ("True" if ok else "False")
                                        and current.get("reason") == reason and current.get("message") == message):
                continue
            status: dict = {"conditions": list(ov.status.get("conditions") or [])}
            for type_ in (L.CONDITION_VALIDATION_SUCCEEDED, L.CONDITION_READY):
                set_condition(status, make_condition(type_, ok, type_ if ok else reason, message, now))
            try:
                self.store.update_status("NodeOverlay", ov.name, {"conditions": status["conditions"]})
            except Exception as e:   # a status is a report: the decision goes on without it
                self.logger.warning(f"could not write NodeOverlay {ov.name} status: {e}")


# The last few overlay results per process: a warm invocation gets the provider's cached instance-type lists back
# (the same objects), so the same lists, NodePools and overlays give the same result without recomputing it (a
# catalog of 1,334 types takes a few hundred ms).  The value keeps the lists alive, so their ids stay theirs.
_OVERLAID: dict[tuple, tuple[list, OverlayResult]] = {}


def _overlaid(base: dict[str, list], snap: ClusterSnapshot, overlays: list) -> OverlayResult:
    pools = {name: snap.nodepools.get(name) for name in base}
    key = (tuple(sorted((name, id(its), len(its)) for name, its in base.items())),
           tuple(sorted((name, json.dumps(np.template_labels if np is not None else None, sort_keys=True))
                        for name, np in pools.items())),
           tuple(sorted((ov.name, json.dumps(ov.spec, sort_keys=True, default=str)) for ov in overlays)))
    hit = _OVERLAID.get(key)
    if hit is not None:
        return hit[1]
    result = apply_overlays_by_nodepool(base, snap.nodepools, overlays)
    if len(_OVERLAID) >= 8:
        _OVERLAID.clear()
    _OVERLAID[key] = (list(base.values()), result)
    return result


def _strip_times(status: dict) -> dict:
    s = json.loads(json.dumps(status, default=str))
    for c in s.get("conditions") or []:
        c.pop("lastTransitionTime", None)
    return s


def _status_differs(current: dict, new: dict) -> bool:
    cur = {k: current.get(k) for k in new}
    return _strip_times(cur) != _strip_times(new)
