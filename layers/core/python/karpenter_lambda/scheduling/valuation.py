"""How the bulk packer values pods and node types (``packer.BulkPacker``): the 2-resource covering LP's dual
prices of CPU and memory (:func:`lp_duals`), what a pod costs packed alone (:func:`standalone_values`), an upper
bound of what one node of a type can hold (:meth:`TypeView.bounds`, :func:`value_bounds`) and simulated fills of
one node (:func:`simulate`).

A fill or a bound depends on a type's allocatable vector only, and a real catalog has about a third as many distinct
vectors as types: :class:`TypeView` groups the types a packing may open by allocatable vector once, and the
valuations work per vector.  The view keeps what depends on its vectors and the request vectors only (which request
vectors fit each of its vectors, the covering LP's front, standalone values); ``cache`` (a dict the caller keeps for
one solver run) holds how many of one request vector fit alone per allocatable vector, so packings that differ only
in the zones their types are offered in (pods pinned to a zone by their volumes) compute it once.
Pure functions; the results are those of the per-type computation, exactly.
"""

from __future__ import annotations

import heapq
import operator
from itertools import compress, count, repeat

from .model import INF

#: a view's memo of standalone values / fitting vectors is cleared past this many entries (bounded memory)
VIEW_MEMO = 512
#: a view's fitting sets (a list of its vectors' positions per request-vector tuple) are cleared past this many
_FITS_MEMO = 256

__all__ = ["TypeView", "BestFirst", "MergedBestFirst", "lp_duals", "lp_front", "lp_pair", "simulate", "simulate_fill",
           "standalone_values", "value_bounds"]


class TypeView:
    """The types one packing may open (``types``: [(price, type)], cheapest first) grouped by allocatable vector:
    ``avails`` (the distinct vectors in order of first appearance), ``cheapest`` ({vector: lowest price, the first
    of equal ones}) and ``lp_items`` (the covering LP's candidates: per vector the cheapest type with a positive
    price, CPU and memory; a type with the same vector and a higher price is dominated and never on the LP's Pareto
    frontier; every type when none qualifies, so :func:`lp_pair`'s fallback is unchanged)."""

    __slots__ = ("types", "avails", "index", "cheapest", "lp_items", "members", "alone", "fits", "cover_fits", "_front",
                 "_firsts")

    def __init__(self, types: list):
        self.types = types
        cheapest: dict = {}
        index: list = []     # per type, the position of its vector in ``avails``
        pos: dict = {}
        lp: dict = {}
        for i, (p, t) in enumerate(types):
            a = t.avail
            q = cheapest.get(a)
            if q is None:
                pos[a] = len(pos)
                cheapest[a] = p
            elif p < q:
                cheapest[a] = p
            index.append(pos[a])
            if p > 0 and a[0] > 0 and a[1] > 0:
                e = lp.get(a)
                if e is None or p < e[1][3]:
                    lp[a] = (i, (t, a[0], a[1], p))
        self.avails = list(cheapest)
        self.index = index
        self.cheapest = cheapest
        # per vector (``avails``' order), the positions of its types in ``types`` (cheapest first)
        members: list = [[] for _ in self.avails]
        for i, j in enumerate(index):
            members[j].append(i)
        self.members = members
        # what depends on this view and the request vectors only, kept with the view (a view lives as long as
        # the template cache keeps it): per request vector its standalone value, per vector tuple which fit
        self.alone: dict = {}
        self.fits: dict = {}
        # per request vector, how many of it one node of each vector in ``avails`` holds (``packer.cover_plan``)
        self.cover_fits: dict = {}
        # lp_pair sorts its points stably: the representatives keep the types' order
        self.lp_items = ([e for _, e in sorted(lp.values(), key=lambda x: x[0])] if lp
                         else [(t, t.avail[0], t.avail[1], p) for p, t in types])
        self._front = None
        self._firsts = None

    def bounds(self, values: dict) -> list:
        """Upper bound of the value one node of each vector in ``avails`` can hold, pods valued at ``values``
        ({request vector: value}), in that order: a fractional knapsack per resource (capacity times the best value
        per unit of it among the request vectors that fit), the least of those; 0 when no request vector fits.  The
        vectors are grouped once per request-vector tuple by which request vectors fit them (kept in ``fits``): a
        packing group's two valuations, and the groups after it asking the same vectors, each make one pass per
        fitting set."""
        vecs = tuple(values)
        groups = self.fits.get(vecs)
        if groups is None:
            if len(self.fits) > _FITS_MEMO:
                self.fits.clear()
            le = operator.le
            by_fit: dict = {}   # which request vectors fit -> (positions in ``avails``, those vectors)
            for pos, a in enumerate(self.avails):
                m = tuple(i for i, v in enumerate(vecs) if all(map(le, v, a)))
                if m:
                    g = by_fit.get(m)
                    if g is None:
                        g = by_fit[m] = ([], [])
                    g[0].append(pos)
                    g[1].append(a)
            # per fitting set, its vectors' columns (resource by resource), for the products below
            groups = self.fits[vecs] = [(m, positions, list(zip(*avails))) for m, (positions, avails) in by_fit.items()]
        per_unit = [[u / x if x else 0.0 for x in v] for v, u in values.items()]
        out = [0.0] * len(self.avails)
        mul = operator.mul
        for m, positions, cols in groups:
            best = None
            for i in m:
                d = per_unit[i]
                best = list(d) if best is None else [y if y > z else z for y, z in zip(d, best)]
            # per vector, the least over the resources with a positive value of capacity times that value (a
            # fractional knapsack per resource), the products taken column by column
            ubs = [map(mul, cols[i], repeat(d)) for i, d in enumerate(best) if d > 0]
            ubs = map(min, *ubs) if len(ubs) > 1 else map(min, ubs[0], repeat(INF))
            for pos, ub in zip(positions, ubs):
                out[pos] = ub
        return out

    def firsts(self) -> tuple[list, list, list]:
        """Per vector (``avails``' order) its first (cheapest) type's price, name and type, computed once."""
        if self._firsts is None:
            first = [self.types[m[0]] for m in self.members]
            self._firsts = ([p for p, _ in first], [t.name for _, t in first], [t for _, t in first])
        return self._firsts

    def first_holding(self, used) -> int | None:
        """Position in ``types`` of the first type (the cheapest, then ``types``' order) whose vector holds ``used``,
        or None.  The vectors are in order of first appearance, so the first one holding ``used`` is that type's:
        one pass over the distinct vectors instead of over every type."""
        ge = operator.ge
        for j, a in enumerate(self.avails):
            if all(map(ge, a, used)):
                return self.members[j][0]
        return None

    def lp_front(self) -> list:
        """:func:`lp_front` of ``lp_items``, computed once (it does not depend on the demand)."""
        if self._front is None:
            self._front = lp_front(self.lp_items)
        return self._front


class _ReadPrefix:
    """Items produced in order by ``_pop`` (None when there are no more), kept in a prefix that later passes read
    again before producing more."""

    __slots__ = ("_done",)

    def _pop(self):
        raise NotImplementedError

    def __iter__(self):
        done = self._done
        i = 0
        while True:
            if i < len(done):
                yield done[i]
            else:
                x = self._pop()
                if x is None:
                    return
                done.append(x)
                yield x
            i += 1


class BestFirst(_ReadPrefix):
    """``items`` in sorted order, sorted only as far as they are read: a heap popped on demand into a prefix that
    later passes read again (the packer's search reads a few dozen of a thousand types).  The items must be totally
    ordered (no two equal), so the order is exactly ``sorted(items)``."""

    __slots__ = ("_heap",)

    def __init__(self, items: list):
        heapq.heapify(items)
        self._heap = items
        self._done: list = []

    def _pop(self):
        return heapq.heappop(self._heap) if self._heap else None

    def without(self, drop) -> "BestFirst":
        """The items for which ``drop(item)`` is false, in the same order."""
        return BestFirst([x for x in self._done + self._heap if not drop(x)])


class MergedBestFirst(_ReadPrefix):
    """The order :class:`BestFirst` gives the packer's search items ``(-(bound / price), price, name, type)`` of every
    type of ``view`` whose vector's bound (``ubs``, per vector) is positive, built from one item per vector: a
    vector's types are cheapest first (then by name), so each one's key is no smaller than the one before it, and
    a heap holding each vector's next type pops the items in exactly ``sorted`` order (a k-way merge).  The search
    reads a few dozen items, so only those are built."""

    __slots__ = ("_heap", "_view", "_next")

    def __init__(self, view: TypeView, ubs: list):
        prices, names, firsts = view.firsts()
        # (-(bound / price), price, name, type, vector, 0) for each vector with a positive bound, built in C loops
        heap = list(compress(zip(map(operator.neg, map(operator.truediv, ubs, prices)), prices, names, firsts, count(),
                                 repeat(0)),
                             map(operator.gt, ubs, repeat(0))))
        heapq.heapify(heap)
        self._heap = heap
        self._done: list = []
        self._view = view
        self._next = ubs

    def _pop(self):
        heap = self._heap
        if not heap:
            return None
        x = heapq.heappop(heap)
        members = self._view.members
        j, k = x[4], x[5] + 1
        if k < len(members[j]):
            p, t = self._view.types[members[j][k]]
            heapq.heappush(heap, (-(self._next[j] / p), p, t.name, t, j, k))
        return x[:4]

    def without(self, drop) -> "BestFirst":
        """The items for which ``drop(item)`` is false, in the same order (every item built)."""
        return BestFirst([x for x in self if not drop(x)])


def standalone_values(types: list, counts: dict, cache: dict | None = None, view: TypeView | None = None) -> dict:
    """Value of one pod per request vector: what it costs packed alone, the lowest price per pod over the
    types each filled with that vector only.  A node whose fill is worth more than its price saves money
    against packing each vector apart.  ``types``: [(price, type)]; ``view``: their :class:`TypeView`."""
    if view is not None:
        memo = view.alone
        if len(memo) > VIEW_MEMO:
            memo.clear()
    else:
        view, memo = TypeView(types), None
    cheapest = view.cheapest
    values = {}
    for v in counts:
        if memo is not None and v in memo:
            if memo[v] is not None:
                values[v] = memo[v]
            continue
        alone = None
        if cache is not None:
            alone = cache.get(("alone", v))
            if alone is None:
                alone = cache[("alone", v)] = {}
        best = None
        for avail, p in cheapest.items():
            n = alone.get(avail) if alone is not None else None
            if n is None:
                n = INF
                for x, c in zip(v, avail):
                    if x:
                        k = c // x
                        if k < n:
                            n = k
                if alone is not None:
                    alone[avail] = n
            if 0 < n < INF and (best is None or p / n < best):
                best = p / n
        if memo is not None:
            memo[v] = best
        if best is not None:
            values[v] = best
    return values


def value_bounds(types: list, values: dict) -> dict:
    """Upper bound of the value one node of each type can hold, {type name: bound} (:meth:`TypeView.bounds`)."""
    view = TypeView(types)
    ubs = view.bounds(values)
    return {t.name: ubs[i] for (_, t), i in zip(types, view.index)}


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


def lp_duals(items, C: float, M: float, front: list | None = None):
    """Dual prices (per CPU unit, per memory unit) of the 2-resource covering LP; ``front``: ``lp_front(items)``
    when the caller keeps it."""
    sol = lp_pair(items, C, M, front)
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


def lp_front(items) -> list:
    """The Pareto frontier of (cpu/price, mem/price) over ``items`` ``(obj, cpu, mem, price)`` with a positive
    price, CPU and memory, as points ``(cpu/price, mem/price, obj, cpu, mem, price)`` by CPU per dollar, most first:
    the part of :func:`lp_pair` that does not depend on the demand."""
    pts = [(cpu / p, mem / p, o, cpu, mem, p) for o, cpu, mem, p in items if p > 0 and cpu > 0 and mem > 0]
    pts.sort(key=lambda x: (-x[0], -x[1]))
    front = []
    best_m = -1.0
    for pt in pts:
        if pt[1] > best_m:
            front.append(pt)
            best_m = pt[1]
    return front


def lp_pair(items, C: float, M: float, front: list | None = None):
    """Exact optimum of min sum(p x) s.t. sum(cpu x) >= C, sum(mem x) >= M, x >= 0 over ``items``
    ``(obj, cpu, mem, price)``: returns ``[(obj, x), ...]`` (one or two entries).  A basic optimal solution
    uses at most two types, and only types on the Pareto frontier of (cpu/price, mem/price) matter
    (``front``: :func:`lp_front` of ``items``, when the caller has it)."""
    if front is None:
        front = lp_front(items)
    if not front:
        return [(items[0][0], 1.0)] if items else []
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
