"""The lifecycle sweep reads only what changed (issue 32).

The lifecycle sweep (:mod:`.lifecycle`, every minute) is driven by time only where something is under way: a
NodeClaim launching (adoption, unknown launches, the 5-minute backstop), launched and not yet registered (the
15-minute registration timeout), registering or initializing, deleting (the drain, its deadlines, the instance, the
finalizer), a node unhealthy (node repair's tolerations), a launch claim without its NodeClaim (released after 5
minutes), a slot in the disruption ledger (a dead interruption slot is released after 5 minutes).  When none of these
exists (:func:`forced_reasons`) and nothing changed since a full sweep that did nothing, another full sweep would do
nothing either, except for what only EC2 shows: an instance that went away, or one no NodeClaim names (garbage
collection).  So:

* **skipped** when the NodeClaims, NodePools, EC2NodeClasses, Nodes (providerID, labels, taints, condition statuses,
  deletion) and launch claims have the fingerprint the marker recorded, before its ``validUntil``
  (:data:`LIFECYCLE_TTL`: a full sweep at least every 5 minutes whatever happens) and before the next
  instance check is due: 6 DynamoDB calls (NodeClaims, NodePools, EC2NodeClasses, the launch claims' two partitions
  and the ledger; the marker's GetItem) and one Kubernetes list; the only EC2 call is the instance status checks'
  ``DescribeInstanceStatus`` (one per 100 NodeClaims; every sweep, as Karpenter polls it every minute: an impaired
  instance or a scheduled event makes the sweep a full one, ``lifecycle._check_instances``);
* **instances checked** every :data:`GC_INTERVAL` (2 minutes, Karpenter's garbage-collection period): one
  ``DescribeInstances`` of this deployment's instances; the same ids in the same states as the last full sweep saw
  -> skipped (the marker's ``gcAt`` moves; a PutItem); anything else -> the full sweep, on that listing;
* otherwise the full sweep, the same as with ``KARPENTER_LAMBDA_SWEEP_SHORTCUTS=false``.  The marker is recorded
  after a full sweep whose report is empty, that nothing forced, in which every NodeClaim's instance was listed and
  live and every live instance listed was some NodeClaim's (no orphan waiting for its 30 s age).

What is skipped and why it is safe: registration, initialization, adoption, unknown launches, liveness and the
termination flow act on NodeClaims in a state that forces the full sweep; node repair on an unhealthy node (forced);
static NodePools decide on the NodePools and NodeClaims (fingerprinted); stale launch claims and dead interruption
slots are forced; EC2NodeClass clean-up follows an EC2NodeClass or NodeClaim change (fingerprinted).  The difference
from a full sweep every minute, documented: an instance that goes away while its Node still shows it Ready and
unchanged, or an orphan instance, is acted on within :data:`GC_INTERVAL` rather than a minute (a Node whose instance
stops goes NotReady, which is a change, and forces the full sweep at once).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from ..api import labels as wk
from ..cloudprovider import GONE_STATES, instance_state
from ..disruption.repair import unhealthy_condition
from .cluster_state import as_dict, instance_id_of
from .sweep_shortcuts import SweepMarker

LIFECYCLE_KIND = "lifecycle"
LIFECYCLE_TTL = 300.0     # a full lifecycle sweep at least this often
GC_INTERVAL = 120.0       # this deployment's instances listed at least this often (Karpenter's garbage collection)
SKIPPED = "lifecycle: nothing launching, registering, deleting or unhealthy and nothing changed: skipped"
CHECKED = "lifecycle: instances unchanged since the last full sweep: skipped"


@dataclass
class LifecycleObserved:
    fingerprint: str
    nodeclaims: list
    nodepools: list
    nodes: list[dict]
    forced: list[str] = field(default_factory=list)
    marker: dict | None = None


def decide(marker: dict | None, fingerprint: str, forced: list[str], now: float) -> tuple[str, str]:
    """``("skip" | "check" | "full", why)``: skip the sweep, list the instances first, or run it in full.  Pure."""
    if forced:
        return "full", forced[0]
    if marker is None:
        return "full", "no quiet sweep recorded"
    if marker.get("fingerprint") != fingerprint:
        return "full", "changed since the last quiet sweep"
    if now >= float(marker.get("validUntil") or 0.0):
        return "full", "the last quiet sweep's marker expired"
    if now >= float(marker.get("gcAt") or 0.0) + GC_INTERVAL:
        return "check", "instance check due"
    return "skip", ""


def forced_reasons(nodeclaims: list, nodes: list[dict]) -> list[str]:
    """What puts the lifecycle sweep to work whatever changed (see the module doc); the store-side half."""
    out = []
    by_provider = {(n.get("spec") or {}).get("providerID"): n for n in nodes if (n.get("spec") or {}).get("providerID")}
    ours = set()
    for nc in nodeclaims:
        pid = nc.status.get("providerID")
        if nc.metadata.get("deletionTimestamp"):
            out.append(f"NodeClaim {nc.name} is deleting")
        elif not pid:
            out.append(f"NodeClaim {nc.name} is launching")
        elif not (nc.is_true("Registered") and nc.is_true("Initialized")):
            out.append(f"NodeClaim {nc.name} is not registered and initialized")
        elif pid not in by_provider:
            out.append(f"NodeClaim {nc.name} has no node")
        ours.add(pid)
    for pid, n in by_provider.items():
        meta = n.get("metadata") or {}
        if pid not in ours:
            # a deleting Node holding the termination finalizer with no NodeClaim: drained and released by the full
            # sweep (lifecycle_gc.finalize_orphan_nodes, which leaves upstream Karpenter's alone)
            if meta.get("deletionTimestamp") and wk.TERMINATION_FINALIZER in (meta.get("finalizers") or ()):
                out.append(f"node {meta.get('name')} is deleting and holds the termination finalizer")
            continue
        if meta.get("deletionTimestamp"):
            out.append(f"node {meta.get('name')} is deleting")
        elif unhealthy_condition(n) is not None:
            out.append(f"node {meta.get('name')} is unhealthy")
    return out


def instances_digest(instances: dict[str, dict]) -> str:
    facts = sorted((iid, instance_state(d) or "") for iid, d in instances.items())
    return hashlib.sha256(json.dumps(facts).encode()).hexdigest()


def instances_settled(instances: dict[str, dict], nodeclaims: list) -> bool:
    """Every NodeClaim's instance is listed and live, and every live instance is some NodeClaim's."""
    claimed = {instance_id_of(nc.status.get("providerID")) for nc in nodeclaims if nc.status.get("providerID")}
    live = {iid for iid, d in instances.items() if instance_state(d) not in GONE_STATES}
    return claimed == live


class QuietLifecycle:
    """The lifecycle sweep's shortcut (see the module doc)."""

    def __init__(self, store, kube, claims, ledger, marker: SweepMarker):
        self.store, self.kube, self.claims, self.ledger, self.marker = store, kube, claims, ledger, marker

    def observe(self) -> LifecycleObserved:
        nodeclaims = list(self.store.list("NodeClaim"))
        nodepools = list(self.store.list("NodePool"))
        nodes = [as_dict(n) for n in self.kube.list_nodes()]
        forced = forced_reasons(nodeclaims, nodes)
        if forced:   # the full sweep reads the rest itself
            return LifecycleObserved("", nodeclaims, nodepools, nodes, forced)
        names = {nc.name for nc in nodeclaims}
        claims = sorted((np, name) for np, (_t, cs) in (self.claims.all_usage() if self.claims else {}).items()
                        for name in cs)
        forced += [f"launch claim {name} has no NodeClaim" for _np, name in claims if name not in names]
        entries = self.ledger.entries() if self.ledger is not None else {}
        if entries:
            forced.append(f"{len(entries)} disruption ledger slot(s) taken")
        facts = [[kind, sorted((o.name, str(o.metadata.get("resourceVersion") or ""),
                                bool(o.metadata.get("deletionTimestamp"))) for o in objs)]
                 for kind, objs in (("NodeClaim", nodeclaims), ("NodePool", nodepools),
                                    ("EC2NodeClass", list(self.store.list("EC2NodeClass"))))]
        facts.append(sorted(_node_facts(n) for n in nodes))
        facts.append(claims)
        digest = hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()
        marker = None if forced else self.marker.get(LIFECYCLE_KIND)
        return LifecycleObserved(digest, nodeclaims, nodepools, nodes, forced, marker)

    def decide(self, observed: LifecycleObserved, now: float) -> tuple[str, str]:
        return decide(observed.marker, observed.fingerprint, observed.forced, now)

    def instances_unchanged(self, observed: LifecycleObserved, instances: dict[str, dict], now: float) -> bool:
        """The instance check: the same instances as the marker's; if so the marker's ``gcAt`` moves to ``now``."""
        m = observed.marker or {}
        if m.get("instances") != instances_digest(instances):
            return False
        self.marker.put(LIFECYCLE_KIND, observed.fingerprint, float(m.get("validUntil") or now), float(m.get("at") or now),
                        {"gcAt": now, "instances": m.get("instances")})
        return True

    def record(self, observed: LifecycleObserved, instances: dict[str, dict], report, now: float) -> bool:
        """After a full sweep: remember ``observed`` when nothing forced it, it did nothing and the instances settled."""
        if observed.forced or any(report.to_dict().values()) or not instances_settled(instances, observed.nodeclaims):
            return False
        self.marker.put(LIFECYCLE_KIND, observed.fingerprint, now + LIFECYCLE_TTL, now,
                        {"gcAt": now, "instances": instances_digest(instances)})
        return True


def _node_facts(node: dict) -> tuple:
    meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    conditions = sorted((c.get("type"), c.get("status")) for c in status.get("conditions") or [])
    return (meta.get("name"), spec.get("providerID"), json.dumps(meta.get("labels") or {}, sort_keys=True),
            json.dumps(spec.get("taints") or [], sort_keys=True, default=str), bool(meta.get("deletionTimestamp")),
            json.dumps(conditions))
