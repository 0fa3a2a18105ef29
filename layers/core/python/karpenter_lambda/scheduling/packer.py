"""The bulk packer for unconstrained pod classes (no topology, no host ports, selected by no one's
(anti-)affinity): after the constrained classes, their pods fill the free room of existing nodes and of the planned
NodeClaims' launch types, then new nodes are opened NodePool by NodePool in weight order.

Pods are valued per request vector two ways -- their share of the 2-resource covering LP's dual prices of CPU and
memory (:func:`lp_duals`), and what each costs packed alone (:func:`standalone_values`) -- and the packing is
planned under each (:meth:`BulkPacker._plan_new`: each step opens the type whose simulated fill is worth the most
per dollar and repeats that fill while the pods last); the plan placing the most pods, then the cheaper, is kept and
its least efficient nodes emptied into the room the others leave (:func:`repack`).  One request vector and no
limits: the exact cheapest cover (:func:`cover_plan`).  What is left goes through the per-class placement.

:class:`BulkPacker` is a mixin of the solver (``solver._Solver``), using its ``pools``, ``existing_nodes``,
``planned``, ``rindex``, ``min_vec``, ``counter``, the placement's ``place`` / ``try_node`` / ``schedule_class`` /
``add_planned`` and finalize's ``launch_type``.  The functions below are pure.
"""

from __future__ import annotations

from .cover import min_cost_cover
from .model import INF, SimNode, fit_count
from .nodeclaim import InstanceTypeOption, NodeClaimTemplate
from .podfacts import PodClass
from .taints import untolerated
from .valuation import (VIEW_MEMO, MergedBestFirst, TypeView, lp_duals, lp_pair, simulate, standalone_values,
                        value_bounds)

# the valuations live in valuation.py; their names stay importable from here
__all__ = ["BulkPacker", "repack", "cover_plan", "apart_plan", "lp_duals", "lp_pair", "simulate", "standalone_values",
           "value_bounds", "shrunk_price"]


class BulkPacker:
    """Packs unconstrained classes in bulk (see the module doc)."""

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
        c0 = cl[0]   # the group's classes share their requirements (pack_simple's key)
        # a node's requirements -> (them, whether the group may go there): the nodes one packing opened share one
        # requirements object (each entry holds it, so its id is not reused while the memo lives)
        compat: dict = {}
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
            if len(c0.reqs):
                hit = compat.get(id(node.reqs))
                if hit is None:
                    hit = compat[id(node.reqs)] = (node.reqs, node.reqs.compatible(c0.reqs) is None)
                if not hit[1]:
                    continue  # no pod of the group may go there (``try_node`` would refuse each): e.g. another zone
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
        minvec = tuple(min(v[i] for v in counts) for i in range(nres))
        exotic_ok = any(x.wants_exotic() for x in live)
        types, view = pack_view(pool, reqs, minvec, exotic_ok)
        if not types:
            return
        cache = self.__dict__.get("_valuation_cache")
        if cache is None:
            cache = self._valuation_cache = {}
        # two ways to value a pod: its share of the 2-resource LP's dual prices of CPU and memory, and what it
        # costs packed alone; the packing is planned under each and the cheaper plan is kept
        # one request vector and no limits: the exact cheapest cover (the greedy fills below can only tie it)
        exact = cover_plan(view, counts, fit_count) if len(counts) == 1 and not pool.remaining else None
        plans = [exact] if exact is not None else []
        if exact is None:
            demand = [sum(v[i] * k for v, k in counts.items()) for i in range(2)]
            y0, y1 = lp_duals(view.lp_items, max(1, demand[0]), max(1, demand[1]), view.lp_front())
            for values in ({v: y0 * v[0] + y1 * v[1] for v in counts}, standalone_values(types, counts, cache, view)):
                values = {v: u for v, u in values.items() if u > 0}
                if values:
                    plans.append(self._plan_new(pool, view, dict(counts), values, cache))
            if not pool.remaining and _apart_may_win(plans, counts, standalone_values(types, counts, cache, view)):
                # and each request vector apart on its exact cheapest cover: a plan the fills above do not always
                # beat (pods whose cheapest home is a small type of their own, e.g. burstable types in one zone)
                apart = apart_plan(view, counts, fit_count)
                if apart is not None:
                    plans.append(apart)
        if not plans:
            return
        best = min(plans, key=lambda x: (-x[1], x[2]))  # most pods placed, then cheapest
        plan = best[0] if pool.remaining else repack(best[0], view)
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

    def _plan_new(self, pool: NodeClaimTemplate, view: TypeView, counts: dict, values: dict, cache: dict):
        """Plan new nodes for ``counts`` ({request vector: pods}) greedily: each step opens the type whose
        simulated fill is worth the most per dollar (pods valued at ``values``) and repeats that fill while the
        pods last.  Returns ([(type, {vector: pods per node}, nodes)], pods placed, cost); nothing is changed."""
        types = view.types
        ubs = view.bounds(values)
        # the types by bound per dollar, best first (then cheaper, then by name): (-bound, price, name, type)
        short = MergedBestFirst(view, ubs)
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
                for neg, p, _, t in short:
                    bound = -neg
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
                    short = short.without(lambda x: x[3] is t)
                    continue
                reps = n
            plan.append((t, taken, reps))
            cost += shrunk_price(view, taken, shrink) * reps
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


def pack_view(pool: NodeClaimTemplate, reqs, minvec: tuple, exotic_ok: bool):
    """([(price, type)], :class:`TypeView`): the types of ``pool.priced(reqs)`` holding ``minvec`` (the smallest
    request of every resource), the exotic ones dropped unless ``exotic_ok`` or none is left; kept on the template
    (``pool.pack_views``: across solves while the template cache keeps it), being a function of those alone."""
    key = (reqs.signature(), minvec, exotic_ok)
    hit = pool.pack_views.get(key)
    if hit is None:
        holds: dict = {}   # allocatable vector -> holds the smallest request of every resource
        types, plain = [], []   # the types holding it; those of them that are not exotic
        for p, _, t in pool.priced(reqs):
            a = t.avail
            ok = holds.get(a)
            if ok is None:
                ok = holds[a] = all(x >= v for x, v in zip(a, minvec))
            if ok:
                types.append((p, t))
                if not t.exotic:
                    plain.append((p, t))
        if not exotic_ok and plain:
            types = plain
        hit = pool.pack_views[key] = (types, TypeView(types) if types else None)
    return hit


def shrunk_price(view: TypeView, taken: dict, cache: dict) -> float:
    """Price of the cheapest of ``view``'s types holding the pods ``taken`` ({vector: count}): what the NodeClaim will
    launch (its plan keeps every type that holds what was placed)."""
    key = tuple(sorted(taken.items()))
    hit = cache.get(key)
    if hit is None:
        vecs = list(taken.items())
        i = view.first_holding([sum(v[r] * k for v, k in vecs) for r in range(len(vecs[0][0]))])
        hit = cache[key] = INF if i is None else view.types[i][0]
    return hit


def cover_plan(view: TypeView, counts: dict, fit_count):
    """The exact cheapest nodes of ``view``'s types for one request vector (``cover.min_cost_cover``) in
    ``_plan_new``'s shape: ([(type, {vector: pods per node}, nodes)], pods placed, cost), or None."""
    # one option per allocatable vector, its first (cheapest) type: the types sharing a vector hold as many pods, and
    # the cover keeps the cheapest option of each fit (the first of equal prices), which is that type
    types = [view.types[m[0]] for m in view.members]
    (v, q), = counts.items()
    memo = view.cover_fits
    fits = memo.get(v)
    if fits is None:
        if len(memo) > VIEW_MEMO:
            memo.clear()
        zero = [0] * len(v)
        fits = memo[v] = [fit_count(v, a, zero) for a in view.avails]
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
            cost += shrunk_price(view, {v: take}, shrink)
    return plan, q, cost


def _apart_may_win(plans: list, counts: dict, alone: dict) -> bool:
    """Could :func:`apart_plan` be kept over ``plans``?  Not when a plan places every pod at no more than the
    vectors' lower bound apart: each pod at least its standalone value (``alone``: the lowest price per pod of a
    node holding that vector alone, which no cover of it beats)."""
    total = sum(counts.values())
    full = [cost for _plan, placed, cost in plans if placed >= total]
    if not full or any(v not in alone for v in counts):
        return True
    return sum(k * alone[v] for v, k in counts.items()) < min(full) - 1e-9


def apart_plan(view: TypeView, counts: dict, fit_count):
    """Each request vector of ``counts`` on its own exact cheapest cover (:func:`cover_plan`), in ``_plan_new``'s
    shape, or None when one vector has no cover."""
    parts = [cover_plan(view, {v: k}, fit_count) for v, k in counts.items()]
    if any(x is None for x in parts):
        return None
    return [e for x in parts for e in x[0]], sum(x[1] for x in parts), sum(x[2] for x in parts)


def repack(plan: list, view: TypeView) -> list:
    """Empty the least efficient planned nodes into the room the others leave in their launch types.

    ``plan``: [(type, {vector: pods}, nodes)].  Nodes with the same fill form a group; each node launches as
    the cheapest type holding its fill, and pods moved into what that type leaves free cost nothing.  Groups
    are taken cheapest-value-first (price per pod): a node whose pods all find room elsewhere is dropped.
    Returns the plan with each fill on its launch type; ``view``: the types (cheapest first) the nodes may launch as."""
    types = view.types
    shrink: dict = {}
    ttype: dict = {}

    def launch(fill_key):
        t = ttype.get(fill_key)
        if t is None:
            fill = dict(fill_key)
            nres = len(fill_key[0][0])
            used = [sum(v[i] * k for v, k in fill.items()) for i in range(nres)]
            i = view.first_holding(used)
            t = None if i is None else types[i][1]
            ttype[fill_key] = t or False
            shrink[fill_key] = (INF if i is None else types[i][0], used)
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
