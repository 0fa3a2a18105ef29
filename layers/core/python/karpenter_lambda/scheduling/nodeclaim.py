"""NodeClaim templates: what a new node of a NodePool may be (Karpenter's ``NodeClaimTemplate`` and the instance-type
filtering of ``nodeclaim.go``).

A :class:`NodeClaimTemplate` is one NodePool as the solver sees it: its requirements (with its template labels and
its name), taints, the DaemonSet overhead every node of it carries, its limits (what is left of them) and its
instance types as :class:`InstanceTypeOption` s (allocatable minus that overhead, the requirements each type offers,
its available offerings), kept only when compatible with the NodePool and launchable under its zone /
capacity-type constraints, cheapest first.  Per requirement signature it caches the compatible types, their prices
and the types that hold one pod of a request vector (:meth:`NodeClaimTemplate.fitting`).

:meth:`NodeClaimTemplate.offers_holding` answers the sizing question outside the solver (consolidation's replacement
node): every (type, offering) that holds given requests under given requirements, cheapest first.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from ..api import labels as L
from ..api.quantity import resource_value
from ..catalog.types import InstanceType, Offering
from . import template_cache
from .model import EXOTIC_RESOURCES, INF, TYPE_KEYS, NodePoolInput, SchedulingError
from .predicates import host_ports, labels_match, node_terms
from .requirements import IN, Requirement, RequirementError, Requirements
from .resources import pod_requests
from .taints import untolerated

__all__ = [
    "NodeClaimTemplate",
    "InstanceTypeOption",
    "TemplateOffer",
    "OfferSet",
    "truncate",
    "relaxed_min_values",
    "describe",
]

BASE_RESOURCES = ("cpu", "memory", "pods")


@dataclass(frozen=True)
class TemplateOffer:
    """One way to launch a node of a template: the instance type, the offering (zone, capacity type, price) and
    the labels the node would carry."""

    price: float
    instance_type: InstanceType
    offering: Offering
    labels: dict


class InstanceTypeOption:
    """An instance type as a NodeClaim template offers it: allocatable minus the NodePool's DaemonSet overhead
    (``avail``, a vector), capacity, the requirements it offers, its available offerings and cheapest price."""
    __slots__ = ("it", "name", "reqs", "avail", "cap", "exotic", "offers", "min_price", "zc", "by_price")

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
        self.by_price = sorted(self.offers, key=lambda o: o.price)   # stable: equal prices keep the offers' order
        self.min_price = self.by_price[0].price if self.by_price else INF
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
        """The cheapest available offering ``reqs`` allow (zone and capacity type); the first of equal prices."""
        z = reqs.get(L.ZONE)
        ct = reqs.get(L.CAPACITY_TYPE)
        for o in self.by_price:
            if z.has(o.zone) and ct.has(o.capacity_type):
                return o
        return None


class NodeClaimTemplate:
    """One NodePool as a template for new nodes (see the module doc).  ``rindex``: the resources of the request
    vectors (cpu, memory, pods first); ``usage``: what the NodePool already uses against its limits."""

    def __init__(self, npi: NodePoolInput, rindex: list, daemonsets: list, usage: dict | None):
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
        volume_keys = [(i, r) for i, r in enumerate(rindex) if L.volume_driver(r) is not None]
        types = []
        for it in npi.instance_types:
            alloc = it.allocatable
            avail = tuple(alloc.get(r, 0) - d for r, d in zip(rindex, dvec))
            if volume_keys:  # the type's attach limits (scheduling/volumes.py)
                room = list(avail)
                for i, r in volume_keys:
                    room[i] = it.allocatable_for(r) - dvec[i]
                avail = tuple(room)
            t = InstanceTypeOption(it, avail, it.capacity)
            if t.reqs.intersects(reqs) is None:
                o = t.cheapest(reqs)
                if o is not None:
                    types.append((o.price, t.name, t, o))
        types.sort(key=lambda x: (x[0], x[1]))
        self.types = [x[2] for x in types]
        # signature -> the compatible types, and each one's cheapest allowed offering; the pool's own are known
        sig = reqs.signature()
        self._compat: dict = {sig: self.types}
        self._compat_offers: dict = {sig: [x[3] for x in types]}
        self._in_price_order: set = {sig}   # signatures whose compatible types are already cheapest first, by name
        self.fit_cache: dict = {}
        self._priced: dict = {}
        self._price_of: dict = {}
        self._union: dict = {}
        self._blocks: dict = {}
        self.pack_views: dict = {}   # the bulk packer's (types, TypeView) per (signature, smallest request, exotic)
        self._offered: dict = {}     # (key, signature) -> offered_domains

    def with_usage(self, nodepool, usage: dict | None) -> "NodeClaimTemplate":
        """This template for one solve: a shallow copy with its own ``remaining`` (the limits minus ``usage``, the
        only state a solve changes); the per-signature caches are shared (``template_cache``)."""
        t = copy.copy(self)
        t.np = nodepool
        t.remaining = {k: v - (usage or {}).get(k, 0) for k, v in self.limits.items()}
        return t

    def offered_domains(self, key: str, reqs: Requirements) -> frozenset:
        """The zones (``key`` zone) or capacity types (``key`` capacity type) of the offerings ``reqs`` allow of
        the types compatible with ``reqs`` (which already include the pool's): where a node of this pool could be
        for a pod with those requirements (topology spread's eligible domains)."""
        sig = (key, reqs.signature())
        hit = self._offered.get(sig)
        if hit is None:
            out = set()
            z, ct = reqs.get(L.ZONE), reqs.get(L.CAPACITY_TYPE)
            zone = key == L.ZONE
            for t in self.compat_types(reqs):
                for o in t.offers:
                    if z.has(o.zone) and ct.has(o.capacity_type):
                        out.add(o.zone if zone else o.capacity_type)
            hit = self._offered[sig] = frozenset(out)
        return hit

    def cache_size(self) -> int:
        return len(self._compat) + len(self.fit_cache) + len(self.pack_views) + len(self._offered)

    def compat_types(self, reqs: Requirements) -> list[InstanceTypeOption]:
        """Pool types compatible with ``reqs`` (which already include the pool's) with an offering allowed by them."""
        sig = reqs.signature()
        hit = self._compat.get(sig)
        if hit is None:
            hit, offers = [], []
            if L.ZONE in reqs and len(reqs) > 1:
                # the same requirements in any zone, then the zone: a type compatible with both has an offering in
                # an allowed zone and capacity type (``cheapest``), which is all the zone adds.  Pods pinned to a
                # zone (volumes, zone affinity, spread shares) then share one pass over the catalog, and a type
                # whose cheapest offering anywhere is in an allowed zone keeps it (the usual case: one price per
                # region); only the others look through their offerings for one in the zones.
                base = reqs.without(L.ZONE)
                candidates = self.compat_types(base)
                z, ct = reqs.get(L.ZONE), reqs.get(L.CAPACITY_TYPE)
                if not z.complement:
                    # in the zone-free signature's price order: when no type's price changes, the list is already
                    # ``priced``'s order (price, then name), and ``priced`` skips its sort
                    zones = z.values
                    ct_ok = ct.has if ct.complement else ct.values.__contains__
                    in_order = True
                    for p0, o, t in self.priced(base):
                        if o.zone not in zones:
                            for o in t.by_price:
                                if o.zone in zones and ct_ok(o.capacity_type):
                                    break
                            else:
                                continue
                            if o.price != p0:
                                in_order = False
                        hit.append(t)
                        offers.append(o)
                    if in_order:
                        self._in_price_order.add(sig)
                    candidates = ()
            else:
                candidates = [t for t in self.types if t.reqs.intersects(reqs) is None]
            for t in candidates:
                o = t.cheapest(reqs)
                if o is not None:
                    hit.append(t)
                    offers.append(o)
            self._compat[sig] = hit
            self._compat_offers[sig] = offers
        return hit

    def priced(self, reqs: Requirements) -> list:
        """[(price, cheapest offering, type)] for the compatible types, cheapest first (cached per signature)."""
        sig = reqs.signature()
        hit = self._priced.get(sig)
        if hit is None:
            types = self.compat_types(reqs)
            hit = [(o.price, o, t) for o, t in zip(self._compat_offers[sig], types)]
            if sig not in self._in_price_order:
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

    def union(self, reqs: Requirements) -> "OfferSet":
        sig = reqs.signature()
        hit = self._union.get(sig)
        if hit is None:
            hit = OfferSet([t for _, _, t in self.priced(reqs)])
            self._union[sig] = hit
        return hit

    def price_of(self, reqs: Requirements) -> dict:
        sig = reqs.signature()
        hit = self._price_of.get(sig)
        if hit is None:
            hit = {t.name: p for p, _, t in self.priced(reqs)}
            self._price_of[sig] = hit
        return hit

    def limit_ok(self, t: InstanceTypeOption) -> str | None:
        for k, rem in self.remaining.items():
            need = 1 if k == "nodes" else t.cap.get(k, 0)
            if need > rem:
                return k
        return None

    def fitting(self, reqs: Requirements, vec: tuple, wants_exotic: bool):
        """(types compatible with ``reqs`` that hold one pod of request vector ``vec``, exotic ones dropped unless
        wanted, their OfferSet, a cache for the caller's sizing) -- cached per (signature, vector, wants_exotic)."""
        key = (reqs.signature(), vec, wants_exotic)
        hit = self.fit_cache.get(key)
        if hit is None:
            v0, v1 = vec[0], vec[1]
            rest = [(i, v) for i, v in enumerate(vec) if i > 1 and v]
            fitting = [t for p, _, t in self.priced(reqs) if t.avail[0] >= v0 and t.avail[1] >= v1
                       and all(t.avail[i] >= v for i, v in rest)]
            if not key[2]:
                plain = [t for t in fitting if not t.exotic]
                if plain:
                    fitting = plain
            hit = (fitting, self.union(reqs), {})
            self.fit_cache[key] = hit
        return hit

    def min_values_error(self, reqs: Requirements, used) -> str | None:
        """Why the types compatible with ``reqs`` that hold ``used`` (a vector) no longer meet a minValues
        requirement, or None."""
        types = [t for t in self.compat_types(reqs) if all(a >= u for a, u in zip(t.avail, used))]
        for r in reqs:
            if r.min_values:
                vals = {t.reqs.get(r.key).any_value() for t in types} - {None}
                if len(vals) < r.min_values:
                    return f"minValues {r.min_values} for {r.key} not met ({len(vals)} values left)"
        return None

    @classmethod
    def for_nodepool(cls, npi: NodePoolInput, daemonsets=(), usage: dict | None = None) -> "NodeClaimTemplate":
        """The template of one NodePool outside a solver run (vectors over cpu, memory and pods), kept across
        calls (``template_cache``)."""
        return cls.shared(npi, list(BASE_RESOURCES), list(daemonsets or ()), usage)

    @classmethod
    def shared(cls, npi: NodePoolInput, rindex: list, daemonsets: list, usage: dict | None) -> "NodeClaimTemplate":
        """``cls(npi, rindex, daemonsets, usage)``, built once per content and kept across solves
        (``template_cache``); a SchedulingError is raised each time, never kept."""
        key = template_cache.key_for(npi, rindex, daemonsets)
        tpl = template_cache.get(key)
        if tpl is None:
            tpl = cls(npi, rindex, daemonsets, None)
            template_cache.put(key, npi, tpl)
        return tpl.with_usage(npi.nodepool, usage)

    def offers_holding(self, requests: dict, requirements: Requirements | None = None, *, labels: dict | None = None,
                       below: float | None = None) -> list[TemplateOffer]:
        """Every (instance type, available offering) of this template whose node holds ``requests`` (pod requests,
        project units; the NodePool's DaemonSet overhead is added here) under the NodePool's requirements and
        ``requirements`` (zone, capacity type and every other key, checked against the node's labels), cheapest
        first (price, type name, zone, capacity type); with ``below``, only offerings priced under it.

        A node's labels: ``labels`` (e.g. the NodePool template's), then the type's own labels, zone, capacity type,
        instance type and NodePool name."""
        reqs = self.reqs if requirements is None else self.reqs.intersection(requirements)
        z, ct = reqs.get(L.ZONE), reqs.get(L.CAPACITY_TYPE)
        volume_keys = {k for k in requests if L.volume_driver(k) is not None}
        out = []
        for t in self.types:
            if t.reqs.intersects(reqs) is not None:
                continue
            it, alloc = t.it, t.it.allocatable
            if any(v > 0 and (it.allocatable_for(k) if k in volume_keys else alloc.get(k, 0)) - self.daemon.get(k, 0) < v
                   for k, v in requests.items()):
                continue
            for o in t.offers:
                if not (z.has(o.zone) and ct.has(o.capacity_type)) or (below is not None and not o.price < below):
                    continue
                node_labels = {**(labels or {}), **t.it.labels, L.ZONE: o.zone, L.CAPACITY_TYPE: o.capacity_type,
                               L.INSTANCE_TYPE: t.name, L.NODEPOOL: self.name}
                if labels_match(reqs, node_labels) is not None:
                    continue
                out.append(TemplateOffer(o.price, t.it, o, node_labels))
        out.sort(key=lambda x: (x.price, x.instance_type.name, x.offering.zone, x.offering.capacity_type))
        return out


class ZoneCapacity:
    __slots__ = ("zone", "capacity_type")

    def __init__(self, zone, capacity_type):
        self.zone = zone
        self.capacity_type = capacity_type


class OfferSet:
    """Stand-in target for a fresh node: the distinct (zone, capacity type) pairs the fitting types offer."""

    def __init__(self, types):
        pairs = set()
        for zc in {t.zc for t in types}:
            pairs |= zc
        self.offers = [ZoneCapacity(z, ct) for z, ct in sorted(pairs)]


def truncate(types: list, reqs: Requirements, n: int) -> list:
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


def relaxed_min_values(reqs: Requirements, types: list) -> tuple[Requirements, bool]:
    """The BestEffort minValues policy (Karpenter's ``relaxMinValues``): ``reqs`` with every minValues that ``types``
    do not meet lowered to the number of distinct values they offer (dropped when they offer none), and whether any
    was lowered.  ``reqs`` itself is not changed."""
    out, relaxed = reqs, False
    for r in list(reqs):
        if not r.min_values:
            continue
        n = len({t.reqs.get(r.key).any_value() for t in types} - {None})
        if n >= r.min_values:
            continue
        out = out.without(r.key)
        out.add(Requirement(r.key, r.complement, r.values, r.gt, r.lt, n or None))
        relaxed = True
    return out, relaxed


def describe(reqs: Requirements) -> str:
    parts = []
    for r in reqs:
        if r.operator == IN and len(r.values) == 1:
            parts.append(f"{r.key}={next(iter(r.values))}")
        else:
            parts.append(str(r))
    return ", ".join(sorted(parts))
