"""Disruption budgets on a snapshot (pure): what the allowance rule of :mod:`karpenter_lambda.api.budgets` counts.

The rule itself (typed :class:`~karpenter_lambda.api.budgets.Budget` objects, minimum over the active budgets that
apply to the reason, percentages rounded up, fail closed) lives in ``api``; this module counts, on a
:class:`~karpenter_lambda.api.snapshot.ClusterSnapshot`, the two numbers it takes (Karpenter's budget mapping):

* ``total``: the NodePool's managed, initialized nodes (the base of percentages), not those drained whose instance
  is terminated (Karpenter leaves out the NodeClaims with ``InstanceTerminating``);
* ``disrupting``: those NotReady, deleting or terminating (``external``) plus the NodeClaims a sweep recorded in
  flight (``recorded``, the ledger's entries: counted whatever their node's state).

Three callers ask, all through :func:`nodepool_allowance` / :func:`reservation_limit`: the sweeps
(``plan.SweepBudgets``), the ledger's conditional reservation (``DisruptionLedger.reserve(entry, max_before)``) and
interruption's rebalance replacement.  The ledger's condition is the same rule evaluated atomically in DynamoDB:
one more entry is allowed while ``limit - external - recorded >= 1``, i.e. ``recorded <= limit - external - 1``.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..api.budgets import (DEFAULT_BUDGETS, NODES_RE, REASONS, UNLIMITED, Allowance, Budget, allowance,
                           budget_limit, parse_budgets, parse_nodes)
from ..api import labels as wk
from ..api.kube import is_terminating, node_ready
from ..api.objects import NodePool
from ..api.snapshot import ClusterSnapshot

__all__ = ["REASONS", "UNLIMITED", "DEFAULT_BUDGETS", "NODES_RE", "Allowance", "Budget", "NodeCount", "parse_nodes",
           "parse_budgets", "budget_limit", "allowed_disruptions", "count_nodes", "nodepool_allowance",
           "reservation_limit"]


@dataclass(frozen=True)
class NodeCount:
    """A NodePool's nodes as the budget rule counts them on one snapshot."""

    total: int        # managed, initialized nodes (with their Node)
    external: int     # of those, NotReady / deleting / terminating and not recorded in flight
    recorded: int     # NodeClaims recorded in flight by a sweep (the ledger's entries of the NodePool)

    @property
    def disrupting(self) -> int:
        return self.external + self.recorded


def count_nodes(snap: ClusterSnapshot, nodepool: str, recorded: set[str] | frozenset = frozenset()) -> NodeCount:
    """:class:`NodeCount` of ``nodepool``; ``recorded``: the NodeClaims the sweeps recorded in flight for this
    NodePool (by their entries; counted even when the snapshot no longer has them, e.g. one derived with an
    earlier command of the sweep carried out)."""
    total = external = 0
    for nc in snap.nodeclaims_of_nodepool(nodepool):
        node = snap.node_of_nodeclaim(nc.name)
        if node is None or not nc.is_true("Initialized"):
            continue
        if (nc.status.get(wk.TERMINATION_STATUS) or {}).get(wk.INSTANCE_TERMINATED_AT):
            continue   # drained and its instance terminated: in neither count (Karpenter's InstanceTerminating)
        total += 1
        if nc.name in recorded:
            continue
        if not node_ready(node) or nc.metadata.get("deletionTimestamp") or is_terminating(node):
            external += 1
    return NodeCount(total, external, len(recorded))


def _budgets_of(nodepool) -> tuple[Budget, ...]:
    if isinstance(nodepool, NodePool):
        return nodepool.budgets
    if isinstance(nodepool, dict):
        return parse_budgets((nodepool.get("spec") or {}).get("disruption") or {})
    return parse_budgets({})   # no NodePool object: the CRD default


def _name_of(nodepool) -> str:
    if isinstance(nodepool, NodePool):
        return nodepool.name
    if isinstance(nodepool, dict):
        return (nodepool.get("metadata") or {}).get("name", "")
    return ""


def allowed_disruptions(nodepool, reason: str, *, total_nodes: int, disrupting: int, now) -> Allowance:
    """The :class:`Allowance` of ``nodepool`` (an ``api.objects.NodePool``, or its manifest dict) for ``reason`` at
    ``now``: :func:`karpenter_lambda.api.budgets.allowance` over ``nodepool.budgets``."""
    return allowance(_budgets_of(nodepool), reason, total_nodes=total_nodes, disrupting=disrupting, now=now,
                     nodepool=_name_of(nodepool))


def nodepool_allowance(snap: ClusterSnapshot, nodepool: str, reason: str,
                       recorded: set[str] | frozenset = frozenset()) -> tuple[Allowance, NodeCount]:
    """(the allowance of ``nodepool`` for ``reason`` on ``snap``, the counts it used).  ``recorded``: the NodeClaims
    the sweeps recorded in flight for this NodePool."""
    count = count_nodes(snap, nodepool, recorded)
    np = snap.nodepools.get(nodepool)
    return allowed_disruptions(np, reason, total_nodes=count.total, disrupting=count.disrupting, now=snap.now), count


def reservation_limit(a: Allowance, count: NodeCount) -> int | None:
    """The ledger's condition for one more reservation of the NodePool: at most this many entries may already be
    recorded (None: no limit).  The same rule as ``a.allowed >= 1``, with ``recorded`` left to DynamoDB so that two
    sweeps racing for the last slot cannot both win."""
    return None if a.limit is None else a.limit - count.external - 1
