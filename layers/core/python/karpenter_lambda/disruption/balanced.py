"""Balanced consolidation (pure): a move is worth it when its share of the NodePool's savings is at least half its
share of the NodePool's disruption (Karpenter's ``consolidationPolicy: Balanced``, designs/balanced-consolidation.md,
pkg/controllers/disruption/balanced.go).

For each NodePool whose policy is ``Balanced``:

* **totals** (:func:`nodepool_totals`, once per sweep): over its managed, initialized, not deleting nodes with a
  known price, the sum of their prices and of their disruption costs;
* a node's **disruption cost** here is ``1`` (a per-node base: an empty node is not free to remove, and no total is
  ever 0) plus, for each reschedulable pod, ``max(0, EvictionCost)`` (:func:`.candidates.eviction_cost`: 1 +
  deletion cost / 2^27 + priority / 2^25, clamped to [-10, 10]).  Unlike the candidate *ordering*
  (:func:`.candidates.disruption_cost`), Karpenter does not multiply it by the lifetime left: the ordering already
  tries nodes near expiry first, the score judges the move itself;
* a **move** (delete or replace, of one or several nodes) scores
  ``(savings / total price) / (its candidates' disruption cost / total disruption cost)`` and is approved when
  ``score >= 1 / k`` with ``k = BALANCED_K = 2`` (Karpenter's default ``consolidationThreshold``; this project does
  not accept that field, so k is fixed).  No savings: rejected.  A move over several NodePools is scored per
  Balanced NodePool, each with its share of the savings (in proportion to its candidates' price), and approved only
  when every one approves; the answer is the lowest score.

At k = 2, in a NodePool of equal nodes and pods a replace must save at least half the node's price, a delete of a
node whose pods fit elsewhere always passes, and an empty node's delete passes unless it is a tiny share of the
NodePool's price.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..api.snapshot import ClusterSnapshot
from ..api.validators import BALANCED
from ..scheduling.reschedule import is_reschedulable
from .candidates import eviction_cost, node_price
from .types import Candidate

__all__ = ["BALANCED_K", "BLOCK_BALANCED", "BalancedScore", "Totals", "is_balanced", "nodepool_totals",
           "node_disruption", "score_move", "score_candidates", "delete_score"]

BALANCED_K = 2                  # Karpenter's default consolidationThreshold: approved at score >= 1/k
BLOCK_BALANCED = "balanced score"   # the Blocked cause of a rejected move


def is_balanced(nodepool) -> bool:
    return (getattr(nodepool, "disruption", None) or {}).get("consolidationPolicy") == BALANCED


@dataclass(frozen=True)
class Totals:
    """A NodePool's price ($/h) and disruption cost, summed over its nodes."""

    price: float = 0.0
    disruption: float = 0.0


@dataclass(frozen=True)
class BalancedScore:
    nodepool: str
    score: float
    savings: float                 # $/h attributed to this NodePool
    disruption: float              # the move's disruption cost in this NodePool
    savings_fraction: float
    disruption_fraction: float
    threshold: float
    approved: bool

    def text(self) -> str:
        """``score 3.33 >= 0.50 (saves 12.5% of NodePool default's price for 3.8% of its disruption cost)``."""
        score = "inf" if math.isinf(self.score) else f"{self.score:.2f}"
        return (f"score {score} {'>=' if self.approved else '<'} {self.threshold:.2f} (saves "
                f"{self.savings_fraction * 100:.1f}% of NodePool {self.nodepool}'s price for "
                f"{self.disruption_fraction * 100:.1f}% of its disruption cost)")

    def to_dict(self) -> dict:
        return {"nodePool": self.nodepool, "score": None if math.isinf(self.score) else round(self.score, 4),
                "threshold": self.threshold, "approved": self.approved,
                "savingsFraction": round(self.savings_fraction, 6),
                "disruptionFraction": round(self.disruption_fraction, 6)}


def node_disruption(pods: list[dict]) -> float:
    """One node's disruption cost for the score: 1 + the sum of max(0, eviction cost) of its reschedulable pods."""
    return 1.0 + sum(max(0.0, eviction_cost(p)) for p in pods if is_reschedulable(p))



def nodepool_totals(snap: ClusterSnapshot) -> dict[str, Totals]:
    """:class:`Totals` of every Balanced NodePool: its managed, initialized, not deleting nodes with a price (a node
    without one counts in neither sum, as Karpenter)."""
    out: dict[str, Totals] = {}
    for name, np in snap.nodepools.items():
        if not is_balanced(np):
            continue
        price = disruption = 0.0
        for nc in snap.nodeclaims_of_nodepool(name):
            node = snap.node_of_nodeclaim(nc.name)
            p = node_price(nc, snap.instance_types.get(name))
            if node is None or p <= 0 or not nc.is_true("Initialized") or nc.metadata.get("deletionTimestamp"):
                continue
            price += p
            disruption += node_disruption(snap.pods_of_nodeclaim(nc.name))
        out[name] = Totals(price, disruption)
    return out


def score_move(nodepool: str, savings: float, disruption: float, totals: Totals, k: float = BALANCED_K
               ) -> BalancedScore:
    """Karpenter's ``ScoreMove``: ``(savings / total price) / (disruption / total disruption)``, approved at >= 1/k."""
    threshold = 1.0 / k
    if totals.price <= 0 or savings <= 0:
        sf = savings / totals.price if totals.price > 0 else 0.0
        return BalancedScore(nodepool, 0.0, savings, disruption, sf, 0.0, threshold, False)
    sf = savings / totals.price
    if totals.disruption <= 0 or disruption <= 0:
        return BalancedScore(nodepool, math.inf, savings, disruption, sf, 0.0, threshold, True)
    df = disruption / totals.disruption
    score = sf / df
    return BalancedScore(nodepool, score, savings, disruption, sf, df, threshold, score >= threshold - 1e-12)


def score_candidates(candidates: list[Candidate], savings: float, totals: dict[str, Totals]) -> BalancedScore | None:
    """The score of a move of ``candidates`` saving ``savings`` $/h; None when none of them is in a Balanced NodePool.
    Several NodePools: each Balanced one scored on its share of the savings; the first rejection, else the lowest
    score."""
    by_pool: dict[str, list[Candidate]] = {}
    for c in candidates:
        by_pool.setdefault(c.nodepool_name, []).append(c)
    whole = sum(c.price for c in candidates)
    worst: BalancedScore | None = None
    for name in sorted(by_pool):
        mine = by_pool[name]
        if not is_balanced(mine[0].nodepool):
            continue
        share = savings
        if len(by_pool) > 1 and whole > 0:
            share = savings * sum(c.price for c in mine) / whole
        cost = sum(node_disruption(c.pods) for c in mine)
        s = score_move(name, share, cost, totals.get(name, Totals()))
        if not s.approved:
            return s
        if worst is None or s.score < worst.score:
            worst = s
    return worst


def delete_score(c: Candidate, totals: dict[str, Totals]) -> BalancedScore | None:
    """The best score any move of ``c`` alone can have (deleting it saves its whole price; a replace saves less):
    below the threshold, single-node consolidation need not simulate it (Karpenter's ``CanPassThreshold``)."""
    return score_candidates([c], c.price, totals)


def totals_for(snap: ClusterSnapshot, ctx=None) -> dict[str, Totals]:
    """:func:`nodepool_totals`, taken once per sweep: kept in the sweep's memo (``ctx``, a
    :class:`~.context.SweepContext`; the contexts derived in the sweep share it), so every move of the sweep is
    scored against the same totals, as Karpenter snapshots them once per cycle."""
    memo = getattr(ctx, "memo", None)
    if memo is None:
        return nodepool_totals(snap)
    if memo.balanced_totals is None:
        memo.balanced_totals = nodepool_totals(snap)
    return memo.balanced_totals


def judge(opt, snap: ClusterSnapshot, ctx=None):
    """A valid consolidation option (:class:`~.types.Option`) of a Balanced NodePool, scored: ``opt.score`` set, and
    ``opt.reason`` (invalid) when the score is under the threshold.  Other options are returned as they are."""
    if not opt.valid or not any(is_balanced(c.nodepool) for c in opt.candidates):
        return opt
    s = score_candidates(opt.candidates, opt.savings, totals_for(snap, ctx))
    opt.score = s
    if s is not None and not s.approved:
        opt.reason = f"{REJECTED_PREFIX}{s.text()}"
    return opt


REJECTED_PREFIX = "balanced: "   # the reason of a rejected option starts with it
