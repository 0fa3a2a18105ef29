"""Quiet sweeps cost almost nothing (issue 32): the consolidation sweep skips when the cluster is unchanged since a
sweep that found nothing, as Karpenter's consolidation does (``IsConsolidated`` / ``markConsolidated`` against the
cluster state's ``ConsolidationState``, which resets after five minutes so that what no watch sees -- an instance type
becoming available, a price -- is looked at again).

``QuietSweeps(store, kube, ledger, marker).observe()`` reads what a consolidation decision depends on and that can
change without the clock: NodePools, EC2NodeClasses and NodeClaims (their ``resourceVersion``), the disruption
ledger, nodes, pods, DaemonSets, PDBs (and the storage objects when a pod uses a claim; and, with the default topology
spread of a scheduler config, ``default_spread``, the selectors of Services, ReplicaSets, StatefulSets and
ReplicationControllers, from which a pod's default constraints are deduced), and the sweep's :class:`SweepMarker`.  With nothing in flight, no pod waiting for a node, and the same fingerprint as the marker
recorded before its ``validUntil``, the sweep ends there: five DynamoDB calls (three Queries of the store, one of the
ledger, one GetItem) and no EC2/SSM/IAM call.  Otherwise the sweep runs in full on the same reads
(:meth:`Observed.prefetched` feeds the snapshot loader, so nothing is read twice).

A full sweep records the marker only when it changed nothing at all (no proposal, no block newly recorded, no pod
change written, no taint removed, no error, no Balanced score): the state it read is then the state it leaves, and
another sweep on it at the same time would decide the same.  ``validUntil`` is the earliest of

* the sweep's time + :data:`CONSOLIDATION_TTL` (Karpenter's five minutes: instance types, prices, unavailable
  offerings, NodeOverlays, nominations expiring and the disruption-cost order, which move with no object changing);
* the end of every consolidateAfter window still running (a node becomes consolidatable by time alone);
* every disruption-budget window edge (a budget opens or closes by time alone).

``KARPENTER_LAMBDA_SWEEP_SHORTCUTS=false`` turns the shortcut off (every sweep runs in full, as before issue 32);
``tests/sim/test_sweep_shortcuts.py`` runs one scenario both ways and compares the event streams.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from ..api.cron import CronError
from ..api.durations import DurationError, parse_duration
from ..api.kube import is_terminal
from ..api.wallclock import budget_edges
from ..disruption.candidates import do_not_disrupt_until, make_candidate
from ..disruption.emptiness import consolidatable_in
from ..scheduling.volumes import has_claims
from .cluster_state import as_dict

SHORTCUTS_ENV = "KARPENTER_LAMBDA_SWEEP_SHORTCUTS"
CONSOLIDATION_TTL = 300.0          # Karpenter's ConsolidationState resets after 5 minutes
MARKER_KIND = "SweepMarker"        # state table item: pk <cluster>#SweepMarker, sk <sweep kind>
STORE_KINDS = ("NodePool", "EC2NodeClass", "NodeClaim")


def enabled(env=None) -> bool:
    """The shortcuts are on unless ``KARPENTER_LAMBDA_SWEEP_SHORTCUTS`` is ``false`` (or ``0``/``no``/``off``)."""
    value = ((os.environ if env is None else env).get(SHORTCUTS_ENV) or "").strip().lower()
    return value not in ("false", "0", "no", "off")


@dataclass
class Prefetched:
    """What :meth:`QuietSweeps.observe` read, handed to the snapshot loader so a full sweep reads nothing twice."""

    store: dict[str, list] = field(default_factory=dict)      # kind -> objects
    pods: list[dict] = field(default_factory=list)
    nodes: list[dict] = field(default_factory=list)
    daemonsets: list[dict] = field(default_factory=list)
    pdbs: list[dict] = field(default_factory=list)

    @classmethod
    def from_store(cls, store) -> "Prefetched":
        """Every stored kind a sweep's snapshot reads (``STORE_KINDS``), listed once."""
        return cls(store={kind: list(store.list(kind)) for kind in STORE_KINDS})


@dataclass
class Observed:
    fingerprint: str
    prefetched: Prefetched
    entries: dict                  # the ledger's entries (NodeClaim -> Entry)
    pending: bool                  # a pod waits for a node (its nomination may expire by time alone)
    marker: dict | None            # {"fingerprint", "validUntil", "at"} recorded by an earlier sweep

    def unchanged(self, now: float) -> bool:
        m = self.marker
        return (m is not None and not self.entries and not self.pending and m.get("fingerprint") == self.fingerprint
                and now < float(m.get("validUntil") or 0.0))


class SweepMarker:
    """The last quiet sweep's fingerprint, one item per sweep kind in the state table (the store never lists it)."""

    def __init__(self, dynamodb_client, cluster: str, table: str):
        self.ddb, self.cluster, self.table = dynamodb_client, cluster, table

    def _key(self, kind: str) -> dict:
        return {"pk": {"S": f"{self.cluster}#{MARKER_KIND}"}, "sk": {"S": kind}}

    def get(self, kind: str) -> dict | None:
        item = self.ddb.get_item(TableName=self.table, Key=self._key(kind), ConsistentRead=True).get("Item")
        if not item or "m" not in item:
            return None
        try:
            return json.loads(item["m"]["S"])
        except (KeyError, ValueError):
            return None

    def put(self, kind: str, fingerprint: str, valid_until: float, at: float, extra: dict | None = None) -> None:
        """``extra``: what else a sweep kind keeps in its marker (the lifecycle sweep: its instance check)."""
        body = json.dumps({**(extra or {}), "fingerprint": fingerprint, "validUntil": valid_until, "at": at},
                          sort_keys=True)
        self.ddb.put_item(TableName=self.table, Item={**self._key(kind), "m": {"S": body}})


class QuietSweeps:
    """The consolidation sweep's shortcut (see the module doc)."""

    def __init__(self, store, kube, ledger, marker: SweepMarker, kind: str = "consolidation",
                 default_spread: bool = False):
        self.store, self.kube, self.ledger, self.marker, self.kind = store, kube, ledger, marker, kind
        # the scheduler config gives pods default topology spread constraints: what selects them is read too
        self.default_spread = default_spread

    def observe(self) -> Observed:
        pre = Prefetched.from_store(self.store)
        entries = self.ledger.entries()
        pre.pods = list(self.kube.list_pods())
        pre.nodes = list(self.kube.list_nodes())
        pre.daemonsets = list(self.kube.list_daemonsets())
        pre.pdbs = list(self.kube.list_pdbs())
        facts: list = [[kind, sorted((o.name, str(o.metadata.get("resourceVersion") or ""),
                                      bool(o.metadata.get("deletionTimestamp"))) for o in pre.store[kind])]
                       for kind in STORE_KINDS]
        facts.append(sorted(_node_facts(n) for n in pre.nodes))
        facts.append(sorted(_pod_facts(p) for p in pre.pods))
        facts.append(sorted(_generation(d) for d in pre.daemonsets))
        facts.append(sorted(_generation(d) for d in pre.pdbs))
        if any(has_claims(p) for p in pre.pods):
            for lister in (self.kube.list_pvcs, self.kube.list_pvs, self.kube.list_storageclasses, self.kube.list_csinodes):
                facts.append(sorted(_version(x) for x in lister()))
        if self.default_spread:
            for lister in (self.kube.list_services, self.kube.list_replicasets, self.kube.list_statefulsets,
                           self.kube.list_replicationcontrollers):
                facts.append(_selectors(lister))
        digest = hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()
        pending = any(not (p.get("spec") or {}).get("nodeName") and not is_terminal(p) for p in pre.pods)
        return Observed(digest, pre, entries, pending, self.marker.get(self.kind))

    def complete(self, observed: Observed) -> None:
        """Before a full sweep: ``observed.prefetched`` already holds everything the snapshot loader reads."""

    def record(self, observed: Observed, snap, report) -> bool:
        """After a full sweep: remember ``observed`` when the sweep changed nothing (see the module doc)."""
        if observed.entries or observed.pending or not quiet(report):
            return False
        self.marker.put(self.kind, observed.fingerprint, valid_until(snap), snap.now)
        return True


def quiet(report) -> bool:
    """Did the sweep leave everything as it found it?"""
    d = report.to_dict()
    return not any(d[k] for k in d if k != "sweep")


def valid_until(snap) -> float:
    """How long another sweep on this unchanged state would decide the same: the TTL, the end of every running
    consolidateAfter window, every pod's do-not-disrupt time limit, every disruption-budget window edge, whichever
    comes first."""
    now = snap.now
    until = now + CONSOLIDATION_TTL
    for name, nc in snap.nodeclaims.items():
        node = snap.node_of_nodeclaim(name)
        np = snap.nodepools.get(nc.labels.get("karpenter.sh/nodepool", ""))
        if node is None or np is None or nc.metadata.get("deletionTimestamp"):
            continue
        left = consolidatable_in(make_candidate(snap, nc, node, np), snap)
        if left is not None and left > 0:
            until = min(until, now + left)
        # a pod's karpenter.sh/do-not-disrupt time limit running out lifts a block the quiet sweep saw
        for p in snap.pods_by_node.get((node.get("metadata") or {}).get("name"), ()):
            t = do_not_disrupt_until(p)
            if t is not None and now < t < math.inf:
                until = min(until, t)
    start = datetime.fromtimestamp(now, tz=timezone.utc)
    horizon = start + timedelta(seconds=until - now)
    for np in snap.nodepools.values():
        for b in (np.disruption or {}).get("budgets") or []:
            if not isinstance(b, dict) or not b.get("schedule") or not b.get("duration"):
                continue
            try:
                edges = budget_edges(b["schedule"], parse_duration(b["duration"]), start, horizon)
            except (CronError, DurationError, ValueError):
                continue
            if edges:
                until = min(until, edges[0].timestamp())
    return until


def _node_facts(node: dict) -> tuple:
    """What a decision reads of a Node (heartbeat times left out: a kubelet's status report changes nothing)."""
    meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, node.get("status") or {}
    conditions = sorted((c.get("type"), c.get("status")) for c in status.get("conditions") or [])
    return (meta.get("name"), _dump(meta.get("labels")), _dump(meta.get("annotations")), bool(meta.get("deletionTimestamp")),
            _dump(spec.get("taints")), bool(spec.get("unschedulable")), spec.get("providerID"),
            _dump(status.get("allocatable")), _dump(status.get("capacity")), _dump(conditions))


def _pod_facts(pod: dict) -> tuple:
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    ready = next((c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    resources = [c.get("resources") for c in (spec.get("containers") or []) + (spec.get("initContainers") or [])]
    return (meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}", spec.get("nodeName"), status.get("phase"),
            ready, bool(meta.get("deletionTimestamp")), _dump(meta.get("labels")), _dump(meta.get("annotations")),
            _dump(meta.get("ownerReferences")), _dump(resources), _dump(spec.get("tolerations")))


def _generation(obj: dict) -> tuple:
    meta = obj.get("metadata") or {}
    return (meta.get("uid") or meta.get("name"), meta.get("generation"), _dump(meta.get("labels")))


def _selectors(lister) -> list:
    """(uid, selector) of every object ``lister()`` returns -- what a default spread selector is deduced from; their
    status (a ReplicaSet's replica counts) changes nothing.  A list that fails is a fact of its own (the loader then
    deduces without it, as upstream): the marker recorded with it does not match a sweep that reads the list."""
    try:
        items = list(lister())
    except Exception as e:  # noqa: BLE001 - the full sweep logs it; here it only must not match a successful read
        return [["unlisted", type(e).__name__, str(getattr(e, "status", ""))]]
    out = []
    for x in map(as_dict, items):
        meta, spec = x.get("metadata") or {}, x.get("spec") or {}
        out.append((meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}", _dump(spec.get("selector"))))
    return sorted(out)


def _version(obj: dict) -> tuple:
    meta = obj.get("metadata") or {}
    return (meta.get("uid") or meta.get("name"), meta.get("resourceVersion"))


def _dump(value) -> str:
    return json.dumps(value, sort_keys=True, default=str) if value else ""
