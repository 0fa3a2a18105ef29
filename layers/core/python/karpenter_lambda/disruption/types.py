"""The disruption contract (pure): candidates, commands, blocks, and the method interface.

Every method (emptiness, drift, expiration, multi- and single-node consolidation, repack) is a :class:`~.context.Method`; the
sweep runs them in Karpenter's order and the first that produces commands wins for a NodePool's budget.  A :class:`Command` is what
the orchestrator (``controllers/disrupt.py``) records and executes: candidates to remove, replacements to launch
first (``NodeClaimPlan`` from the solver), the reason and the savings.  A :class:`Blocked` says why a candidate
stays (budget, do-not-disrupt, PDB, pods would not fit, ...), at most once per node and cause.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..api.objects import NodeClaim, NodePool
from ..api.snapshot import ClusterSnapshot
from ..scheduling import NodeClaimPlan

if TYPE_CHECKING:
    from .balanced import BalancedScore

# reasons (the `reason` keys of `NodeClaimDisrupted` events; Karpenter's budget reasons are Empty/Drifted/Underutilized)
EMPTY = "Empty"
DRIFTED = "Drifted"
EXPIRED = "Expired"
UNDERUTILIZED = "Underutilized"

GRACEFUL = "graceful"
FORCEFUL = "forceful"

# DisruptionBlocked causes
BLOCK_BUDGET = "budget"
BLOCK_DO_NOT_DISRUPT = "do-not-disrupt"
BLOCK_PDB = "PDB"
BLOCK_PODS_WOULD_NOT_FIT = "would leave pods pending"


@dataclass
class Candidate:
    """A managed, initialized, not deleting NodeClaim with its Node, NodePool and pods (from the snapshot)."""

    nodeclaim: NodeClaim
    node: dict | None              # the Node (None only for a NodeClaim that never registered)
    nodepool: NodePool
    pods: list[dict] = field(default_factory=list)            # every non-terminal pod bound to the node
    reschedulable: list[dict] = field(default_factory=list)   # the pods that must land elsewhere
    instance_type: str = ""
    zone: str = ""
    capacity_type: str = ""
    price: float = 0.0
    disruption_cost: float = 0.0
    drift_reason: str | None = None          # NodePoolDrifted, RequirementsDrifted, AMIDrift, ... (when drifted)
    drifted_since: float | None = None

    @property
    def name(self) -> str:
        return self.nodeclaim.name

    @property
    def node_name(self) -> str | None:
        return ((self.node or {}).get("metadata") or {}).get("name")

    @property
    def nodepool_name(self) -> str:
        return self.nodepool.name


@dataclass
class Option:
    """Consolidation's validity test answer (:func:`.consolidation.consolidation_option`): delete the candidates, or
    replace them by one strictly cheaper node; ``reason`` says why not."""

    candidates: list[Candidate]
    replacement: NodeClaimPlan | None = None   # with the price-filtered instance types
    savings: float = 0.0
    reason: str = ""                      # why not (empty when valid)
    cheapest_possible: float | None = None
    placements: dict[str, str] = field(default_factory=dict)   # moved pod key -> existing node (where the test put it)
    usage: dict[str, dict[str, int]] = field(default_factory=dict)   # NodePool usage with the candidates freed
    stray: list[str] = field(default_factory=list)   # pods that would still need another new node (not one node)
    score: "BalancedScore | None" = None   # a Balanced NodePool's score of the move (rejected: ``reason`` says so)

    @property
    def valid(self) -> bool:
        return not self.reason

    @property
    def action(self) -> str:
        return "replace" if self.replacement is not None else "delete"


@dataclass
class Command:
    reason: str                                     # EMPTY | DRIFTED | EXPIRED | UNDERUTILIZED
    candidates: list[Candidate]
    replacements: list[NodeClaimPlan] = field(default_factory=list)   # launched before draining
    savings_per_hour: float = 0.0
    forceful: bool = False                          # not held by budgets (expiration)
    detail: str = ""                                # human explanation (drift kind, ...)
    option: Option | None = None                    # consolidation: the validity test's answer (where pods go)
    score: "BalancedScore | None" = None            # consolidation in a Balanced NodePool: the move's score

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.candidates]


@dataclass
class Blocked:
    nodeclaim: str
    cause: str        # BLOCK_* above
    message: str      # e.g. "do-not-disrupt pod default/web-1", "budget Drifted 0 of 3 left"
    reason: str = ""  # the disruption reason it blocked (EMPTY, DRIFTED, ...)
    score: "BalancedScore | None" = None   # cause "balanced score": the rejected move's score
    # a finding another method's about the same NodeClaim in the sweep replaces: multi-node leaving a candidate out
    # of its groups because earlier ones hold the budget (single-node still looks at it, one at a time)
    provisional: bool = False


@dataclass
class DisruptionPlan:
    commands: list[Command] = field(default_factory=list)
    blocked: list[Blocked] = field(default_factory=list)
    # the graceful commands were planned one after another, each on the snapshot as if the ones before it were
    # carried out (consolidation's several commands per sweep): they are re-validated in that order
    sequential: bool = False


class MethodBase:
    """What every method shares (its typed interface is :class:`~.context.Method`): the defaults of the optional
    parts, so the sweep reads them instead of probing."""

    reason: str = ""
    kind: str = GRACEFUL
    eventual: bool = False   # drift: pod blockers wait for the terminationGracePeriod deadline
    chains: bool = False     # consolidation: several commands per sweep, each on the context left by the one before

    def validate(self, snapshot: ClusterSnapshot, candidates: list[Candidate], ctx, planned_price: float | None
                 ) -> tuple[Command | None, str] | None:
        """The method's own second look before acting; None: it has none (``plan.revalidate``'s applies)."""
        return None
