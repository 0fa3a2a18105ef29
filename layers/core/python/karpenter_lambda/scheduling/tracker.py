"""The topology tracker: owns the topology groups and their per-domain pod counts (Karpenter's ``topology.go``).

Groups come from the pending classes' constraints and from the required anti-affinity of pods already on nodes
(with, for each such anti-affinity, the inverse group: where the pods it selects may not go).  A spread group carries
its owners' node filter (:class:`~.topology.NodeFilter`, part of its key): it counts only the pods on nodes that
pass.  Existing pods are counted once at construction; the placement records each placement
(:meth:`TopologyTracker.record`) and asks, before placing pods of a class on a node, how many may go there and in
which domains (:meth:`TopologyTracker.check`).  Rules: see :mod:`.topology`.
"""

from __future__ import annotations

from ..api import labels as L
from . import topology as T
from .existing import node_facts
from .model import INF, INV, SimNode
from .podfacts import PodClass
from .predicates import labels_match, node_terms
from .requirements import Requirements
from .taints import untolerated

__all__ = ["TopologyTracker"]


class TopologyTracker:
    """Topology groups (``groups``: group key -> :class:`~.topology.Group`; ``group_list`` in creation order) over
    the NodeClaim templates ``pools`` and the ``existing_nodes``; sets each class's memberships (``member``,
    ``inv``) and whether it is unconstrained (``simple``).  ``why``: the text of the constraint that refused the
    last :meth:`check`."""

    def __init__(self, pools: list, existing_nodes: list[SimNode], classes: list[PodClass], namespaces: dict | None = None):
        self.pools = pools
        self.namespaces = namespaces   # the namespaces' labels (namespaceSelectors); None: not known
        self.existing_nodes = existing_nodes
        self.groups: dict = {}
        self.group_list: list = []
        self._refused = None   # (class, key, constraints, the node's domains) of the last refusing check
        self.valid: dict[str, list] = {}   # of the last check of a new node: key -> its valid domains, chosen first
        self._elig: dict = {}
        self._own: dict = {}    # id(class) -> ids of the filtered groups the class owns (its pods always pass)
        self._fpass: dict = {}  # (id(group), existing node id) -> does the node pass the group's node filter
        self._build(classes)

    def _build(self, classes: list):
        """Create every topology group (from pending classes and pods already on nodes) and count existing pods."""
        groups = self.groups
        filters = self._key_by_node_filter(classes)
        owners = []  # (class-or-None, constraint, selector, namespaces)
        for c in classes:
            for con, sel, nss in c.cons:
                owners.append((con, sel, nss))
        existing_owned = []
        for n in self.existing_nodes:
            facts = node_facts(n.existing, self.namespaces)
            if facts is not None:
                for con, sel, nss in facts.anti:
                    owners.append((con, sel, nss))
                    existing_owned.append((n, con))
                continue
            for p in n.existing.pods or []:
                try:
                    for con, sel, nss in T.pod_constraints(p, self.namespaces):
                        if con.kind == T.ANTI and con.required:
                            owners.append((con, sel, nss))
                            existing_owned.append((n, con))
                except ValueError:
                    continue
        for con, sel, nss in owners:
            if con.group_key not in groups:
                groups[con.group_key] = T.Group(con.kind, con.key, nss, sel, filters.get(con.group_key))
            if con.kind == T.ANTI and con.required:
                ik = (INV,) + con.group_key
                if ik not in groups:
                    groups[ik] = T.Group(INV, con.key, nss, sel)
        self.group_list = list(groups.values())
        for c in classes:
            own = {id(groups[con.group_key]) for con, _, _ in c.cons if con.group_key in filters}
            if own:
                self._own[id(c)] = own
        # memberships.  A group with matchLabels selects only pods carrying its first (sorted) pair: a pod's groups
        # are looked for among the groups indexed under one of its pairs plus those without matchLabels -- the same
        # answer as testing every group, in group_list order
        position = {id(g): i for i, g in enumerate(self.group_list)}
        loose = [g for g in self.group_list if not g.selector.labels]
        indexed: dict = {}
        for g in self.group_list:
            if g.selector.labels:
                indexed.setdefault(next(iter(sorted(g.selector.labels.items()))), []).append(g)
        by_labels: dict = {}  # classes share label sets: membership computed once per (namespace, labels)
        for c in classes:
            lk = (c.ns, tuple(sorted(c.labels.items())))
            hit = by_labels.get(lk)
            if hit is None:
                maybe = list(loose)
                for pair in lk[1]:
                    maybe.extend(indexed.get(pair, ()))
                if len(maybe) > len(loose):
                    maybe.sort(key=lambda g: position[id(g)])
                hit = by_labels[lk] = (
                    [g for g in maybe if g.kind != INV and g.matches(c.ns, c.labels)],
                    [g for g in maybe if g.kind == INV and g.matches(c.ns, c.labels)])
            c.member, c.inv = hit
            # a class some pod's (anti-)affinity or topology spread selects is placed in queue order (not bulk-packed
            # after the constrained classes), so a smaller pod that prefers or refuses its node, or spreads over it,
            # finds it already placed and counted (Karpenter's queue: larger pods first, each recorded as placed)
            c.simple = not c.cons and not c.ports and not c.inv and not any(
                g.kind in (T.AFFINITY, T.ANTI, T.SPREAD) for g in c.member)
            c.spread_eligible = {}
        # counts from existing pods; the groups a pod belongs to depend only on its namespace and labels, so they
        # are computed once per distinct (namespace, labels) and only among the groups whose first matchLabels
        # pair the pod carries (plus the groups without matchLabels): the same answer as testing every group
        direct = [g for g in self.group_list if g.kind != INV]
        unindexed = [g for g in direct if not g.selector.labels]
        by_pair: dict = {}
        for g in direct:
            if g.selector.labels:
                by_pair.setdefault(next(iter(sorted(g.selector.labels.items()))), []).append(g)
        member_of: dict = {}
        fpass = self._fpass
        for n in self.existing_nodes:
            facts = node_facts(n.existing, self.namespaces)
            if facts is not None:
                sets = facts.labelsets
            else:
                sets = []
                for p in n.existing.pods or []:
                    meta = p.get("metadata") or {}
                    ns, labels = meta.get("namespace") or "default", meta.get("labels") or {}
                    sets.append((ns, tuple(sorted(labels.items())), labels, 1))
            for ns, items, labels, count in sets:
                lk = (ns, items)
                hit = member_of.get(lk)
                if hit is None:
                    maybe = list(unindexed)
                    for pair in items:
                        maybe.extend(by_pair.get(pair, ()))
                    hit = member_of[lk] = [g for g in maybe if g.matches(ns, labels)]
                for g in hit:
                    if g.filter is not None:
                        ok = fpass.get((id(g), n.id))
                        if ok is None:
                            ok = fpass[(id(g), n.id)] = g.filter.passes_labels(n.labels, n.taints)
                        if not ok:
                            continue  # a spread counts only the pods on nodes passing its node filter
                    d = n.domains(g.key)
                    if d:
                        g.record(d[0], count)
        for n, con in existing_owned:
            d = n.domains(con.key)
            if d:
                groups[(INV,) + con.group_key].record(d[0])

    @staticmethod
    def _key_by_node_filter(classes: list) -> dict:
        """Give each class's spread constraints its node filter (``topology.node_filter``): a constraint whose filter
        does not pass every node is replaced, in the class's own ``cons``, by a copy keyed by the filter too (the
        classes sharing a constraint object may differ in node selector, affinity or tolerations).  Returns
        {group key: filter} of the filtered groups."""
        filters: dict = {}
        keyed: dict = {}  # (id(constraint), filter signature) -> the keyed copy
        made: dict = {}   # (id(constraint), id(terms), tolerations text) -> (filter or None)
        for c in classes:
            new = None
            for i, (con, sel, nss) in enumerate(c.cons):
                if con.kind != T.SPREAD or not (con.node_taints_honor or (con.node_affinity_honor and c.terms)):
                    continue
                mk = (id(con), id(c.terms), repr(c.tolerations) if con.node_taints_honor else None)
                f = made.get(mk, False)
                if f is False:
                    # the pod's own affinity: a volume's zone is not part of what the kube-scheduler filters nodes
                    # by (nor Karpenter's StrictRequirements), or a StatefulSet's 4th replica, its volume in zone a,
                    # would count zone a's pods only and be refused a node there
                    f = made[mk] = T.node_filter(con, node_terms(c.pods[0], own=True), c.tolerations)
                if f is None:
                    continue
                k = (id(con), f.sig)
                kc = keyed.get(k)
                if kc is None:
                    kc = keyed[k] = con.keyed(con.group_key + (f.sig,))
                    filters[kc.group_key] = f
                if new is None:
                    new = list(c.cons)
                new[i] = (kc, sel, nss)
            if new is not None:
                c.cons = new
        return filters

    def eligible_domains(self, c: PodClass, con) -> set:
        """Domains of ``con.key`` a pod of class ``c`` could land in by its required node affinity and node selector
        (nodeAffinityPolicy Honor; a preferred term does not count, as in Karpenter; with ``nodeAffinityPolicy:
        Ignore`` every NodePool's and node's domains that the pod's own requirement on the key allows, Karpenter's
        podDomains); nodeTaintsPolicy Ignore by default: a NodePool's domains count even when the pod does not
        tolerate its taints, as in Karpenter; with ``nodeTaintsPolicy: Honor`` only NodePools and nodes whose taints
        it tolerates)."""
        honor = con.node_taints_honor
        # the class's strict requirements: a preferred term (a preferred zone) does not shrink the domains the skew
        # is measured over (Karpenter's StrictRequirements); it only steers where the pods go while the skew allows
        strict, ssig = c.strict_reqs()
        sig = (con.key, ssig, (repr(c.tolerations), c.tolerate_pns) if honor else None, con.node_affinity_honor)
        hit = self._elig.get(sig)
        if hit is not None:
            return hit
        out = set()
        pr = strict.get(con.key)
        if not con.node_affinity_honor:
            strict = Requirements([pr]) if con.key in strict else Requirements()
        for p in self.pools:
            if p.reqs.compatible(strict) is not None:
                continue
            if honor and untolerated(c.tolerations, p.taints, c.tolerate_pns):
                continue
            reqs = p.reqs.intersection(strict)
            if con.key in (L.ZONE, L.CAPACITY_TYPE):
                out.update(p.offered_domains(con.key, reqs))
            else:
                r = reqs.get(con.key)
                if not r.complement:
                    out.update(r.values)
        for n in self.existing_nodes:
            v = n.labels.get(con.key)
            if v is not None and pr.has(v) and (not con.node_affinity_honor or labels_match(strict, n.labels) is None):
                if honor and untolerated(c.tolerations, n.taints, c.tolerate_pns):
                    continue
                out.add(v)
        self._elig[sig] = out
        return out

    @property
    def why(self) -> str:
        """The text of the constraint that refused the last :meth:`check`, with what the pods already placed make of
        it: per domain the counts of a spread, where the pods a required pod affinity needs are (or that none matches
        its selector yet), where the pods an anti-affinity keeps away already are."""
        if self._refused is None:
            return ""
        c, key, cons, options, blockers = self._refused
        # the constraint that refused the most domains (a spread whose counts allow a domain is not named for it)
        named = [b for b in blockers if b is not None]
        if len(named) < len(blockers) and len(named) * 2 <= len(blockers):
            return f"pod anti-affinity of pods already placed ({key})"
        con = max(named, key=named.count) if named else (cons[0] if cons else None)
        why = con.text if con is not None else f"pod anti-affinity of pods already placed ({key})"
        if con is not None and options:
            g = self.groups[con.group_key]
            here = f"this node can be in {' '.join(options[:8])}"
            if con.kind == T.SPREAD and key != L.HOSTNAME:
                # name the counts: a domain no NodePool can reach for this pod (e.g. a zone only a tainted NodePool
                # offers) keeps the minimum at 0
                why = f"{con.text} (pods per domain: {_counts(sorted(self.eligible_domains(c, con)), g)}; {here})"
            elif con.kind == T.AFFINITY and not g.total:
                why = f"{con.text} (no pod matches the selector, and this pod does not match it itself)"
            elif con.kind in (T.AFFINITY, T.ANTI) and key != L.HOSTNAME:
                held = sorted(d for d, n in g.counts.items() if n)
                why = f"{con.text} (matching pods in: {_counts(held, g)}; {here})"
        if not options:
            why = f"node has no {key} label ({why})"
        return why

    def check(self, c: PodClass, node: SimNode, new: bool):
        """(allowance, {key: domain}) for placing pods of ``c`` on ``node``; allowance 0 = not allowed.

        The text of the blocking constraint is left in ``self.why`` when the allowance is 0.
        """
        allow = INF
        chosen: dict[str, str] = {}
        if new:   # key -> the valid domains, the chosen one first (a new node may try the others)
            self.valid = {}
        per_key: dict[str, list] = {}
        for con in c.active_constraints():
            per_key.setdefault(con.key, []).append(con)
        inv = [g for g in c.inv if g.total]
        for g in inv:
            per_key.setdefault(g.key, [])
        groups = self.groups
        for key, cons in per_key.items():
            options = node.domains(key)
            valid = []
            blockers: list = []   # per refused domain, the constraint that refused it (None: an inverse group)
            for d in options:
                ok = True
                for con in cons:
                    g = groups[con.group_key]
                    cnt = g.counts.get(d, 0)
                    if con.kind == T.SPREAD:
                        if key == L.HOSTNAME:
                            mn = 0
                        else:
                            elig = self.eligible_domains(c, con)
                            if d not in elig:
                                ok = False
                                blockers.append(con)
                                break
                            mn = 0 if (con.min_domains and len(elig) < con.min_domains) else min(
                                (g.counts.get(e, 0) for e in elig), default=0)
                        if cnt + 1 - mn > con.max_skew:
                            ok = False
                    elif con.kind == T.AFFINITY:
                        if cnt == 0 and not (g.total == 0 and g in c.member):
                            ok = False
                    else:  # anti-affinity
                        if cnt > 0:
                            ok = False
                    if not ok:
                        blockers.append(con)
                        break
                if ok:   # the anti-affinity of pods already placed, toward this pod
                    for g in inv:
                        if g.key == key and g.counts.get(d, 0) > 0:
                            ok = False
                            blockers.append(None)
                            break
                if ok:
                    valid.append(d)
            if not valid:
                # said by ``why`` when asked (a new node's refusal)
                self._refused = (c, key, cons, options, blockers)
                return 0, chosen
            # choose: lowest count for the first spread constraint, else the first valid domain
            spread = [con for con in cons if con.kind == T.SPREAD]
            aff = [con for con in cons if con.kind == T.AFFINITY] if not spread else ()
            if spread or aff:
                g0 = groups[(spread or aff)[0].group_key]
                sign = 1 if spread else -1
                order = sorted(valid, key=lambda v: (sign * g0.counts.get(v, 0), v))
                d = order[0] if spread else max(valid, key=lambda v: (g0.counts.get(v, 0), v))
            else:
                order = valid
                d = valid[0]
            chosen[key] = d
            if new and len(valid) > 1:
                self.valid[key] = [d] + [v for v in order if v != d]
            for con in cons:
                g = groups[con.group_key]
                if g not in c.member:
                    continue
                cnt = g.counts.get(d, 0)
                if con.kind == T.SPREAD:
                    if key == L.HOSTNAME:
                        a = con.max_skew - cnt
                    else:
                        elig = self.eligible_domains(c, con)
                        mn = 0 if (con.min_domains and len(elig) < con.min_domains) else min(
                            (g.counts.get(e, 0) for e in elig), default=0)
                        a = con.max_skew + mn - cnt
                    allow = min(allow, max(a, 1))
                elif con.kind == T.ANTI:
                    allow = 1
        return allow, chosen

    def _passes(self, g, node: SimNode) -> bool:
        """Does ``node`` pass spread group ``g``'s node filter (existing nodes: their labels; planned ones: their
        requirements as they stand, Karpenter's ``nodeFilter.Matches``)?"""
        if node.fixed:
            k = (id(g), node.id)
            ok = self._fpass.get(k)
            if ok is None:
                ok = self._fpass[k] = g.filter.passes_labels(node.labels, node.taints)
            return ok
        return g.filter.passes_reqs(node.reqs, node.taints)

    def record(self, c: PodClass, node: SimNode, n: int):
        doms: dict = {}
        own = None
        for g in c.member:
            if g.filter is not None:
                if own is None:
                    own = self._own.get(id(c), ())
                # the class's own filtered groups: its pods pass by construction (they match its node affinity and
                # tolerate the node); another filter: only on a node that passes it
                if id(g) not in own and not self._passes(g, node):
                    continue
            d = doms.get(g.key)
            if d is None:
                d = doms[g.key] = node.domains(g.key)
            if len(d) == 1:
                g.record(d[0], n)
            elif g.kind == T.ANTI and d:
                for x in d:
                    g.record(x, n)
        for con in c.active_constraints():
            if con.kind == T.ANTI and con.required:
                g = self.groups[(INV,) + con.group_key]
                for x in node.domains(con.key):
                    g.record(x, n)

    def domain_filter(self, c: PodClass):
        """[(key, allowed domains or None, forbidden domains)] for the non-hostname topology of ``c`` as the
        counts stand: a planned node none of whose domains passes is refused by :meth:`check` too, so the
        node scans skip it without the full check.  None when ``c`` has no such constraint."""
        out: dict = {}
        groups = self.groups
        for con in c.active_constraints():
            if con.key == L.HOSTNAME:
                continue
            g = groups[con.group_key]
            allowed, forbidden = out.get(con.key, (None, set()))
            if con.kind == T.SPREAD:
                elig = self.eligible_domains(c, con)
                mn = 0 if (con.min_domains and len(elig) < con.min_domains) else min(
                    (g.counts.get(e, 0) for e in elig), default=0)
                ok = {d for d in elig if g.counts.get(d, 0) + 1 - mn <= con.max_skew}
                allowed = ok if allowed is None else allowed & ok
            elif con.kind == T.AFFINITY:
                if not (g.total == 0 and g in c.member):
                    ok = {d for d, k in g.counts.items() if k > 0}
                    allowed = ok if allowed is None else allowed & ok
            else:
                forbidden = forbidden | {d for d, k in g.counts.items() if k > 0}
            out[con.key] = (allowed, forbidden)
        for g in c.inv:
            if g.key != L.HOSTNAME and g.total:
                allowed, forbidden = out.get(g.key, (None, set()))
                out[g.key] = (allowed, forbidden | {d for d, k in g.counts.items() if k > 0})
        return [(k, a, f) for k, (a, f) in out.items()] or None

    @staticmethod
    def domains_pass(node: SimNode, filt) -> bool:
        for key, allowed, forbidden in filt:
            doms = node.domains(key)
            if not doms:
                continue  # left to check (it explains the missing label)
            if not any((allowed is None or d in allowed) and d not in forbidden for d in doms):
                return False
        return True


def _counts(domains: list, group) -> str:
    """``d=count`` for the first eight of ``domains`` (the group's pods there), `` ...`` when there are more."""
    return " ".join(f"{d}={group.counts.get(d, 0)}" for d in domains[:8]) + (" ..." if len(domains) > 8 else "")
