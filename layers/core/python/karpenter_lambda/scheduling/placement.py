"""Placement of one pod class (Karpenter's ``scheduler.go`` add loop and ``nodeclaim.go`` sizing): existing and
in-flight nodes first, then the NodeClaims planned in this round (a window of the most recent, and the free room
of older ones' launch types), then a new NodeClaim per NodePool in weight order.

A mixin of the solver (``solver._Solver``), which holds the state it uses: ``pools`` (NodeClaim templates, by weight),
``existing_nodes``, ``planned`` / ``open`` / ``node_by_id`` / ``nodes`` (NodeClaims planned, those still with room,
by id, every node), ``topology`` (the :class:`~.tracker.TopologyTracker`), ``rindex``, ``share_factor``,
``no_limits``, ``min_vec``, ``counter`` (NodeClaim names) and ``relax_min_values`` (the BestEffort minValues policy:
no NodeClaim is refused for minValues; finalize lowers them); ``launch_type`` comes from :mod:`.finalize`.
"""

from __future__ import annotations

from ..api import labels as L
from ..api.quantity import format_resource
from . import topology as T
from .existing import can_add
from .model import INF, SimNode, fit_count
from .nodeclaim import InstanceTypeOption, NodeClaimTemplate, describe
from .podfacts import PodClass
from .predicates import ports_conflict
from .requirements import Requirement, Requirements
from .taints import format_taint, untolerated

__all__ = ["Placement"]


class Placement:
    """Places pod classes on existing, in-flight and planned nodes, and opens new NodeClaims."""

    def init_placement(self) -> None:
        self._blocks: list = []
        self._blocked = 0
        self._pruned_at = 0

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
            if not len(c.reqs):
                new_reqs = None
            else:
                fit = node.fit
                if fit is not None and fit[0] is c.reqs and fit[1] is node.reqs and fit[2] is node.target \
                        and fit[3] is over:
                    # these requirements passed on this node as it was left: its requirements already hold them
                    # (intersecting again changes nothing) and its target and ``over`` type took them
                    new_reqs = node.reqs
                else:
                    if node.reqs.compatible(c.reqs) is not None:
                        return 0
                    new_reqs = node.reqs.intersection(c.reqs)
                    if new_reqs == node.reqs:
                        new_reqs = node.reqs   # nothing narrowed: the node keeps its object (and cached signature)
                    if node.target.reqs.intersects(new_reqs) is not None or node.target.cheapest(new_reqs) is None:
                        return 0
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
        if not node.fixed and node.pool.has_min_values and not self.relax_min_values:
            n = self._min_values_cap(node.pool, new_reqs or node.reqs, node.used, c.vec, n, node.charge)
            if n <= 0:
                return 0
        if over is not None:
            fr = new_reqs if new_reqs is not None else node.reqs
            if over.reqs.intersects(fr) is not None or over.cheapest(fr) is None:
                return 0
            node.target = over
            node.cap = over.avail
        if new_reqs is not None and not node.fixed:
            node.reqs = new_reqs
            if not c.cons and not c.inv:   # (a topology choice may have added to them: not the class's alone)
                node.fit = (c.reqs, new_reqs, node.target, over)
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
        clashing, daemon_ports = frozenset(), pool.daemon_ports
        if c.ports and pool.daemon_ports:
            clash = ports_conflict(pool.daemon_ports, c.ports)
            if clash:
                # only the types a DaemonSet holding the port runs on are kept from the pod (Karpenter drops those
                # daemon groups), by an instance-type NotIn requirement on the NodeClaim
                clashing, daemon_ports = pool.daemon_port_clash(c.ports)
                if len(clashing) >= len(pool.types):
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
        if clashing:
            reqs = reqs.copy()
            reqs.add(Requirement(L.INSTANCE_TYPE, True, clashing))
        vec = c.vec
        fitting, union, best_cache = pool.fitting(reqs, c.vec, c.wants_exotic())
        if not fitting:
            types = pool.compat_types(reqs)
            if not types:
                why.append(f"no instance type in NodePool {pool.name} matches {describe(c.reqs) or 'its requirements'}"
                           + pool.held_matching(reqs))
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
        if pool.has_min_values and not self.relax_min_values:   # BestEffort: finalize lowers minValues instead
            # under limits, among the types the limits leave (Karpenter filters by the remaining resources first)
            err = pool.min_values_error(reqs, vec, within=pool.remaining if limited else None)
            if err:
                why.append(f"NodePool {pool.name}: {err}")
                return 0
        node = SimNode(f"{pool.name}#{self.counter}", False, pool, reqs, {}, pool.taints, None, [0] * len(vec))
        node.ports = set(daemon_ports)
        remaining = c.limit - c.placed
        allow = INF
        if c.cons or c.inv:
            node.target = union
            allow, chosen = self.topology.check(c, node, True)
            if allow <= 0:
                why.append(f"NodePool {pool.name}: {self.topology.why}")
                return 0
            alternatives = dict(self.topology.valid)
            base, base_fit = reqs, (fitting, union, best_cache)
            tried: list[str] = []
            while True:
                extra = [Requirement(k, False, (d,)) for k, d in chosen.items() if k != L.HOSTNAME]
                if not extra:
                    break
                got = self._pinned(c, pool, base, extra, base_fit, limited)
                if not isinstance(got, str):
                    reqs, (fitting, union, best_cache) = got
                    node.reqs = reqs
                    break
                # the domain the topology chose has no type for the pod (or too few for minValues): another domain
                # the constraints allow, when one key had several (Karpenter tries only its first choice)
                tried.append(got)
                nxt = self._next_domain(c, node, base, chosen, alternatives)
                if nxt is None:
                    why.append(f"NodePool {pool.name}: {'; '.join(tried)}")
                    return 0
                allow, chosen = nxt
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
        if limited and pool.has_min_values:
            node.charge = pool.min_values_charge(node.reqs, fitting, best)
        for lk in pool.remaining:
            pool.remaining[lk] -= node.charge[lk] if node.charge else (1 if lk == "nodes" else best.cap.get(lk, 0))
        n = min(fit_count(vec, best.avail, node.used), k)
        if pool.has_min_values and not self.relax_min_values and n > 1:
            n = max(1, self._min_values_cap(pool, node.reqs, node.used, vec, n, node.charge))
        self.place(c, node, n)
        self.add_planned(node)
        return n

    def _pinned(self, c: PodClass, pool: NodeClaimTemplate, reqs: Requirements, extra: list, fit: tuple,
                limited: bool):
        """A new NodeClaim's requirements with the domains the topology chose (``extra``) and its fitting types
        (``(reqs, (fitting, union, best_cache))``), or why none is left (a str)."""
        reqs = reqs.copy()
        for r in extra:
            reqs.add(r)
        if limited:
            fitting, union, best_cache = [t for t in fit[0] if t.cheapest(reqs) is not None], fit[1], fit[2]
        else:
            fitting, union, best_cache = pool.fitting(reqs, c.vec, c.wants_exotic())
        if not fitting:
            return f"no instance type offered in {describe(Requirements(extra))}"
        if pool.has_min_values and not self.relax_min_values:
            # the domain narrows the types: minValues again, in it (Karpenter checks minValues on the NodeClaim's
            # requirements after the topology's are added)
            err = pool.min_values_error(reqs, c.vec, within=pool.remaining if limited else None)
            if err:
                return f"{err} in {describe(Requirements(extra))}"
        return reqs, (fitting, union, best_cache)

    def _next_domain(self, c: PodClass, node: SimNode, base: Requirements, chosen: dict, alternatives: dict):
        """The topology's (allowance, choice) for a new node pinned to the next untried valid domain of the one key
        that had several (``alternatives``, consumed), or None when there is none."""
        keys = [k for k in chosen if k != L.HOSTNAME]
        if len(keys) != 1 or len(alternatives.get(keys[0], ())) < 2:
            return None
        key = keys[0]
        rest = alternatives[key]
        rest.remove(chosen[key])
        while rest:
            pinned = base.copy()
            pinned.add(Requirement(key, False, (rest[0],)))
            node.reqs = pinned
            allow, got = self.topology.check(c, node, True)
            node.reqs = base
            if allow > 0 and got.get(key) == rest[0]:
                return allow, got
            rest.pop(0)
        return None

    def _min_values_cap(self, pool: NodeClaimTemplate, reqs: Requirements, used, vec, n: int, within) -> int:
        """The most pods of request ``vec`` (at most ``n``) that a NodeClaim of ``pool`` with ``reqs`` and ``used``
        takes while the types that would still hold them meet every minValues requirement (Karpenter's Strict policy
        refuses a pod that would leave too few); 0 when not even one.  More pods leave fewer types, so the largest
        such count is found by bisection."""
        def ok(m: int) -> bool:
            return pool.min_values_error(reqs, [u + v * m for u, v in zip(used, vec)], within=within) is None
        if ok(n):
            return n
        lo, hi = 0, n   # ok(lo) (0 pods more: the node as it is) and not ok(hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if ok(mid):
                lo = mid
            else:
                hi = mid
        return lo

    def _blocking(self, c: PodClass, types) -> str:
        parts = []
        for i, r in enumerate(self.rindex):
            v = c.vec[i]
            most = max((t.avail[i] for t in types), default=0)   # what the roomiest type leaves it
            if v and most < v:
                if most <= 0:
                    parts.append(f"{r}={format_resource(r, v)} (none has any)")
                else:   # a large amount of memory in whole Gi, of CPU in whole cores, rounded down (an upper bound)
                    shown = (f"{most >> 30}Gi" if r == "memory" and most >= 10 << 30 else
                             str(most // 1000) if r == "cpu" and most >= 10_000 else format_resource(r, most))
                    parts.append(f"{r}={format_resource(r, v)} (at most {shown})")
        if not parts:
            parts = [", ".join(f"{r}={format_resource(r, c.vec[i])}" for i, r in enumerate(self.rindex) if c.vec[i] and r != "pods")
                     + " together"]
        daemons = any(t.daemon for t in types)   # what the DaemonSets take is already out of "at most"
        return ", ".join(parts) + (" (+ daemonset overhead)" if daemons else "")

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
                conflicts = c.self_conflicts()
                if conflicts:   # what each NodePool said follows from this, which no NodePool can change
                    why = [f"its own node requirements exclude each other: {'; '.join(conflicts)} "
                           f"(no node can satisfy them all)"]
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
