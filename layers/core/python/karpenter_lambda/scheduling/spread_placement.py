"""Topology spread placed by domain shares: a class whose spread constraint selects itself is placed domain by
domain, each domain's share (:func:`.spread.domain_shares`) in bulk, pinned to the domain (see
docs/scheduling.md, "How topology spread is packed").

A mixin of the solver (``solver._Solver``), using its ``pools``, ``existing_nodes``, ``topology``, ``no_limits``,
the placement's ``schedule_class`` and the packer's ``pack_fresh``.
"""

from __future__ import annotations

from ..api import labels as L
from . import topology as T
from .existing import can_add
from .model import fit_count
from .podfacts import PodClass
from .requirements import Requirement, Requirements
from .spread import SpreadRule, domain_shares
from .taints import untolerated

__all__ = ["SpreadShares", "BATCH_MIN_PODS"]

#: a class joins the zone-share batch (``place_spread_batch``) with at least this many pods left: a smaller one's
#: shares (a pod or two per zone) fill the room the nodes planned before them leave, pod by pod, for less
#: (``bench/scheduling.py --json``, Karpenter's mix: $2,418.21/h at 10,000 pods and $4,828.87/h at 20,000 with every
#: class in the batch, $2,410.03/h and $4,823.20/h with this; the spread mix and ``bench/default_spread.py`` the same)
BATCH_MIN_PODS = 8


class SpreadShares:
    """Places a spread class's pending pods by domain shares before the pod-by-pod path."""

    def _spread_key(self, c: PodClass):
        """(key, [spread constraints on it]) when ``c`` can be placed by domain shares: an active spread constraint
        on a key other than the hostname that selects the class itself, no pod anti-affinity on that key and no
        required pod affinity at all (with self-affinity on the hostname, the pods of a domain's share go to one node
        and the next domain gets none: a share placed before another falls short breaks the skew), no host ports,
        and no NodePool limits (a limit could leave one domain short after the others took their share).  Else None."""
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
            if con.kind == T.AFFINITY:
                return None   # pod affinity (on any key) ties the pods' domains together: a share can fall short
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
        NodePool with a fitting instance type offered there (enough of them for its minValues)."""
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
            if not pool.fitting(reqs, c.vec, c.wants_exotic())[0]:
                continue
            if pool.has_min_values and not self.relax_min_values and pool.min_values_error(reqs, c.vec) is not None:
                continue   # no NodeClaim of this NodePool can be made there (Strict minValues)
            return True
        return False

    def _shares_of(self, c: PodClass, sk: tuple | None = None):
        """(key, constraints, {domain: share}) of ``c``'s remaining pods (``place_spread_shares``), or None;
        ``sk``: ``_spread_key(c)`` when the caller has it."""
        left = c.limit - c.placed
        if sk is None:
            sk = self._spread_key(c) if left > 1 else None
        if sk is None or left <= 1:
            return None
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
            return None
        return key, cons, shares

    def place_spread_batch(self, classes: list[PodClass]) -> None:
        """The shares of many spread classes packed together, domain by domain: every class whose only constraint
        is a topology spread over itself (the zone spread of a Deployment, written or the scheduler config's
        default) and whose spread groups no other class of the batch counts takes its share of each domain
        (``domain_shares``, as ``place_spread_shares`` computes it), and the shares pinned to one domain are bin-packed
        together (``pack_simple``: the free room of the nodes planned so far, then new nodes whose fill mixes the
        classes' requests).  Without this, each class's share opened nodes of its own: 40 zone-spread Deployments of
        50 pods made 635 NodeClaims where one packing per zone needs about 70 (bench/default_spread.py).  A share
        not placed in full is left to the per-class path, which checks the skew as the counts then stand."""
        picked = []
        owners: dict = {}   # topology group key -> the batch class counting it (a group two classes count is left out)
        for c in classes:
            # the cheap checks first: the shares (eligible domains, the NodePools' types) only for a candidate
            sk = self._spread_key(c) if c.limit - c.placed >= BATCH_MIN_PODS else None
            if sk is None or c.inv or any(g.kind in (T.AFFINITY, T.ANTI) for g in c.member):
                continue
            idx = {i for i, (con, _, _) in enumerate(c.cons) if con in sk[1]}
            dropped = set(c.dropped) | idx
            if any(i not in dropped for i in range(len(c.cons))):
                continue   # something else constrains it: place_spread_shares places it on its own
            groups = {id(g) for g in c.member}
            if any(gk in owners for gk in groups):
                continue   # its pods count in a group an earlier class of the batch counts: its shares would move
            got = self._shares_of(c, sk)
            if got is None:
                continue
            owners.update(dict.fromkeys(groups, c))
            picked.append((c, got[0], got[2], dropped))
        if len(picked) < 2:
            return   # one class: place_spread_shares does the same
        saved = {id(c): (c.reqs, c.sig, c.dropped, c.limit, c.simple) for c, *_ in picked}
        domains = sorted({d for _c, _k, shares, _d in picked for d, q in shares.items() if q})
        try:
            for d in domains:
                batch = []
                for c, key, shares, dropped in picked:
                    q = shares.get(d, 0)
                    if not q:
                        continue
                    base = saved[id(c)][0]
                    pinned = base.copy()
                    pinned.add(Requirement(key, False, (d,)))
                    c.reqs, c.sig = pinned, pinned.signature()
                    c.dropped = dropped
                    c.simple = True
                    c.limit = c.placed + q
                    batch.append(c)
                if batch:
                    self.pack_simple(batch)
                for c in batch:   # back to the class as it is, for the next domain
                    c.reqs, c.sig, c.dropped, c.limit, c.simple = saved[id(c)]
        finally:
            for c, *_ in picked:
                c.reqs, c.sig, c.dropped, c.limit, c.simple = saved[id(c)]

    def place_spread_shares(self, c: PodClass) -> None:
        """Place the remaining pods of ``c`` domain by domain, each domain's share (``spread.domain_shares``) in bulk:
        pinned to the domain, the spread constraint is met by the shares, so one NodeClaim (or the bin packer's
        nodes) takes the whole share instead of one pod each.  What a domain cannot take is left to the pod-by-pod
        path, which checks the skew as the counts then stand."""
        got = self._shares_of(c)
        if got is None:
            return
        key, cons, shares = got
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
