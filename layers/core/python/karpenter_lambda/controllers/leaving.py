"""Capacity for the pods of nodes that are about to go, launched before they are evicted.

Karpenter's provisioner counts the pods of deleting nodes as pending (``provisioner.go``:
``nodes.Deleting().ReschedulablePods``), so whatever deletes a NodeClaim -- an interruption, a NodePool's deletion --
gets their capacity launched before the drain reaches them.  karpenter-lambda's provisioner is fed pending pods only,
so the deleter launches it through :func:`launch_for_leaving`: the scheduler with the leaving nodes treated as gone
(``simulate_removal``), each new NodeClaim through the :class:`~.launcher.Launcher` under a deterministic name (a
retry launches only what is missing), annotated ``karpenter-lambda.io/replaces`` (so consolidation leaves it alone
while the pods are still coming, ``disruption/candidates.py``), the pods nominated to it.  Without it a drain that a
PodDisruptionBudget paces sends the pods to the provisioner a few at a time, each group waiting a node's
launch-to-ready time on a node sized for that group alone.

Used by the interruption handler (``interrupt.py``, on its own snapshot), and through :func:`launch_ahead` (which
loads one) by the lifecycle sweep: a NodePool's deletion (``nodepool_deleted.py``) and a NodeClaim the user deleted
(``karpenter-lambda delete nodeclaim``, ``lifecycle.py``).  The snapshot must carry the instance types
(``SnapshotLoader.load_instance_types``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..api import labels as wk
from ..api.kube import node_allocatable, pod_key, pod_uid
from ..api.labels import REPLACES_ANNOTATION, encode_replaces
from ..api.objects import NodeClaim
from ..scheduling.inputs import existing_nodes, held_reservations, nodepool_inputs, price_of
from ..scheduling.model import ExistingNode
from ..scheduling.reschedule import simulate_removal
from .launcher import Launcher, nodeclaim_name
from .snapshot import SnapshotLoader


@dataclass
class LeavingOutcome:
    """What :func:`launch_for_leaving` did: NodeClaims launched (and already launched by an earlier try), pods left
    without a place (``{pod, reason}``), and launch failures worth a retry (an API error, a transient failure)."""

    launched: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    by_leaving: dict[str, list[str]] = field(default_factory=dict)   # leaving NodeClaim -> those (launched or not)
    unschedulable: list[dict] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def candidate(snap, nc: NodeClaim, node: dict) -> ExistingNode:
    """The leaving node as the scheduler sees it (its pods, its room), for ``simulate_removal``."""
    meta = node.get("metadata") or {}
    labels = dict(meta.get("labels") or {})
    return ExistingNode(name=meta.get("name"), labels=labels, taints=list((node.get("spec") or {}).get("taints") or []),
                        allocatable=node_allocatable(node), pods=list(snap.pods_by_node.get(meta.get("name"), [])),
                        nodepool=labels.get(wk.NODEPOOL) or nc.nodepool_name,
                        instance_type=labels.get(wk.INSTANCE_TYPE) or nc.labels.get(wk.INSTANCE_TYPE),
                        zone=labels.get(wk.ZONE), capacity_type=labels.get(wk.CAPACITY_TYPE), price=price_of(nc),
                        initialized=True)


def launch_for_leaving(snap, leaving: list[NodeClaim], launcher: Launcher, salt: str,
                       decide: Callable[..., None], is_transient: Callable[[str], bool]) -> LeavingOutcome:
    """Launch what the pods of ``leaving`` (and the pods nominated to them) need once those nodes are gone.

    ``salt``: part of every new NodeClaim's deterministic name (with its NodePool and pods), so the same call again
    launches only what is missing.  ``is_transient(failure)``: a launch failure worth retrying (reported in
    ``failures``) rather than a final answer for its pods (``unschedulable``)."""
    out = LeavingOutcome()
    names = [nc.name for nc in leaving]
    held = held_reservations(snap)
    candidates, exclude = [], set(names)
    source: dict[str, str] = {}   # pod key -> the leaving NodeClaim it is on (or nominated to)
    for nc in leaving:
        node = snap.node_of_nodeclaim(nc.name)
        if node is not None:
            candidates.append(candidate(snap, nc, node))
            exclude.add(node["metadata"]["name"])
            source.update({pod_key(p): nc.name for p in candidates[-1].pods})
    nominated = [snap.pods_by_uid[u] for u, c in held.items() if c in exclude and u in snap.pods_by_uid]
    source.update({pod_key(snap.pods_by_uid[u]): c for u, c in held.items() if c in names and u in snap.pods_by_uid})
    if not candidates and not nominated:
        return out
    inputs, problems = nodepool_inputs(snap)
    others = existing_nodes(snap, held, exclude=exclude)
    result = simulate_removal(candidates, others=others, nodepools=inputs, daemonsets=snap.daemonsets,
                              usage=snap.usage, pending=nominated, min_values_policy=snap.min_values_policy,
                              namespaces=snap.namespace_labels)
    out.unschedulable = [{"pod": k, "reason": r + (("; " + "; ".join(problems)) if problems else "")}
                         for k, r in {**result.unschedulable, **result.pending_unschedulable}.items()
                         if k not in result.pods_on_uninitialized]
    by_key = {pod_key(p): p for c in candidates for p in c.pods}
    by_key.update({pod_key(p): p for p in nominated})
    takeover = {u: c for u, c in snap.reservations.items() if u not in held or held[u] in exclude}
    what = ", ".join(names)
    for plan in result.new_nodeclaims:
        np = snap.nodepools[plan.nodepool]
        ncls = snap.nodeclasses[np.node_class_ref.get("name")]
        pods = [by_key[k] for k in plan.pods if k in by_key]
        name = nodeclaim_name(plan.nodepool, [pod_uid(p) for p in pods], [salt])
        # it replaces the leaving NodeClaims whose pods it takes: until they move, it holds room for those pods only
        # (``scheduling/inputs.replacement_placeholders``), so a pod evicted from another one may use the rest
        mine = sorted({source[pod_key(p)] for p in pods if pod_key(p) in source}) or names
        got = launcher.launch(plan, np, ncls, snap.resolved.get(ncls.name), pods, name=name, takeover=takeover,
                              annotations={REPLACES_ANNOTATION: encode_replaces(mine)}, replacing=names)
        if got.launched is not None or got.duplicate:
            for old in mine:
                out.by_leaving.setdefault(old, []).append(got.name)
        if got.launched is not None:
            out.launched.append(got.name)
            decide("replace", f"replacement {got.name} ({got.launched.instance_type} {got.launched.capacity_type} "
                              f"{got.launched.zone}) for NodeClaim {what}", nodeclaim=got.name, replaces=what,
                   instanceId=got.launched.instance_id)
        elif got.duplicate:
            out.duplicates.append(got.name)
            decide("duplicate", f"replacement {got.name} for {what} already launched", nodeclaim=got.name)
        elif got.error or (got.failed and is_transient(got.failed)):
            out.failures.append(f"replacement for {what}: {got.error or got.failed}")
        else:
            why = got.limit or got.failed or "nothing launched"
            out.unschedulable.extend({"pod": pod_key(p), "reason": why} for p in pods)
    return out


def launch_ahead(store, kube, claims, cloud, clock: Callable[[], float], logger, going: list[NodeClaim], now: float,
                 salt: str, decide: Callable[..., None], is_transient: Callable[[str], bool],
                 loader_options: dict | None = None) -> LeavingOutcome:
    """:func:`launch_for_leaving` on a snapshot loaded here (the catalog only when a node of ``going`` has pods).
    ``loader_options``: the solve settings of the snapshot (``SnapshotLoader``'s ``min_values_policy`` and
    ``scheduler_config``, from ``runtime.Config``), as the provisioner's."""
    loader = SnapshotLoader(store, kube, claims, cloud, logger=logger, **(loader_options or {}))
    snap = loader.load(now, instance_types=False)
    names = {((snap.node_of_nodeclaim(nc.name) or {}).get("metadata") or {}).get("name") for nc in going}
    if not any(snap.pods_by_node.get(n) for n in names if n):
        return LeavingOutcome()   # empty nodes: nothing to place
    loader.load_instance_types(snap)
    return launch_for_leaving(snap, going, Launcher(store, claims, cloud, clock, decide), salt, decide, is_transient)
