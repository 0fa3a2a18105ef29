"""Disruption candidates (pure): which NodeClaims a method may look at, and what blocks a graceful disruption.

Karpenter's rules (pkg/controllers/disruption/types.go ``NewCandidate``, state/statenode.go):

* a candidate is **managed** (a NodeClaim of a NodePool that still exists, with its Node), **initialized**, **not
  deleting** and **not nominated** (a pending pod the provisioner placed on it keeps it: the pod needs it).  Forceful
  methods (expiration) take every NodeClaim that is not deleting (``forceful=True``).
* **blockers** for graceful methods: ``karpenter.sh/do-not-disrupt: "true"`` on the Node or on a pod (a Go duration
  value blocks until that long after the pod's ``status.startTime``, and for good while it has none, as Karpenter
  v1.x), and, for each pod a drain would evict (DaemonSet pods too, not those tolerating the
  ``karpenter.sh/disrupted:NoSchedule`` taint), a PodDisruptionBudget that allows no eviction of it or more than one
  PodDisruptionBudget selecting it (:func:`~.pdb.blocking_pdbs_in`).  An *eventual* method (drift) ignores pod
  blockers when the NodeClaim has a ``terminationGracePeriod``: the drain then waits for them until the deadline
  (Karpenter v1).
* **disruption cost** (consolidation's ordering): per evictable pod ``1 + deletion-cost/2^27 + priority/2^25``,
  clamped to [-10, 10] as Karpenter's ``EvictionCost``, summed, times the fraction of ``expireAfter`` left.

No I/O, no clock: ``snapshot.now`` is the time.
"""

from __future__ import annotations

from ..api import labels as wk
from ..api.durations import DurationError, parse_go_duration, parse_nillable_duration
from ..api.kube import is_mirror_pod, is_terminal, is_terminating, node_ready, pod_key, pod_uid
from ..api.labels import PRICE_ANNOTATION, SECURITY_GROUPS_ANNOTATION, SUBNET_ANNOTATION
from ..api.snapshot import ClusterSnapshot
from ..api.times import to_epoch as epoch   # RFC 3339 text / datetime / number -> epoch seconds (None: absent, bad)
from ..catalog.overlay import offering_overlay
from ..scheduling.reschedule import is_reschedulable
from .eviction import tolerates_disrupted
from .pdb import blocking_pdbs_in, pdb_index
from .replace import needed_by_pending
from .types import BLOCK_DO_NOT_DISRUPT, BLOCK_PDB, BLOCK_PODS_WOULD_NOT_FIT, Candidate

LAST_POD_EVENT = "lastPodEventTime"   # NodeClaim status field kept by the sweeps (RFC 3339)


def condition_time(nc, type_: str) -> float | None:
    c = nc.condition(type_) if nc is not None else None
    if not c or c.get("status") != "True":
        return None
    return epoch(c.get("lastTransitionTime"))


def created_at(nc) -> float | None:
    return epoch(nc.metadata.get("creationTimestamp"))


def evictable_pods(pods: list[dict]) -> list[dict]:
    """The pods a drain would evict (not mirror, not terminal, not already terminating)."""
    return [p for p in pods if not is_mirror_pod(p) and not is_terminal(p) and not is_terminating(p)]


def do_not_disrupt_until(pod: dict) -> float | None:
    """When a pod's ``karpenter.sh/do-not-disrupt`` stops blocking: inf for "true", ``status.startTime`` + d for a
    positive Go duration (``time.ParseDuration``: "1.5h", "300ms"), inf while the pod has no start time; None for
    anything else (core ``pkg/utils/pod/scheduling.go`` ``IsDoNotDisruptActive``)."""
    meta = pod.get("metadata") or {}
    value = (meta.get("annotations") or {}).get(wk.DO_NOT_DISRUPT)
    if value is None:
        return None
    if value == "true":
        return float("inf")
    try:
        d = float(parse_go_duration(value))
    except (DurationError, ValueError, TypeError):
        return None  # Karpenter ignores an unparsable value
    if d <= 0:
        return None  # ... and a duration that is not positive
    start = epoch((pod.get("status") or {}).get("startTime"))
    return float("inf") if start is None else start + d


def pod_blockers(pods: list[dict], snap: ClusterSnapshot, ctx=None) -> list[tuple[str, str]]:
    """(cause, message) for each pod that blocks a graceful disruption of its node.  ``ctx``: the sweep's
    :class:`~.context.SweepContext` (its caches keep the PDB index of ``snap``)."""
    out = []
    index = None
    for p in pods:
        if is_terminal(p) or is_terminating(p):
            continue
        until = do_not_disrupt_until(p)   # every active pod, a mirror pod too (Karpenter's ValidatePodsDisruptable)
        if until is not None and snap.now < until:
            left = "" if until == float("inf") else f" ({int(until - snap.now)}s left)"
            out.append((BLOCK_DO_NOT_DISRUPT, f"do-not-disrupt pod {pod_key(p)}{left}"))
            continue
        if is_mirror_pod(p):
            continue  # not evicted (its node's deletion takes it): its PDBs are not asked
        if tolerates_disrupted(p):
            continue  # never evicted (upstream IsEvictable): its PDBs are not asked; DaemonSet pods are
        if index is None:
            index = pdb_index(snap, ctx.caches_for(snap) if ctx is not None else None)
        pdbs = blocking_pdbs_in(p, index)
        names = [f"{(b.get('metadata') or {}).get('namespace') or 'default'}/{(b.get('metadata') or {}).get('name')}"
                 for b in pdbs]
        if len(names) > 1:
            out.append((BLOCK_PDB, f"pod {pod_key(p)} is selected by more than one PDB ({', '.join(names)}): "
                                   f"the Eviction API does not support that"))
        elif names:
            out.append((BLOCK_PDB, f"PDB {names[0]} allows no eviction of pod {pod_key(p)}"))
    return out


def node_blocker(node: dict | None) -> tuple[str, str] | None:
    ann = ((node or {}).get("metadata") or {}).get("annotations") or {}
    if ann.get(wk.DO_NOT_DISRUPT) == "true":
        return BLOCK_DO_NOT_DISRUPT, f"do-not-disrupt node {((node or {}).get('metadata') or {}).get('name')}"
    return None


def eviction_cost(pod: dict) -> float:
    """Karpenter's ``EvictionCost`` of one pod: ``1 + deletion-cost/2^27 + priority/2^25``, clamped to [-10, 10]."""
    cost = 1.0
    ann = (pod.get("metadata") or {}).get("annotations") or {}
    try:
        cost += float(ann.get("controller.kubernetes.io/pod-deletion-cost", 0)) / 2 ** 27
    except (TypeError, ValueError):
        pass
    prio = (pod.get("spec") or {}).get("priority")
    if isinstance(prio, (int, float)):
        cost += float(prio) / 2 ** 25
    return min(10.0, max(-10.0, cost))


def disruption_cost(pods: list[dict], lifetime_left: float = 1.0) -> float:
    """Consolidation's ordering: the reschedulable pods' :func:`eviction_cost` summed, times the lifetime left."""
    total = sum(eviction_cost(p) for p in pods if is_reschedulable(p))
    return total * max(0.0, min(1.0, lifetime_left))


def lifetime_left(nc, nodepool, now: float) -> float:
    """Fraction of ``expireAfter`` left (1.0 when it never expires)."""
    try:
        ttl = parse_nillable_duration(nc.spec.get("expireAfter") or nodepool.expire_after)
    except DurationError:
        return 1.0
    born = created_at(nc)
    if ttl is None or not ttl or born is None:
        return 1.0
    return max(0.0, 1.0 - (now - born) / ttl)


def node_price(nc, offered: list | None = None, labels: dict | None = None) -> float:
    """What the node costs: the price recorded at launch; but where a NodeOverlay now sets the price of its offering
    (``offered``: the NodePool's overlaid catalog), that price, as Karpenter reads candidates' prices from the
    current (overlaid) offerings, so an overlay created after the launch does not make every replacement look
    cheaper than the node it replaces."""
    labels = labels if labels is not None else (nc.labels or {})
    name, zone, ct = labels.get(wk.INSTANCE_TYPE), labels.get(wk.ZONE), labels.get(wk.CAPACITY_TYPE)
    for it in offered or ():
        if it.name != name:
            continue
        for o in it.offerings:
            if o.zone == zone and o.capacity_type == ct and offering_overlay(o):
                return float(o.price)
        break
    try:
        return float((nc.annotations or {}).get(PRICE_ANNOTATION) or 0.0)
    except (TypeError, ValueError):
        return 0.0


def make_candidate(snap: ClusterSnapshot, nc, node: dict | None, nodepool) -> Candidate:
    labels = {**(nc.labels or {}), **(((node or {}).get("metadata") or {}).get("labels") or {})}
    pods = list(snap.pods_by_node.get(((node or {}).get("metadata") or {}).get("name"), [])) if node else []
    return Candidate(
        nodeclaim=nc, node=node, nodepool=nodepool, pods=pods,
        reschedulable=[p for p in pods if is_reschedulable(p)],
        instance_type=labels.get(wk.INSTANCE_TYPE, ""), zone=labels.get(wk.ZONE, ""),
        capacity_type=labels.get(wk.CAPACITY_TYPE, ""),
        price=node_price(nc, snap.instance_types.get(getattr(nodepool, "name", "")), labels),
        disruption_cost=disruption_cost(pods, lifetime_left(nc, nodepool, snap.now)),
    )


def nominated(snap: ClusterSnapshot, nc) -> list[dict]:
    """Pending pods the provisioner nominated to this NodeClaim (they need it)."""
    out = []
    for uid in snap.reserved_by_claim.get(nc.name, []):
        pod = snap.pods_by_uid.get(uid)
        if pod is not None and not (pod.get("spec") or {}).get("nodeName") and not is_terminal(pod):
            out.append(pod)
    return out


def _pods_to_move(snap: ClusterSnapshot, nodeclaim: str) -> bool:
    """Does the node of ``nodeclaim`` still hold pods that will need another node (reschedulable, not terminal)?"""
    node = snap.node_of_nodeclaim(nodeclaim)
    if node is None:
        return False
    return any(is_reschedulable(p) for p in snap.pods_by_node.get((node.get("metadata") or {}).get("name"), ()))


def build_candidates(snap: ClusterSnapshot, *, forceful: bool = False, exclude: set[str] | frozenset = frozenset()
                     ) -> tuple[list[Candidate], list[tuple[str, str, str]]]:
    """(candidates, skipped) where skipped is (nodeclaim, cause, message) for nodes that are not candidates for a
    reason the user should see (nominated).  ``exclude``: NodeClaims already being disrupted."""
    out: list[Candidate] = []
    skipped: list[tuple[str, str, str]] = []
    needed: dict[str, list[str]] | None = None
    for nc in sorted(snap.nodeclaims.values(), key=lambda c: c.name):
        if nc.name in exclude or nc.metadata.get("deletionTimestamp"):
            continue
        nodepool = snap.nodepools.get(nc.labels.get(wk.NODEPOOL, ""))
        if nodepool is None:
            continue  # not managed (or its NodePool is going away)
        node = snap.node_of_nodeclaim(nc.name)
        if not forceful:
            if node is None or not nc.is_true("Initialized") or is_terminating(node):
                continue
            leads = [n for n in wk.decode_replaces((nc.annotations or {}).get(wk.REPLACES_ANNOTATION))
                     if n in snap.nodeclaims]
            # the replacement of a command still in flight (its candidate in the ledger, ``exclude``): its candidates'
            # pods are coming here.  A command abandoned (replacements kept: its candidate no longer in flight) left
            # the annotation on them; they are ordinary nodes then, for consolidation to judge, as in Karpenter
            waiting_for = [n for n in leads if n in exclude and not snap.nodeclaims[n].metadata.get("deletionTimestamp")]
            if waiting_for:
                skipped.append((nc.name, BLOCK_PODS_WOULD_NOT_FIT, f"replacement for NodeClaim {waiting_for[0]} in flight"))
                continue
            draining = [n for n in leads if snap.nodeclaims[n].metadata.get("deletionTimestamp") and _pods_to_move(snap, n)]
            if draining:      # ... or being drained (a PodDisruptionBudget, do-not-disrupt): they still come here
                skipped.append((nc.name, BLOCK_PODS_WOULD_NOT_FIT, f"replacement for NodeClaim {draining[0]}, whose "
                                                                   f"pods are still being drained"))
                continue
            waiting = [pod_key(p) for p in nominated(snap, nc)]
            if not waiting:
                if needed is None:
                    needed = needed_by_pending(snap)
                waiting = needed.get((node.get("metadata") or {}).get("name"), [])
            if waiting:
                skipped.append((nc.name, BLOCK_PODS_WOULD_NOT_FIT, f"nominated for pending pod {waiting[0]}"
                                + (f" and {len(waiting) - 1} more" if len(waiting) > 1 else "")))
                continue
        out.append(make_candidate(snap, nc, node, nodepool))
    return out, skipped


def graceful_blockers(c: Candidate, snap: ClusterSnapshot, *, eventual: bool = False, ctx=None) -> list[tuple[str, str]]:
    """What keeps a graceful (or eventual) method from disrupting ``c``: node annotation first, then pods.
    ``ctx``: the sweep's :class:`~.context.SweepContext` (caches)."""
    out = []
    nb = node_blocker(c.node)
    if nb:
        out.append(nb)
    if eventual and c.nodeclaim.spec.get("terminationGracePeriod"):
        return out  # the drain honours the pods' blockers until the terminationGracePeriod deadline
    out.extend(pod_blockers(c.pods, snap, ctx))
    return out


__all__ = ["LAST_POD_EVENT", "SECURITY_GROUPS_ANNOTATION", "SUBNET_ANNOTATION", "build_candidates", "condition_time",
           "created_at", "disruption_cost", "do_not_disrupt_until", "epoch", "evictable_pods", "eviction_cost",
           "graceful_blockers", "lifetime_left", "make_candidate", "nominated", "pod_blockers", "pod_uid"]
