"""The disruption question asked of a snapshot (pure): "without these candidates, where would their pods go?"

One call of :func:`karpenter_lambda.scheduling.reschedule.simulate_removal` with the solver input built from the
snapshot exactly as provisioning builds it (:mod:`karpenter_lambda.scheduling.inputs`), minus the candidates and
minus every NodeClaim already being disrupted (``exclude``).  Pending pods are the provisioner's job and are not
added (their nominations on in-flight NodeClaims are kept as those NodeClaims' load).
"""

from __future__ import annotations

from ..api import labels as wk
from ..api.kube import node_allocatable
from ..api.snapshot import ClusterSnapshot
from ..scheduling.inputs import existing_nodes, held_reservations, nodepool_inputs, price_of, scheduling_taints
from ..scheduling.inputs import scheduling_input
from ..scheduling.reschedule import RescheduleResult, simulate_removal
from ..scheduling.solver import ExistingNode, SchedulingError, solve
from .types import Candidate


def candidate_node(c: Candidate, snap: ClusterSnapshot) -> ExistingNode:
    node = c.node or {}
    meta = node.get("metadata") or {}
    labels = dict(meta.get("labels") or c.nodeclaim.labels or {})
    return ExistingNode(
        name=meta.get("name") or c.name, labels=labels, taints=scheduling_taints(node, c.nodeclaim) if node else [],
        allocatable=node_allocatable(node) if node else {}, pods=list(c.pods), nodepool=c.nodepool_name,
        in_flight=False, instance_type=labels.get(wk.INSTANCE_TYPE), zone=labels.get(wk.ZONE),
        capacity_type=labels.get(wk.CAPACITY_TYPE), price=price_of(c.nodeclaim), initialized=True,
    )


def removal_plan(snap: ClusterSnapshot, candidates: list[Candidate], ctx=None, *, exclude=(),
                 max_instance_types: int = 60, extra_taints: dict[str, list[dict]] | None = None,
                 extra_nodes: list[ExistingNode] = ()) -> tuple[RescheduleResult, set[str]]:
    """(the simulation, the node/NodeClaim names left out of the remaining capacity).  ``extra_taints``: node name
    -> taints added in the simulation only (a node that must not receive moved pods keeps counting for topology).
    ``extra_nodes``: capacity added to the simulation (consolidation's one replacement, sized and placed).
    ``ctx``: the sweep's :class:`~.context.SweepContext`: its ``exclude`` (NodeClaims already being disrupted) are
    left out too."""
    out: set[str] = set(exclude) | (set(ctx.exclude) if ctx is not None else set())
    for c in candidates:
        out.add(c.name)
        if c.node_name:
            out.add(c.node_name)
    for name in list(out):
        node = snap.node_of_nodeclaim(name)
        if node is not None:
            out.add((node.get("metadata") or {}).get("name"))
    inputs, _problems = nodepool_inputs(snap)
    others = existing_nodes(snap, held_reservations(snap), exclude=out)
    for en in others:
        if extra_taints and en.name in extra_taints:
            en.taints = list(en.taints) + list(extra_taints[en.name])
    others = others + list(extra_nodes)
    result = simulate_removal([candidate_node(c, snap) for c in candidates], others=others, nodepools=inputs,
                              daemonsets=snap.daemonsets, usage=snap.usage, pending=(),
                              max_instance_types=max_instance_types)
    return result, out


def new_capacity_sketch(snap: ClusterSnapshot, candidates: list[Candidate], ctx=None,
                        max_instance_types: int = 60) -> RescheduleResult:
    """One pod of each kind among the candidates' pods (same namespace, labels and spec) scheduled on new capacity
    alone (no existing node): the NodeClaims they would need, with the requirements, labels, taints and DaemonSet
    overhead the solver gives them -- not how many pods fit (the caller sums every pod).  No validity test (topology
    counts and the remaining nodes are not in it) and cheap (the remaining nodes are what a simulation spends its
    time on): consolidation sizes its one replacement from it (:func:`.consolidation.consolidation_option`
    ``one_node``) and then asks the full question once."""
    inputs, _problems = nodepool_inputs(snap)
    nodes, seen = [], set()
    for c in candidates:   # one pod per kind (namespace, labels, spec): the needs are the same, the solver's work not
        en = candidate_node(c, snap)
        keep = []
        for p in en.pods:
            m = p.get("metadata") or {}
            kind = (m.get("namespace") or "default", repr(sorted((m.get("labels") or {}).items())),
                    repr(sorted((k, v) for k, v in (p.get("spec") or {}).items() if k != "nodeName")))
            if kind not in seen:
                seen.add(kind)
                keep.append(p)
        en.pods = keep
        nodes.append(en)
    return simulate_removal(nodes, others=[], nodepools=inputs, daemonsets=snap.daemonsets, usage=snap.usage,
                            pending=(), max_instance_types=max_instance_types)


def needed_by_pending(snap: ClusterSnapshot) -> dict[str, list[str]]:
    """Node name -> the pending pods the scheduler would place there now (Karpenter keeps a node a pending pod was
    nominated to; here the provisioner only reserves in-flight NodeClaims, so the question is asked directly).
    One solver call, only when pods are pending."""
    pending = snap.pending_pods()
    if not pending:
        return {}
    try:
        inp, _ = scheduling_input(snap, pending, held=held_reservations(snap))
        return {name: list(keys) for name, keys in solve(inp).existing.items()}
    except SchedulingError:
        return {}
