"""The provisioning simulation: pending pods + NodePools (with instance types) + existing nodes -> NodeClaim plans.

Design (see docs/scheduling.md):

* Pods are grouped into equivalence classes (same namespace, labels and spec => identical requests and
  constraints) and a class is placed in bulk: how many of its pods fit on a target is integer arithmetic on
  resource vectors, capped by what topology allows in the chosen domain.
* Classes go in Karpenter's queue order (cpu desc, memory desc, creation, uid).  A class tries existing and
  in-flight nodes, then NodeClaims planned in this round, then a new NodeClaim per NodePool in weight order.
* Per NodePool, the instance types compatible with a requirement signature are computed once and cached.
* A new NodeClaim is sized on the instance type with the lowest price per pod placed (cheapest offering);
  its plan keeps every compatible type that can hold what was placed on it, cheapest first, at most 60, and
  launches the cheapest.  Later classes also use the free room of older NodeClaims' launch types (free).
* Unconstrained classes (no topology, no host ports, not selected by anyone's anti-affinity) that are left
  after the constrained ones are packed in bulk: pods valued per request vector (LP duals of CPU and memory,
  or stand-alone cost; both planned, the cheaper kept), each step opens the type whose simulated fill is
  worth the most per dollar and repeats that fill while the pods last.
* A class that cannot be placed is relaxed one preference at a time in Karpenter's order, and retried.

The scheduler's modules, along Karpenter's seams (pkg/controllers/provisioning/scheduling):

* ``model``: input, result and plan types, the solver's node (``SimNode``);
* ``podfacts``: pod classes (``queue.go``'s order); ``predicates``: node affinity, taints, host ports, selectors;
* ``nodeclaim``: NodeClaim templates, one per NodePool (``nodeclaim.go``'s instance-type filtering and sizing);
* ``existing``: existing and in-flight nodes, one ``can_add`` (``existingnode.go``);
* ``tracker``: the topology tracker that owns the domain counts (``topology.go``; rules in ``topology``);
* ``preferences``: relaxation (``preferences.go``); ``placement``: one class onto nodes (``scheduler.go``'s add);
* ``spread_placement``: spread classes by domain shares; ``packer``: the bulk packer of unconstrained classes;
* ``finalize``: NodeClaim plans; ``limits``: the unlimited-first pass under NodePool limits;
* this module: ``solve()`` and the orchestration (``_Solver.run``).
"""

from __future__ import annotations

from dataclasses import replace

from ..api.kube import pod_key

from .collector import paused
from .existing import build_existing_nodes
from .finalize import Finalizer
from .limits import LIMITED_OPTION_SPREAD, solve_within_limits_unconstrained
from .model import (MIN_VALUES_BEST_EFFORT, MIN_VALUES_POLICIES, MIN_VALUES_STRICT, ExistingNode, NodeClaimPlan,
                    NodePoolInput, SchedulingError, SchedulingInput, SchedulingResult, SimNode, Unschedulable)
from .nodeclaim import NodeClaimTemplate
from .packer import BulkPacker
from .placement import Placement
from .podfacts import build_classes
from .preferences import relax
from .spread_placement import SpreadShares
from .tracker import TopologyTracker

__all__ = [
    "solve",
    "SchedulingInput",
    "NodePoolInput",
    "ExistingNode",
    "SchedulingResult",
    "NodeClaimPlan",
    "Unschedulable",
    "SchedulingError",
    "LIMITED_OPTION_SPREAD",
    "MIN_VALUES_STRICT",
    "MIN_VALUES_BEST_EFFORT",
]


class _Solver(Placement, SpreadShares, BulkPacker, Finalizer):
    """One provisioning round: the state the placement, spread, packer and finalize mixins share."""

    def __init__(self, inp: SchedulingInput, relax_min_values: bool = False):
        self.inp = inp
        self.relax_min_values = relax_min_values   # the BestEffort minValues policy
        self.max_types = max(1, int(inp.max_instance_types or 60))
        self.share_factor = 4
        self.unsched: list[Unschedulable] = []
        self.classes = build_classes(inp.pods, self._zone_map, self.unsched, inp.namespaces)
        rset = {"cpu", "memory", "pods"}
        for c in self.classes:
            rset.update(c.req)
        self.daemonsets = list(inp.daemonsets or [])
        self.rindex = ["cpu", "memory", "pods"] + sorted(rset - {"cpu", "memory", "pods"})
        self.rpos = {r: i for i, r in enumerate(self.rindex)}
        for c in self.classes:
            c.vec = tuple(c.req.get(r, 0) for r in self.rindex)
        pools = []
        seen = set()
        for npi in inp.nodepools:
            if npi.nodepool.name in seen:
                raise SchedulingError(f"NodePool/{npi.nodepool.name}: duplicate NodePool name")
            seen.add(npi.nodepool.name)
            pools.append(NodeClaimTemplate.shared(npi, self.rindex, self.daemonsets, (inp.nodepool_usage or {}).get(npi.nodepool.name)))
        pools.sort(key=lambda p: (-p.weight, p.name))
        self.pools = pools
        self.pool_by_name = {p.name: p for p in pools}
        self.planned: list[SimNode] = []
        self.open: list[SimNode] = []
        self.node_by_id: dict = {}
        self.counter = 0
        self.min_vec: list = []
        self.init_placement()
        self.init_finalize()
        self.existing_nodes = build_existing_nodes(inp.existing_nodes or [], self.rindex, self.rpos, self.pool_by_name,
                                                   inp.namespaces)
        self.nodes: list[SimNode] = list(self.existing_nodes)  # existing first, then planned in creation order
        self.topology = TopologyTracker(self.pools, self.existing_nodes, self.classes, inp.namespaces)
        self.no_limits = not any(p.remaining for p in self.pools)
        # some NodePool taints PreferNoSchedule: only then is that effect tolerated as the last relaxation (Karpenter)
        self.pns_pools = any(t.get("effect") == "PreferNoSchedule" for p in self.pools for t in p.taints)

    def _zone_map(self) -> dict:
        """{zone id: zone} over every offering of the NodePools' instance types (computed on first use)."""
        m = self.__dict__.get("_zmap")
        if m is None:
            m = {}
            for npi in self.inp.nodepools or []:
                for it in getattr(npi, "instance_types", None) or []:
                    for o in it.offerings:
                        if o.zone_id:
                            m[o.zone_id] = o.zone
            self._zmap = m
        return m

    def run(self) -> SchedulingResult:
        if self.classes:
            self.min_vec = [min(c.vec[i] for c in self.classes) for i in range(len(self.rindex))]
        pending = list(self.classes)
        # first the zone shares of the classes spreading over themselves, bin-packed together per zone
        self.place_spread_batch([c for c in pending if not c.simple])
        progress = True
        while pending and progress:
            progress = False
            hard = [c for c in pending if not c.simple]
            simple = [c for c in pending if c.simple]
            for c in hard:
                before = c.placed
                self.place_spread_shares(c)
                while not self.schedule_class(c):
                    step = relax(c, self.pns_pools)
                    if step is None:
                        break
                    c.relaxed.append(step)
                if c.placed > before:
                    progress = True
            if simple:
                before = sum(c.placed for c in simple)
                self.pack_simple(simple)
                for c in simple:
                    while c.placed < len(c.pods) and not self.schedule_class(c):
                        step = relax(c, self.pns_pools)
                        if step is None:
                            break
                        c.relaxed.append(step)
                if sum(c.placed for c in simple) > before:
                    progress = True
            pending = [c for c in pending if c.placed < len(c.pods)]
        return self.result(pending)


def solve(inp: SchedulingInput, *, min_values_policy: str = MIN_VALUES_STRICT) -> SchedulingResult:
    """Run one provisioning round over ``inp`` (pure; no I/O). Raises SchedulingError on malformed input.

    ``min_values_policy`` (Karpenter's ``--min-values-policy``): ``"Strict"`` (default) makes no NodeClaim whose
    instance types would no longer meet a requirement's minValues (its pods stay unschedulable, the reason naming
    minValues); ``"BestEffort"`` makes it with that minValues lowered to what its types offer, and marks the plan
    (``NodeClaimPlan.min_values_relaxed``, the annotation in ``NodeClaimPlan.annotations()``)."""
    if not isinstance(inp, SchedulingInput):
        raise SchedulingError("solve() needs a SchedulingInput")
    if min_values_policy not in MIN_VALUES_POLICIES:
        raise SchedulingError(f"min_values_policy: must be one of {', '.join(MIN_VALUES_POLICIES)}, "
                              f"got {min_values_policy!r}")
    relax = min_values_policy == MIN_VALUES_BEST_EFFORT
    # the simulation allocates many small objects and frees them all at the end: the collector is paused for the
    # whole call (the volume wrapper included; scheduling/collector.py)
    with paused():
        if inp.pod_problems or inp.pod_notes:
            return _with_pod_facts(inp, relax)
        return _solve(inp, relax)


def _solve(inp: SchedulingInput, relax: bool) -> SchedulingResult:
    if any(npi.nodepool.limits for npi in inp.nodepools):
        unlimited = solve_within_limits_unconstrained(inp, lambda i: _Solver(i, relax).run())
        if unlimited is not None:
            return unlimited
    return _Solver(inp, relax).run()


def _with_pod_facts(inp: SchedulingInput, relax: bool) -> SchedulingResult:
    """``solve`` for pods with volume problems (unschedulable before any node is looked at, Karpenter's
    ``ValidatePersistentVolumeClaims``) or volume constraints (named in the reason when the pod stays unschedulable;
    scheduling/volumes.py)."""
    problems, notes = inp.pod_problems or {}, inp.pod_notes or {}
    blocked, pods = [], inp.pods
    if problems:   # (only notes, the usual case: every pod goes to the solve as it is)
        pods = []
        for p in inp.pods:
            key = pod_key(p) if isinstance(p, dict) else None
            if key in problems:
                blocked.append(Unschedulable(key, problems[key]))
            else:
                pods.append(p)
    res = _solve(replace(inp, pods=pods, pod_problems={}, pod_notes={}), relax)
    for u in res.unschedulable:
        if u.pod in notes:
            u.reason = f"{u.reason}; volumes: {notes[u.pod]}"
    res.unschedulable = blocked + res.unschedulable
    return res
