"""One cluster snapshot: what every decision reads, built once per invocation (as Karpenter's ``state.Cluster``).

The loader is :mod:`karpenter_lambda.controllers.snapshot` (store + Kubernetes API + launch claims + catalog);
this module is the pure data type and its derived views, so ``scheduling`` and ``disruption`` read it without
I/O.  Kubernetes objects are plain camelCase dicts; Karpenter objects are :mod:`.objects` wrappers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from . import labels as wk
from .kube import is_terminal, node_name_of, pod_uid
from .objects import EC2NodeClass, NodeClaim, NodePool
from .selectors import NamespaceLabels


@dataclass(eq=False)
class ClusterSnapshot:
    now: float                                                    # epoch seconds (the injected clock)
    nodepools: dict[str, NodePool] = field(default_factory=dict)  # not being deleted
    nodeclasses: dict[str, EC2NodeClass] = field(default_factory=dict)
    nodeclaims: dict[str, NodeClaim] = field(default_factory=dict)
    nodes: list[dict] = field(default_factory=list)
    pods: list[dict] = field(default_factory=list)                # every live pod (bound or not)
    daemonsets: list[dict] = field(default_factory=list)
    pdbs: list[dict] = field(default_factory=list)
    reservations: dict[str, str] = field(default_factory=dict)    # pod uid -> NodeClaim name (live nominations)
    usage: dict[str, dict[str, int]] = field(default_factory=dict)  # NodePool -> resources counted against limits
    instance_types: dict[str, list] = field(default_factory=dict)   # NodePool -> InstanceType (priced, minus unavailable)
    nodepool_problems: dict[str, str] = field(default_factory=dict)  # NodePool -> why it has no instance types
    resolved: dict[str, Any] = field(default_factory=dict)         # EC2NodeClass -> resolution (adapter object)
    # storage (issue 28): PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes as Kubernetes dicts;
    # scheduling.volumes.apply_volumes(snapshot) turns them into the pods' node requirements and volume counts
    pvcs: list[dict] = field(default_factory=list)
    pvs: list[dict] = field(default_factory=list)
    storageclasses: list[dict] = field(default_factory=list)
    csinodes: list[dict] = field(default_factory=list)
    pod_problems: dict[str, str] = field(default_factory=dict)     # pod uid -> why it cannot be scheduled (volumes)
    pod_notes: dict[str, str] = field(default_factory=dict)        # pod uid -> constraints it carries from volumes
    # Karpenter's --min-values-policy (Strict | BestEffort: scheduling.MIN_VALUES_POLICIES), the setting
    # KARPENTER_LAMBDA_MIN_VALUES_POLICY the loader copies here: every solve on this snapshot uses it
    min_values_policy: str = "Strict"
    # Karpenter's SpotToSpotConsolidation feature gate (KARPENTER_LAMBDA_SPOT_TO_SPOT_CONSOLIDATION, set by the sweep):
    # whether consolidation may replace spot nodes by a spot node; on by default here, off in Karpenter
    spot_to_spot_consolidation: bool = True
    # the Namespace objects (dicts), read when a pod (anti-)affinity term has a non-empty namespaceSelector;
    # None: not read (such a selector is then ignored: scheduling.predicates.term_namespaces)
    namespaces: list[dict] | None = None
    # the scheduler config's default topology spread constraints (api.scheduler_config.SchedulerConfig
    # .default_constraints, the setting KARPENTER_LAMBDA_SCHEDULER_CONFIG), copied here by the loader / plan /
    # simulate; scheduling.default_spread.apply_default_spread gives them to the pods that declare none, with a
    # selector deduced from the Services and the workload controllers below (read only when default_spread is set)
    default_spread: tuple = ()
    services: list[dict] = field(default_factory=list)              # Service dicts
    workload_controllers: list[dict] = field(default_factory=list)  # ReplicaSet / StatefulSet / ReplicationController
                                                                    # dicts, each carrying apiVersion and kind
    # the RuntimeClasses and LimitRanges (dicts with apiVersion and kind) a DaemonSet without a pod has its template
    # admitted with (scheduling.nodeclaim.counted_daemonsets); listed by the loader only for such a DaemonSet
    runtimeclasses: list[dict] = field(default_factory=list)
    limitranges: list[dict] = field(default_factory=list)

    # -- derived views (computed once) -----------------------------------------------------------
    @cached_property
    def node_by_name(self) -> dict[str, dict]:
        return {(n.get("metadata") or {}).get("name"): n for n in self.nodes}

    @cached_property
    def namespace_labels(self) -> NamespaceLabels | None:
        """{namespace: labels} of the Namespace objects, and of every pod's namespace that has none (no labels but
        the automatic ``kubernetes.io/metadata.name``, which :class:`NamespaceLabels` adds); None when not read."""
        if self.namespaces is None:
            return None
        out = NamespaceLabels()
        for ns in self.namespaces:
            meta = ns.get("metadata") or {}
            if meta.get("name"):
                out[meta["name"]] = dict(meta.get("labels") or {})
        for p in self.pods:
            out.setdefault((p.get("metadata") or {}).get("namespace") or "default", {})
        return out

    @cached_property
    def pods_by_uid(self) -> dict[str, dict]:
        return {pod_uid(p): p for p in self.pods}

    @cached_property
    def pods_by_node(self) -> dict[str, list[dict]]:
        """Bound, non-terminal pods per node name."""
        out: dict[str, list[dict]] = {}
        for p in self.pods:
            nn = node_name_of(p)
            if nn and not is_terminal(p):
                out.setdefault(nn, []).append(p)
        return out

    @cached_property
    def _claim_by_node(self) -> dict[str, NodeClaim]:
        out: dict[str, NodeClaim] = {}
        by_provider = {nc.status.get("providerID"): nc for nc in self.nodeclaims.values() if nc.status.get("providerID")}
        for n in self.nodes:
            meta, spec = n.get("metadata") or {}, n.get("spec") or {}
            nc = by_provider.get(spec.get("providerID"))
            if nc is None:
                nc = next((c for c in self.nodeclaims.values() if c.status.get("nodeName") == meta.get("name")), None)
            if nc is not None:
                out[meta.get("name")] = nc
        return out

    def nodeclaim_of_node(self, node_name: str) -> NodeClaim | None:
        return self._claim_by_node.get(node_name)

    @cached_property
    def _node_by_claim(self) -> dict[str, dict]:
        return {nc.name: self.node_by_name[n] for n, nc in self._claim_by_node.items() if n in self.node_by_name}

    def node_of_nodeclaim(self, name: str) -> dict | None:
        return self._node_by_claim.get(name)

    def pods_of_nodeclaim(self, name: str) -> list[dict]:
        node = self.node_of_nodeclaim(name)
        return list(self.pods_by_node.get((node.get("metadata") or {}).get("name"), [])) if node else []

    @cached_property
    def reserved_by_claim(self) -> dict[str, list[str]]:
        """NodeClaim -> pod uids it holds a live nomination for (in reservation order)."""
        out: dict[str, list[str]] = {}
        for uid, nc in self.reservations.items():
            out.setdefault(nc, []).append(uid)
        return out

    def nodeclaims_of_nodepool(self, nodepool: str) -> list[NodeClaim]:
        return [nc for nc in self.nodeclaims.values() if nc.labels.get(wk.NODEPOOL) == nodepool]

    def pending_pods(self) -> list[dict]:
        """Live pods with no node that still need one (not terminal, not terminating, not DaemonSet/Node-owned, not
        held back by scheduling gates: Karpenter provisions for none of those)."""
        from .kube import is_daemon_pod, is_terminating, scheduling_gates

        return [p for p in self.pods if not node_name_of(p) and not is_terminal(p) and not is_terminating(p)
                and not is_daemon_pod(p) and not scheduling_gates(p)]
