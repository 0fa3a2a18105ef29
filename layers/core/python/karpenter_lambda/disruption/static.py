"""Static NodePools (pure): ``spec.replicas`` NodeClaims kept, whatever the pods (Karpenter v1.7+ "Static
NodePools", ``pkg/controllers/static/provisioning`` and ``.../deprovisioning``).

* A NodePool with ``spec.replicas`` is **static**: the provisioner never plans new NodeClaims in it for pending pods
  (its nodes still take pods as existing capacity), and consolidation leaves it alone; drift replaces its nodes
  first (:mod:`.static_drift`: one NodeClaim from the template per drifted one, launched before the drain); expiration
  and node repair delete them (a NodeClaim being deleted no longer counts, so a new one is launched at once).
* **Scale up**: ``replicas`` minus the NodeClaims of the NodePool not being deleted, capped by ``limits.nodes``
  (counted on every NodeClaim of the NodePool, deleting ones included, as the launch claims count them).  A
  NodeClaim that a live replacement of the same NodePool replaces (``karpenter-lambda.io/replaces``: static drift,
  :mod:`.static_drift`) still counts here, as Karpenter's static provisioning counts its "pending disruption"
  NodeClaims: the replacement is not launched twice.
* **Scale down** when the NodeClaims not being deleted and not being replaced (Karpenter's "running" count, which
  leaves the pending disruption ones out, so a replacement in flight is not taken for an excess) exceed
  ``replicas``, among those (Karpenter's deprovisioning order): NodeClaims not launched yet (no providerID) first, then empty
  nodes (no pod but DaemonSet pods, none of them do-not-disrupt), then the others: without a do-not-disrupt pod
  first, then the lower disruption cost (pods weighted by deletion cost and priority, times the lifetime left).
  do-not-disrupt is Karpenter's ``IsDoNotDisruptActive``: ``"true"``, or a duration not yet elapsed since the pod
  started.  Our own additions (not Karpenter's): the higher ``karpenter.sh/deprovisioning-priority`` annotation
  before the cost (and among the unlaunched ones), the name last, so the order is stable.
* A static NodeClaim is sized by nothing but the NodePool: every instance type its requirements allow with an
  available offering, cheapest first, exotic types (GPU, accelerators, metal) only when nothing else is left, at
  most 60 (:func:`static_nodeclaim_plan`; the launch takes the cheapest offering, as CreateFleet would).

:func:`plan_static` takes a snapshot and returns one :class:`StaticDecision` per static NodePool that needs a change;
``controllers/static.py`` carries them out from the lifecycle sweep.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..api import labels as wk
from ..api.kube import is_daemon_pod
from ..api.objects import NodeClaim, NodePool
from ..api.quantity import resource_value
from ..api.snapshot import ClusterSnapshot
from ..scheduling.model import NodeClaimPlan, NodePoolInput
from ..scheduling.nodeclaim import NodeClaimTemplate, truncate
from .candidates import disruption_cost, lifetime_left
from .eviction import do_not_disrupt_active

OVERPROVISIONED = "Overprovisioned"      # the reason of a static scale-down's NodeClaimDisrupted event
PRIORITY_ANNOTATION = "karpenter.sh/deprovisioning-priority"
MAX_INSTANCE_TYPES = 60


def replicas_of(np: NodePool) -> int | None:
    """``spec.replicas`` (validated >= 0), or None for a dynamic NodePool."""
    return np.replicas


def is_static(np: NodePool) -> bool:
    return replicas_of(np) is not None


def node_limit(np: NodePool) -> int | None:
    raw = (np.limits or {}).get("nodes")
    if raw is None:
        return None
    try:
        return int(resource_value("nodes", raw))
    except ValueError:
        return None


@dataclass
class StaticDecision:
    nodepool: str
    replicas: int
    active: int                     # NodeClaims not being deleted
    total: int                      # every NodeClaim of the NodePool
    replacing: int = 0              # of ``active``: replaced by a live replacement (static drift in flight)
    launch: int = 0
    remove: list[str] = field(default_factory=list)   # NodeClaims to delete, in Karpenter's order
    limited: str | None = None      # why fewer are launched than missing

    @property
    def changes(self) -> bool:
        return bool(self.launch or self.remove or self.limited)


def count_active(claims: list[NodeClaim]) -> int:
    return sum(1 for nc in claims if not nc.metadata.get("deletionTimestamp"))


def pending_disruption(claims: list[NodeClaim]) -> set[str]:
    """The NodeClaims of ``claims`` (one NodePool's) not being deleted that a live (not deleting) NodeClaim of the
    same list replaces (``karpenter-lambda.io/replaces``): a static drift's candidates while their replacement is in
    flight, Karpenter's ``PendingDisruption`` NodeClaims of a static NodePool."""
    live = {nc.name for nc in claims if not nc.metadata.get("deletionTimestamp")}
    out: set[str] = set()
    for nc in claims:
        if nc.name in live:
            out.update(n for n in wk.decode_replaces((nc.annotations or {}).get(wk.REPLACES_ANNOTATION))
                       if n in live and n != nc.name)
    return out


def static_counts(claims: list[NodeClaim]) -> tuple[int, int]:
    """(active: not being deleted, running: active and not being replaced) of one NodePool's NodeClaims: the
    scale up compares ``active`` with ``replicas``, the scale down ``running`` (Karpenter's static provisioning and
    deprovisioning counts)."""
    active = count_active(claims)
    return active, active - len(pending_disruption(claims))


def plan_static(snap: ClusterSnapshot) -> list[StaticDecision]:
    """What every static NodePool of the snapshot needs now (NodePools already at ``replicas`` are left out)."""
    out = []
    for np in sorted(snap.nodepools.values(), key=lambda n: n.name):
        want = replicas_of(np)
        if want is None:
            continue
        claims = snap.nodeclaims_of_nodepool(np.name)
        active, running = static_counts(claims)
        d = StaticDecision(np.name, want, active, len(claims), replacing=active - running)
        if d.active < want:
            missing = want - d.active
            limit = node_limit(np)
            room = missing if limit is None else max(0, min(missing, limit - d.total))
            d.launch = room
            if room < missing:
                d.limited = f"limits.nodes {limit} reached ({d.total} NodeClaims, {d.total - d.active} deleting)"
        elif running > want:
            d.remove = removal_order(snap, np)[: running - want]
        if d.changes:
            out.append(d)
    return out


def _node_pods(snap: ClusterSnapshot, nc: NodeClaim) -> list[dict]:
    return snap.pods_of_nodeclaim(nc.name)


def _do_not_disrupt(pods: list[dict], now: float) -> bool:
    """A pod's ``karpenter.sh/do-not-disrupt`` is active: ``"true"``, or a duration not yet elapsed since it started
    (Karpenter's ``pod.IsDoNotDisruptActive``)."""
    return any(do_not_disrupt_active(p, now) for p in pods)


def _priority(nc: NodeClaim) -> int:
    try:
        return int((nc.annotations or {}).get(PRIORITY_ANNOTATION, 0))
    except (TypeError, ValueError):
        return 0


def removal_order(snap: ClusterSnapshot, np: NodePool) -> list[str]:
    """The NodePool's NodeClaims not being deleted and not being replaced (a static drift's candidate goes with its
    own disruption), in the order a scale down removes them (module doc)."""
    claims = snap.nodeclaims_of_nodepool(np.name)
    replaced = pending_disruption(claims)
    live = [nc for nc in claims if not nc.metadata.get("deletionTimestamp") and nc.name not in replaced]
    keyed = []
    for nc in live:
        if not nc.status.get("providerID"):
            keyed.append(((0, -_priority(nc), 0, 0.0), nc.name))
            continue
        pods = _node_pods(snap, nc)
        if all(is_daemon_pod(p) for p in pods) and not _do_not_disrupt(pods, snap.now):
            keyed.append(((1, 0, 0, 0.0), nc.name))
            continue
        cost = disruption_cost(pods, lifetime_left(nc, np, snap.now))
        keyed.append(((2, int(_do_not_disrupt(pods, snap.now)), -_priority(nc), cost), nc.name))
    keyed.sort()
    return [name for _k, name in keyed]


def static_nodeclaim_plan(np: NodePool, instance_types: list, name: str, daemonsets: list | tuple = ()
                          ) -> NodeClaimPlan | None:
    """The NodeClaim a static NodePool launches (module doc), or None when no instance type is offered."""
    template = NodeClaimTemplate.for_nodepool(NodePoolInput(nodepool=np, instance_types=list(instance_types)),
                                              daemonsets)
    types = [t for t in template.types if not t.exotic] or list(template.types)
    types = truncate(types, template.reqs, MAX_INSTANCE_TYPES)
    if not types:
        return None
    first = types[0]
    offer = first.cheapest(template.reqs)
    if offer is None:
        return None
    reqs = template.reqs.copy()
    labels = dict(np.template_labels)
    labels.update(reqs.node_labels())
    reason = (f"static NodePool {np.name} (replicas {replicas_of(np)}): cheapest of {len(types)} instance types "
              f"its requirements allow: {first.name} {offer.capacity_type} in {offer.zone} at ${offer.price:.4f}/h")
    return NodeClaimPlan(name=name, nodepool=np.name, requirements=reqs, instance_types=[t.it for t in types],
                         instance_type=first.name, zone=offer.zone, capacity_type=offer.capacity_type, price=offer.price,
                         pods=[], requests={}, reason=reason, labels=labels, taints=list(np.taints),
                         startup_taints=list(np.startup_taints))


__all__ = ["OVERPROVISIONED", "StaticDecision", "count_active", "is_static", "node_limit", "pending_disruption",
           "plan_static", "removal_order", "replicas_of", "static_counts", "static_nodeclaim_plan"]
