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
* ``preferences``: relaxation (``preferences.go``);
* this module: ``solve()``, the orchestration (``_Solver.run``), the placement of one class onto nodes
  (``scheduler.go``'s add), spread classes by domain shares, the bulk packer of unconstrained classes, the
  NodeClaim plans and the unlimited-first pass under NodePool limits.
"""

from __future__ import annotations

import gc
import hashlib
from dataclasses import replace
from typing import Callable

from ..api import labels as L
from ..api.quantity import format_resource, resource_value
from . import topology as T
from .cover import min_cost_cover
from .existing import build_existing_nodes, can_add
from .model import (EXOTIC_KEYS, EXOTIC_RESOURCES, INF, ExistingNode, NodeClaimPlan, NodePoolInput, SchedulingError,
                    SchedulingInput, SchedulingResult, SimNode, Unschedulable, fit_count)
from .nodeclaim import InstanceTypeOption, NodeClaimTemplate, describe, truncate
from .podfacts import PodClass, build_classes
from .predicates import host_ports, labels_match, ports_conflict
from .preferences import relax
from .requirements import Requirement, Requirements
from .spread import SpreadRule, domain_shares
from .taints import format_taint, untolerated
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
]


class _Solver:
    """One provisioning round: the state the placement, spread, packer and finalize mixins share."""

    def __init__(self, inp: SchedulingInput):
        self.inp = inp
        self.max_types = max(1, int(inp.max_instance_types or 60))
        self.share_factor = 4
        self.unsched: list[Unschedulable] = []
        self.classes = build_classes(inp.pods, self._zone_map, self.unsched)
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
            pools.append(NodeClaimTemplate(npi, self.rindex, self.daemonsets, (inp.nodepool_usage or {}).get(npi.nodepool.name)))
        pools.sort(key=lambda p: (-p.weight, p.name))
        self.pools = pools
        self.pool_by_name = {p.name: p for p in pools}
        self.planned: list[SimNode] = []
        self.open: list[SimNode] = []
        self.node_by_id: dict = {}
        self.counter = 0
        self.min_vec: list = []
        self._blocks: list = []
        self._blocked = 0
        self._pruned_at = 0
        self._final_cache: dict = {}
        self._reqs_exotic: dict = {}
        self._text_cache: dict = {}
        self._exotic_idx = [self.rpos[r] for r in EXOTIC_RESOURCES if r in self.rpos]
        self.existing_nodes = build_existing_nodes(inp.existing_nodes or [], self.rindex, self.rpos, self.pool_by_name)
        self.nodes: list[SimNode] = list(self.existing_nodes)  # existing first, then planned in creation order
        self.topology = TopologyTracker(self.pools, self.existing_nodes, self.classes)
        self.no_limits = not any(p.remaining for p in self.pools)

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
        progress = True
        while pending and progress:
            progress = False
            hard = [c for c in pending if not c.simple]
            simple = [c for c in pending if c.simple]
            for c in hard:
                before = c.placed
                self.place_spread_shares(c)
                while not self.schedule_class(c):
                    step = relax(c)
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
                        step = relax(c)
                        if step is None:
                            break
                        c.relaxed.append(step)
                if sum(c.placed for c in simple) > before:
                    progress = True
            pending = [c for c in pending if c.placed < len(c.pods)]
        return self.result(pending)

    def add_planned(self, node: SimNode) -> None:
        """A new NodeClaim planned in this round."""
        self.nodes.append(node)
        self.planned.append(node)
        self.open.append(node)
        self.node_by_id[node.id] = node

    def place(self, c: PodClass, node: SimNode, n: int):
        node.launch = None
        if node.block is not None:
            node.block[1] = None
        keys = c.keys[c.placed:c.placed + n]
        c.placed += n
        node.pods.extend(keys)
        vec = c.vec
        used = node.used
        for i, v in enumerate(vec):
            if v:
                used[i] += v * n
        if c.ports:
            node.ports |= c.ports
        self.topology.record(c, node, n)

    def try_node(self, c: PodClass, node: SimNode, limit: int = INF, grow: bool = False, over: InstanceTypeOption | None = None) -> int:
        """Place as many remaining pods of ``c`` as fit on ``node`` (at most ``limit``); returns how many.

        ``grow``: a planned node too small for one more pod may move to a larger compatible type.
        ``over``: place only within this type (the node's launch type) and make it the node's target."""
        remaining = min(c.limit - c.placed, limit)
        n = fit_count(c.vec, node.cap if over is None else over.avail, node.used)
        if n <= 0:
            if not grow or node.fixed or not self._grow(c, node):
                return 0
            n = fit_count(c.vec, node.cap, node.used)
        if c.ports:
            if ports_conflict(node.ports, c.ports):
                return 0
            n = 1
        if node.fixed:
            if not can_add(node, c):
                return 0
            new_reqs = None
        else:
            pool = node.pool
            if untolerated(c.tolerations, pool.taints, c.tolerate_pns) or c.hostname_blocks():
                return 0
            if len(c.reqs):
                if node.reqs.compatible(c.reqs) is not None:
                    return 0
                new_reqs = node.reqs.intersection(c.reqs)
                if node.target.reqs.intersects(new_reqs) is not None or node.target.cheapest(new_reqs) is None:
                    return 0
            else:
                new_reqs = None
        if c.cons or c.inv:
            allow, chosen = self.topology.check(c, node, False)
            if allow <= 0:
                return 0
            n = min(n, allow)
            if chosen and not node.fixed:
                base = new_reqs if new_reqs is not None else node.reqs
                extra = [Requirement(k, False, (d,)) for k, d in chosen.items()
                         if k != L.HOSTNAME and len(node.domains(k)) > 1]
                if extra:
                    new_reqs = base.copy()
                    for r in extra:
                        new_reqs.add(r)
                    if node.target.cheapest(new_reqs) is None:
                        return 0
        n = min(n, remaining)
        if not node.fixed and node.pool.has_min_values:
            used = [u + v * n for u, v in zip(node.used, c.vec)]
            if node.pool.min_values_error(new_reqs or node.reqs, used) is not None:
                return 0
        if over is not None:
            fr = new_reqs if new_reqs is not None else node.reqs
            if over.reqs.intersects(fr) is not None or over.cheapest(fr) is None:
                return 0
            node.target = over
            node.cap = over.avail
        if new_reqs is not None and not node.fixed:
            node.reqs = new_reqs
        self.place(c, node, n)
        return n

    def _grow(self, c: PodClass, node: SimNode) -> bool:
        pool = node.pool
        need = [u + v for u, v in zip(node.used, c.vec)]
        reqs = node.reqs.intersection(c.reqs) if len(c.reqs) else node.reqs
        old = node.target
        lim = {k: v + (1 if k == "nodes" else old.cap.get(k, 0)) for k, v in pool.remaining.items()}
        for price, o, t in pool.priced(reqs):
            if t.exotic and not old.exotic:
                continue
            if all(a >= x for a, x in zip(t.avail, need)) and t.cheapest(node.reqs) is not None:
                if lim and any((1 if k == "nodes" else t.cap.get(k, 0)) > v for k, v in lim.items()):
                    continue
                for k in pool.remaining:
                    pool.remaining[k] = lim[k] - (1 if k == "nodes" else t.cap.get(k, 0))
                node.target = t
                node.cap = t.avail
                node.launch = None
                if node.block is not None:
                    node.block[1] = None
                return True
        return False

    def _new_node(self, c: PodClass, pool: NodeClaimTemplate, why: list) -> int:
        """Open a NodeClaim on ``pool`` for class ``c``; returns pods placed (0 + reason in ``why`` if impossible)."""
        bad = untolerated(c.tolerations, pool.taints, c.tolerate_pns)
        if bad is not None:
            why.append(f"NodePool {pool.name}: taint {format_taint(bad)} not tolerated")
            return 0
        if c.hostname_blocks():
            why.append(f"NodePool {pool.name}: {c.reqs.get(L.HOSTNAME)}: a new node's hostname is not known in advance")
            return 0
        if c.ports and pool.daemon_ports:
            clash = ports_conflict(pool.daemon_ports, c.ports)
            if clash:
                why.append(f"NodePool {pool.name}: host port {clash[2]}/{clash[1]} is used by a DaemonSet")
                return 0
        if len(c.reqs):
            err = pool.reqs.compatible(c.reqs)
            if err is not None:
                why.append(f"NodePool {pool.name}: incompatible requirements: {err}")
                return 0
            reqs = pool.reqs.intersection(c.reqs)
        else:
            reqs = pool.reqs
        vec = c.vec
        fitting, union, best_cache = pool.fitting(reqs, c.vec, c.wants_exotic())
        if not fitting:
            types = pool.compat_types(reqs)
            if not types:
                why.append(f"no instance type in NodePool {pool.name} matches {describe(c.reqs) or 'its requirements'}")
            else:
                why.append(f"no instance type in NodePool {pool.name} has {self._blocking(c, types)}"
                           + (f" with {describe(c.reqs)}" if len(c.reqs) else ""))
            return 0
        limited = bool(pool.remaining)
        if limited:
            within = [t for t in fitting if pool.limit_ok(t) is None]
            if not within:
                k = pool.limit_ok(fitting[0])
                lv = pool.limits[k]
                why.append(f"NodePool {pool.name}: limits {k} {format_resource(k, lv) if k != 'nodes' else lv} reached")
                return 0
            fitting = within
        if pool.has_min_values:
            err = pool.min_values_error(reqs, vec)
            if err:
                why.append(f"NodePool {pool.name}: {err}")
                return 0
        node = SimNode(f"{pool.name}#{self.counter}", False, pool, reqs, {}, pool.taints, None, [0] * len(vec))
        node.ports = set(pool.daemon_ports)
        remaining = c.limit - c.placed
        allow = INF
        if c.cons or c.inv:
            node.target = union
            allow, chosen = self.topology.check(c, node, True)
            if allow <= 0:
                why.append(f"NodePool {pool.name}: {self.topology.why}")
                return 0
            extra = [Requirement(k, False, (d,)) for k, d in chosen.items() if k != L.HOSTNAME]
            if extra:
                reqs = reqs.copy()
                for r in extra:
                    reqs.add(r)
                node.reqs = reqs
                if limited:
                    fitting = [t for t in fitting if t.cheapest(reqs) is not None]
                else:
                    fitting, union, best_cache = pool.fitting(reqs, c.vec, c.wants_exotic())
                if not fitting:
                    why.append(f"NodePool {pool.name}: no instance type offered in {describe(Requirements(extra))}")
                    return 0
        self.counter += 1
        k = max(1, min(remaining, allow, 1 if c.ports else INF))
        # a node limited by topology to a few pods of this class is sized for several, so that other
        # classes (and the bulk packing) can share it, as a NodeClaim that keeps larger types would; not under
        # NodePool limits, where the sizing type is what the NodeClaim counts against them
        size_k = k if (k >= remaining or limited) else min(remaining, self.share_factor * k)
        best = None if limited else best_cache.get((k, size_k))
        if best is None:
            # fitting is sorted by price: price / min(fit, k) >= price / k bounds the rest of the scan
            bkey = None
            zero = [0] * len(vec)
            prices = pool.price_of(reqs)
            for t in fitting:
                price = prices[t.name]
                if bkey is not None and price / size_k > bkey[0]:
                    break
                m = min(fit_count(vec, t.avail, zero), size_k)
                key = (price / m, -m, price)
                if bkey is None or key < bkey:
                    best, bkey = t, key
            if not limited:
                best_cache[(k, size_k)] = best
        node.target = best
        node.cap = best.avail
        node.limit_snapshot = dict(pool.remaining)
        for lk in pool.remaining:
            pool.remaining[lk] -= 1 if lk == "nodes" else best.cap.get(lk, 0)
        n = min(fit_count(vec, best.avail, node.used), k)
        self.place(c, node, n)
        self.add_planned(node)
        return n

    def _blocking(self, c: PodClass, types) -> str:
        parts = []
        for i, r in enumerate(self.rindex):
            v = c.vec[i]
            if v and not any(t.avail[i] >= v for t in types):
                parts.append(f"{r}={format_resource(r, v)}")
        if not parts:
            parts = [", ".join(f"{r}={format_resource(r, c.vec[i])}" for i, r in enumerate(self.rindex) if c.vec[i] and r != "pods")
                     + " together"]
        return ", ".join(parts) + " (+ daemonset overhead)"

    def schedule_class(self, c: PodClass, window: int = 24, new_nodes: bool = True) -> bool:
        """One attempt for the remaining pods of ``c``; True if all are placed.  ``new_nodes`` False: only existing,
        in-flight and already planned nodes."""
        why: list[str] = []
        total = c.limit
        # existing and in-flight nodes first
        for node in self.existing_nodes:
            if c.placed >= total:
                return True
            while c.placed < total and self.try_node(c, node):
                pass
        # NodeClaims planned in this round: for required hostname affinity the nodes already holding a match,
        # else a window of the most recent ones that still have room
        if c.placed < total and self.planned:
            self._prune_open()
            cands = self.open[-window:] if window else []
            grow = False
            for con in c.active_constraints():
                if con.kind == T.AFFINITY and con.key == L.HOSTNAME:
                    g = self.topology.groups[con.group_key]
                    if g.total:
                        cands = [self.node_by_id[d] for d, k in g.counts.items() if k and d in self.node_by_id]
                        grow = True
                    break
            v0, v1 = c.vec[0], c.vec[1]
            # hostname anti-affinity / spread counts that already rule a planned node out (checked inline)
            hchecks = [(self.topology.groups[con.group_key].counts, 1 if con.kind == T.ANTI else con.max_skew)
                       for con in c.active_constraints() if con.key == L.HOSTNAME and con.kind != T.AFFINITY]
            hchecks += [(g.counts, 1) for g in c.inv if g.key == L.HOSTNAME]
            # several passes: a node narrowed to one zone by a spread pod can take more once the other zones
            # caught up
            for _ in range(16):
                start = c.placed
                filt = self.topology.domain_filter(c) if (c.cons or c.inv) else None
                for node in cands:
                    cap, used = node.cap, node.used
                    if cap[0] - used[0] < v0 or cap[1] - used[1] < v1 or cap[2] <= used[2]:
                        continue  # no room (checked inline: most windowed nodes are full for most classes)
                    if hchecks and any(cnt.get(node.id, 0) >= th for cnt, th in hchecks):
                        continue
                    if filt and not self.topology.domains_pass(node, filt):
                        continue
                    before = c.placed
                    while c.placed < total and self.try_node(c, node):
                        pass
                    if filt and c.placed > before:
                        filt = self.topology.domain_filter(c)
                if not grow and c.placed < total and self.no_limits and len(self.open) > window:
                    # older NodeClaims: only the free room of the type each would launch as now (cheapest holding
                    # what it has), which costs nothing more
                    for blk in self._older_blocks(window):
                        mr = blk[1]
                        if mr is None:
                            mr = self._block_room(blk)
                        if mr[0] < v0 or mr[1] < v1 or mr[2] < 1:
                            continue
                        for node in blk[0]:
                            t0 = node.launch
                            if t0 is None:
                                t0 = self.launch_type(node)
                            if t0 is False:
                                continue
                            cap, used = t0.avail, node.used
                            if cap[0] - used[0] < v0 or cap[1] - used[1] < v1 or cap[2] <= used[2]:
                                continue
                            if hchecks and any(cnt.get(node.id, 0) >= th for cnt, th in hchecks):
                                continue
                            if filt and not self.topology.domains_pass(node, filt):
                                continue
                            before = c.placed
                            while c.placed < total and self.try_node(c, node, over=t0):
                                pass
                            if filt and c.placed > before:
                                filt = self.topology.domain_filter(c)
                            if c.placed >= total:
                                break
                        if c.placed >= total:
                            break
                if c.placed >= total or c.placed == start or grow:
                    break
            if c.placed >= total:
                return True
            if grow and c.placed < total:
                # no room left next to the pods it must join: grow the least loaded of those nodes
                for node in sorted(cands, key=lambda n: (n.used[0], n.order)):
                    while c.placed < total and self.try_node(c, node, grow=True):
                        pass
                if c.placed >= total:
                    return True
        # new NodeClaims, NodePools by weight (window 0: every planned NodeClaim only within its launch type)
        while c.placed < total and new_nodes:
            placed = 0
            why = []
            for pool in self.pools:
                placed = self._new_node(c, pool, why)
                if placed:
                    break
            if not placed:
                if not self.pools:
                    why.append("no NodePool")
                if c.placed < total and self.existing_nodes and not why:
                    why.append("does not fit on any existing node")
                c.errors["last"] = "; ".join(dict.fromkeys(why))
                if len(c.terms) > 1:  # ORed required node affinity terms: remember why each one failed
                    c.errors.setdefault("terms", {})[c.term_idx] = c.errors["last"]
                return False
        return c.placed >= total

    def _older_blocks(self, window: int) -> list:
        """Planned nodes older than the recent window, in blocks of 32: [[nodes], max free room of their
        launch types or None when a node in it changed]."""
        blocks = self._blocks
        upto = len(self.planned) - window
        while self._blocked < upto:
            if not blocks or len(blocks[-1][0]) >= 32:
                blocks.append([[], None])
            blk = blocks[-1]
            node = self.planned[self._blocked]
            blk[0].append(node)
            blk[1] = None
            node.block = blk
            self._blocked += 1
        return blocks

    def _block_room(self, blk: list) -> list:
        m = [-1, -1, -1]
        for node in blk[0]:
            t0 = node.launch
            if t0 is None:
                t0 = self.launch_type(node)
            if t0 is False:
                continue
            cap, used = t0.avail, node.used
            for i in (0, 1, 2):
                if cap[i] - used[i] > m[i]:
                    m[i] = cap[i] - used[i]
        blk[1] = m
        return m

    def _prune_open(self):
        if len(self.open) > 256 and len(self.open) > 2 * self._pruned_at:  # amortised: at most doubles between prunes
            mins = self.min_vec
            keep = []
            for n in self.open:
                if all(a - u >= m for a, u, m in zip(n.cap, n.used, mins) if m):
                    keep.append(n)
            self.open = keep
            self._pruned_at = len(keep)

    def _spread_key(self, c: PodClass):
        """(key, [spread constraints on it]) when ``c`` can be placed by domain shares: an active spread constraint
        on a key other than the hostname that selects the class itself, no pod (anti-)affinity on that key, no host
        ports, and no NodePool limits (a limit could leave one domain short after the others took their share).
        Else None."""
        if c.ports or not self.no_limits or c.hostname_blocks():
            return None
        key = None
        for con in c.active_constraints():
            if con.kind == T.SPREAD and con.key != L.HOSTNAME and self.topology.groups[con.group_key] in c.member:
                key = con.key
                break
        if key is None:
            return None
        cons = []
        for con in c.active_constraints():
            if con.key != key:
                continue
            if con.kind != T.SPREAD:
                return None
            cons.append(con)
        if any(g.key == key and g.total for g in c.inv):
            return None
        return key, cons

    def _domain_hosts(self, c: PodClass, key: str, d: str) -> bool:
        """Whether one pod of ``c`` could be placed in domain ``d`` of ``key``: an existing node there with room, or a
        NodePool with a fitting instance type offered there."""
        for n in self.existing_nodes:
            if n.labels.get(key) == d and fit_count(c.vec, n.cap, n.used) > 0 and can_add(n, c):
                return True
        pin = Requirement(key, False, (d,))
        for pool in self.pools:
            if untolerated(c.tolerations, pool.taints, c.tolerate_pns) or pool.reqs.compatible(c.reqs) is not None:
                continue
            reqs = pool.reqs.intersection(c.reqs)
            if reqs.compatible(Requirements([pin])) is not None:
                continue
            reqs = reqs.copy()
            reqs.add(pin)
            if pool.fitting(reqs, c.vec, c.wants_exotic())[0]:
                return True
        return False

    def place_spread_shares(self, c: PodClass) -> None:
        """Place the remaining pods of ``c`` domain by domain, each domain's share (``spread.domain_shares``) in bulk:
        pinned to the domain, the spread constraint is met by the shares, so one NodeClaim (or the bin packer's
        nodes) takes the whole share instead of one pod each.  What a domain cannot take is left to the pod-by-pod
        path, which checks the skew as the counts then stand."""
        left = c.limit - c.placed
        sk = self._spread_key(c) if left > 1 else None
        if sk is None:
            return
        key, cons = sk
        rules = []
        domains: set | None = None
        for con in cons:
            g = self.topology.groups[con.group_key]
            elig = self.topology.eligible_domains(c, con)
            rules.append(SpreadRule(dict(g.counts), con.max_skew, set(elig), con.min_domains, g in c.member))
            domains = set(elig) if domains is None else domains & elig
        hosts = [d for d in sorted(domains or ()) if self._domain_hosts(c, key, d)]
        shares = domain_shares(left, hosts, rules)
        if sum(shares.values()) < 2:
            return
        saved = (c.reqs, c.sig, c.dropped, c.limit, c.simple)
        idx = {i for i, (con, _, _) in enumerate(c.cons) if con in cons}
        c.dropped = set(c.dropped) | idx
        c.simple = (not any(True for _ in c.active_constraints()) and not c.inv
                    and not any(g.kind in (T.AFFINITY, T.ANTI) for g in c.member))
        try:
            for d in sorted(shares, key=lambda x: (-shares[x], x)):
                q = shares[d]
                if not q:
                    continue
                pinned = saved[0].copy()
                pinned.add(Requirement(key, False, (d,)))
                c.reqs, c.sig = pinned, pinned.signature()
                c.limit = c.placed + q
                # the room existing and planned nodes have (older NodeClaims: only what their launch types leave), then
                # new nodes: bin-packed when nothing else constrains the class, else sized for the whole share
                if not self.schedule_class(c, window=0, new_nodes=False):
                    if c.simple:
                        self.pack_fresh([c])
                    else:
                        self.schedule_class(c)
                if c.placed < c.limit:
                    break  # this domain fell short: the rest go pod by pod
        finally:
            c.reqs, c.sig, c.dropped, c.limit, c.simple = saved

    def pack_simple(self, classes: list[PodClass]):
        """Pack unconstrained classes: fill planned nodes' free room, then open LP-sized nodes."""
        # group by placement signature: requirements + tolerations
        groups: dict = {}
        for c in classes:
            key = (c.reqs.signature(), repr(c.tolerations), c.tolerate_pns)
            groups.setdefault(key, []).append(c)
        for cl in groups.values():
            self._pack_group(cl)

    def _pack_group(self, cl: list[PodClass]):
        def left(c):
            return c.limit - c.placed
        # 1. free room on existing nodes and planned nodes
        live = [c for c in cl if left(c)]
        for node in self.existing_nodes + self.planned:
            if not live:
                return
            if not left(live[0]) or not left(live[-1]):
                live = [c for c in live if left(c)]
                if not live:
                    return
            if node.fixed:
                self._fill(node, live)
                continue
            # a planned NodeClaim: only the room its launch type leaves (filling it past that buys a larger type,
            # which on a real catalog costs more than packing the pods on nodes of their own)
            t0 = node.launch if node.launch is not None else self.launch_type(node)
            if t0 is not False and t0 is not None and fit_count(self.min_vec, t0.avail, node.used) > 0:
                self._fill(node, live, over=t0)
        self.pack_fresh([c for c in cl if left(c)])

    def pack_fresh(self, live: list[PodClass]):
        """New nodes for the classes in ``live`` (one placement signature), then the per-class path for the rest."""
        def left(c):
            return c.limit - c.placed
        # 2. new nodes, NodePools by weight: a node's type is the one whose simulated fill has the highest value
        #    per dollar, pods valued at the LP dual prices of CPU and memory (column-generation style)
        for pool in self.pools:
            if not live:
                return
            if pool.has_min_values:
                break  # minValues is checked pod by pod on the per-class path
            self._pack_new(pool, live)
            live = [c for c in live if left(c)]
        # 3. what is left goes through the per-class path (other NodePools, explanations)
        for c in live:
            if left(c):
                self.schedule_class(c)

    def _pack_new(self, pool: NodeClaimTemplate, live: list):
        c = live[0]
        if untolerated(c.tolerations, pool.taints, c.tolerate_pns) or pool.reqs.compatible(c.reqs) is not None \
                or c.hostname_blocks():
            return
        reqs = pool.reqs.intersection(c.reqs) if len(c.reqs) else pool.reqs
        nres = len(self.rindex)
        buckets: dict = {}
        for x in live:
            if x.placed < x.limit:
                buckets.setdefault(x.vec, []).append(x)
        counts = {v: sum(x.limit - x.placed for x in cl) for v, cl in buckets.items()}
        minvec = [min(v[i] for v in counts) for i in range(nres)]
        exotic_ok = any(x.wants_exotic() for x in live)
        types = [(p, t) for p, _, t in pool.priced(reqs) if all(a >= v for a, v in zip(t.avail, minvec))]
        if not exotic_ok:
            types = [(p, t) for p, t in types if not t.exotic] or types
        if not types:
            return
        # two ways to value a pod: its share of the 2-resource LP's dual prices of CPU and memory, and what it
        # costs packed alone; the packing is planned under each and the cheaper plan is kept
        # one request vector and no limits: the exact cheapest cover (the greedy fills below can only tie it)
        exact = cover_plan(types, counts, fit_count) if len(counts) == 1 and not pool.remaining else None
        plans = [exact] if exact is not None else []
        if exact is None:
            demand = [sum(v[i] * k for v, k in counts.items()) for i in range(2)]
            y0, y1 = lp_duals([(t, t.avail[0], t.avail[1], p) for p, t in types], max(1, demand[0]), max(1, demand[1]))
            for values in ({v: y0 * v[0] + y1 * v[1] for v in counts}, standalone_values(types, counts)):
                values = {v: u for v, u in values.items() if u > 0}
                if values:
                    plans.append(self._plan_new(pool, types, dict(counts), values))
        if not plans:
            return
        best = min(plans, key=lambda x: (-x[1], x[2]))  # most pods placed, then cheapest
        plan = best[0] if pool.remaining else repack(best[0], types)
        for t, taken, reps in plan:
            for _ in range(reps):
                node = SimNode(f"{pool.name}#{self.counter}", False, pool, reqs, {}, pool.taints, t.avail, [0] * nres)
                node.ports = set(pool.daemon_ports)
                self.counter += 1
                node.target = t
                node.limit_snapshot = dict(pool.remaining)
                for lk in pool.remaining:
                    pool.remaining[lk] -= 1 if lk == "nodes" else t.cap.get(lk, 0)
                for v, k in taken.items():
                    cl = buckets[v]
                    while k:
                        x = cl[0]
                        m = min(k, x.limit - x.placed)
                        self.place(x, node, m)
                        k -= m
                        if x.placed >= x.limit:
                            cl.pop(0)
                self.add_planned(node)

    def _plan_new(self, pool: NodeClaimTemplate, types: list, counts: dict, values: dict):
        """Plan new nodes for ``counts`` ({request vector: pods}) greedily: each step opens the type whose
        simulated fill is worth the most per dollar (pods valued at ``values``) and repeats that fill while the
        pods last.  Returns ([(type, {vector: pods per node}, nodes)], pods placed, cost); nothing is changed."""
        ubs = value_bounds(types, values)
        short = sorted(((ubs[t.name] / p, p, t) for p, t in types if ubs[t.name] > 0), key=lambda x: (-x[0], x[1], x[2].name))
        remaining = dict(pool.remaining)

        def limit_ok(t):
            for k, rem in remaining.items():
                if (1 if k == "nodes" else t.cap.get(k, 0)) > rem:
                    return False
            return True

        plan = []
        placed = 0
        cost = 0.0
        shrink: dict = {}
        sims: dict = {}
        current = None
        sel_eff = 0.0
        while counts:
            sim = None
            if current is not None:
                sim = simulate(current[1].avail, counts, values, sims)
                if not sim[0] or sim[1] / current[0] < 0.97 * sel_eff:
                    current = None
            if current is None:
                best = None
                vecs = list(counts)
                tried = 0
                for bound, p, t in short:
                    if best is not None and bound <= best[0]:
                        break  # no type further down can beat the best simulated fill
                    av = t.avail
                    if not any(all(a >= x for a, x in zip(av, v)) for v in vecs):
                        continue
                    tried += 1
                    if tried > 48:
                        break
                    if remaining and not limit_ok(t):
                        continue
                    s = simulate(av, counts, values, sims)
                    if s[0] and (best is None or s[1] / p > best[0]):
                        best = (s[1] / p, (p, t), s)
                if best is None:
                    break
                sel_eff, current, sim = best
            t = current[1]
            taken = sim[0]
            reps = max(1, min(counts[v] // k for v, k in taken.items()))
            if remaining:
                n = 0
                while n < reps and limit_ok(t):
                    for lk in remaining:
                        remaining[lk] -= 1 if lk == "nodes" else t.cap.get(lk, 0)
                    n += 1
                if not n:
                    current = None
                    short = [x for x in short if x[2] is not t]
                    continue
                reps = n
            plan.append((t, taken, reps))
            cost += shrunk_price(types, taken, shrink) * reps
            for v, k in taken.items():
                counts[v] -= k * reps
                placed += k * reps
                if not counts[v]:
                    del counts[v]
        return plan, placed, cost

    def _fill(self, node: SimNode, live: list, over: InstanceTypeOption | None = None):
        """Fill ``node`` from the classes in ``live``: at each step the pods (grouped by request vector) that
        keep the node's free CPU and memory fractions closest, larger pods first.  ``over``: only within that type
        (a planned node's launch type)."""
        cap, used = (node.cap if over is None else over.avail), node.used
        buckets: dict = {}
        for c in live:
            if c.placed < c.limit:
                buckets.setdefault(c.vec, []).append(c)
        c0, c1 = float(cap[0] or 1), float(cap[1] or 1)
        blocked: set = set()
        while buckets:
            free = [a - u for a, u in zip(cap, used)]
            if free[0] <= 0 or free[1] <= 0 or (len(free) > 2 and free[2] <= 0):
                return
            f0, f1 = free[0] / c0, free[1] / c1
            best = None
            bscore = None
            for v in buckets:
                if v in blocked or any(x > f for x, f in zip(v, free) if x):
                    continue
                a0, a1 = v[0] / c0, v[1] / c1
                s = abs((f0 - a0) - (f1 - a1)) * 4.0 - (a0 + a1)
                if bscore is None or s < bscore:
                    best, bscore = v, s
            if best is None:
                return
            cls = buckets[best]
            c = cls[0]
            nfit = fit_count(best, cap, used)
            # chunk: a slice of what fits, so the balance can be corrected as the node fills
            want = min(nfit, max(1, nfit // 6), c.limit - c.placed)
            got = self.try_node(c, node, want, over=over)
            if not got:
                blocked.add(best)
                continue
            if c.placed >= c.limit:
                cls.pop(0)
                if not cls:
                    del buckets[best]

    def result(self, pending) -> SchedulingResult:
        res = SchedulingResult()
        for n in self.existing_nodes:
            if n.pods:
                res.existing[n.id] = list(n.pods)
        for c in pending:
            reason = c.errors.get("last") or "could not be placed"
            terms = c.errors.get("terms") or {}
            if len(terms) > 1:
                reason = (f"none of the {len(c.terms)} required node affinity terms can be met: "
                          + "; ".join(f"term {i}: {e}" for i, e in sorted(terms.items())))
            for k in c.keys[c.placed:]:
                self.unsched.append(Unschedulable(k, reason))
        res.unschedulable = self.unsched
        names = set()
        for node in self.planned:
            if not node.pods:
                continue
            plan = self._finalize(node)
            base = plan.name
            i = 1
            while plan.name in names:
                plan.name = f"{base}-{i}"
                i += 1
            names.add(plan.name)
            res.nodeclaims.append(plan)
        res.cost_per_hour = round(sum(p.price for p in res.nodeclaims), 6)
        return res

    @staticmethod
    def _option_bounds(node: SimNode) -> dict | None:
        """On a NodePool with limits: per limited resource, what this NodeClaim was charged (its sizing type's
        capacity; ``nodes`` 1).  No option of its plan may count more, so the largest option of every NodeClaim
        (what Karpenter subtracts, and what the provisioner reserves) still fits in the limits."""
        if not node.limit_snapshot:
            return None
        cap = node.target.cap
        return {k: (1 if k == "nodes" else cap.get(k, 0)) for k in node.limit_snapshot}

    def _final_types(self, node: SimNode, wants_exotic: bool):
        """([(price, offering, type)] that hold what was placed, cheapest first; the <= max_types kept)."""
        pool, reqs, used, lim = node.pool, node.reqs, node.used, self._option_bounds(node)
        u0, u1, u2 = used[0], used[1], used[2]
        rest = [(i, u) for i, u in enumerate(used) if i > 2 and u]
        need_all = any(r.min_values for r in reqs)
        plain, exotic = [], []
        for price, o, t in pool.priced_fitting(reqs, u0, u1, u2):
            av = t.avail
            if av[0] < u0 or av[1] < u1 or av[2] < u2 or (rest and not all(av[i] >= u for i, u in rest)):
                continue
            if lim and any((1 if k == "nodes" else t.cap.get(k, 0)) > v for k, v in lim.items()):
                continue
            (exotic if t.exotic and not wants_exotic else plain).append((price, o, t))
            if not need_all and len(plain) >= self.max_types:
                break
        priced = plain or exotic
        if not priced:
            return None
        keep = truncate([t for _, _, t in priced], reqs, self.max_types)
        return priced[0], keep, Requirement(L.INSTANCE_TYPE, False, {t.name for t in keep})

    def _final_lookup(self, node: SimNode):
        """(cache key, wants exotic, cached final types or None) for a planned node as it stands."""
        reqs, used, lim = node.reqs, node.used, self._option_bounds(node)
        sig = reqs.signature()
        rex = self._reqs_exotic.get(sig)
        if rex is None:
            rex = self._reqs_exotic[sig] = any(
                k in reqs and not reqs.get(k).is_empty() and not reqs.get(k).complement for k in EXOTIC_KEYS)
        wants_exotic = rex or any(used[i] for i in self._exotic_idx)
        ck = (sig, tuple(used), tuple(sorted(lim.items())) if lim else None, wants_exotic)
        return ck, wants_exotic, self._final_cache.get(ck)

    def launch_type(self, node: SimNode) -> InstanceTypeOption | None:
        """The type a planned node would launch as now, when it offers the same zones / capacity types as
        the node's current target (so topology domains are unchanged), else False; kept on the node until
        pods are placed on it (``_place`` resets it)."""
        ck, wants_exotic, fin = self._final_lookup(node)
        if fin is None:
            fin = self._final_types(node, wants_exotic)
            if fin is not None:
                self._final_cache[ck] = fin
        t0 = None
        if fin is not None:
            t0 = fin[0][2]
            z, ct = node.reqs.get(L.ZONE), node.reqs.get(L.CAPACITY_TYPE)

            def zc(t):
                return {(o.zone, o.capacity_type) for o in t.offers if z.has(o.zone) and ct.has(o.capacity_type)}
            if t0 is not node.target and zc(t0) != zc(node.target):
                t0 = None
        node.launch = t0 if t0 is not None else False
        return node.launch

    def _finalize(self, node: SimNode) -> NodeClaimPlan:
        pool = node.pool
        reqs = node.reqs
        used = node.used
        ck, wants_exotic, hit = self._final_lookup(node)
        if hit is None:
            hit = self._final_types(node, wants_exotic)
            if hit is None:  # nothing holds it within the limits as they stood: the type it was sized on
                t = node.target
                o = t.cheapest(reqs)
                hit = ((o.price, o, t), [t], Requirement(L.INSTANCE_TYPE, False, (t.name,)))
            else:
                self._final_cache[ck] = hit
        (_, o, t0), keep, it_req = hit
        vals = {r: used[i] for i, r in enumerate(self.rindex) if used[i]}
        for k, v in pool.daemon.items():
            vals[k] = vals.get(k, 0) + v
        final_reqs = reqs.copy()
        final_reqs.add(it_req)
        h = hashlib.sha1("\n".join(sorted(node.pods)).encode()).hexdigest()[:5]
        tk = tuple(sorted(vals.items()))
        req_text = self._text_cache.get(tk)
        if req_text is None:
            req_text = self._text_cache[tk] = ", ".join(f"{k}={format_resource(k, v)}" for k, v in tk if k != "pods")
        reason = (f"cheapest compatible offering: {t0.name} {o.capacity_type} in {o.zone} at ${o.price:.4f}/h; "
                  f"{len(keep)} of {len(pool.types)} instance types in NodePool {pool.name} fit {req_text} "
                  f"({vals.get('pods', 0)} pods incl. daemonsets)")
        labels = dict(pool.np.template_labels)
        labels.update(final_reqs.labels())
        return NodeClaimPlan(
            name=f"{pool.name}-{h}", nodepool=pool.name, requirements=final_reqs, instance_types=[t.it for t in keep],
            instance_type=t0.name, zone=o.zone, capacity_type=o.capacity_type, price=o.price, pods=list(node.pods),
            requests=vals, reason=reason, labels=labels, taints=list(pool.taints), startup_taints=list(pool.startup_taints))


def shrunk_price(types: list, taken: dict, cache: dict) -> float:
    """Price of the cheapest of ``types`` ([(price, type)], cheapest first) holding the pods ``taken``
    ({vector: count}): what the NodeClaim will launch (its plan keeps every type that holds what was placed)."""
    key = tuple(sorted(taken.items()))
    hit = cache.get(key)
    if hit is None:
        vecs = list(taken.items())
        used = [sum(v[i] * k for v, k in vecs) for i in range(len(vecs[0][0]))]
        hit = next((p for p, t in types if all(a >= u for a, u in zip(t.avail, used))), INF)
        cache[key] = hit
    return hit


def cover_plan(types: list, counts: dict, fit_count):
    """The exact cheapest nodes for one request vector (``cover.min_cost_cover``) in ``_plan_new``'s shape:
    ([(type, {vector: pods per node}, nodes)], pods placed, cost), or None."""
    (v, q), = counts.items()
    zero = [0] * len(v)
    fits = [fit_count(v, t.avail, zero) for _, t in types]
    sol = min_cost_cover([(f, p) for f, (p, _) in zip(fits, types)], q)
    if sol is None:
        return None
    plan: list = []
    left = q
    shrink: dict = {}
    cost = 0.0
    for f, (_, t), n in sorted(zip(fits, types, sol), key=lambda x: -x[0]):
        for _ in range(n):
            take = min(f, left)
            left -= take
            if plan and plan[-1][0] is t and plan[-1][1][v] == take:
                plan[-1] = (t, plan[-1][1], plan[-1][2] + 1)
            else:
                plan.append((t, {v: take}, 1))
            cost += shrunk_price(types, {v: take}, shrink)
    return plan, q, cost


def repack(plan: list, types: list) -> list:
    """Empty the least efficient planned nodes into the room the others leave in their launch types.

    ``plan``: [(type, {vector: pods}, nodes)].  Nodes with the same fill form a group; each node launches as
    the cheapest type holding its fill, and pods moved into what that type leaves free cost nothing.  Groups
    are taken cheapest-value-first (price per pod): a node whose pods all find room elsewhere is dropped.
    Returns the plan with each fill on its launch type."""
    shrink: dict = {}
    ttype: dict = {}

    def launch(fill_key):
        t = ttype.get(fill_key)
        if t is None:
            fill = dict(fill_key)
            nres = len(fill_key[0][0])
            used = [sum(v[i] * k for v, k in fill.items()) for i in range(nres)]
            t = next((tt for p, tt in types if all(a >= u for a, u in zip(tt.avail, used))), None)
            ttype[fill_key] = t or False
            shrink[fill_key] = (next((p for p, tt in types if tt is t), INF), used)
        return ttype[fill_key]

    groups: dict = {}
    for t, taken, reps in plan:
        key = tuple(sorted(taken.items()))
        if launch(key) is False:
            return plan
        groups[key] = groups.get(key, 0) + reps

    def free(key):
        t = ttype[key]
        used = shrink[key][1]
        return [a - u for a, u in zip(t.avail, used)]

    order = sorted(groups, key=lambda k: -shrink[k][0] / max(1, sum(n for _, n in k)))
    for victim in order:
        while groups.get(victim):
            # hosts: every other group with room, as (key, free room); a move takes one node of the group
            moves = []
            pending = [v for v, k in victim for _ in range(k)]
            avail = {k: n for k, n in groups.items() if n and k != victim}
            avail_v = groups[victim] - 1
            if avail_v:
                avail[victim] = avail_v
            hosts: dict = {}  # host key -> (new fill dict, free room): nodes being filled in this attempt
            ok = True
            for v in pending:
                placed = False
                for hk, (fill, fr) in hosts.items():
                    if all(x <= f for x, f in zip(v, fr)):
                        fill[v] = fill.get(v, 0) + 1
                        for i, x in enumerate(v):
                            fr[i] -= x
                        placed = True
                        break
                if placed:
                    continue
                for k, n in avail.items():
                    if n <= 0:
                        continue
                    fr = free(k)
                    if all(x <= f for x, f in zip(v, fr)):
                        avail[k] = n - 1
                        fill = dict(k)
                        fill[v] = fill.get(v, 0) + 1
                        for i, x in enumerate(v):
                            fr[i] -= x
                        hosts[(k, len(moves))] = (fill, fr)
                        moves.append(k)
                        placed = True
                        break
                if not placed:
                    ok = False
                    break
            if not ok:
                break
            groups[victim] -= 1
            for (k, _), (fill, fr) in hosts.items():
                groups[k] -= 1
                nk = tuple(sorted(fill.items()))
                if nk not in ttype:  # the host keeps its launch type: the fill still fits in it
                    ttype[nk] = ttype[k]
                    shrink[nk] = (shrink[k][0], [u + sum(v[i] * (fill.get(v, 0) - dict(k).get(v, 0)) for v in fill)
                                                 for i, u in enumerate(shrink[k][1])])
                groups[nk] = groups.get(nk, 0) + 1
    return [(ttype[k], dict(k), n) for k, n in groups.items() if n]


def standalone_values(types: list, counts: dict) -> dict:
    """Value of one pod per request vector: what it costs packed alone, the lowest price per pod over the
    types each filled with that vector only.  A node whose fill is worth more than its price saves money
    against packing each vector apart."""
    values = {}
    for v in counts:
        best = None
        for p, t in types:
            n = INF
            for x, c in zip(v, t.avail):
                if x:
                    k = c // x
                    if k < n:
                        n = k
            if 0 < n < INF and (best is None or p / n < best):
                best = p / n
        if best is not None:
            values[v] = best
    return values


def value_bounds(types: list, values: dict) -> dict:
    """Upper bound of the value one node of each type can hold (fractional knapsack, per resource: capacity
    times the best value per unit of it among the vectors that fit); 0 when no vector fits."""
    ubs = {}
    nres = len(next(iter(values)))
    for p, t in types:
        a = t.avail
        dens = [0.0] * nres
        any_fit = False
        for v, u in values.items():
            if all(x <= c for x, c in zip(v, a)):
                any_fit = True
                for i, x in enumerate(v):
                    if x and u / x > dens[i]:
                        dens[i] = u / x
        ub = 0.0
        if any_fit:
            ub = INF
            for i, d in enumerate(dens):
                if d > 0:
                    ub = min(ub, a[i] * d)
        ubs[t.name] = ub
    return ubs


def simulate(cap, counts: dict, values: dict, cache: dict | None = None):
    """Fill a node of capacity ``cap`` from ``counts`` ({request vector: pods left}); returns ({vector: pods
    taken}, value).  Two greedy fills are tried and the more valuable kept: one keeping the node's free CPU
    and memory fractions balanced (larger pods first), one taking the most valuable pods per share of the
    node's scarcest resource.  A node never takes more than its pod slots of one vector, so counts are capped
    at that for the ``cache`` key: the same fill is found again while plenty of pods are left."""
    if cache is not None:
        slots = cap[2]
        key = (cap, tuple((v, k if k < slots else slots) for v, k in counts.items()))
        hit = cache.get(key)
        if hit is not None:
            return hit
    a = simulate_fill(cap, counts, values, False)
    b = simulate_fill(cap, counts, values, True)
    out = a if a[1] >= b[1] else b
    if cache is not None:
        cache[key] = out
    return out


def simulate_fill(cap, counts: dict, values: dict, density: bool):
    free = list(cap)
    c0, c1, c2 = float(cap[0] or 1), float(cap[1] or 1), float(cap[2] or 1)
    left = {v: k for v, k in counts.items() if v in values}
    taken: dict = {}
    value = 0.0
    n = len(free)
    while left:
        if free[0] <= 0 or free[1] <= 0 or free[2] <= 0:
            break
        f0, f1 = free[0] / c0, free[1] / c1
        best = None
        bscore = None
        for v in left:
            ok = True
            for i in range(n):
                if v[i] > free[i]:
                    ok = False
                    break
            if not ok:
                continue
            a0, a1 = v[0] / c0, v[1] / c1
            if density:
                s = -values[v] / max(a0, a1, v[2] / c2)
            else:
                s = abs((f0 - a0) - (f1 - a1)) * 4.0 - (a0 + a1)
            if bscore is None or s < bscore:
                best, bscore = v, s
        if best is None:
            break
        fit = INF
        for i in range(n):
            if best[i]:
                q = free[i] // best[i]
                if q < fit:
                    fit = q
        k = min(left[best], max(1, fit // 6))
        for i in range(n):
            free[i] -= best[i] * k
        taken[best] = taken.get(best, 0) + k
        value += values[best] * k
        left[best] -= k
        if not left[best]:
            del left[best]
    return taken, value


def lp_duals(items, C: float, M: float):
    """Dual prices (per CPU unit, per memory unit) of the 2-resource covering LP."""
    sol = lp_pair(items, C, M)
    if len(sol) == 2:
        (a, _, _), (b, _, _) = sol
        pa = next(p for o, c, m, p in items if o is a)
        pb = next(p for o, c, m, p in items if o is b)
        ca, ma = a.avail[0], a.avail[1]
        cb, mb = b.avail[0], b.avail[1]
        det = ca * mb - cb * ma
        if det:
            y0 = (pa * mb - pb * ma) / det
            y1 = (ca * pb - cb * pa) / det
            if y0 >= 0 and y1 >= 0:
                return y0, y1
    a = sol[0][0]
    pa = next(p for o, c, m, p in items if o is a)
    # single type: split its price by the share of each resource the demand uses
    ca, ma = a.avail[0], a.avail[1]
    u0, u1 = C / ca, M / ma
    tot = u0 + u1
    return pa * (u0 / tot) / ca, pa * (u1 / tot) / ma


def lp_pair(items, C: float, M: float):
    """Exact optimum of min sum(p x) s.t. sum(cpu x) >= C, sum(mem x) >= M, x >= 0 over ``items``
    ``(obj, cpu, mem, price)``: returns ``[(obj, x), ...]`` (one or two entries).  A basic optimal solution
    uses at most two types, and only types on the Pareto frontier of (cpu/price, mem/price) matter."""
    pts = [(cpu / p, mem / p, o, cpu, mem, p) for o, cpu, mem, p in items if p > 0 and cpu > 0 and mem > 0]
    if not pts:
        return [(items[0][0], 1.0)] if items else []
    pts.sort(key=lambda x: (-x[0], -x[1]))
    front = []
    best_m = -1.0
    for pt in pts:
        if pt[1] > best_m:
            front.append(pt)
            best_m = pt[1]
    best = None
    for pt in front:
        x = max(C / pt[3], M / pt[4])
        cost = x * pt[5]
        if best is None or cost < best[0]:
            best = (cost, [(pt[2], x)])
    for i in range(len(front)):
        a = front[i]
        for j in range(i + 1, len(front)):
            b = front[j]
            det = a[3] * b[4] - b[3] * a[4]
            if det == 0:
                continue
            xa = (C * b[4] - b[3] * M) / det
            xb = (a[3] * M - C * a[4]) / det
            if xa < 0 or xb < 0:
                continue
            cost = xa * a[5] + xb * b[5]
            if cost < best[0]:
                best = (cost, [(a[2], xa), (b[2], xb)])
    out = [(o, x, 0) for o, x in best[1] if x > 0]
    return out or [(best[1][0][0], 1.0, 0)]


# A NodeClaim of a limited NodePool keeps only options up to this many times its cheapest option's capacity in
# each limited resource, so what it counts against the limits (its largest option) stays close to what it uses.
LIMITED_OPTION_SPREAD = 2


def solve_within_limits_unconstrained(inp: SchedulingInput,
                                      run: Callable[[SchedulingInput], SchedulingResult]) -> SchedulingResult | None:
    """Plan as if the NodePools had no limits; keep that plan when it stays within them anyway.

    Limits make the packer conservative (each NodeClaim of a limited NodePool is charged its largest option as
    it is created, as Karpenter does, so nodes are sized for their own pods).  Most NodePools' limits are far
    from binding in one round: then the unconstrained plan, with each NodeClaim's options trimmed to sizes near
    its cheapest, is both cheaper and within the limits (every NodeClaim charged its largest remaining option,
    what the provisioner reserves).  None when it would not fit, or when minValues forbid trimming.  ``run``: one
    solver run (the solver's, passed in so that this module does not import it).
    """
    limits: dict[str, dict[str, int]] = {}
    pools = []
    for npi in inp.nodepools:
        np_ = npi.nodepool
        if np_.limits:
            try:
                limits[np_.name] = {k: resource_value(k, v) for k, v in np_.limits.items()}
            except (TypeError, ValueError):
                return None  # the constrained pass reports the bad limit
            free = np_.copy()
            free.spec.pop("limits", None)
            pools.append(replace(npi, nodepool=free))
        else:
            pools.append(npi)
    res = run(replace(inp, nodepools=pools))
    used = {name: dict((inp.nodepool_usage or {}).get(name) or {}) for name in limits}
    for plan in res.nodeclaims:
        lim = limits.get(plan.nodepool)
        if lim is None:
            continue
        if any(r.min_values for r in plan.requirements):
            return None
        cheapest = next((it for it in plan.instance_types if it.name == plan.instance_type), None)
        if cheapest is None:
            return None
        keys = [k for k in lim if k != "nodes"]
        kept = [it for it in plan.instance_types
                if all(it.capacity.get(k, 0) <= LIMITED_OPTION_SPREAD * cheapest.capacity.get(k, 0) for k in keys)]
        u = used[plan.nodepool]
        u["nodes"] = u.get("nodes", 0) + 1
        for k in keys:
            u[k] = u.get(k, 0) + max(it.capacity.get(k, 0) for it in kept)
        if any(u.get(k, 0) > v for k, v in lim.items()):
            return None
        if len(kept) < len(plan.instance_types):
            plan.instance_types = kept
            plan.requirements = plan.requirements.copy().add(
                Requirement(L.INSTANCE_TYPE, False, {it.name for it in kept}))
    return res


def solve(inp: SchedulingInput) -> SchedulingResult:
    """Run one provisioning round over ``inp`` (pure; no I/O). Raises SchedulingError on malformed input."""
    if not isinstance(inp, SchedulingInput):
        raise SchedulingError("solve() needs a SchedulingInput")
    # the simulation allocates many small objects and frees them all at the end: the cyclic collector's
    # passes over the (large) input would only cost time, so it is paused for the call and restored after
    enabled = gc.isenabled()
    gc.disable()
    try:
        if any(npi.nodepool.limits for npi in inp.nodepools):
            unlimited = solve_within_limits_unconstrained(inp, _run)
            if unlimited is not None:
                return unlimited
        return _Solver(inp).run()
    finally:
        if enabled:
            gc.enable()


def _run(inp: SchedulingInput) -> SchedulingResult:
    return _Solver(inp).run()


# names other modules import from here under their old private names (until their owners move to the public ones
# in predicates / limits / packer)
_labels_match = labels_match
_host_ports = host_ports
_repack = repack
_solve_within_limits_unconstrained = solve_within_limits_unconstrained
