"""One sweep's context (pure): the snapshot it decides on, the budgets it may still spend, its evaluation counter and
its named caches.

Every method's ``compute_commands(ctx, candidates, snapshot)`` and ``validate(snapshot, candidates, ctx, price)``
receives a :class:`SweepContext`:

* ``snapshot``: the :class:`~karpenter_lambda.api.snapshot.ClusterSnapshot` decided on;
* ``budgets``: an :class:`AllowanceView`, the budget left per (NodePool, reason) by the one allowance rule
  (:mod:`.budgets`), counted on the snapshot the sweep started from, minus what this sweep's commands took;
* ``counters``: the consolidation validity tests (one scheduling simulation each) the sweep may run and has run;
* ``caches``: per-snapshot answers (:class:`SnapshotCaches`: consolidateAfter windows, consolidatable verdicts, the
  PDB index) and ``memo``: per-sweep answers (:class:`SweepMemo`: groups and prefixes found invalid, pod requests,
  bin types);
* ``exclude`` (NodeClaims already being disrupted: neither candidates nor capacity) and ``leaving`` (those whose pods
  are placed before the candidates', :mod:`.replace`; None: ``exclude``).

:meth:`SweepContext.derive` is the context after a consolidation option is carried out (``apply_option``): a new
snapshot, the same budgets, counters and memo, and the caches that still hold (the PDB index: pods only move;
windows and verdicts of the nodes whose pods did not change).  The several commands of one sweep are planned, and
re-validated, each on the context derived from the one before.

``SweepContext(snapshot, inflight)`` is also importable as ``plan.SweepBudgets`` (its former name) and keeps that
class's methods (``limit``, ``left``, ``available``, ``take``, ``message``, ``allowance``), which delegate to
``budgets``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from ..api.budgets import Allowance
from ..api.snapshot import ClusterSnapshot
from .budgets import NodeCount, nodepool_allowance
from .consolidation import Applied, carry_out
from .types import Blocked, Candidate, Command, Option

# Every consolidation validity test is one scheduling simulation over the whole cluster (about 0.5 s on 1,000
# nodes / 20,000 pods, one core): a sweep runs at most this many, whatever the methods (Karpenter bounds its
# single-node method by a 3-minute timeout; a count keeps the plan pure and reproducible).
MAX_SWEEP_EVALUATIONS = 24

__all__ = ["MAX_SWEEP_EVALUATIONS", "AllowanceView", "Evaluations", "SnapshotCaches", "SweepMemo", "SweepContext",
           "Method"]


class AllowanceView:
    """Budget left per (NodePool, reason) for one sweep, and what is already being disrupted."""

    def __init__(self, snap: ClusterSnapshot, inflight: dict[str, str] | None = None):
        self.snap = snap
        self.inflight = dict(inflight or {})          # NodeClaim -> NodePool, recorded by the sweeps
        self.taken: dict[str, int] = {}
        self._cache: dict[tuple[str, str], tuple[Allowance, NodeCount]] = {}

    def recorded(self, nodepool: str) -> int:
        return sum(1 for np in self.inflight.values() if np == nodepool)

    def allowance(self, nodepool: str, reason: str) -> Allowance:
        key = (nodepool, reason)
        if key not in self._cache:
            recorded = {n for n, p in self.inflight.items() if p == nodepool}
            self._cache[key] = nodepool_allowance(self.snap, nodepool, reason, recorded)
        return self._cache[key][0]

    def limit(self, nodepool: str, reason: str) -> int | None:
        return self.allowance(nodepool, reason).limit

    def left(self, nodepool: str, reason: str) -> int:
        return max(0, self.allowance(nodepool, reason).allowed - self.taken.get(nodepool, 0))

    def available(self, nodepool: str, reason: str) -> bool:
        return self.left(nodepool, reason) > 0

    def take(self, nodepool: str, reason: str) -> None:
        self.taken[nodepool] = self.taken.get(nodepool, 0) + 1

    def message(self, nodepool: str, reason: str, ahead: int = 0) -> str:
        """Why a candidate is held by the budget.  ``ahead``: candidates of the same NodePool this method already put
        before it in this sweep (they hold what is left, though the budget has not been taken yet)."""
        a = self.allowance(nodepool, reason)
        limit = "unlimited" if a.limit is None else str(a.limit)
        src = f" ({a.budget})" if a.budget else ""
        left = self.left(nodepool, reason)
        if ahead and left:
            return (f"budget {reason} {left} of {limit} left{src}, held by the {ahead} candidate(s) of NodePool "
                    f"{nodepool} considered before this one in this sweep")
        return f"budget {reason} {left} of {limit} left{src}"


@dataclass
class Evaluations:
    """Consolidation's validity tests: at most ``max`` per sweep (None: unlimited), ``used`` so far."""

    max: int | None = MAX_SWEEP_EVALUATIONS
    used: int = 0

    def left(self) -> int:
        return 1 << 30 if self.max is None else max(0, self.max - self.used)


@dataclass
class SnapshotCaches:
    """Answers about ONE snapshot, computed once (a sweep asks about thousands of pods and nodes)."""

    window: dict[str, bool] = field(default_factory=dict)            # node name -> inside its consolidateAfter window
    consolidatable: dict[str, object] = field(default_factory=dict)  # NodeClaim -> None | () | (cause, message)
    pdb_index: list | None = None                                    # disruption.pdb.pdb_index
    # replace.leaving_placements: (leaving, exclude) -> {pod key: (node, pod)}, the pods of the nodes already leaving
    leaving: dict = field(default_factory=dict)

    def derive(self, snap: ClusterSnapshot, applied: Applied) -> "SnapshotCaches":
        """The caches that still hold on ``applied.snapshot`` (``snap`` with an option carried out): the PDB index
        (pods only move: what each PDB allows is unchanged), and the windows and verdicts of the nodes that neither
        went nor received pods."""
        touched = applied.touched
        verdicts = {k: v for k, v in self.consolidatable.items()
                    if k not in applied.gone_claims
                    and (snap.node_of_nodeclaim(k) or {}).get("metadata", {}).get("name") not in touched}
        window = {k: v for k, v in self.window.items() if k not in applied.gone_nodes and k not in touched}
        leaving = {}
        for key, placed in self.leaving.items():   # pods counted on a node the option removed went where it put them
            kept = {}
            for pod, (where, p) in placed.items():
                if where in applied.gone_nodes:
                    where = applied.moved.get(pod)
                    if where is None:
                        break
                    p = {**p, "spec": {**(p.get("spec") or {}), "nodeName": where}}
                kept[pod] = (where, p)
            else:
                leaving[key] = kept
        return SnapshotCaches(window=window, consolidatable=verdicts, pdb_index=self.pdb_index, leaving=leaving)


@dataclass
class SweepMemo:
    """Answers about one sweep, kept across the snapshots derived in it (the catalog does not change; a later
    command only fills the cluster further)."""

    group_invalid: set[frozenset] = field(default_factory=set)    # packed groups found invalid
    prefix_failed: bool = False                                    # multi-node's longest prefix found invalid
    single_node_invalid: set[str] = field(default_factory=set)    # single-node candidates found invalid
    pod_requests: dict = field(default_factory=dict)               # (namespace, name) -> (cpu, memory)
    bin_types: dict = field(default_factory=dict)                  # (NodePool, zone, capacity type) -> bin types
    # Balanced NodePools' price and disruption totals (balanced.Totals), taken once per sweep as Karpenter does
    balanced_totals: dict | None = None


class SweepContext:
    def __init__(self, snap: ClusterSnapshot, inflight: dict[str, str] | None = None, *,
                 caches: SnapshotCaches | None = None, budgets: AllowanceView | None = None,
                 counters: Evaluations | None = None, memo: SweepMemo | None = None,
                 exclude: set[str] | None = None, leaving: set[str] | None = None):
        self.snapshot = snap
        self.budgets = budgets if budgets is not None else AllowanceView(snap, inflight)
        self.counters = counters if counters is not None else Evaluations()
        self.caches = caches if caches is not None else SnapshotCaches()
        self.memo = memo if memo is not None else SweepMemo()
        self.exclude: set[str] = set(self.budgets.inflight) if exclude is None else exclude
        # NodeClaims whose pods are placed before the candidates' (replace.leaving_of); None: ``exclude``
        self.leaving: set[str] | None = leaving

    def derive(self, option: Option) -> "SweepContext":
        """The context after ``option`` is carried out: ``carry_out`` of the snapshot, the caches that still hold,
        and the SAME budgets, counters, memo, exclusions (what this sweep took stays taken)."""
        applied = carry_out(self.snapshot, option)
        return SweepContext(applied.snapshot, caches=self.caches.derive(self.snapshot, applied), budgets=self.budgets, counters=self.counters, memo=self.memo, exclude=self.exclude,
                            leaving=self.leaving)

    def caches_for(self, snap: ClusterSnapshot) -> SnapshotCaches:
        """This context's caches when ``snap`` is its snapshot; otherwise fresh ones (answers about another snapshot
        are never mixed in)."""
        return self.caches if snap is self.snapshot else SnapshotCaches()

    # -- the evaluation counter --------------------------------------------------------------------------
    @property
    def evaluations(self) -> int:
        return self.counters.used

    @property
    def max_evaluations(self) -> int | None:
        return self.counters.max

    @max_evaluations.setter
    def max_evaluations(self, value: int | None) -> None:
        self.counters.max = value

    def count_evaluation(self) -> None:
        self.counters.used += 1

    # -- SweepBudgets' methods (its former name), delegated to the allowance view -----------------------------
    @property
    def inflight(self) -> dict[str, str]:
        return self.budgets.inflight

    def allowance(self, nodepool: str, reason: str) -> Allowance:
        return self.budgets.allowance(nodepool, reason)

    def limit(self, nodepool: str, reason: str) -> int | None:
        return self.budgets.limit(nodepool, reason)

    def left(self, nodepool: str, reason: str) -> int:
        return self.budgets.left(nodepool, reason)

    def available(self, nodepool: str, reason: str) -> bool:
        return self.budgets.available(nodepool, reason)

    def take(self, nodepool: str, reason: str) -> None:
        self.budgets.take(nodepool, reason)

    def message(self, nodepool: str, reason: str, ahead: int = 0) -> str:
        return self.budgets.message(nodepool, reason, ahead)


class Method(Protocol):
    """A disruption method (the classes derive from :class:`~.types.MethodBase`, which gives the defaults)."""

    reason: str          # EMPTY | DRIFTED | EXPIRED | UNDERUTILIZED
    kind: str            # GRACEFUL | FORCEFUL
    eventual: bool       # drift: pod blockers wait for the terminationGracePeriod deadline
    chains: bool         # consolidation: several commands per sweep, each on the context left by the one before

    def should_disrupt(self, candidate: Candidate, snapshot: ClusterSnapshot) -> bool: ...

    def compute_commands(self, ctx: SweepContext, candidates: list[Candidate], snapshot: ClusterSnapshot
                         ) -> tuple[list[Command], list[Blocked]]: ...

    def validate(self, snapshot: ClusterSnapshot, candidates: list[Candidate], ctx: SweepContext | None,
                 planned_price: float | None) -> tuple[Command | None, str] | None:
        """Its own second look (consolidation: still valid and no dearer than planned); None: the generic one."""
