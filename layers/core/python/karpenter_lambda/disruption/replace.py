"""The disruption question asked of a snapshot (pure): "without these candidates, where would their pods go?"

One call of :func:`karpenter_lambda.scheduling.reschedule.simulate_removal` with the solver input built from the
snapshot exactly as provisioning builds it (:mod:`karpenter_lambda.scheduling.inputs`), minus the candidates and
minus every NodeClaim already being disrupted (``exclude``).  Pending pods are the provisioner's job and are not
added (their nominations on in-flight NodeClaims are kept as those NodeClaims' load).

**Room already spoken for** (issue 28 item 4, "replacement before drain"): the nodes already leaving -- the
NodeClaims other commands have in flight (the sweep context's ``leaving``, by default its ``exclude``) and every
NodeClaim being deleted -- still have pods that are about to need a place, so the room those pods will take is not
offered to the candidates' pods:

* a leaving node that a live replacement replaces (``karpenter-lambda.io/replaces``): its pods are held on that
  replacement as placeholders (``scheduling.inputs.replacement_placeholders``: the replacement's room and the pods'
  anti-affinity), so they are not placed again;
* the other leaving nodes' reschedulable pods are placed FIRST (:func:`leaving_placements`, one solver call per
  snapshot and set of leaving nodes, kept in the sweep's caches) and added to the nodes they land on before the
  candidates' pods are placed; those that land on a candidate move with its own pods.  Karpenter does the same with
  the pods of its deleting nodes (``SimulateScheduling``'s ``deletingNodePods``); placing them first means a
  candidate never counts on room an earlier command's pods will take.
"""

from __future__ import annotations

from ..api import labels as wk
from ..api.kube import node_allocatable, pod_key
from ..api.snapshot import ClusterSnapshot
from ..scheduling.existing_pods import facts_for
from ..scheduling.inputs import POD_FACTS_CACHE, existing_nodes, held_reservations, nodepool_inputs, price_of
from ..scheduling.inputs import scheduling_input, scheduling_taints
from ..scheduling.reschedule import RescheduleResult, is_reschedulable, simulate_removal
from ..scheduling.solver import ExistingNode, SchedulingError, solve
from .types import Candidate

# a simulation-only taint: nodes that are not Initialized receive none of the candidates' pods (expiration's
# replacement-first: a pod counted on a node still coming up would have no place when the drain starts)
NOT_INITIALIZED_TAINT = {"key": "karpenter-lambda.io/not-initialized", "effect": "NoSchedule"}


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


def _names_of(snap: ClusterSnapshot, names) -> set[str]:
    """NodeClaim names plus the names of their Nodes (the solver's existing nodes are named by the Node once
    registered, by the NodeClaim before)."""
    out = set(names)
    for name in list(out):
        node = snap.node_of_nodeclaim(name)
        if node is not None:
            out.add((node.get("metadata") or {}).get("name"))
    out.discard(None)
    return out


def deleting_nodeclaims(snap: ClusterSnapshot) -> set[str]:
    """NodeClaims being deleted (whoever asked: a sweep, expiration, interruption, by hand) or whose Node is."""
    out = set()
    for name, nc in snap.nodeclaims.items():
        node = snap.node_of_nodeclaim(name)
        if nc.metadata.get("deletionTimestamp") or ((node or {}).get("metadata") or {}).get("deletionTimestamp"):
            out.add(name)
    return out


def replaced_by_live_replacement(snap: ClusterSnapshot) -> set[str]:
    """NodeClaims a live (not deleting) replacement replaces: their pods are held on it as placeholders."""
    out: set[str] = set()
    for nc in snap.nodeclaims.values():
        if nc.metadata.get("deletionTimestamp"):
            continue
        out.update(wk.decode_replaces((nc.annotations or {}).get(wk.REPLACES_ANNOTATION)))
    return out


def leaving_of(snap: ClusterSnapshot, ctx=None, leaving=None) -> set[str]:
    """The NodeClaims whose pods are about to need a place: ``leaving`` (or the context's ``leaving``, else its
    ``exclude``: what other commands have in flight) plus every NodeClaim being deleted, except the in-flight ones
    the context leaves out of ``leaving`` on purpose (commands planned after the caller's, which gave its pods
    priority: the executor's second looks)."""
    chosen = getattr(ctx, "leaving", None) if ctx is not None else None
    later = set(ctx.exclude) - set(chosen) if chosen is not None else set()
    if leaving is None and ctx is not None:
        leaving = chosen if chosen is not None else ctx.exclude
    return {n for n in set(leaving or ()) | (deleting_nodeclaims(snap) - later) if n in snap.nodeclaims}


def _leaving_node(snap: ClusterSnapshot, name: str) -> ExistingNode | None:
    nc = snap.nodeclaims.get(name)
    node = snap.node_of_nodeclaim(name)
    if nc is None or node is None:
        return None
    node_name = (node.get("metadata") or {}).get("name")
    pods = [p for p in snap.pods_by_node.get(node_name, []) if is_reschedulable(p)]
    if not pods:
        return None
    labels = dict((node.get("metadata") or {}).get("labels") or nc.labels or {})
    return ExistingNode(name=node_name, labels=labels, taints=[], allocatable=node_allocatable(node), pods=pods,
                        nodepool=labels.get(wk.NODEPOOL), instance_type=labels.get(wk.INSTANCE_TYPE),
                        zone=labels.get(wk.ZONE), capacity_type=labels.get(wk.CAPACITY_TYPE), price=price_of(nc))


def leaving_placements(snap: ClusterSnapshot, leaving: set[str], exclude: set[str] = frozenset(), ctx=None,
                       max_instance_types: int = 60) -> dict[str, tuple[str, dict]]:
    """Pod key -> (the existing node it lands on, the pod) for the reschedulable pods of the ``leaving`` NodeClaims
    that no live replacement holds, placed on the cluster without every leaving and ``exclude``-d node (pods that
    would need a new node are left out: no existing room is theirs).  One solver call, kept in the sweep's caches
    (per snapshot, leaving set and exclude set)."""
    held = replaced_by_live_replacement(snap)
    moving = sorted(n for n in leaving if n not in held)
    if not moving:
        return {}
    key = (frozenset(moving), frozenset(exclude))
    cache = ctx.caches_for(snap).leaving if ctx is not None else {}
    if key in cache:
        return cache[key]
    nodes = [en for en in (_leaving_node(snap, n) for n in moving) if en is not None]
    out: dict[str, tuple[str, dict]] = {}
    if nodes:
        gone = _names_of(snap, set(leaving) | set(exclude))
        inputs, _problems = nodepool_inputs(snap)
        try:
            others = existing_nodes(snap, held_reservations(snap), exclude=gone)
            result = simulate_removal(nodes, others=others, nodepools=inputs, daemonsets=snap.daemonsets,
                                      usage=snap.usage, pending=(), max_instance_types=max_instance_types,
                                      min_values_policy=snap.min_values_policy, namespaces=snap.namespace_labels)
        except SchedulingError:
            result = None
        if result is not None:
            by_key = {pod_key(p): p for en in nodes for p in en.pods}
            for k, where in result.placements.items():
                if k in by_key:
                    p = by_key[k]
                    out[k] = (where, {**p, "spec": {**(p.get("spec") or {}), "nodeName": where}})
    cache[key] = out
    return out


def removal_plan(snap: ClusterSnapshot, candidates: list[Candidate], ctx=None, *, exclude=(),
                 max_instance_types: int = 60, extra_taints: dict[str, list[dict]] | None = None,
                 extra_nodes: list[ExistingNode] = (), leaving=None, initialized_only: bool = False
                 ) -> tuple[RescheduleResult, set[str]]:
    """(the simulation, the node/NodeClaim names left out of the remaining capacity).  ``extra_taints``: node name
    -> taints added in the simulation only (a node that must not receive moved pods keeps counting for topology).
    ``extra_nodes``: capacity added to the simulation (consolidation's one replacement, sized and placed).
    ``ctx``: the sweep's :class:`~.context.SweepContext`: its ``exclude`` (NodeClaims already being disrupted) are
    left out too.  ``exclude``: more NodeClaims left out of the capacity (going away in this sweep, their pods
    placed by their own command).  ``leaving``: the NodeClaims whose pods are placed first (default: the context's,
    see the module doc).  ``initialized_only``: the candidates' pods go only to Initialized nodes or new ones
    (expiration: a pod placed on a node still coming up would wait for it)."""
    own = _names_of(snap, {c.name for c in candidates} | {c.node_name for c in candidates if c.node_name})
    gone_here = _names_of(snap, set(exclude))
    inflight = _names_of(snap, set(ctx.exclude) if ctx is not None else set())
    leave = leaving_of(snap, ctx, leaving) - own
    out: set[str] = own | gone_here | inflight | _names_of(snap, leave)
    inputs, _problems = nodepool_inputs(snap)
    # the placeholders of a replacement hold the pods of what it replaces unless those are the ones placed here:
    # only the candidates (and what this sweep removes) are left out of existing_nodes, the rest is dropped after
    others = [en for en in existing_nodes(snap, held_reservations(snap), exclude=own | gone_here) if en.name not in out]
    not_capacity = set(exclude) | (set(ctx.exclude) - leave if ctx is not None else set()) - own
    first = leaving_placements(snap, leave, not_capacity, ctx, max_instance_types) if leave else {}
    by_node: dict[str, list[dict]] = {}
    for where, p in first.values():
        by_node.setdefault(where, []).append(p)
    facts = snap.__dict__.setdefault(POD_FACTS_CACHE, {})
    uninitialized = {en.name for en in others if en.in_flight or not en.initialized} if initialized_only else set()
    for en in others:
        if en.name in by_node:
            en.pods = list(en.pods) + by_node[en.name]
            en.pod_facts = facts_for(en.pods, facts)
        taints = list((extra_taints or {}).get(en.name, ()))
        if en.name in uninitialized:
            taints.append(dict(NOT_INITIALIZED_TAINT))
        if taints:
            en.taints = list(en.taints) + taints
    others = others + list(extra_nodes)
    nodes = [candidate_node(c, snap) for c in candidates]
    for en in nodes:   # pods of earlier commands counted on a candidate move with its own
        if en.name in by_node:
            en.pods = en.pods + by_node[en.name]
    result = simulate_removal(nodes, others=others, nodepools=inputs,
                              daemonsets=snap.daemonsets, usage=snap.usage, pending=(),
                              max_instance_types=max_instance_types, min_values_policy=snap.min_values_policy,
                              namespaces=snap.namespace_labels)
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
                            pending=(), max_instance_types=max_instance_types, min_values_policy=snap.min_values_policy,
                            namespaces=snap.namespace_labels)


def needed_by_pending(snap: ClusterSnapshot) -> dict[str, list[str]]:
    """Node name -> the pending pods the scheduler would place there now (Karpenter keeps a node a pending pod was
    nominated to; here the provisioner only reserves in-flight NodeClaims, so the question is asked directly).
    One solver call, only when pods are pending."""
    pending = snap.pending_pods()
    if not pending:
        return {}
    try:
        inp, _ = scheduling_input(snap, pending, held=held_reservations(snap))
        return {name: list(keys) for name, keys in solve(inp, min_values_policy=snap.min_values_policy).existing.items()}
    except SchedulingError:
        return {}
