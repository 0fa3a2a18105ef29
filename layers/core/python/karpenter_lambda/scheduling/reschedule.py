"""The disruption question: "if these nodes went away, where would their pods go, and what would be launched?"

Every disruption method (emptiness, drift, consolidation) asks it.  It is one call of the provisioning solver
(:func:`~karpenter_lambda.scheduling.solver.solve`), not a second scheduler, set up as Karpenter's
``SimulateScheduling`` (pkg/controllers/disruption/helpers.go) does:

* the candidates' reschedulable pods (:func:`is_reschedulable`) become pending pods (deep copies, ``nodeName``
  stripped) and are scheduled together with the pods already pending;
* the candidates are not offered as capacity (they are going away), and what they count against their
  NodePool's limits is freed (their capacity and one ``nodes``);
* a pod the solver puts on an uninitialized node (``ExistingNode.initialized`` False, or an in-flight NodeClaim)
  is not rescheduled: Karpenter will not disrupt on the strength of capacity that has not come up yet.

Pure: no I/O, no clock; the inputs are never modified.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..api import labels as L
from ..api.kube import is_daemon_pod, pod_key
from ..api.quantity import resource_value
from . import topology as T
from .existing_pods import matches
from .model import MIN_VALUES_STRICT, ExistingNode, SchedulingError, SchedulingInput
from .predicates import node_terms
from .solver import solve
from .taints import tolerates

__all__ = ["simulate_removal", "RescheduleResult", "is_reschedulable", "DISRUPTED_TAINT"]

DISRUPTED_TAINT = {"key": L.DISRUPTED_TAINT_KEY, "effect": "NoSchedule"}
TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass
class RescheduleResult:
    new_nodeclaims: list = field(default_factory=list)         # NodeClaimPlan: what would have to be launched
    placements: dict = field(default_factory=dict)             # pod key -> existing node name (all pods placed there)
    unschedulable: dict = field(default_factory=dict)          # candidates' pod key -> reason
    pending_unschedulable: dict = field(default_factory=dict)  # already-pending pod key -> reason
    pods_on_uninitialized: dict = field(default_factory=dict)  # candidates' pod key -> uninitialized node name
    rescheduled: list = field(default_factory=list)            # the candidates' reschedulable pod keys
    price: float = 0.0                                         # $/h of new_nodeclaims (their launch offerings)
    usage: dict = field(default_factory=dict)                  # NodePool usage the solver saw (candidates freed)

    @property
    def all_rescheduled(self) -> bool:
        """Every reschedulable candidate pod lands on an initialized existing node or a new NodeClaim."""
        return not self.unschedulable

    def to_dict(self) -> dict:
        return {
            "newNodeClaims": [n.to_dict() for n in self.new_nodeclaims],
            "placements": dict(self.placements),
            "unschedulable": dict(self.unschedulable),
            "pendingUnschedulable": dict(self.pending_unschedulable),
            "podsOnUninitialized": dict(self.pods_on_uninitialized),
            "rescheduled": list(self.rescheduled),
            "allRescheduled": self.all_rescheduled,
            "pricePerHour": round(self.price, 6),
        }


def _owner_kinds(pod: dict) -> set:
    return {o.get("kind") for o in (pod.get("metadata") or {}).get("ownerReferences") or []}


def is_reschedulable(pod: dict) -> bool:
    """Would ``pod`` need a new home if its node went away?  (Karpenter's ``IsReschedulable`` + disrupted taint.)

    No when it is terminal (Succeeded/Failed), terminating (``deletionTimestamp``; a StatefulSet's terminating
    pod still counts, as in Karpenter: its replacement must be created before the old one is gone), owned by a
    DaemonSet (its node's own daemon) or a Node (a mirror/static pod), or tolerates the
    ``karpenter.sh/disrupted:NoSchedule`` taint (Karpenter does not evict it: it stays until the node goes).
    """
    meta = pod.get("metadata") or {}
    if is_daemon_pod(pod):   # an apps/v1 DaemonSet or a v1 Node (api/kube.py, Karpenter's IsOwnedBy)
        return False
    owners = _owner_kinds(pod)
    if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
        return False
    if meta.get("deletionTimestamp") and "StatefulSet" not in owners:
        return False
    return not tolerates((pod.get("spec") or {}).get("tolerations"), [DISRUPTED_TAINT])


def _as_pending(pod: dict) -> dict:
    """The pod as if pending: a new top-level dict and spec without ``nodeName`` (the solver only reads pods; the
    nested objects are shared, not copied -- a deep copy per moved pod was a tenth of a consolidation sweep)."""
    p = dict(pod)
    if isinstance(pod.get("spec"), dict):
        p["spec"] = {k: v for k, v in pod["spec"].items() if k != "nodeName"}
    return p


def _resources(d, where: str) -> dict[str, int]:
    out = {}
    for k, v in (d or {}).items():
        try:
            out[k] = v if isinstance(v, int) else resource_value(k, v)
        except ValueError as e:
            raise SchedulingError(f"{where}.{k}: {e}") from None
    return out


def _nodepool_of(node: ExistingNode) -> str | None:
    return node.nodepool or (node.labels or {}).get(L.NODEPOOL)


def _candidate_capacity(node: ExistingNode, nodepools: list, capacity: dict) -> dict[str, int]:
    """What ``node`` counts against its NodePool's limits: given, else its type's capacity, else its allocatable."""
    if node.name in capacity:
        return _resources(capacity[node.name], f"capacity[{node.name}]")
    type_name = node.instance_type or (node.labels or {}).get(L.INSTANCE_TYPE)
    pool = _nodepool_of(node)
    for npi in nodepools:
        if npi.nodepool.name != pool:
            continue
        for it in npi.instance_types:
            if it.name == type_name:
                return dict(it.capacity)
    return _resources(node.allocatable, f"candidate {node.name}: allocatable")


def _freed_usage(usage: dict | None, candidates: list, nodepools: list, capacity: dict) -> dict:
    """A copy of ``usage`` with each candidate's capacity and one ``nodes`` taken off its NodePool (never below 0)."""
    out = {name: dict(res or {}) for name, res in (usage or {}).items()}
    for node in candidates:
        pool = out.get(_nodepool_of(node) or "")
        if not pool:
            continue
        cap = _candidate_capacity(node, nodepools, capacity)
        cap["nodes"] = 1
        for k in list(pool):
            pool[k] = max(0, pool[k] - cap.get(k, 0))
    return out


def simulate_removal(candidates, *, others, nodepools, daemonsets=(), usage=None, pending=(), max_instance_types=60,
                     capacity=None, min_values_policy: str = MIN_VALUES_STRICT, namespaces=None) -> RescheduleResult:
    """Schedule the candidates' pods (with the pending pods) as if the candidates were gone.

    ``candidates`` and ``others`` are :class:`ExistingNode` (``others`` includes in-flight NodeClaims, with
    ``in_flight=True``); ``nodepools`` are :class:`NodePoolInput`; ``usage`` is NodePool -> {resource: int} as the
    solver takes it; ``capacity`` optionally gives a candidate's capacity by node name (what it counts against its
    NodePool's limits; default: its instance type's capacity from ``nodepools``, else its allocatable);
    ``min_values_policy``: as :func:`~.solver.solve` takes it; ``namespaces``: the cluster's namespaces and their
    labels ({name: labels}, for namespaceSelectors; None: not known).  Raises SchedulingError on malformed input.
    """
    candidates = list(candidates)
    for i, node in enumerate(candidates):
        if not isinstance(node, ExistingNode):
            raise SchedulingError(f"candidates[{i}]: must be an ExistingNode")
    gone = {n.name for n in candidates}
    keep = [n for n in others if not (isinstance(n, ExistingNode) and n.name in gone)]
    moved = [_as_pending(p) for n in candidates for p in (n.pods or []) if isinstance(p, dict) and is_reschedulable(p)]
    moved_keys = [pod_key(p) for p in moved]
    pending = list(pending)
    freed = _freed_usage(usage, candidates, nodepools, dict(capacity or {}))
    res = solve(SchedulingInput(pods=pending + moved, nodepools=list(nodepools), existing_nodes=keep,
                                daemonsets=list(daemonsets), nodepool_usage=freed,
                                max_instance_types=max_instance_types, namespaces=namespaces),
                min_values_policy=min_values_policy)
    mine = set(moved_keys)
    out = RescheduleResult(new_nodeclaims=list(res.nodeclaims), rescheduled=moved_keys, price=res.cost_per_hour,
                           usage=freed)
    uninitialized = {n.name for n in keep if isinstance(n, ExistingNode) and (n.in_flight or not n.initialized)}
    for node_name, keys in res.existing.items():
        for key in keys:
            out.placements[key] = node_name
            if key in mine and node_name in uninitialized:
                out.pods_on_uninitialized[key] = node_name
                out.unschedulable[key] = f"would schedule against uninitialized node {node_name}"
    for u in res.unschedulable:
        (out.unschedulable if u.pod in mine else out.pending_unschedulable)[u.pod] = u.reason
    if not out.unschedulable:
        for key, why in _spread_recheck(candidates, keep, moved, res).items():
            out.unschedulable[key] = why
    return out


def _labelsets(n: ExistingNode):
    """(namespace, labels, pods) per distinct label set on ``n``: its summary when made from its pods, else counted."""
    f = n.pod_facts
    if f is not None and matches(f, n.pods):
        return [(ns, labels, c) for ns, _, labels, c in f.labelsets]
    out = []
    for q in n.pods or ():
        meta = q.get("metadata") or {}
        out.append((meta.get("namespace") or "default", meta.get("labels") or {}, 1))
    return out


def _spread_recheck(candidates, keep, moved, res) -> dict:
    """Re-check the moved pods' required topology spread (keys other than the hostname) on the result: per domain,
    the pods each constraint selects on the nodes kept, plus where the moved pods went (existing nodes or new
    NodeClaims), against the same counts before the move.  A constraint whose skew exceeds maxSkew and is worse than
    before makes the move invalid (the solver should never propose one: this is the consolidation's second look).
    Domains: those of nodes passing the constraint's node filter (``topology.node_filter``: the pod's own nodeSelector
    and required node affinity, its tolerations under nodeTaintsPolicy Honor), as the solver counts them.  Returns
    {pod key: reason}."""
    rules = {}
    for p in moved:
        try:
            cons = T.pod_constraints(p)
        except ValueError:
            continue
        for con, sel, nss in cons:
            if con.kind == T.SPREAD and con.required and con.key != L.HOSTNAME and con.group_key not in rules:
                rules[con.group_key] = (con, T.Group(con.kind, con.key, nss, sel), p, pod_key(p))
    if not rules:
        return {}
    by_key = {pod_key(p): p for p in moved}
    new_labels = {}
    for plan in res.nodeclaims:
        labels = dict(plan.labels)
        labels[L.ZONE] = plan.zone
        labels.setdefault(L.CAPACITY_TYPE, plan.capacity_type)
        for k in plan.pods:
            new_labels[k] = labels
    # the kept nodes' pods by distinct (namespace, labels): [(node index, pods)], so each rule matches a label set once
    sets: dict = {}
    for i, n in enumerate(keep + list(candidates)):
        for ns, labels, c in _labelsets(n):
            k = (ns, tuple(sorted(labels.items())))
            hit = sets.get(k)
            if hit is None:
                hit = sets[k] = (ns, labels, [])
            hit[2].append((i, c))
    by_pair: dict = {}   # a selector with matchLabels only selects label sets holding its first pair
    for k, v in sets.items():
        for pair in k[1]:
            by_pair.setdefault(pair, []).append(v)
    kept = len(keep)
    node_labels = {n.name: n.labels or {} for n in keep}
    node_taints = {n.name: n.taints or () for n in keep}
    placed = {k: (node_labels.get(name, {}), node_taints.get(name, ())) for name, ks in res.existing.items() for k in ks}
    placed.update((k, (labels, ())) for k, labels in new_labels.items())
    out = {}
    for con, group, pod, key in rules.values():
        nf = T.node_filter(con, node_terms(pod, own=True), (pod.get("spec") or {}).get("tolerations"))

        def domain(labels, taints=()):
            if nf is not None and not nf.passes_labels(labels, taints):
                return None
            return labels.get(con.key)
        doms = [domain(n.labels or {}, n.taints or ()) for n in keep + list(candidates)]
        before = {d: 0 for d in doms[:kept] if d is not None}
        after = dict(before)
        sel = group.selector.labels
        maybe = by_pair.get(next(iter(sorted(sel.items()))), ()) if sel else sets.values()
        for ns, labels, where in maybe:
            if group.matches(ns, labels):
                for i, c in where:
                    d = doms[i]
                    if d is not None:
                        before[d] = before.get(d, 0) + c
                        if i < kept:
                            after[d] += c
        for k, p in by_key.items():
            meta = p.get("metadata") or {}
            if k in placed and group.matches(meta.get("namespace") or "default", meta.get("labels") or {}):
                d = domain(*placed[k])
                if d is not None:
                    after[d] = after.get(d, 0) + 1
        skew_after = max(after.values(), default=0) - min(after.values(), default=0)
        skew_before = max(before.values(), default=0) - min(before.values(), default=0)
        if skew_after > con.max_skew and skew_after > skew_before:
            out[key] = f"would break {con.text} (skew {skew_after} after the move, {skew_before} before)"
    return out
