"""Finalize: the planned NodeClaims become :class:`~.model.NodeClaimPlan` s (Karpenter's ``NodeClaim.FinalizeScheduling``
and the instance-type truncation of the launch): each keeps every compatible instance type that holds what was
placed on it -- within what it was charged against NodePool limits -- cheapest first, at most ``max_types`` (keeping
enough distinct values for minValues), and launches the cheapest.  Also the type a planned NodeClaim would launch
as now (:meth:`Finalizer.launch_type`), whose free room later classes may use at no extra cost.

A mixin of the solver (``solver._Solver``), using its ``existing_nodes``, ``planned``, ``unsched``, ``rindex``,
``rpos``, ``max_types`` and ``relax_min_values`` (the BestEffort minValues policy: a plan's minValues lowered to what
its kept types offer, ``NodeClaimPlan.min_values_relaxed``).
"""

from __future__ import annotations

import hashlib

from ..api import labels as L
from ..api.quantity import format_resource
from .model import EXOTIC_KEYS, EXOTIC_RESOURCES, NodeClaimPlan, SchedulingResult, SimNode, Unschedulable
from .nodeclaim import InstanceTypeOption, min_overhead, relaxed_min_values, truncate
from .requirements import Requirement

__all__ = ["Finalizer"]


class Finalizer:
    """Turns the planned nodes into NodeClaim plans (see the module doc)."""

    def init_finalize(self) -> None:
        self._final_cache: dict = {}
        self._reqs_exotic: dict = {}
        self._text_cache: dict = {}
        self._same_domains: dict = {}   # (type, type, requirements signature) -> they offer the same zones/capacity types
        self._exotic_idx = [self.rpos[r] for r in EXOTIC_RESOURCES if r in self.rpos]

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
        if node.charge:   # a minValues NodeClaim: charged the largest of the types its minValues need
            return dict(node.charge)
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
        pods are placed on it (``place`` resets it)."""
        ck, wants_exotic, fin = self._final_lookup(node)
        if fin is None:
            fin = self._final_types(node, wants_exotic)
            if fin is not None:
                self._final_cache[ck] = fin
        t0 = None
        if fin is not None:
            t0 = fin[0][2]
            if t0 is not node.target:
                # kept per pair of types and requirement set (the nodes of one zone ask it again and again); each
                # entry holds both types, so their ids stay theirs
                sk = (id(t0), id(node.target), ck[0])
                hit = self._same_domains.get(sk)
                if hit is None:
                    z, ct = node.reqs.get(L.ZONE), node.reqs.get(L.CAPACITY_TYPE)

                    def zc(t):
                        return {(o.zone, o.capacity_type) for o in t.offers if z.has(o.zone) and ct.has(o.capacity_type)}
                    hit = self._same_domains[sk] = (t0, node.target, zc(t0) == zc(node.target))
                if not hit[2]:
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
        # the DaemonSet overhead the NodeClaim asks: the least of its launch types' (Karpenter's addDaemonRequests)
        over = pool.daemon if pool.daemon_groups <= 1 else min_overhead(t.daemon for t in keep)   # one group: its own
        for k, v in over.items():
            vals[k] = vals.get(k, 0) + v
        final_reqs = reqs.copy()
        final_reqs.add(it_req)
        relaxed = False
        if self.relax_min_values:   # BestEffort: what the launch types offer is the minValues the NodeClaim asks
            final_reqs, relaxed = relaxed_min_values(final_reqs, keep)
        h = hashlib.sha1("\n".join(sorted(node.pods)).encode()).hexdigest()[:5]
        tk = tuple(sorted(vals.items()))
        req_text = self._text_cache.get(tk)
        if req_text is None:
            req_text = self._text_cache[tk] = ", ".join(f"{k}={format_resource(k, v)}" for k, v in tk if k != "pods")
        reason = (f"cheapest compatible offering: {t0.name} {o.capacity_type} in {o.zone} at ${o.price:.4f}/h; "
                  f"{len(keep)} of {len(pool.types)} instance types in NodePool {pool.name} fit {req_text} "
                  f"({vals.get('pods', 0)} pods incl. daemonsets)")
        if node.limit_snapshot:   # the options were trimmed to what the NodeClaim counts against the limits
            reason += f"; options kept within what it counts against NodePool {pool.name}'s limits"
        labels = dict(pool.np.template_labels)
        labels.update(final_reqs.node_labels())
        return NodeClaimPlan(
            name=f"{pool.name}-{h}", nodepool=pool.name, requirements=final_reqs, instance_types=[t.it for t in keep],
            instance_type=t0.name, zone=o.zone, capacity_type=o.capacity_type, price=o.price, pods=list(node.pods),
            requests=vals, reason=reason, labels=labels, taints=list(pool.taints), startup_taints=list(pool.startup_taints),
            min_values_relaxed=relaxed)
