"""The drift sweep reads only what changed (issue 32): the analogue of the consolidation shortcut
(:mod:`.sweep_shortcuts`) for the drift sweep (expiration and drift, :mod:`.disrupt` with ``kind="drift"``).

What a drift sweep decides on a cluster where nothing is drifted, expiring or in flight depends on

* the NodePools, EC2NodeClasses and NodeClaims (the drift hashes, requirements, ``expireAfter``: their
  ``resourceVersion``), and the Nodes' labels and taints (requirements drift reads the Node's labels; a stale
  ``karpenter.sh/disrupted`` taint is removed): read every sweep and fingerprinted;
* the AMIs the EC2NodeClass's alias / ``ssmParameter`` terms name: their SSM parameters are read every sweep (one
  ``GetParameters`` call for every EC2NodeClass, 10 names a call) and fingerprinted, so a new AMI release is seen
  in the same sweep as without the shortcut;
* what changes with no object and no SSM parameter changing -- the subnets and security groups a selector matches,
  capacity reservations, AMIs selected by tags or name, the instance-type catalog and its offerings
  (``InstanceTypeNotFound``): re-read by a full sweep at least every :data:`DRIFT_TTL` (5 minutes: Karpenter's
  EC2NodeClass status controller re-resolves AMIs and security groups every 5 minutes, the consolidation
  shortcut's TTL is the same);
* the clock: a NodeClaim expires at creation + ``expireAfter`` (the marker is valid until the earliest expiry).

A sweep runs in full (the same code, the same reads as with ``KARPENTER_LAMBDA_SWEEP_SHORTCUTS=false``) when any
of these holds (:func:`forced_reasons`): a disruption in flight (any ledger entry), a NodeClaim with a ``Drifted``
condition (a drifted node waits for its budget, its pods' room or its replacement: time and pods decide), a
NodeClaim in a capacity reservation (a capacity block ends by time alone), a Node with the ``karpenter.sh/disrupted``
taint; or no marker, a fingerprint different from the marker's (a new, changed or deleted object, a NodeClaim not
yet marked, an AMI release), the marker's ``validUntil`` passed.  The marker is recorded only after a full sweep that
changed nothing (:func:`.sweep_shortcuts.quiet`) and that nothing forced.  A skipped sweep makes 6 AWS calls (4
DynamoDB Queries, a GetItem, one SSM GetParameters) and one Kubernetes list (Nodes).

Differences from a sweep run every minute in full, documented: a subnet / security group retagged, a capacity
reservation or an AMI selected by tags or name that changes, an instance type leaving the catalog, is seen within
:data:`DRIFT_TTL` instead of within a minute -- as Karpenter, whose EC2NodeClass status is re-resolved on that kind of
period.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from ..adapters.aws.amis import AMIProvider, alias_parameters
from ..api import labels as wk
from ..disruption.expiration import expires_at
from .sweep_shortcuts import STORE_KINDS, Prefetched, SweepMarker, quiet

DRIFT_TTL = 300.0   # subnets, security groups, reservations, AMIs by tags/name, the catalog: re-read at least this often
DRIFT_KIND = "drift"


@dataclass
class DriftObserved:
    fingerprint: str
    prefetched: Prefetched
    entries: dict                       # the ledger's entries (NodeClaim -> Entry)
    forced: list[str] = field(default_factory=list)   # why this sweep must run in full whatever the marker says
    marker: dict | None = None

    def unchanged(self, now: float) -> bool:
        return skip_reason(self.marker, self.fingerprint, self.forced, now) is None


def skip_reason(marker: dict | None, fingerprint: str, forced: list[str], now: float) -> str | None:
    """Why the sweep must run in full (None: it may be skipped).  Pure: the decision the tests pin down."""
    if forced:
        return forced[0]
    if marker is None:
        return "no quiet sweep recorded"
    if marker.get("fingerprint") != fingerprint:
        return "changed since the last quiet sweep"
    if now >= float(marker.get("validUntil") or 0.0):
        return "the last quiet sweep's marker expired"
    return None


def forced_reasons(store: dict[str, list], nodes: list[dict], entries: dict) -> list[str]:
    """What makes a drift sweep run in full whatever changed (see the module doc)."""
    out = []
    if entries:
        out.append(f"{len(entries)} disruption(s) in flight")
    for nc in store.get("NodeClaim") or []:
        if nc.condition("Drifted") is not None:
            out.append(f"NodeClaim {nc.name} is marked Drifted")
        if (nc.labels or {}).get(wk.CAPACITY_RESERVATION_ID):
            out.append(f"NodeClaim {nc.name} runs in capacity reservation {nc.labels[wk.CAPACITY_RESERVATION_ID]}")
    for n in nodes:
        if wk.has_disrupted_taint(n):
            out.append(f"node {(n.get('metadata') or {}).get('name')} has the {wk.DISRUPTED_TAINT_KEY} taint")
    return out


def ami_parameter_names(nodeclass, k8s_version: str) -> list[str]:
    """The SSM parameters the EC2NodeClass's AMI terms read (an alias's, ``ssmParameter`` terms')."""
    names: list[str] = []
    for term in (nodeclass.spec.get("amiSelectorTerms") or []):
        alias = term.get("alias")
        if alias and "@" in alias:
            family, version = alias.split("@", 1)
            names.extend(path for path, _arch, _variants in alias_parameters(family, k8s_version, version))
        if term.get("ssmParameter"):
            names.append(term["ssmParameter"])
    return list(dict.fromkeys(names))


def valid_until(snap) -> float:
    """How long a quiet drift sweep's marker holds: :data:`DRIFT_TTL`, or the earliest expiry of a NodeClaim."""
    until = snap.now + DRIFT_TTL
    for nc in snap.nodeclaims.values():
        np = snap.nodepools.get(nc.labels.get(wk.NODEPOOL, ""))
        if np is None or nc.metadata.get("deletionTimestamp"):
            continue
        at = expires_at(nc, np)
        if at is not None:
            until = min(until, at)
    return until


class QuietDrift:
    """The drift sweep's shortcut (see the module doc): ``observe()`` before, ``complete()`` when it runs in full,
    ``record()`` after a full sweep."""

    kind = DRIFT_KIND

    def __init__(self, store, kube, ledger, marker: SweepMarker, cloud):
        self.store, self.kube, self.ledger, self.marker, self.cloud = store, kube, ledger, marker, cloud

    def observe(self) -> DriftObserved:
        pre = Prefetched.from_store(self.store)
        entries = self.ledger.entries()
        pre.nodes = list(self.kube.list_nodes())
        forced = forced_reasons(pre.store, pre.nodes, entries)
        try:
            params = self._parameters(pre.store["EC2NodeClass"])
        except Exception as e:   # noqa: BLE001 - unreadable (a bad alias, SSM denied): the full sweep decides
            params, forced = {}, forced + [f"AMI parameters not read: {e}"]
        facts = [[kind, sorted((o.name, str(o.metadata.get("resourceVersion") or ""),
                                bool(o.metadata.get("deletionTimestamp"))) for o in pre.store[kind])]
                 for kind in STORE_KINDS]
        facts.append(sorted(_node_facts(n) for n in pre.nodes))
        facts.append(sorted(params.items()))
        digest = hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()
        marker = self.marker.get(self.kind) if not forced else None
        return DriftObserved(digest, pre, entries, forced, marker)

    def _parameters(self, nodeclasses: list) -> dict[str, str | None]:
        version = str(getattr(getattr(self.cloud, "cluster", None), "version", "") or "")
        names = sorted({n for c in nodeclasses for n in ami_parameter_names(c, version)})
        if not names:
            return {}
        got = AMIProvider(self.cloud.ec2, self.cloud.ssm, version)._ssm_get_many(names)
        return {n: got.get(n) for n in names}

    def complete(self, observed: DriftObserved) -> None:
        """Before a full sweep: the rest of what the snapshot loader reads (pods, DaemonSets, PDBs)."""
        pre = observed.prefetched
        pre.pods = list(self.kube.list_pods())
        pre.daemonsets = list(self.kube.list_daemonsets())
        pre.pdbs = list(self.kube.list_pdbs())

    def record(self, observed: DriftObserved, snap, report) -> bool:
        """After a full sweep: remember ``observed`` when nothing forced the sweep and it changed nothing."""
        if observed.forced or observed.entries or not quiet(report):
            return False
        self.marker.put(self.kind, observed.fingerprint, valid_until(snap), snap.now)
        return True


def _node_facts(node: dict) -> tuple:
    """What a drift decision reads of a Node: its NodeClaim (providerID), labels, taints, deletion."""
    meta, spec = node.get("metadata") or {}, node.get("spec") or {}
    return (meta.get("name"), spec.get("providerID"), json.dumps(meta.get("labels") or {}, sort_keys=True),
            json.dumps(spec.get("taints") or [], sort_keys=True, default=str), bool(meta.get("deletionTimestamp")))
