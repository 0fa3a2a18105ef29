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
"""

from __future__ import annotations

import gc
import hashlib
from dataclasses import replace

from ..api import labels as L
from ..api.kube import is_daemon_pod, pod_key
from ..api.quantity import format_resource, resource_value
from ..catalog.types import InstanceType
from . import topology as T
from .cover import min_cost_cover
from .existing_pods import matches, summarize
from .model import (EXOTIC_KEYS, EXOTIC_RESOURCES, INF, INV, TYPE_KEYS, ExistingNode, NodeClaimPlan, NodePoolInput,
                    SchedulingError, SchedulingInput, SchedulingResult, Unschedulable)
from .predicates import host_ports, labels_match, node_terms, ports_conflict
from .requirements import IN, Requirement, RequirementError, Requirements, node_selector_term
from .resources import PodSpecError, pod_requests
from .spread import SpreadRule, domain_shares
from .taints import format_taint, untolerated

__all__ = [
    "solve",
    "SchedulingInput",
    "NodePoolInput",
    "ExistingNode",
    "SchedulingResult",
    "NodeClaimPlan",
    "Unschedulable",
    "SchedulingError",
]

# --------------------------------------------------------------------------------------------------------
# internal structures
# --------------------------------------------------------------------------------------------------------
class _Type:
    __slots__ = ("it", "name", "reqs", "avail", "cap", "exotic", "offers", "min_price", "zc")

    def __init__(self, it: InstanceType, avail: tuple, cap: dict):
        self.it = it
        self.name = it.name
        self.avail = avail  # allocatable minus the pool's daemonset overhead, as a vector
        self.cap = cap
        labels = it.labels
        self.exotic = bool(labels.get(L.INSTANCE_GPU_COUNT) or labels.get(L.INSTANCE_ACCELERATOR_COUNT)
                           or "metal" in labels.get(L.INSTANCE_SIZE, "")  # metal, metal-24xl, metal-48xl, ...
                           or any(it.capacity.get(r, 0) > 0 for r in EXOTIC_RESOURCES))
        self.offers = [o for o in it.offerings if o.available]
        self.min_price = min((o.price for o in self.offers), default=INF)
        self.zc = frozenset((o.zone, o.capacity_type) for o in self.offers)
        zids = frozenset(o.zone_id for o in self.offers if o.zone_id)
        # the requirements an instance type offers depend only on its labels and offerings: cached on the object
        ck = (tuple(sorted(labels.items())), self.zc, zids)
        cached = it.__dict__.get("_scheduling_reqs")
        if cached is not None and cached[0] == ck:
            self.reqs = cached[1]
            return
        reqs = Requirements()
        for k in TYPE_KEYS:
            if k not in labels:
                reqs.add(Requirement(k, False))
        for k, v in labels.items():
            reqs.add(Requirement(L.normalize_key(k), False, (str(v),)))
        reqs.add(Requirement(L.INSTANCE_TYPE, False, (it.name,)))
        reqs.add(Requirement(L.ZONE, False, {o.zone for o in self.offers}))
        reqs.add(Requirement(L.CAPACITY_TYPE, False, {o.capacity_type for o in self.offers}))
        if zids:
            reqs.add(Requirement(L.ZONE_ID, False, zids))
        self.reqs = reqs
        it.__dict__["_scheduling_reqs"] = (ck, reqs)

    def cheapest(self, reqs: Requirements):
        z = reqs.get(L.ZONE)
        ct = reqs.get(L.CAPACITY_TYPE)
        best = None
        for o in self.offers:
            if z.has(o.zone) and ct.has(o.capacity_type) and (best is None or o.price < best.price):
                best = o
        return best


class _Pool:
    def __init__(self, npi: NodePoolInput, rindex: dict, daemonsets: list, usage: dict):
        np_ = npi.nodepool
        self.np = np_
        self.name = np_.name
        self.weight = np_.weight
        try:
            reqs = Requirements.from_list(np_.requirements)
        except RequirementError as e:
            raise SchedulingError(f"NodePool/{self.name}: spec.template.spec.requirements: {e}") from None
        reqs.add_all(Requirements.from_labels(np_.template_labels))
        reqs.add(Requirement(L.NODEPOOL, False, (self.name,)))
        self.reqs = reqs
        self.taints = list(np_.taints)
        self.startup_taints = list(np_.startup_taints)
        self.has_min_values = any(r.min_values for r in reqs)
        # daemonset overhead
        self.daemon: dict[str, int] = {}
        self.daemon_ports: frozenset = frozenset()
        for ds in daemonsets:
            tpl = ((ds.get("spec") or {}).get("template") or {})
            pod = {"metadata": tpl.get("metadata") or {}, "spec": tpl.get("spec") or {}}
            # a daemon pod does not respect PreferNoSchedule (Karpenter adds that toleration for it)
            if untolerated((pod["spec"].get("tolerations")), self.taints, True):
                continue
            dreqs_terms = node_terms(pod)
            if dreqs_terms and all(self.reqs.compatible(t) for t in dreqs_terms):
                continue
            for k, v in pod_requests(pod).items():
                self.daemon[k] = self.daemon.get(k, 0) + v
            self.daemon_ports = self.daemon_ports | host_ports(pod["spec"])
        # limits
        self.limits: dict[str, int] = {}
        for k, q in (np_.limits or {}).items():
            try:
                self.limits[k] = resource_value(k, q)
            except ValueError as e:
                raise SchedulingError(f"NodePool/{self.name}: spec.limits.{k}: {e}") from None
        self.remaining = {k: v - (usage or {}).get(k, 0) for k, v in self.limits.items()}
        # instance types compatible with the NodePool and launchable under its zone / capacity-type constraints
        dvec = [self.daemon.get(r, 0) for r in rindex]
        types = []
        for it in npi.instance_types:
            alloc = it.allocatable
            avail = tuple(alloc.get(r, 0) - d for r, d in zip(rindex, dvec))
            t = _Type(it, avail, it.capacity)
            if t.reqs.intersects(reqs) is None and t.cheapest(reqs) is not None:
                types.append(t)
        types.sort(key=lambda t: (t.cheapest(reqs).price, t.name))
        self.types = types
        self._compat: dict = {}
        self.fit_cache: dict = {}
        self._priced: dict = {}
        self._price_of: dict = {}
        self._union: dict = {}
        self._blocks: dict = {}

    def compat_types(self, reqs: Requirements) -> list[_Type]:
        """Pool types compatible with ``reqs`` (which already include the pool's) with an offering allowed by them."""
        sig = reqs.signature()
        hit = self._compat.get(sig)
        if hit is None:
            hit = [t for t in self.types if t.reqs.intersects(reqs) is None and t.cheapest(reqs) is not None]
            self._compat[sig] = hit
        return hit

    def priced(self, reqs: Requirements) -> list:
        """[(price, cheapest offering, type)] for the compatible types, cheapest first (cached per signature)."""
        sig = reqs.signature()
        hit = self._priced.get(sig)
        if hit is None:
            hit = []
            for t in self.compat_types(reqs):
                o = t.cheapest(reqs)
                hit.append((o.price, o, t))
            hit.sort(key=lambda x: (x[0], x[2].name))
            self._priced[sig] = hit
        return hit

    def priced_fitting(self, reqs: Requirements, cpu: int, mem: int, pods: int):
        """Iterate ``priced(reqs)`` skipping blocks of 32 types none of which has the cpu / memory / pods."""
        sig = reqs.signature()
        blocks = self._blocks.get(sig)
        pr = self.priced(reqs)
        if blocks is None:
            blocks = []
            for i in range(0, len(pr), 32):
                chunk = pr[i:i + 32]
                blocks.append((max(x[2].avail[0] for x in chunk), max(x[2].avail[1] for x in chunk),
                               max(x[2].avail[2] for x in chunk), i, i + len(chunk)))
            self._blocks[sig] = blocks
        for mc, mm, mp, i, j in blocks:
            if mc >= cpu and mm >= mem and mp >= pods:
                for k in range(i, j):
                    yield pr[k]

    def union(self, reqs: Requirements) -> "_Union":
        sig = reqs.signature()
        hit = self._union.get(sig)
        if hit is None:
            hit = _Union([t for _, _, t in self.priced(reqs)])
            self._union[sig] = hit
        return hit

    def price_of(self, reqs: Requirements) -> dict:
        sig = reqs.signature()
        hit = self._price_of.get(sig)
        if hit is None:
            hit = {t.name: p for p, _, t in self.priced(reqs)}
            self._price_of[sig] = hit
        return hit

    def limit_ok(self, t: _Type) -> str | None:
        for k, rem in self.remaining.items():
            need = 1 if k == "nodes" else t.cap.get(k, 0)
            if need > rem:
                return k
        return None


class _Node:
    """An existing / in-flight node (fixed) or a NodeClaim planned in this round."""

    __slots__ = ("id", "fixed", "pool", "reqs", "labels", "taints", "cap", "used", "pods", "target", "ports",
                 "limit_snapshot", "existing", "order", "keys", "dcache", "launch", "block")

    def __init__(self, id_, fixed, pool, reqs, labels, taints, cap, used):
        self.id = id_
        self.fixed = fixed
        self.pool = pool
        self.reqs = reqs
        self.labels = labels
        self.taints = taints
        self.cap = cap
        self.used = used
        self.pods: list[str] = []
        self.keys: list[str] = []
        self.target: _Type | None = None
        self.ports: set = set()
        self.limit_snapshot: dict = {}
        self.existing = None
        self.order = 0
        self.dcache = None
        self.launch = None
        self.block = None

    def domains(self, key: str):
        """Possible domains of this node for ``key`` (a tuple), () when the node has no such label."""
        if key == L.HOSTNAME:
            return (self.id,) if not self.fixed else ((self.labels.get(L.HOSTNAME, self.id)),)
        if self.fixed:
            v = self.labels.get(key)
            return (v,) if v is not None else ()
        r = self.reqs.get(key)
        if key in (L.ZONE, L.CAPACITY_TYPE):
            t = self.target
            dc = self.dcache
            if dc is not None and dc[0] is self.reqs and dc[1] is t and dc[2] == key:
                return dc[3]
            attr = "zone" if key == L.ZONE else "capacity_type"
            z = self.reqs.get(L.ZONE)
            ct = self.reqs.get(L.CAPACITY_TYPE)
            vals = {getattr(o, attr) for o in t.offers if z.has(o.zone) and ct.has(o.capacity_type)}
            out = tuple(sorted(vals))
            self.dcache = (self.reqs, t, key, out)
            return out
        if not r.complement:
            return tuple(sorted(r.values))
        if key in self.labels:
            return (self.labels[key],)
        return ()


class _Class:
    __slots__ = ("pods", "keys", "ns", "labels", "req", "vec", "terms", "term_idx", "preferred", "pref_drop",
                 "tolerations", "tolerate_pns", "cons", "dropped", "ports", "reqs", "sig", "member", "placed",
                 "sort_key", "simple", "relaxed", "spread_eligible", "errors", "inv", "zmap", "limit")

    def effective_reqs(self) -> Requirements:
        r = Requirements()
        if self.terms:
            r.add_all(self.terms[self.term_idx])
        if self.pref_drop < len(self.preferred):
            r.add_all(self.preferred[self.pref_drop][1])
        if L.ZONE_ID in r:
            # topology.k8s.aws/zone-id names one zone: also constrain the zone, so offerings, domains and the
            # plan's zone follow it (the map comes from the offerings' zone ids)
            m = self.zmap()
            if m:
                zr = r.get(L.ZONE_ID)
                r.add(Requirement(L.ZONE, False, {z for zid, z in m.items() if zr.has(zid)}))
        return r

    def hostname_blocks(self) -> bool:
        """A pod requiring kubernetes.io/hostname In [...] (or DoesNotExist) can only go to existing nodes: a new
        node's hostname is not known in advance (Karpenter gives each new NodeClaim a placeholder hostname)."""
        r = self.reqs.get(L.HOSTNAME) if L.HOSTNAME in self.reqs else None
        return r is not None and not r.complement


def _facts(en: ExistingNode):
    """The node's pods summed (``existing_pods.PodsOnNode``): the caller's when made from exactly ``en.pods``, else
    summed here (and kept on ``en``); None when a pod does not parse (the caller then reports it pod by pod)."""
    f = en.pod_facts
    if not matches(f, en.pods):
        f = en.pod_facts = summarize(en.pods or ())
    return f


# --------------------------------------------------------------------------------------------------------
# the solver
# --------------------------------------------------------------------------------------------------------
class _Solver:
    def __init__(self, inp: SchedulingInput):
        self.inp = inp
        self.max_types = max(1, int(inp.max_instance_types or 60))
        self.share_factor = 4
        self.unsched: list[Unschedulable] = []
        self._build_classes(inp.pods)
        rset = {"cpu", "memory", "pods"}
        for c in self.classes:
            rset.update(c.req)
        self.daemonsets = list(inp.daemonsets or [])
        self.rindex = ["cpu", "memory", "pods"] + sorted(rset - {"cpu", "memory", "pods"})
        self.rpos = {r: i for i, r in enumerate(self.rindex)}
        for c in self.classes:
            c.vec = tuple(c.req.get(r, 0) for r in self.rindex)
        self._exotic_idx = [self.rpos[r] for r in EXOTIC_RESOURCES if r in self.rpos]
        pools = []
        seen = set()
        for npi in inp.nodepools:
            if npi.nodepool.name in seen:
                raise SchedulingError(f"NodePool/{npi.nodepool.name}: duplicate NodePool name")
            seen.add(npi.nodepool.name)
            pools.append(_Pool(npi, self.rindex, self.daemonsets, (inp.nodepool_usage or {}).get(npi.nodepool.name)))
        pools.sort(key=lambda p: (-p.weight, p.name))
        self.pools = pools
        self.pool_by_name = {p.name: p for p in pools}
        self.nodes: list[_Node] = []  # existing first, then planned in creation order
        self.planned: list[_Node] = []
        self.open: list[_Node] = []
        self.groups: dict = {}
        self.node_by_id: dict = {}
        self._elig: dict = {}
        self._pruned_at = 0
        self._final_cache: dict = {}
        self._reqs_exotic: dict = {}
        self._text_cache: dict = {}
        self._counter = 0
        self._build_existing(inp.existing_nodes or [])
        self._build_groups()
        self._no_limits = not any(p.remaining for p in self.pools)
        self._blocks: list = []
        self._blocked = 0

    # -- input ------------------------------------------------------------------------------------------
    def _build_classes(self, pods):
        by_key: dict = {}
        shapes: dict = {}
        classes = []
        for i, pod in enumerate(pods):
            if not isinstance(pod, dict):
                raise SchedulingError(f"pods[{i}]: must be a Pod object (dict)")
            if is_daemon_pod(pod):
                continue
            meta = pod.get("metadata") or {}
            spec = pod.get("spec") or {}
            labels = meta.get("labels") or {}
            ns = meta.get("namespace") or "default"
            key = (ns, repr(sorted(labels.items())), repr(spec))
            c = by_key.get(key)
            if c is None:
                c = _Class()
                # classes that differ only in requests share their constraints: parsed once per shape
                skey = (key[0], key[1], repr(spec.get("nodeSelector")), repr(spec.get("affinity")),
                        repr(spec.get("topologySpreadConstraints")))
                try:
                    c.req = pod_requests(pod)
                    shape = shapes.get(skey)
                    if shape is None:
                        terms = node_terms(pod)
                        na = ((spec.get("affinity") or {}).get("nodeAffinity") or {})
                        prefs = []
                        for j, p in enumerate(na.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
                            prefs.append((int(p.get("weight", 1)), node_selector_term(p.get("preference"))))
                        prefs.sort(key=lambda x: -x[0])
                        shape = shapes[skey] = (terms, prefs, T.pod_constraints(pod), [])
                    c.terms, c.preferred, cons, eff = shape
                    c.ports = host_ports(spec)
                except (PodSpecError, RequirementError, ValueError) as e:
                    self.unsched.append(Unschedulable(pod_key(pod), f"invalid pod: {e}"))
                    continue
                c.pods, c.keys = [], []
                c.ns, c.labels = ns, labels
                c.term_idx = 0
                c.pref_drop = 0
                c.tolerations = spec.get("tolerations") or []
                c.tolerate_pns = False
                c.cons = cons
                c.dropped = set()
                c.placed = 0
                c.relaxed = []
                c.errors = {}
                c.zmap = self._zone_map
                c.sort_key = (-c.req.get("cpu", 0), -c.req.get("memory", 0), meta.get("creationTimestamp") or "",
                              meta.get("uid") or pod_key(pod))
                if not eff:
                    r = c.effective_reqs()
                    eff.extend((r, r.signature()))
                c.reqs, c.sig = eff
                by_key[key] = c
                classes.append(c)
            c.pods.append(pod)
            c.keys.append(pod_key(pod))
        for c in classes:
            c.limit = len(c.pods)  # how many of its pods may be placed now (lowered while a zone's share is placed)
        classes.sort(key=lambda c: c.sort_key)
        self.classes = classes

    def _vec(self, d: dict) -> list:
        return [d.get(r, 0) for r in self.rindex]

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

    def _build_existing(self, existing):
        for i, en in enumerate(existing):
            if not isinstance(en, ExistingNode):
                raise SchedulingError(f"existing_nodes[{i}]: must be an ExistingNode")
            alloc = {}
            where = f"existing_nodes[{i}] ({en.name})"
            for k, v in (en.allocatable or {}).items():
                try:
                    alloc[k] = v if isinstance(v, int) else resource_value(k, v)
                except ValueError as e:
                    raise SchedulingError(f"{where}: allocatable.{k}: {e}") from None
            used = [0] * len(self.rindex)
            extra_used = {}
            ports = set()
            facts = _facts(en)
            if facts is not None:
                for k, v in facts.used.items():
                    if k in self.rpos:
                        used[self.rpos[k]] += v
                    else:
                        extra_used[k] = extra_used.get(k, 0) + v
                ports = set(facts.ports)
            for j, p in enumerate(() if facts is not None else en.pods or []):
                try:
                    for k, v in pod_requests(p).items():
                        if k in self.rpos:
                            used[self.rpos[k]] += v
                        else:
                            extra_used[k] = extra_used.get(k, 0) + v
                    ports |= host_ports(p.get("spec") or {})
                except (PodSpecError, ValueError, AttributeError) as e:
                    raise SchedulingError(f"{where}: pods[{j}] {pod_key(p) if isinstance(p, dict) else ''}: {e}") from None
            labels = dict(en.labels or {})
            labels = {L.normalize_key(k): str(v) for k, v in labels.items()}
            labels.setdefault(L.HOSTNAME, en.name)
            if en.zone and L.ZONE not in labels:
                labels[L.ZONE] = en.zone
            if en.capacity_type and L.CAPACITY_TYPE not in labels:
                labels[L.CAPACITY_TYPE] = en.capacity_type
            if en.instance_type and L.INSTANCE_TYPE not in labels:
                labels[L.INSTANCE_TYPE] = en.instance_type
            if en.nodepool and L.NODEPOOL not in labels:
                labels[L.NODEPOOL] = en.nodepool
            n = _Node(en.name, True, self.pool_by_name.get(en.nodepool or labels.get(L.NODEPOOL, "")), None, labels,
                      list(en.taints or []), tuple(alloc.get(r, 0) for r in self.rindex), used)
            n.ports = ports
            n.existing = en
            self.nodes.append(n)
        self.existing_nodes = list(self.nodes)

    def _build_groups(self):
        """Create every topology group (from pending classes and pods already on nodes) and count existing pods."""
        groups = self.groups
        owners = []  # (class-or-None, constraint, selector, namespaces)
        for c in self.classes:
            for con, sel, nss in c.cons:
                owners.append((con, sel, nss))
        existing_owned = []
        for n in self.existing_nodes:
            facts = _facts(n.existing)
            if facts is not None:
                for con, sel, nss in facts.anti:
                    owners.append((con, sel, nss))
                    existing_owned.append((n, con))
                continue
            for p in n.existing.pods or []:
                try:
                    for con, sel, nss in T.pod_constraints(p):
                        if con.kind == T.ANTI and con.required:
                            owners.append((con, sel, nss))
                            existing_owned.append((n, con))
                except ValueError:
                    continue
        for con, sel, nss in owners:
            if con.group_key not in groups:
                groups[con.group_key] = T.Group(con.kind, con.key, nss, sel)
            if con.kind == T.ANTI and con.required:
                ik = (INV,) + con.group_key
                if ik not in groups:
                    groups[ik] = T.Group(INV, con.key, nss, sel)
        self.group_list = list(groups.values())
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
        for c in self.classes:
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
            # a class some pod's (anti-)affinity selects is placed in queue order (not bulk-packed after the
            # constrained classes), so a smaller pod that prefers or refuses its node finds it already placed
            c.simple = not c.cons and not c.ports and not c.inv and not any(
                g.kind in (T.AFFINITY, T.ANTI) for g in c.member)
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
        for n in self.existing_nodes:
            facts = _facts(n.existing)
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
                    d = n.domains(g.key)
                    if d:
                        g.record(d[0], count)
        for n, con in existing_owned:
            d = n.domains(con.key)
            if d:
                groups[(INV,) + con.group_key].record(d[0])

    # -- topology ----------------------------------------------------------------------------------------
    def _active_constraints(self, c: _Class):
        for i, (con, sel, nss) in enumerate(c.cons):
            if i in c.dropped:
                continue
            yield con

    def _eligible_domains(self, c: _Class, con) -> set:
        """Domains of ``con.key`` a pod of class ``c`` could land in (nodeAffinityPolicy Honor; nodeTaintsPolicy
        Ignore by default: a NodePool's domains count even when the pod does not tolerate its taints, as in
        Karpenter; with ``nodeTaintsPolicy: Honor`` only NodePools and nodes whose taints it tolerates)."""
        honor = con.node_taints_honor
        sig = (con.key, c.sig, (repr(c.tolerations), c.tolerate_pns) if honor else None)
        hit = self._elig.get(sig)
        if hit is not None:
            return hit
        out = set()
        pr = c.reqs.get(con.key)
        for p in self.pools:
            if p.reqs.compatible(c.reqs) is not None:
                continue
            if honor and untolerated(c.tolerations, p.taints, c.tolerate_pns):
                continue
            reqs = p.reqs.intersection(c.reqs)
            if con.key in (L.ZONE, L.CAPACITY_TYPE):
                z, ct = reqs.get(L.ZONE), reqs.get(L.CAPACITY_TYPE)
                for t in p.compat_types(reqs):
                    for o in t.offers:
                        if z.has(o.zone) and ct.has(o.capacity_type):
                            out.add(o.zone if con.key == L.ZONE else o.capacity_type)
            else:
                r = reqs.get(con.key)
                if not r.complement:
                    out.update(r.values)
        for n in self.existing_nodes:
            v = n.labels.get(con.key)
            if v is not None and pr.has(v) and labels_match(c.reqs, n.labels) is None:
                if honor and untolerated(c.tolerations, n.taints, c.tolerate_pns):
                    continue
                out.add(v)
        self._elig[sig] = out
        return out

    def _topology(self, c: _Class, node: _Node, new: bool):
        """(allowance, {key: domain}) for placing pods of ``c`` on ``node``; allowance 0 = not allowed.

        The text of the blocking constraint is left in ``self._why`` when the allowance is 0.
        """
        allow = INF
        chosen: dict[str, str] = {}
        per_key: dict[str, list] = {}
        for con in self._active_constraints(c):
            per_key.setdefault(con.key, []).append(con)
        inv = [g for g in c.inv if g.total]
        for g in inv:
            per_key.setdefault(g.key, [])
        groups = self.groups
        for key, cons in per_key.items():
            options = node.domains(key)
            valid = []
            for d in options:
                ok = True
                for g in inv:
                    if g.key == key and g.counts.get(d, 0) > 0:
                        ok = False
                        break
                if not ok:
                    continue
                for con in cons:
                    g = groups[con.group_key]
                    cnt = g.counts.get(d, 0)
                    if con.kind == T.SPREAD:
                        if key == L.HOSTNAME:
                            mn = 0
                        else:
                            elig = self._eligible_domains(c, con)
                            if d not in elig:
                                ok = False
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
                        break
                if ok:
                    valid.append(d)
            if not valid:
                self._why = next((con.text for con in cons), f"pod anti-affinity of pods already placed ({key})")
                sp = next((con for con in cons if con.kind == T.SPREAD), None)
                if sp is not None and key != L.HOSTNAME and options:
                    # name the counts: a domain no NodePool can reach for this pod (e.g. a zone only a tainted
                    # NodePool offers) keeps the minimum at 0
                    g = groups[sp.group_key]
                    elig = sorted(self._eligible_domains(c, sp))
                    cnt = " ".join(f"{d}={g.counts.get(d, 0)}" for d in elig[:8]) + (" ..." if len(elig) > 8 else "")
                    self._why = f"{sp.text} (pods per domain: {cnt}; this node can be in {' '.join(options[:8])})"
                if not options:
                    self._why = f"node has no {key} label ({self._why})"
                return 0, chosen
            # choose: lowest count for the first spread constraint, else the first valid domain
            spread = [con for con in cons if con.kind == T.SPREAD]
            if spread:
                g0 = groups[spread[0].group_key]
                d = min(valid, key=lambda v: (g0.counts.get(v, 0), v))
            else:
                aff = [con for con in cons if con.kind == T.AFFINITY]
                if aff:
                    g0 = groups[aff[0].group_key]
                    d = max(valid, key=lambda v: (g0.counts.get(v, 0), v))
                else:
                    d = valid[0]
            chosen[key] = d
            for con in cons:
                g = groups[con.group_key]
                if g not in c.member:
                    continue
                cnt = g.counts.get(d, 0)
                if con.kind == T.SPREAD:
                    if key == L.HOSTNAME:
                        a = con.max_skew - cnt
                    else:
                        elig = self._eligible_domains(c, con)
                        mn = 0 if (con.min_domains and len(elig) < con.min_domains) else min(
                            (g.counts.get(e, 0) for e in elig), default=0)
                        a = con.max_skew + mn - cnt
                    allow = min(allow, max(a, 1))
                elif con.kind == T.ANTI:
                    allow = 1
        return allow, chosen

    def _record(self, c: _Class, node: _Node, n: int):
        doms: dict = {}
        for g in c.member:
            d = doms.get(g.key)
            if d is None:
                d = doms[g.key] = node.domains(g.key)
            if len(d) == 1:
                g.record(d[0], n)
            elif g.kind == T.ANTI and d:
                for x in d:
                    g.record(x, n)
        for con in self._active_constraints(c):
            if con.kind == T.ANTI and con.required:
                g = self.groups[(INV,) + con.group_key]
                for x in node.domains(con.key):
                    g.record(x, n)

    # -- placement ---------------------------------------------------------------------------------------
    def _fit_count(self, vec, cap, used) -> int:
        n = INF
        for v, a, u in zip(vec, cap, used):
            if v:
                k = (a - u) // v
                if k < n:
                    n = k
                    if n <= 0:
                        return 0
        return n

    def _place(self, c: _Class, node: _Node, n: int):
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
        self._record(c, node, n)

    def _try_node(self, c: _Class, node: _Node, limit: int = INF, grow: bool = False, over: _Type | None = None) -> int:
        """Place as many remaining pods of ``c`` as fit on ``node`` (at most ``limit``); returns how many.

        ``grow``: a planned node too small for one more pod may move to a larger compatible type.
        ``over``: place only within this type (the node's launch type) and make it the node's target."""
        remaining = min(c.limit - c.placed, limit)
        n = self._fit_count(c.vec, node.cap if over is None else over.avail, node.used)
        if n <= 0:
            if not grow or node.fixed or not self._grow(c, node):
                return 0
            n = self._fit_count(c.vec, node.cap, node.used)
        if c.ports:
            if ports_conflict(node.ports, c.ports):
                return 0
            n = 1
        if node.fixed:
            if untolerated(c.tolerations, node.taints, c.tolerate_pns):
                return 0
            if labels_match(c.reqs, node.labels) is not None:
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
            allow, chosen = self._topology(c, node, False)
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
            if self._min_values_error(node.pool, new_reqs or node.reqs, used) is not None:
                return 0
        if over is not None:
            fr = new_reqs if new_reqs is not None else node.reqs
            if over.reqs.intersects(fr) is not None or over.cheapest(fr) is None:
                return 0
            node.target = over
            node.cap = over.avail
        if new_reqs is not None and not node.fixed:
            node.reqs = new_reqs
        self._place(c, node, n)
        return n

    def _grow(self, c: _Class, node: _Node) -> bool:
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

    def _min_values_error(self, pool: _Pool, reqs: Requirements, used) -> str | None:
        types = [t for t in pool.compat_types(reqs) if all(a >= u for a, u in zip(t.avail, used))]
        for r in reqs:
            if r.min_values:
                vals = {t.reqs.get(r.key).any_value() for t in types} - {None}
                if len(vals) < r.min_values:
                    return f"minValues {r.min_values} for {r.key} not met ({len(vals)} values left)"
        return None

    def _fitting(self, pool: _Pool, reqs: Requirements, c: _Class):
        """(types compatible with ``reqs`` that hold one pod of ``c``, exotic ones dropped unless wanted, _Union)."""
        key = (reqs.signature(), c.vec, _wants_exotic(c))
        hit = pool.fit_cache.get(key)
        if hit is None:
            vec = c.vec
            v0, v1 = vec[0], vec[1]
            rest = [(i, v) for i, v in enumerate(vec) if i > 1 and v]
            fitting = [t for p, _, t in pool.priced(reqs) if t.avail[0] >= v0 and t.avail[1] >= v1
                       and all(t.avail[i] >= v for i, v in rest)]
            if not key[2]:
                plain = [t for t in fitting if not t.exotic]
                if plain:
                    fitting = plain
            hit = (fitting, pool.union(reqs), {})
            pool.fit_cache[key] = hit
        return hit

    def _new_node(self, c: _Class, pool: _Pool, why: list) -> int:
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
        fitting, union, best_cache = self._fitting(pool, reqs, c)
        if not fitting:
            types = pool.compat_types(reqs)
            if not types:
                why.append(f"no instance type in NodePool {pool.name} matches {_describe(c.reqs) or 'its requirements'}")
            else:
                why.append(f"no instance type in NodePool {pool.name} has {self._blocking(c, types)}"
                           + (f" with {_describe(c.reqs)}" if len(c.reqs) else ""))
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
            err = self._min_values_error(pool, reqs, vec)
            if err:
                why.append(f"NodePool {pool.name}: {err}")
                return 0
        node = _Node(f"{pool.name}#{self._counter}", False, pool, reqs, {}, pool.taints, None, [0] * len(vec))
        node.ports = set(pool.daemon_ports)
        remaining = c.limit - c.placed
        allow = INF
        if c.cons or c.inv:
            node.target = union
            allow, chosen = self._topology(c, node, True)
            if allow <= 0:
                why.append(f"NodePool {pool.name}: {self._why}")
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
                    fitting, union, best_cache = self._fitting(pool, reqs, c)
                if not fitting:
                    why.append(f"NodePool {pool.name}: no instance type offered in {_describe(Requirements(extra))}")
                    return 0
        self._counter += 1
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
                m = min(self._fit_count(vec, t.avail, zero), size_k)
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
        n = min(self._fit_count(vec, best.avail, node.used), k)
        self._place(c, node, n)
        self.nodes.append(node)
        self.planned.append(node)
        self.open.append(node)
        self.node_by_id[node.id] = node
        return n

    def _blocking(self, c: _Class, types) -> str:
        parts = []
        for i, r in enumerate(self.rindex):
            v = c.vec[i]
            if v and not any(t.avail[i] >= v for t in types):
                parts.append(f"{r}={format_resource(r, v)}")
        if not parts:
            parts = [", ".join(f"{r}={format_resource(r, c.vec[i])}" for i, r in enumerate(self.rindex) if c.vec[i] and r != "pods")
                     + " together"]
        return ", ".join(parts) + " (+ daemonset overhead)"

    def _schedule_class(self, c: _Class, window: int = 24, new_nodes: bool = True) -> bool:
        """One attempt for the remaining pods of ``c``; True if all are placed.  ``new_nodes`` False: only existing,
        in-flight and already planned nodes."""
        why: list[str] = []
        total = c.limit
        # existing and in-flight nodes first
        for node in self.existing_nodes:
            if c.placed >= total:
                return True
            while c.placed < total and self._try_node(c, node):
                pass
        # NodeClaims planned in this round: for required hostname affinity the nodes already holding a match,
        # else a window of the most recent ones that still have room
        if c.placed < total and self.planned:
            self._prune_open()
            cands = self.open[-window:] if window else []
            grow = False
            for con in self._active_constraints(c):
                if con.kind == T.AFFINITY and con.key == L.HOSTNAME:
                    g = self.groups[con.group_key]
                    if g.total:
                        cands = [self.node_by_id[d] for d, k in g.counts.items() if k and d in self.node_by_id]
                        grow = True
                    break
            v0, v1 = c.vec[0], c.vec[1]
            # hostname anti-affinity / spread counts that already rule a planned node out (checked inline)
            hchecks = [(self.groups[con.group_key].counts, 1 if con.kind == T.ANTI else con.max_skew)
                       for con in self._active_constraints(c) if con.key == L.HOSTNAME and con.kind != T.AFFINITY]
            hchecks += [(g.counts, 1) for g in c.inv if g.key == L.HOSTNAME]
            # several passes: a node narrowed to one zone by a spread pod can take more once the other zones
            # caught up
            for _ in range(16):
                start = c.placed
                filt = self._domain_filter(c) if (c.cons or c.inv) else None
                for node in cands:
                    cap, used = node.cap, node.used
                    if cap[0] - used[0] < v0 or cap[1] - used[1] < v1 or cap[2] <= used[2]:
                        continue  # no room (checked inline: most windowed nodes are full for most classes)
                    if hchecks and any(cnt.get(node.id, 0) >= th for cnt, th in hchecks):
                        continue
                    if filt and not self._domains_pass(node, filt):
                        continue
                    before = c.placed
                    while c.placed < total and self._try_node(c, node):
                        pass
                    if filt and c.placed > before:
                        filt = self._domain_filter(c)
                if not grow and c.placed < total and self._no_limits and len(self.open) > window:
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
                                t0 = self._launch_type(node)
                            if t0 is False:
                                continue
                            cap, used = t0.avail, node.used
                            if cap[0] - used[0] < v0 or cap[1] - used[1] < v1 or cap[2] <= used[2]:
                                continue
                            if hchecks and any(cnt.get(node.id, 0) >= th for cnt, th in hchecks):
                                continue
                            if filt and not self._domains_pass(node, filt):
                                continue
                            before = c.placed
                            while c.placed < total and self._try_node(c, node, over=t0):
                                pass
                            if filt and c.placed > before:
                                filt = self._domain_filter(c)
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
                    while c.placed < total and self._try_node(c, node, grow=True):
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

    def _domain_filter(self, c: _Class):
        """[(key, allowed domains or None, forbidden domains)] for the non-hostname topology of ``c`` as the
        counts stand: a planned node none of whose domains passes is refused by ``_topology`` too, so the
        node scans skip it without the full check.  None when ``c`` has no such constraint."""
        out: dict = {}
        groups = self.groups
        for con in self._active_constraints(c):
            if con.key == L.HOSTNAME:
                continue
            g = groups[con.group_key]
            allowed, forbidden = out.get(con.key, (None, set()))
            if con.kind == T.SPREAD:
                elig = self._eligible_domains(c, con)
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
    def _domains_pass(node: _Node, filt) -> bool:
        for key, allowed, forbidden in filt:
            doms = node.domains(key)
            if not doms:
                continue  # left to _topology (it explains the missing label)
            if not any((allowed is None or d in allowed) and d not in forbidden for d in doms):
                return False
        return True

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
                t0 = self._launch_type(node)
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
            mins = self._min_vec
            keep = []
            for n in self.open:
                if all(a - u >= m for a, u, m in zip(n.cap, n.used, mins) if m):
                    keep.append(n)
            self.open = keep
            self._pruned_at = len(keep)

    # -- topology spread in bulk ----------------------------------------------------------------------------
    def _spread_key(self, c: _Class):
        """(key, [spread constraints on it]) when ``c`` can be placed by domain shares: an active spread constraint
        on a key other than the hostname that selects the class itself, no pod (anti-)affinity on that key, no host
        ports, and no NodePool limits (a limit could leave one domain short after the others took their share).
        Else None."""
        if c.ports or not self._no_limits or c.hostname_blocks():
            return None
        key = None
        for con in self._active_constraints(c):
            if con.kind == T.SPREAD and con.key != L.HOSTNAME and self.groups[con.group_key] in c.member:
                key = con.key
                break
        if key is None:
            return None
        cons = []
        for con in self._active_constraints(c):
            if con.key != key:
                continue
            if con.kind != T.SPREAD:
                return None
            cons.append(con)
        if any(g.key == key and g.total for g in c.inv):
            return None
        return key, cons

    def _domain_hosts(self, c: _Class, key: str, d: str) -> bool:
        """Whether one pod of ``c`` could be placed in domain ``d`` of ``key``: an existing node there with room, or a
        NodePool with a fitting instance type offered there."""
        for n in self.existing_nodes:
            if n.labels.get(key) == d and self._fit_count(c.vec, n.cap, n.used) > 0 \
                    and not untolerated(c.tolerations, n.taints, c.tolerate_pns) and labels_match(c.reqs, n.labels) is None:
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
            if self._fitting(pool, reqs, c)[0]:
                return True
        return False

    def _place_spread_shares(self, c: _Class) -> None:
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
            g = self.groups[con.group_key]
            elig = self._eligible_domains(c, con)
            rules.append(SpreadRule(dict(g.counts), con.max_skew, set(elig), con.min_domains, g in c.member))
            domains = set(elig) if domains is None else domains & elig
        hosts = [d for d in sorted(domains or ()) if self._domain_hosts(c, key, d)]
        shares = domain_shares(left, hosts, rules)
        if sum(shares.values()) < 2:
            return
        saved = (c.reqs, c.sig, c.dropped, c.limit, c.simple)
        idx = {i for i, (con, _, _) in enumerate(c.cons) if con in cons}
        c.dropped = set(c.dropped) | idx
        c.simple = (not any(True for _ in self._active_constraints(c)) and not c.inv
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
                if not self._schedule_class(c, window=0, new_nodes=False):
                    if c.simple:
                        self._pack_fresh([c])
                    else:
                        self._schedule_class(c)
                if c.placed < c.limit:
                    break  # this domain fell short: the rest go pod by pod
        finally:
            c.reqs, c.sig, c.dropped, c.limit, c.simple = saved

    # -- relaxation ---------------------------------------------------------------------------------------
    def _relax(self, c: _Class) -> str | None:
        if c.terms and c.term_idx < len(c.terms) - 1:
            c.term_idx += 1
            c.reqs = c.effective_reqs()
            c.sig = c.reqs.signature()
            return "required node affinity term dropped"
        for kind, label in ((T.AFFINITY, "preferred pod affinity"), (T.ANTI, "preferred pod anti-affinity")):
            cand = [(con.weight, -i, i) for i, (con, _, _) in enumerate(c.cons)
                    if con.kind == kind and not con.required and i not in c.dropped]
            if cand:
                c.dropped.add(max(cand)[2])
                return f"{label} dropped"
        if c.pref_drop < len(c.preferred):
            c.pref_drop += 1
            c.reqs = c.effective_reqs()
            c.sig = c.reqs.signature()
            return "preferred node affinity dropped"
        for i, (con, _, _) in enumerate(c.cons):
            if con.kind == T.SPREAD and not con.required and i not in c.dropped:
                c.dropped.add(i)
                return "ScheduleAnyway topology spread dropped"
        if not c.tolerate_pns:
            c.tolerate_pns = True
            return "PreferNoSchedule taints tolerated"
        return None

    # -- bulk packing of unconstrained classes -------------------------------------------------------------
    def _pack_simple(self, classes: list[_Class]):
        """Pack unconstrained classes: fill planned nodes' free room, then open LP-sized nodes."""
        # group by placement signature: requirements + tolerations
        groups: dict = {}
        for c in classes:
            key = (c.reqs.signature(), repr(c.tolerations), c.tolerate_pns)
            groups.setdefault(key, []).append(c)
        for cl in groups.values():
            self._pack_group(cl)

    def _pack_group(self, cl: list[_Class]):
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
            t0 = node.launch if node.launch is not None else self._launch_type(node)
            if t0 is not False and t0 is not None and self._fit_count(self._min_vec, t0.avail, node.used) > 0:
                self._fill(node, live, over=t0)
        self._pack_fresh([c for c in cl if left(c)])

    def _pack_fresh(self, live: list[_Class]):
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
                self._schedule_class(c)

    def _pack_new(self, pool: _Pool, live: list):
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
        exotic_ok = any(_wants_exotic(x) for x in live)
        types = [(p, t) for p, _, t in pool.priced(reqs) if all(a >= v for a, v in zip(t.avail, minvec))]
        if not exotic_ok:
            types = [(p, t) for p, t in types if not t.exotic] or types
        if not types:
            return
        # two ways to value a pod: its share of the 2-resource LP's dual prices of CPU and memory, and what it
        # costs packed alone; the packing is planned under each and the cheaper plan is kept
        # one request vector and no limits: the exact cheapest cover (the greedy fills below can only tie it)
        exact = _cover_plan(types, counts, self._fit_count) if len(counts) == 1 and not pool.remaining else None
        plans = [exact] if exact is not None else []
        if exact is None:
            demand = [sum(v[i] * k for v, k in counts.items()) for i in range(2)]
            y0, y1 = _lp_duals([(t, t.avail[0], t.avail[1], p) for p, t in types], max(1, demand[0]), max(1, demand[1]))
            for values in ({v: y0 * v[0] + y1 * v[1] for v in counts}, _standalone_values(types, counts)):
                values = {v: u for v, u in values.items() if u > 0}
                if values:
                    plans.append(self._plan_new(pool, types, dict(counts), values))
        if not plans:
            return
        best = min(plans, key=lambda x: (-x[1], x[2]))  # most pods placed, then cheapest
        plan = best[0] if pool.remaining else _repack(best[0], types)
        for t, taken, reps in plan:
            for _ in range(reps):
                node = _Node(f"{pool.name}#{self._counter}", False, pool, reqs, {}, pool.taints, t.avail, [0] * nres)
                node.ports = set(pool.daemon_ports)
                self._counter += 1
                node.target = t
                node.limit_snapshot = dict(pool.remaining)
                for lk in pool.remaining:
                    pool.remaining[lk] -= 1 if lk == "nodes" else t.cap.get(lk, 0)
                for v, k in taken.items():
                    cl = buckets[v]
                    while k:
                        x = cl[0]
                        m = min(k, x.limit - x.placed)
                        self._place(x, node, m)
                        k -= m
                        if x.placed >= x.limit:
                            cl.pop(0)
                self.nodes.append(node)
                self.planned.append(node)
                self.open.append(node)
                self.node_by_id[node.id] = node

    def _plan_new(self, pool: _Pool, types: list, counts: dict, values: dict):
        """Plan new nodes for ``counts`` ({request vector: pods}) greedily: each step opens the type whose
        simulated fill is worth the most per dollar (pods valued at ``values``) and repeats that fill while the
        pods last.  Returns ([(type, {vector: pods per node}, nodes)], pods placed, cost); nothing is changed."""
        ubs = _value_bounds(types, values)
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
                sim = _simulate(current[1].avail, counts, values, sims)
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
                    s = _simulate(av, counts, values, sims)
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
            cost += _shrunk_price(types, taken, shrink) * reps
            for v, k in taken.items():
                counts[v] -= k * reps
                placed += k * reps
                if not counts[v]:
                    del counts[v]
        return plan, placed, cost

    def _fill(self, node: _Node, live: list, over: _Type | None = None):
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
            nfit = self._fit_count(best, cap, used)
            # chunk: a slice of what fits, so the balance can be corrected as the node fills
            want = min(nfit, max(1, nfit // 6), c.limit - c.placed)
            got = self._try_node(c, node, want, over=over)
            if not got:
                blocked.add(best)
                continue
            if c.placed >= c.limit:
                cls.pop(0)
                if not cls:
                    del buckets[best]

    # -- main -----------------------------------------------------------------------------------------------
    def run(self) -> SchedulingResult:
        self._inv_any = any(g.kind == INV for g in self.group_list)
        if self.classes:
            self._min_vec = [min(c.vec[i] for c in self.classes) for i in range(len(self.rindex))]
        pending = list(self.classes)
        progress = True
        while pending and progress:
            progress = False
            hard = [c for c in pending if not c.simple]
            simple = [c for c in pending if c.simple]
            for c in hard:
                before = c.placed
                self._place_spread_shares(c)
                while not self._schedule_class(c):
                    step = self._relax(c)
                    if step is None:
                        break
                    c.relaxed.append(step)
                if c.placed > before:
                    progress = True
            if simple:
                before = sum(c.placed for c in simple)
                self._pack_simple(simple)
                for c in simple:
                    while c.placed < len(c.pods) and not self._schedule_class(c):
                        step = self._relax(c)
                        if step is None:
                            break
                        c.relaxed.append(step)
                if sum(c.placed for c in simple) > before:
                    progress = True
            pending = [c for c in pending if c.placed < len(c.pods)]
        return self._result(pending)

    def _result(self, pending) -> SchedulingResult:
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
    def _option_bounds(node: _Node) -> dict | None:
        """On a NodePool with limits: per limited resource, what this NodeClaim was charged (its sizing type's
        capacity; ``nodes`` 1).  No option of its plan may count more, so the largest option of every NodeClaim
        (what Karpenter subtracts, and what the provisioner reserves) still fits in the limits."""
        if not node.limit_snapshot:
            return None
        cap = node.target.cap
        return {k: (1 if k == "nodes" else cap.get(k, 0)) for k in node.limit_snapshot}

    def _final_types(self, node: _Node, wants_exotic: bool):
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
        keep = _truncate([t for _, _, t in priced], reqs, self.max_types)
        return priced[0], keep, Requirement(L.INSTANCE_TYPE, False, {t.name for t in keep})

    def _final_lookup(self, node: _Node):
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

    def _launch_type(self, node: _Node) -> _Type | None:
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

    def _finalize(self, node: _Node) -> NodeClaimPlan:
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


class _ZC:
    __slots__ = ("zone", "capacity_type")

    def __init__(self, zone, capacity_type):
        self.zone = zone
        self.capacity_type = capacity_type


class _Union:
    """Stand-in target for a fresh node: the distinct (zone, capacity type) pairs the fitting types offer."""

    def __init__(self, types):
        pairs = set()
        for zc in {t.zc for t in types}:
            pairs |= zc
        self.offers = [_ZC(z, ct) for z, ct in sorted(pairs)]


def _truncate(types: list, reqs: Requirements, n: int) -> list:
    """The cheapest ``n`` types, keeping enough distinct values for every minValues requirement."""
    if len(types) <= n:
        return types
    keep = list(types[:n])
    for r in reqs:
        if not r.min_values:
            continue
        vals = {t.reqs.get(r.key).any_value() for t in keep}
        if len(vals) >= r.min_values:
            continue
        for t in types[n:]:
            v = t.reqs.get(r.key).any_value()
            if v not in vals:
                # replace the most expensive type whose value is duplicated
                for j in range(len(keep) - 1, -1, -1):
                    vj = keep[j].reqs.get(r.key).any_value()
                    if sum(1 for x in keep if x.reqs.get(r.key).any_value() == vj) > 1:
                        keep.pop(j)
                        break
                keep.append(t)
                vals.add(v)
                if len(vals) >= r.min_values:
                    break
    return keep


def _wants_exotic(c: _Class) -> bool:
    hit = c.errors.get("exotic")
    if hit is not None and hit[0] is c.sig:
        return hit[1]
    v = _wants_exotic_uncached(c)
    c.errors["exotic"] = (c.sig, v)
    return v


def _wants_exotic_uncached(c: _Class) -> bool:
    if any(c.req.get(r, 0) for r in EXOTIC_RESOURCES):
        return True
    for k in EXOTIC_KEYS:
        if k in c.reqs:
            r = c.reqs.get(k)
            if not r.is_empty() and r.operator not in ("NotIn", "DoesNotExist"):
                return True
    return False


def _describe(reqs: Requirements) -> str:
    parts = []
    for r in reqs:
        if r.operator == IN and len(r.values) == 1:
            parts.append(f"{r.key}={next(iter(r.values))}")
        else:
            parts.append(str(r))
    return ", ".join(sorted(parts))


def _shrunk_price(types: list, taken: dict, cache: dict) -> float:
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


def _cover_plan(types: list, counts: dict, fit_count):
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
            cost += _shrunk_price(types, {v: take}, shrink)
    return plan, q, cost


def _repack(plan: list, types: list) -> list:
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


def _standalone_values(types: list, counts: dict) -> dict:
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


def _value_bounds(types: list, values: dict) -> dict:
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


def _simulate(cap, counts: dict, values: dict, cache: dict | None = None):
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
    a = _simulate_fill(cap, counts, values, False)
    b = _simulate_fill(cap, counts, values, True)
    out = a if a[1] >= b[1] else b
    if cache is not None:
        cache[key] = out
    return out


def _simulate_fill(cap, counts: dict, values: dict, density: bool):
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


def _lp_duals(items, C: float, M: float):
    """Dual prices (per CPU unit, per memory unit) of the 2-resource covering LP."""
    sol = _lp_pair(items, C, M)
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


def _lp_pair(items, C: float, M: float):
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
            unlimited = _solve_within_limits_unconstrained(inp)
            if unlimited is not None:
                return unlimited
        return _Solver(inp).run()
    finally:
        if enabled:
            gc.enable()


# A NodeClaim of a limited NodePool keeps only options up to this many times its cheapest option's capacity in
# each limited resource, so what it counts against the limits (its largest option) stays close to what it uses.
LIMITED_OPTION_SPREAD = 2


def _solve_within_limits_unconstrained(inp: SchedulingInput) -> SchedulingResult | None:
    """Plan as if the NodePools had no limits; keep that plan when it stays within them anyway.

    Limits make the packer conservative (each NodeClaim of a limited NodePool is charged its largest option as
    it is created, as Karpenter does, so nodes are sized for their own pods).  Most NodePools' limits are far
    from binding in one round: then the unconstrained plan, with each NodeClaim's options trimmed to sizes near
    its cheapest, is both cheaper and within the limits (every NodeClaim charged its largest remaining option,
    what the provisioner reserves).  None when it would not fit, or when minValues forbid trimming.
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
    res = _Solver(replace(inp, nodepools=pools)).run()
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


# the private names other modules import from here (until their owners move to the public ones)
_labels_match = labels_match
_host_ports = host_ports
