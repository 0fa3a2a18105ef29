"""Underutilization (pure): Karpenter's multi-node then single-node consolidation.

* :class:`MultiNodeConsolidation`: the consolidatable candidates in Karpenter's order (cheapest to disrupt first),
  within the ``Underutilized`` budget, at most the first 100; a binary search for the longest prefix (at least 2)
  that can be deleted, or replaced by ONE strictly cheaper node (:func:`.consolidation.consolidation_option`).
* :class:`SingleNodeConsolidation`: each candidate in that order until the first valid delete or cheaper replace;
  the candidates it looked at and could not move get the reason (no cheaper replacement, pods would not fit).

Beyond Karpenter, multi-node also tries **packed groups** (:func:`packed_groups`) when the longest prefix is not
valid, before the binary search: per NodePool, zone and capacity type, the candidates are packed on their
reschedulable pods' requests (:func:`_pack`, the dot-product rule: bins full in CPU and memory alike) into bins of
three instance types -- the one cheapest for that zone's mix of requests, the one cheapest per CPU, the one cheapest
per memory -- (``GROUP_FILL`` of its allocatable; the nodes with a zone-spread pod whose owner has more pods in that
zone than in another, so the solver could put it in another zone, only when nothing else fits), and each bin's
nodes whose pods would fit one strictly cheaper node are a candidate set, the largest estimated saving first (each
try is one validity test: its one node is sized directly, ``one_node``).  A group goes through the same validity
test (:func:`.consolidation.consolidation_option`) as any multi-node command; when the one node takes all but a few
pods (``Option.stray``), the group without the nodes those pods came from is tried once.  The longest prefix, once
invalid in a sweep, is not asked again in that sweep, and Karpenter's binary search runs only when no group was
tried (a sweep has few validity tests: ``plan.MAX_SWEEP_EVALUATIONS``).

Both share :meth:`validate`, the second look before acting (Karpenter's 15 s validation): still consolidatable, no
new blocker, still a valid option, and a replacement no dearer than planned.
"""

from __future__ import annotations

from ..api import labels as wk
from ..api.kube import node_allocatable, pod_key
from ..api.snapshot import ClusterSnapshot
from ..scheduling.requirements import Requirements
from ..scheduling.resources import pod_requests
from ..scheduling.predicates import labels_match
from .consolidation import (consolidatable, consolidation_enabled, consolidation_option, evaluations_left,
                            interleaved, ordered, window_nodes)
from .balanced import BLOCK_BALANCED, REJECTED_PREFIX, delete_score, totals_for
from .emptiness import consolidatable_in, is_empty
from .types import BLOCK_PODS_WOULD_NOT_FIT, GRACEFUL, UNDERUTILIZED, Blocked, Candidate, Command, MethodBase, Option

MULTI_NODE_MAX = 100
SINGLE_NODE_MAX_EVALUATIONS = 100   # Karpenter bounds single-node by a 3-minute timeout; a count keeps it pure
NO_CHEAPER = "no cheaper replacement"
GROUP_FILL = 0.98         # a group's requests fill at most this share of the bin type's allocatable (room for DaemonSets)
GROUP_MAX_NODES = 60      # nodes per group (the pods of one group are one validity test)
GROUP_MAX_CPU = 96_000    # millicores: the largest bin type considered
GROUP_TRIES = 6           # groups tried per call (each one validity test: its one node sized directly)
GROUP_MISSES = 2          # ... and no more after this many invalid ones (the sweep's tests are few)
ZONE_SPREAD_LAST = True   # first-fit packs the nodes whose zone-spread pods could leave the zone last


def _cause(reason: str) -> str:
    if reason.startswith(REJECTED_PREFIX):
        return BLOCK_BALANCED
    return BLOCK_PODS_WOULD_NOT_FIT if reason.startswith("pods would not fit") else NO_CHEAPER


def _command(opt: Option) -> Command:
    return Command(UNDERUTILIZED, list(opt.candidates), replacements=[opt.replacement] if opt.replacement else [],
                   savings_per_hour=opt.savings, option=opt, score=opt.score,
                   detail=(f"{opt.action} {len(opt.candidates)} node(s)" +
                           (f" by {opt.replacement.instance_type}" if opt.replacement is not None else "") +
                           f", saves ${opt.savings:.4f}/h" +
                           (f"; balanced {opt.score.text()}" if opt.score is not None else "")))


class _Underutilized(MethodBase):
    reason = UNDERUTILIZED
    kind = GRACEFUL
    chains = True   # several commands per sweep, each planned on the context left by the ones before (plan._chain)

    def should_disrupt(self, c: Candidate, snap: ClusterSnapshot) -> bool:
        # an empty node is Emptiness's, under the Empty budget (Karpenter's consolidation ShouldDisrupt skips it):
        # taking it here would delete it past an Empty budget of 0 and count it against the Underutilized one
        return consolidation_enabled(c) and not is_empty(c) and consolidatable_in(c, snap) is not None

    def _within_budget(self, ctx, cands, blocked):
        budgets = ctx.budgets
        out, taken = [], {}
        for c in cands:
            np = c.nodepool_name
            if taken.get(np, 0) >= budgets.left(np, UNDERUTILIZED):
                ahead = taken.get(np, 0)
                blocked.append(Blocked(c.name, "budget", budgets.message(np, UNDERUTILIZED, ahead=ahead),
                                       UNDERUTILIZED, provisional=ahead > 0))
                continue
            taken[np] = taken.get(np, 0) + 1
            out.append(c)
        return out

    def validate(self, snap: ClusterSnapshot, candidates: list[Candidate], ctx, planned_price: float | None):
        ok, blocked = consolidatable(snap, candidates, ctx)
        if blocked:
            return None, f"{blocked[0][0].name}: {blocked[0][2]}"
        window = window_nodes(snap, ctx)
        zones = {c.zone for c in ok}
        opt = None
        if planned_price is not None and len(ok) > 1 and len(zones) == 1 and None not in zones:
            # a replace of one zone's nodes may have been a packed group sized directly (one_node): asked that way
            # first, then the solver's own way
            opt = consolidation_option(snap, ok, ctx, window=window, one_node=next(iter(zones)))
            if opt.valid and opt.replacement is not None and opt.replacement.price > planned_price + 1e-9:
                opt = None   # a dearer node than planned: the solver's own way decides
        if opt is None or not opt.valid:
            opt = consolidation_option(snap, ok, ctx, window=window)
        if not opt.valid:
            return None, opt.reason
        if opt.replacement is not None and planned_price is not None and opt.replacement.price > planned_price + 1e-9:
            return None, f"replacement price changed: ${opt.replacement.price:.4f}/h now vs ${planned_price:.4f}/h planned"
        if opt.replacement is None and planned_price is not None:
            pass  # a delete where a replace was planned is only cheaper
        return _command(opt), ""


def _apart(c: Candidate) -> set:
    """What must stay on separate nodes: for each pod with a required anti-affinity, its owner (or its labels)."""
    out = set()
    for p in c.reschedulable:
        aff = ((p.get("spec") or {}).get("affinity") or {}).get("podAntiAffinity") or {}
        if not aff.get("requiredDuringSchedulingIgnoredDuringExecution"):
            continue
        m = p.get("metadata") or {}
        owner = next((o.get("uid") or o.get("name") for o in m.get("ownerReferences") or []), None)
        out.add((m.get("namespace") or "default", owner or tuple(sorted((m.get("labels") or {}).items()))))
    return out


def _zone_spread_counts(snap: ClusterSnapshot) -> tuple[dict, set]:
    """({(namespace, owner): {zone: pods}} for the pods with a required zone spread, every zone with a node)."""
    node_zone = {(n.get("metadata") or {}).get("name"): ((n.get("metadata") or {}).get("labels") or {}).get(wk.ZONE)
                 for n in snap.nodes}
    zones = {z for z in node_zone.values() if z}
    counts: dict = {}
    for p in snap.pods:
        spec = p.get("spec") or {}
        tscs = spec.get("topologySpreadConstraints")
        if not tscs or not any(t.get("topologyKey") == wk.ZONE and t.get("whenUnsatisfiable", "DoNotSchedule")
                               == "DoNotSchedule" for t in tscs):
            continue
        z = node_zone.get(spec.get("nodeName"))
        if not z:
            continue
        key = _owner(p)
        d = counts.setdefault(key, {})
        d[z] = d.get(z, 0) + 1
    return counts, zones


def _owner(p: dict) -> tuple:
    m = p.get("metadata") or {}
    owner = next((o.get("uid") or o.get("name") for o in m.get("ownerReferences") or []), None)
    return (m.get("namespace") or "default", owner or tuple(sorted((m.get("labels") or {}).items())))


def _may_leave_zone(c: Candidate, counts: dict, zones: set) -> bool:
    """Whether one of the candidate's pods with a required zone spread could be put in another zone once moved: its
    owner has more pods in the candidate's zone than in another zone (maxSkew 1 then lets the solver choose the
    other zone, where the group's one new node is not)."""
    for p in c.reschedulable:
        d = counts.get(_owner(p))
        if d is None:
            continue
        here = d.get(c.zone, 0)
        if any(d.get(z, 0) < here for z in zones if z != c.zone):
            return True
    return False


def _requests(c: Candidate, cache: dict) -> tuple[int, int, int]:
    """(cpu m, memory bytes, pods) requested by a candidate's reschedulable pods."""
    cpu = mem = 0
    for p in c.reschedulable:
        m = p.get("metadata") or {}
        key = (m.get("namespace") or "default", m.get("name"))
        r = cache.get(key)
        if r is None:
            q = pod_requests(p)
            r = cache[key] = (q.get("cpu", 0), q.get("memory", 0))
        cpu += r[0]
        mem += r[1]
    return cpu, mem, len(c.reschedulable)


def _bin_types(snap: ClusterSnapshot, nodepool, zone: str, capacity_type: str) -> list[tuple[float, int, int, int]]:
    """(price, cpu, memory, pods) of the NodePool's instance types offered in ``zone`` as ``capacity_type``, only
    those no other type beats on price and every resource (cheapest first)."""
    reqs = Requirements.from_list(nodepool.requirements)
    out = []
    for it in snap.instance_types.get(nodepool.name, []):
        prices = [o.price for o in it.offerings if o.available and o.zone == zone and o.capacity_type == capacity_type]
        if not prices:
            continue
        labels = {**it.labels, wk.ZONE: zone, wk.CAPACITY_TYPE: capacity_type, wk.INSTANCE_TYPE: it.name}
        if labels_match(reqs, labels) is not None:
            continue
        a = it.allocatable
        out.append((min(prices), a.get("cpu", 0), a.get("memory", 0), a.get("pods", 0)))
    out.sort()
    front = []
    for t in out:
        if not any(f[0] <= t[0] and f[1] >= t[1] and f[2] >= t[2] and f[3] >= t[3] for f in front):
            front.append(t)
    return front


def packed_groups(snap: ClusterSnapshot, candidates: list[Candidate], cache: dict | None = None,
                  bins_cache: dict | None = None) -> list[tuple[float, list[Candidate]]]:
    """Candidate sets whose pods would fill one node cheaper than they cost together: [(estimated saving,
    candidates)], the largest saving first.  Only an estimate on requests (cpu, memory, pod
    slots): the validity test decides."""
    cache = {} if cache is None else cache
    counts, zones = _zone_spread_counts(snap) if ZONE_SPREAD_LAST else ({}, set())
    parts: dict[tuple, list[Candidate]] = {}
    for c in candidates:
        if not c.zone:
            continue
        parts.setdefault((c.nodepool_name, c.zone, c.capacity_type), []).append(c)
    groups = []
    for (_np, zone, ct), members in sorted(parts.items()):
        if len(members) < 2:
            continue
        bkey = (members[0].nodepool_name, zone, ct)   # the catalog does not change within a sweep
        types = bins_cache.get(bkey) if bins_cache is not None else None
        if types is None:
            types = _bin_types(snap, members[0].nodepool, zone, ct)
            if bins_cache is not None:
                bins_cache[bkey] = types
        if not types:
            continue
        req = {c.name: _requests(c, cache) for c in members}
        dc = sum(r[0] for r in req.values()) or 1
        dm = sum(r[1] for r in req.values()) or 1
        big = [t for t in types if t[1] <= GROUP_MAX_CPU] or types
        # the bins: the type cheapest per unit of this zone's mix of requests, and the ones cheapest per CPU and per
        # memory (a bin of those, filled with a balanced mix of nodes, is full in both: the cheapest cluster mixes
        # them); each packing gives its groups, all ranked together (one is taken per command)
        bin_types = []
        for key in (lambda t: (t[0] / max(1e-12, min(t[1] / dc, t[2] / dm)), t[0]),
                    lambda t: (t[0] / max(1, t[1]), -t[1]), lambda t: (t[0] / max(1, t[2]), -t[2])):
            t = min(big, key=key)
            if t not in bin_types:
                bin_types.append(t)

        def used(c):
            a = node_allocatable(c.node or {})
            r = req[c.name]
            return max(r[0] / max(1, a.get("cpu", 1)), r[1] / max(1, a.get("memory", 1)))

        # the nodes whose zone-spread pods the solver could send to another zone than the bin's one node go last:
        # the first bins are built from nodes whose pods must land in the zone
        risky = {c.name for c in members if counts and _may_leave_zone(c, counts, zones)}
        order = sorted(members, key=lambda c: (c.name in risky, used(c), -c.price, c.name))
        apart = {c.name: _apart(c) for c in members}
        seen: set = set()
        for bin_t in bin_types:
            cap = (bin_t[1] * GROUP_FILL, bin_t[2] * GROUP_FILL, bin_t[3] * GROUP_FILL)
            for b in _pack(order, req, apart, risky, cap):
                key = frozenset(c.name for c in b[3])
                if len(b[3]) < 2 or key in seen:
                    continue
                seen.add(key)
                price = next((t[0] for t in types if t[1] >= b[0] / GROUP_FILL and t[2] >= b[1] / GROUP_FILL
                              and t[3] >= b[2]), None)
                if price is None:
                    continue
                saving = sum(c.price for c in b[3]) - price
                if saving > 1e-9:
                    groups.append((saving, b[3]))
    groups.sort(key=lambda g: (-g[0], g[1][0].name))
    return groups


def _pack(order: list[Candidate], req: dict, apart: dict, risky: set, cap: tuple) -> list[list]:
    """Bins of at most ``cap`` (cpu, memory, pods) requests, [cpu, memory, pods, [candidates], apart]: each bin is
    filled by the dot-product rule of vector bin packing (the candidate whose requests best match the bin's room,
    weighed by how empty each resource still is), which mixes CPU-heavy and memory-heavy nodes so the bin fills
    in both; a "risky" node (zone spread) only when no other fits.  Two pods that must be on separate nodes
    (required anti-affinity) never go in one bin: one node could not take both."""
    c0, m0 = max(1e-9, cap[0]), max(1e-9, cap[1])
    # (cpu, memory, pods, apart, preferred, candidate) in priority order; plain tuples: this loop runs n^2 / bin
    left = [(*req[c.name], apart[c.name], c.name not in risky, c) for c in order]
    bins: list[list] = []
    while left:
        b = [0, 0, 0, [], set()]
        while len(b[3]) < GROUP_MAX_NODES:
            best, best_key = -1, None
            rc, rm = (1 - b[0] / c0) / c0, (1 - b[1] / m0) / m0
            room = (cap[0] - b[0], cap[1] - b[1], cap[2] - b[2])
            taken = b[4]
            for i, (cpu, mem, pods, ap, pref, _c) in enumerate(left):
                if cpu > room[0] or mem > room[1] or pods > room[2] or (ap and ap & taken):
                    continue
                key = (pref, cpu * rc + mem * rm)
                if best_key is None or key > best_key:
                    best, best_key = i, key
            if best < 0:
                break
            cpu, mem, pods, ap, _pref, c = left.pop(best)
            b[0] += cpu
            b[1] += mem
            b[2] += pods
            b[3].append(c)
            b[4] |= ap
        if not b[3]:
            left.pop(0)   # larger than a bin on its own
            continue
        bins.append(b)
    return bins


class MultiNodeConsolidation(_Underutilized):
    def _groups(self, ctx, ok: list[Candidate], snap: ClusterSnapshot, window):
        """Beyond Karpenter: the packed groups (:func:`packed_groups`) within the budget, the best first; the first
        valid one, or None.  A group found invalid is not tried again in this sweep (``ctx.memo``)."""
        failed = ctx.memo.group_invalid
        tries = misses = 0
        for _saving, group in packed_groups(snap, ok, ctx.memo.pod_requests, ctx.memo.bin_types):
            if tries >= GROUP_TRIES or misses >= GROUP_MISSES or evaluations_left(ctx) <= 0:
                break
            key = frozenset(c.name for c in group)
            if key in failed:
                continue
            per_pool: dict[str, int] = {}
            for c in group:
                per_pool[c.nodepool_name] = per_pool.get(c.nodepool_name, 0) + 1
            if any(n > ctx.budgets.left(p, UNDERUTILIZED) for p, n in per_pool.items()):
                continue
            tries += 1
            # a group's nodes share a zone, and its pods were chosen to fill one node there: sized directly
            opt = consolidation_option(snap, group, ctx, window=window, one_node=group[0].zone)
            if opt.valid:
                return opt
            failed.add(key)
            if opt.stray and evaluations_left(ctx) > 0:
                # the one node took all but a few pods: the same group without the nodes those pods came from
                stray = set(opt.stray)
                rest = [c for c in group if not any(pod_key(p) in stray for p in c.reschedulable)]
                if 2 <= len(rest) < len(group) and frozenset(c.name for c in rest) not in failed:
                    opt = consolidation_option(snap, rest, ctx, window=window, one_node=rest[0].zone)
                    if opt.valid:
                        return opt
                    failed.add(frozenset(c.name for c in rest))
            misses += 1
        return None

    def compute_commands(self, ctx, candidates: list[Candidate], snap: ClusterSnapshot):
        ok, why = consolidatable(snap, candidates, ctx)
        blocked = [Blocked(c.name, cause, msg, UNDERUTILIZED) for c, cause, msg in why]
        within = self._within_budget(ctx, ordered(ok), blocked)[:MULTI_NODE_MAX]
        if len(within) < 2:
            return [], blocked
        window = window_nodes(snap, ctx)
        best, lo, hi = None, 2, len(within)
        # the longest prefix first: when it is valid (a cluster with room) the binary search would end there too,
        # after log2(n) simulations instead of one.  Once it failed in a sweep it is not asked again there (the
        # later commands of the sweep only fill the cluster further).
        opt = None
        if evaluations_left(ctx) > 0 and not ctx.memo.prefix_failed:
            opt = consolidation_option(snap, within, ctx, window=window)
        if opt is not None and opt.valid:
            best, lo = opt, hi + 1
        else:
            if opt is not None:
                ctx.memo.prefix_failed = True
            hi -= 1
            n0 = ctx.evaluations
            best = self._groups(ctx, ok, snap, window)
            if best is not None or ctx.evaluations > n0:
                lo = hi + 1   # packed groups were tried: no binary search on the prefix (its tests are spent)
        while lo <= hi and evaluations_left(ctx) > 0:
            mid = (lo + hi) // 2
            opt = consolidation_option(snap, within[:mid], ctx, window=window)
            if opt.valid:
                best, lo = opt, mid + 1
            else:
                hi = mid - 1
        if best is None:
            return [], blocked
        for c in best.candidates:
            ctx.budgets.take(c.nodepool_name, UNDERUTILIZED)
        return [_command(best)], blocked


class SingleNodeConsolidation(_Underutilized):
    def compute_commands(self, ctx, candidates: list[Candidate], snap: ClusterSnapshot):
        ok, why = consolidatable(snap, candidates, ctx)
        blocked = [Blocked(c.name, cause, msg, UNDERUTILIZED) for c, cause, msg in why]
        window = window_nodes(snap, ctx)
        tried = ctx.memo.single_node_invalid   # found invalid earlier in this sweep: not again
        budgets = ctx.budgets
        n = 0
        for c in interleaved(ok):
            if c.name in tried:
                continue
            if n >= SINGLE_NODE_MAX_EVALUATIONS or evaluations_left(ctx) <= 0:
                break
            if not budgets.available(c.nodepool_name, UNDERUTILIZED):
                blocked.append(Blocked(c.name, "budget", budgets.message(c.nodepool_name, UNDERUTILIZED), UNDERUTILIZED))
                continue
            best = delete_score(c, totals_for(snap, ctx))
            if best is not None and not best.approved:
                # Balanced: even deleting it (the most any move of it saves) scores under the threshold -- no
                # simulation needed (Karpenter's CanPassThreshold)
                tried.add(c.name)
                blocked.append(Blocked(c.name, BLOCK_BALANCED, f"{REJECTED_PREFIX}even a delete would have "
                                       f"{best.text()}", UNDERUTILIZED, score=best))
                continue
            n += 1
            opt = consolidation_option(snap, [c], ctx, window=window)
            if opt.valid:
                budgets.take(c.nodepool_name, UNDERUTILIZED)
                return [_command(opt)], blocked
            tried.add(c.name)
            blocked.append(Blocked(c.name, _cause(opt.reason), opt.reason, UNDERUTILIZED, score=opt.score))
        return [], blocked
