"""Underutilization (pure): Karpenter's multi-node then single-node consolidation.

* :class:`MultiNodeConsolidation`: the consolidatable candidates in Karpenter's order (cheapest to disrupt first),
  within the ``Underutilized`` budget, at most the first 100; a binary search for the longest prefix (at least 2)
  that can be deleted, or replaced by ONE strictly cheaper node (:func:`.consolidation.consolidation_option`).
* :class:`SingleNodeConsolidation`: each candidate in that order until the first valid delete or cheaper replace;
  the candidates it looked at and could not move get the reason (no cheaper replacement, pods would not fit).

Both share :meth:`validate`, the second look before acting (Karpenter's 15 s validation): still consolidatable, no
new blocker, still a valid option, and a replacement no dearer than planned.
"""

from __future__ import annotations

from ..api.snapshot import ClusterSnapshot
from .consolidation import (consolidatable, consolidation_enabled, consolidation_option, evaluations_left, ordered,
                            window_nodes)
from .emptiness import consolidatable_in
from .types import BLOCK_PODS_WOULD_NOT_FIT, GRACEFUL, UNDERUTILIZED, Blocked, Candidate, Command

MULTI_NODE_MAX = 100
SINGLE_NODE_MAX_EVALUATIONS = 100   # Karpenter bounds single-node by a 3-minute timeout; a count keeps it pure
NO_CHEAPER = "no cheaper replacement"


def _cause(reason: str) -> str:
    return BLOCK_PODS_WOULD_NOT_FIT if reason.startswith("pods would not fit") else NO_CHEAPER


def _command(opt) -> Command:
    return Command(UNDERUTILIZED, list(opt.candidates), replacements=[opt.replacement] if opt.replacement else [],
                   savings_per_hour=opt.savings, option=opt,
                   detail=(f"{opt.action} {len(opt.candidates)} node(s)" +
                           (f" by {opt.replacement.instance_type}" if opt.replacement is not None else "") +
                           f", saves ${opt.savings:.4f}/h"))


class _Underutilized:
    reason = UNDERUTILIZED
    kind = GRACEFUL
    eventual = False
    chains = True   # several commands per sweep, each planned on the snapshot left by the ones before (plan._chain)

    def should_disrupt(self, c: Candidate, snap: ClusterSnapshot) -> bool:
        return consolidation_enabled(c) and consolidatable_in(c, snap) is not None

    def _within_budget(self, budgets, cands, blocked):
        out, taken = [], {}
        for c in cands:
            np = c.nodepool_name
            if taken.get(np, 0) >= budgets.left(np, UNDERUTILIZED):
                blocked.append(Blocked(c.name, "budget", budgets.message(np, UNDERUTILIZED), UNDERUTILIZED))
                continue
            taken[np] = taken.get(np, 0) + 1
            out.append(c)
        return out

    def validate(self, snap: ClusterSnapshot, candidates: list[Candidate], budgets, planned_price: float | None):
        ok, blocked = consolidatable(snap, candidates)
        if blocked:
            return None, f"{blocked[0][0].name}: {blocked[0][2]}"
        opt = consolidation_option(snap, ok, budgets, window=window_nodes(snap))
        if not opt.valid:
            return None, opt.reason
        if opt.replacement is not None and planned_price is not None and opt.replacement.price > planned_price + 1e-9:
            return None, f"replacement price changed: ${opt.replacement.price:.4f}/h now vs ${planned_price:.4f}/h planned"
        if opt.replacement is None and planned_price is not None:
            pass  # a delete where a replace was planned is only cheaper
        return _command(opt), ""


class MultiNodeConsolidation(_Underutilized):
    def compute_commands(self, budgets, candidates: list[Candidate], snap: ClusterSnapshot):
        ok, why = consolidatable(snap, candidates)
        blocked = [Blocked(c.name, cause, msg, UNDERUTILIZED) for c, cause, msg in why]
        within = self._within_budget(budgets, ordered(ok), blocked)[:MULTI_NODE_MAX]
        if len(within) < 2:
            return [], blocked
        window = window_nodes(snap)
        best, lo, hi = None, 2, len(within)
        # the longest prefix first: when it is valid (a cluster with room) the binary search would end there too,
        # after log2(n) simulations instead of one
        opt = consolidation_option(snap, within, budgets, window=window) if evaluations_left(budgets) > 0 else None
        if opt is not None and opt.valid:
            best, lo = opt, hi + 1
        else:
            hi -= 1
        while lo <= hi and evaluations_left(budgets) > 0:
            mid = (lo + hi) // 2
            opt = consolidation_option(snap, within[:mid], budgets, window=window)
            if opt.valid:
                best, lo = opt, mid + 1
            else:
                hi = mid - 1
        if best is None:
            return [], blocked
        for c in best.candidates:
            budgets.take(c.nodepool_name, UNDERUTILIZED)
        return [_command(best)], blocked


class SingleNodeConsolidation(_Underutilized):
    def compute_commands(self, budgets, candidates: list[Candidate], snap: ClusterSnapshot):
        ok, why = consolidatable(snap, candidates)
        blocked = [Blocked(c.name, cause, msg, UNDERUTILIZED) for c, cause, msg in why]
        window = window_nodes(snap)
        tried = getattr(budgets, "single_node_invalid", None)   # found invalid earlier in this sweep: not again
        n = 0
        for c in ordered(ok):
            if tried is not None and c.name in tried:
                continue
            if n >= SINGLE_NODE_MAX_EVALUATIONS or evaluations_left(budgets) <= 0:
                break
            if not budgets.available(c.nodepool_name, UNDERUTILIZED):
                blocked.append(Blocked(c.name, "budget", budgets.message(c.nodepool_name, UNDERUTILIZED), UNDERUTILIZED))
                continue
            n += 1
            opt = consolidation_option(snap, [c], budgets, window=window)
            if opt.valid:
                budgets.take(c.nodepool_name, UNDERUTILIZED)
                return [_command(opt)], blocked
            if tried is not None:
                tried.add(c.name)
            blocked.append(Blocked(c.name, _cause(opt.reason), opt.reason, UNDERUTILIZED))
        return [], blocked
