"""NodeClaim templates: what a new node of a NodePool may be (Karpenter's ``NodeClaimTemplate`` and the instance-type
filtering of ``nodeclaim.go``).

A :class:`NodeClaimTemplate` is one NodePool as the solver sees it: its requirements (with its template labels and
its name), taints, its limits (what is left of them) and its instance types as :class:`InstanceTypeOption` s
(allocatable minus the DaemonSet overhead of that type, the requirements each type offers, its available offerings),
kept only when compatible with the NodePool and launchable under its zone / capacity-type constraints, cheapest
first.  A DaemonSet counts against a type only when its pod would run there (Karpenter's daemon overhead groups):
it tolerates the NodePool's taints, and one of its required node-affinity terms is compatible with the NodePool's
requirements and intersects the type's (an amd64-only agent is not charged to arm64 types, a GPU device plugin only
to GPU types).  ``daemon`` is the overhead every node of the pool carries (the least over its types) and
``daemon_ports`` the host ports of every DaemonSet that runs on some type of it.  Per requirement signature it
caches the compatible types, their prices and the types that hold one pod of a request vector
(:meth:`NodeClaimTemplate.fitting`).

:meth:`NodeClaimTemplate.offers_holding` answers the sizing question outside the solver (consolidation's replacement
node): every (type, offering) that holds given requests under given requirements, cheapest first.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from operator import attrgetter

from ..api import labels as L
from ..api.quantity import resource_value
from ..catalog.types import InstanceType, Offering
from . import template_cache
from .model import EXOTIC_RESOURCES, INF, RESERVATION_KEYS, TYPE_KEYS, NodePoolInput, SchedulingError, imply_reserved
from .predicates import host_ports, labels_match, node_terms, ports_conflict
from .requirements import IN, Requirement, RequirementError, Requirements
from .resources import pod_requests
from .taints import untolerated

__all__ = [
    "NodeClaimTemplate",
    "InstanceTypeOption",
    "TemplateOffer",
    "OfferSet",
    "truncate",
    "min_overhead",
    "counted_daemonsets",
    "live_daemon_pods",
    "relaxed_min_values",
    "describe",
]

BASE_RESOURCES = ("cpu", "memory", "pods")


@dataclass(frozen=True)
class TemplateOffer:
    """One way to launch a node of a template: the instance type, the offering (zone, capacity type, price), the
    labels the node would carry and the DaemonSet overhead it would carry (the DaemonSets that run on that type)."""

    price: float
    instance_type: InstanceType
    offering: Offering
    labels: dict
    daemon: dict = field(default_factory=dict)


_price = attrgetter("price")


def _price_and_rank(o: Offering) -> tuple:
    return (o.price, o.reservation_rank())


class InstanceTypeOption:
    """An instance type as a NodeClaim template offers it: allocatable minus the DaemonSet overhead of the daemons
    that run on it in this NodePool (``avail``, a vector; ``daemon``, that overhead as a dict, shared by the types
    with the same daemons), capacity, the requirements it offers, its available offerings and cheapest price."""
    __slots__ = ("it", "name", "reqs", "avail", "cap", "exotic", "offers", "min_price", "zc", "by_price", "daemon",
                 "daemon_key", "reserved")

    def __init__(self, it: InstanceType, avail: tuple | None, cap: dict, daemon: dict | None = None):
        self.it = it
        self.name = it.name
        self.avail = avail  # allocatable minus this type's daemonset overhead, as a vector
        self.cap = cap
        self.daemon = daemon if daemon is not None else {}
        self.daemon_key = ()   # which of the template's DaemonSets run on it (the template's grouping)
        labels = it.labels
        self.exotic = bool(labels.get(L.INSTANCE_GPU_COUNT) or labels.get(L.INSTANCE_ACCELERATOR_COUNT)
                           or "metal" in labels.get(L.INSTANCE_SIZE, "")  # metal, metal-24xl, metal-48xl, ...
                           or any(it.capacity.get(r, 0) > 0 for r in EXOTIC_RESOURCES))
        self.offers = [o for o in it.offerings if o.available]
        # whether an offering carries reservation labels: only then do ``cheapest`` & co. check them
        self.reserved = any(o.reservation_id for o in self.offers)
        # stable: equal prices keep the offers' order, but for reservations' kinds (upstream's order: a non-interruptible
        # ODCR, a capacity block, an interruptible ODCR: Offering.reservation_rank)
        self.by_price = sorted(self.offers, key=_price_and_rank if self.reserved else _price)
        self.min_price = self.by_price[0].price if self.by_price else INF
        self.zc = frozenset((o.zone, o.capacity_type) for o in self.offers)
        zids = frozenset(o.zone_id for o in self.offers if o.zone_id)
        # the requirements an instance type offers depend only on its labels and offerings: cached on the object
        ck = (tuple(sorted(labels.items())), self.zc, zids,
              tuple(sorted(tuple(o.reservation_labels().values()) for o in self.offers if o.reservation_id)))
        cached = it.__dict__.get("_scheduling_reqs")
        if cached is not None and cached[0] == ck:
            self.reqs = cached[1]
            return
        reqs = Requirements()
        for k in TYPE_KEYS:
            if k not in labels:
                reqs.add(Requirement(k, False))
        reserved = [o.reservation_labels() for o in self.offers if o.reservation_id]
        if reserved:   # the reservations' labels (only their offerings carry them: model.imply_reserved)
            for k in RESERVATION_KEYS:
                reqs.add(Requirement(k, False, {lb[k] for lb in reserved}))
        else:
            for k in RESERVATION_KEYS:
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
        """The cheapest available offering ``reqs`` allow (zone, capacity type and, when ``reqs`` constrain one, the
        reservation's id, type and interruptible); the first of equal prices."""
        z = reqs.get(L.ZONE)
        ct = reqs.get(L.CAPACITY_TYPE)
        if self.reserved:   # only a type with reserved offerings, and only when ``reqs`` constrain their labels
            rk = reservation_reqs(reqs)
            if rk is not None:
                for o in self.by_price:
                    if z.has(o.zone) and ct.has(o.capacity_type) and reservation_ok(o, rk):
                        return o
                return None
        for o in self.by_price:
            if z.has(o.zone) and ct.has(o.capacity_type):
                return o
        return None


def reservation_reqs(reqs: Requirements) -> tuple | None:
    """``reqs``' requirements on the reservation labels (id, type, interruptible), or None when they constrain none
    (the usual case: then an offering's reservation is never looked at)."""
    out = None
    for k in RESERVATION_KEYS:
        if k in reqs:
            out = (out or ()) + (reqs.get(k),)
    return out


def reservation_ok(o: Offering, rk: tuple) -> bool:
    """Whether offering ``o`` meets the reservation requirements ``rk`` (:func:`reservation_reqs`): an offering of no
    reservation has no such labels, which only ``In`` / ``Exists`` refuse, and those narrow the capacity type to
    ``reserved`` already (``model.imply_reserved``)."""
    if not o.reservation_id:
        return True
    labels = o.reservation_labels()
    return all(r.has(labels[r.key]) for r in rk)


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
        imply_reserved(reqs)
        self.reqs = reqs
        self.taints = list(np_.taints)
        self.startup_taints = list(np_.startup_taints)
        self.has_min_values = any(r.min_values for r in reqs)
        # the catalog's held types (``InstanceTypes.held``: no price, or allocatable below zero), for explanations
        self.held = tuple(getattr(npi.instance_types, "held", ()))
        self.held_why = dict(getattr(npi.instance_types, "skipped", None) or {})
        # DaemonSet overhead, per instance type (Karpenter's buildDaemonOverheadGroups / isDaemonPodCompatible): a
        # daemon pod counts on a type when it tolerates the NodePool's taints (PreferNoSchedule aside: Karpenter adds
        # that toleration for it) and one of its required node-affinity terms (each with its nodeSelector) is
        # compatible with the NodePool's requirements and intersects the type's.  Types are grouped by the daemons
        # that count on them: one overhead (dict, vector, host ports) per group, shared by its types.
        daemons = []   # (requests, host ports, the terms compatible with the pool or None: every type)
        for ds in daemonsets:
            tpl = ((ds.get("spec") or {}).get("template") or {})
            pod = {"metadata": tpl.get("metadata") or {}, "spec": tpl.get("spec") or {}}
            if untolerated((pod["spec"].get("tolerations")), self.taints, True):
                continue
            terms = node_terms(pod)
            if terms:
                terms = [t for t in terms if self.reqs.compatible(t) is None]
                if not terms:
                    continue
            daemons.append((pod_requests(pod), host_ports(pod["spec"]), terms or None))
        # a daemon with terms runs on a type when one of them intersects the type's requirements, which only the
        # type's requirements on the terms' keys decide: a type's group is kept per their values (a few per catalog)
        conditional = [(i, d[2]) for i, d in enumerate(daemons) if d[2] is not None]
        everywhere = tuple(i for i, d in enumerate(daemons) if d[2] is None)
        term_keys = sorted({k for _, terms in conditional for t in terms for k in t.keys()})
        group_of: dict = {}   # the type's requirements on term_keys -> its group key

        def group_key(treqs: Requirements) -> tuple:
            proj = tuple((r.complement, r.values, r.gt, r.lt) if r is not None else None
                         for r in (treqs.get(k) if treqs.has(k) else None for k in term_keys))
            key = group_of.get(proj)
            if key is None:
                key = group_of[proj] = everywhere + tuple(
                    i for i, terms in conditional if any(treqs.intersects(term) is None for term in terms))
            return key

        groups: dict = {}   # compatible daemon indices -> (overhead dict, overhead vector, host ports)

        def group(key: tuple) -> tuple:
            g = groups.get(key)
            if g is None:
                over: dict[str, int] = {}
                ports: frozenset = frozenset()
                for i in key:
                    for k, v in daemons[i][0].items():
                        over[k] = over.get(k, 0) + v
                    ports = ports | daemons[i][1]
                g = groups[key] = (over, [over.get(r, 0) for r in rindex], ports)
            return g

        # limits
        self.limits: dict[str, int] = {}
        for k, q in (np_.limits or {}).items():
            try:
                self.limits[k] = resource_value(k, q)
            except ValueError as e:
                raise SchedulingError(f"NodePool/{self.name}: spec.limits.{k}: {e}") from None
        self.remaining = {k: v - (usage or {}).get(k, 0) for k, v in self.limits.items()}
        # instance types compatible with the NodePool and launchable under its zone / capacity-type constraints
        volume_keys = [(i, r) for i, r in enumerate(rindex) if L.volume_driver(r) is not None]
        types = []
        for it in npi.instance_types:
            t = InstanceTypeOption(it, None, it.capacity)
            if t.reqs.intersects(reqs) is not None:
                continue
            o = t.cheapest(reqs)
            if o is None:
                continue
            key = group_key(t.reqs) if conditional else everywhere
            over, dvec, _ = group(key)
            alloc = it.allocatable
            avail = tuple(alloc.get(r, 0) - d for r, d in zip(rindex, dvec))
            if volume_keys:  # the type's attach limits (scheduling/volumes.py)
                room = list(avail)
                for i, r in volume_keys:
                    room[i] = it.allocatable_for(r) - dvec[i]
                avail = tuple(room)
            t.avail = avail
            t.daemon = over
            t.daemon_key = key
            types.append((o.price, t.name, t, o))
        # what every node of the pool carries (the least overhead of its types: Karpenter's addDaemonRequests) and
        # every host port a DaemonSet holds on some type of it (a pod wanting one is kept off those types)
        kept = {x[2].daemon_key for x in types}
        self.daemon: dict[str, int] = min_overhead([groups[k][0] for k in kept])
        self.daemon_ports: frozenset = frozenset().union(*(groups[k][2] for k in kept))
        self.daemon_groups = len(kept)
        self._group_ports = {k: groups[k][2] for k in kept}   # daemon group key -> the host ports its DaemonSets hold
        self._port_clash: dict = {}
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
            rk = reservation_reqs(reqs)
            zone = key == L.ZONE
            for t in self.compat_types(reqs):
                for o in t.offers:
                    if z.has(o.zone) and ct.has(o.capacity_type) and (rk is None or reservation_ok(o, rk)):
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
                rk = reservation_reqs(reqs)
                if not z.complement:
                    # in the zone-free signature's price order: when no type's price changes, the list is already
                    # ``priced``'s order (price, then name), and ``priced`` skips its sort
                    zones = z.values
                    ct_ok = ct.has if ct.complement else ct.values.__contains__
                    in_order = True
                    for p0, o, t in self.priced(base):
                        if o.zone not in zones:
                            for o in t.by_price:
                                if o.zone in zones and ct_ok(o.capacity_type) and (
                                        rk is None or not t.reserved or reservation_ok(o, rk)):
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

    def daemon_port_clash(self, ports) -> tuple[frozenset, frozenset]:
        """For a pod wanting host ``ports`` (a frozenset, ``predicates.host_ports``): (the names of the types whose
        DaemonSets hold one of them, the host ports the DaemonSets of the other types hold).  As Karpenter, which
        drops only the daemon overhead groups whose host ports conflict (``filterInstanceTypesByRequirements``): a
        DaemonSet that runs on some types only keeps the pod off those types, not off the NodePool."""
        hit = self._port_clash.get(ports)
        if hit is None:
            bad = {k for k, held in self._group_ports.items() if held and ports_conflict(held, ports)}
            names = frozenset(t.name for t in self.types if t.daemon_key in bad)
            left = frozenset().union(*(held for k, held in self._group_ports.items() if k not in bad))
            hit = self._port_clash[ports] = (names, left)
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

    def held_matching(self, reqs: Requirements) -> str:
        """Why the catalog's held types whose labels ``reqs`` allow are not options, as an explanation suffix
        (``" (t3.nano matches but is left out: allocatable memory below zero: ...)"``), or "" when none."""
        hits = []
        for it in self.held:
            if all(r.has(it.labels[r.key]) for r in reqs if r.key in it.labels):
                why = self.held_why.get(it.name) or it.unfit_reason() or "no price is known for its offerings"
                hits.append((it.name, why))
        if not hits:
            return ""
        names = ", ".join(n for n, _ in hits[:5]) + (f" and {len(hits) - 5} more" if len(hits) > 5 else "")
        whys = sorted({w for _, w in hits})
        verb = "matches but is" if len(hits) == 1 else "match but are"
        return f" ({names} {verb} left out: {whys[0]}{'; ...' if len(whys) > 1 else ''})"

    def min_values_error(self, reqs: Requirements, used, within: dict | None = None) -> str | None:
        """Why the types compatible with ``reqs`` that hold ``used`` (a vector) no longer meet a minValues
        requirement, or None.  ``within``: only types counting no more than that against the NodePool's limits (a
        limited NodeClaim's charge, or what the limits leave)."""
        types = [t for t in self.compat_types(reqs)
                 if all(a >= u for a, u in zip(t.avail, used))
                 and (not within or all((1 if k == "nodes" else t.cap.get(k, 0)) <= v for k, v in within.items()))]
        for r in reqs:
            if r.min_values:
                vals = {t.reqs.get(r.key).any_value() for t in types} - {None}
                if len(vals) < r.min_values:
                    why = " within the NodePool's limits" if within else ""
                    return f"minValues {r.min_values} for {r.key} not met{why} ({len(vals)} values left)"
        return None

    def min_values_charge(self, reqs: Requirements, fitting: list, sizing: InstanceTypeOption) -> dict:
        """What a new NodeClaim of this limited NodePool counts against its limits: per limited resource (``nodes``
        1) the largest capacity among ``sizing`` and the cheapest types of ``fitting`` (price order) that meet every
        minValues requirement -- as Karpenter charges a NodeClaim its largest option, and a minValues NodeClaim keeps
        options of several values (trimmed to its sizing type alone it would offer one)."""
        keep = truncate(fitting, reqs, 1) + [sizing]
        return {k: (1 if k == "nodes" else max(t.cap.get(k, 0) for t in keep)) for k in self.remaining}

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
        project units; each type's DaemonSet overhead, ``InstanceTypeOption.daemon``, is added here, and is the
        offer's ``daemon``) under the NodePool's requirements and ``requirements`` (zone, capacity type and every
        other key, checked against the node's labels), cheapest first (price, type name, zone, capacity type); with
        ``below``, only offerings priced under it.

        A node's labels: ``labels`` (e.g. the NodePool template's), then the type's own labels, zone, capacity type,
        instance type and NodePool name."""
        reqs = self.reqs if requirements is None else self.reqs.intersection(requirements)
        z, ct = reqs.get(L.ZONE), reqs.get(L.CAPACITY_TYPE)
        volume_keys = {k for k in requests if L.volume_driver(k) is not None}
        out = []
        for t in self.types:
            if t.reqs.intersects(reqs) is not None:
                continue
            it, alloc, daemon = t.it, t.it.allocatable, t.daemon
            if any(v > 0 and (it.allocatable_for(k) if k in volume_keys else alloc.get(k, 0)) - daemon.get(k, 0) < v
                   for k, v in requests.items()):
                continue
            for o in t.offers:
                if not (z.has(o.zone) and ct.has(o.capacity_type)) or (below is not None and not o.price < below):
                    continue
                node_labels = {**(labels or {}), **t.it.labels, L.ZONE: o.zone, L.CAPACITY_TYPE: o.capacity_type,
                               L.INSTANCE_TYPE: t.name, L.NODEPOOL: self.name}
                if o.reservation_id:   # a node in a reservation carries its id, type and interruptible
                    node_labels.update(o.reservation_labels())
                if labels_match(reqs, node_labels) is not None:
                    continue
                out.append(TemplateOffer(o.price, t.it, o, node_labels, daemon))
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


def min_overhead(overheads) -> dict:
    """The least of DaemonSet overheads (dicts), resource by resource (Karpenter's ``resources.MinResources`` over
    the daemon overhead groups): what a node carries whichever of those types it launches as.  The same dict when
    they are all one object."""
    overheads = list({id(o): o for o in overheads}.values())
    if not overheads:
        return {}
    if len(overheads) == 1:
        return overheads[0]
    out = {}
    for k in overheads[0]:
        v = min(o.get(k, 0) for o in overheads)
        if v > 0:
            out[k] = v
    return out


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


# ------------------------------------------------------------------------ the pod a DaemonSet's overhead is counted from
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
#: what of a daemon pod's spec the overhead reads (requests, host ports, tolerations, node requirements); the rest
#: (volumes, a live pod's nodeName, its token volume's name...) is left out, so that the same DaemonSets give the same
#: templates (``template_cache``) whichever of their pods is the newest
_OVERHEAD_SPEC_KEYS = ("overhead", "resources", "tolerations", "nodeSelector")
_OVERHEAD_CONTAINER_KEYS = ("name", "resources", "ports", "restartPolicy")


def _controlling_daemonset(pod: dict):
    """((namespace, DaemonSet name), its uid or None) of the apps/v1 DaemonSet controlling ``pod``, else None."""
    meta = pod.get("metadata") or {}
    for ref in meta.get("ownerReferences") or ():
        if (isinstance(ref, dict) and ref.get("kind") == "DaemonSet" and ref.get("apiVersion", "apps/v1") == "apps/v1"
                and ref.get("controller", True) and ref.get("name")):
            return (meta.get("namespace") or "default", ref["name"]), ref.get("uid") or None
    return None


def live_daemon_pods(daemonsets, pods) -> dict[tuple, dict]:
    """{(namespace, name): the newest pod each DaemonSet controls} among ``pods`` (Karpenter's
    ``state.Cluster.UpdateDaemonSet``: the pod controlled by the DaemonSet -- the same uid, or the same name where
    either side has none -- with the latest ``creationTimestamp``, the first of equals)."""
    wanted = {((ds.get("metadata") or {}).get("namespace") or "default", (ds.get("metadata") or {}).get("name")):
              (ds.get("metadata") or {}).get("uid") or None for ds in daemonsets}
    out: dict[tuple, dict] = {}
    if not wanted:
        return out
    for p in pods:
        owner = _controlling_daemonset(p)
        if owner is None or owner[0] not in wanted:
            continue
        key, uid = owner
        if uid and wanted[key] and uid != wanted[key]:
            continue   # a pod of a former DaemonSet of that name
        best = out.get(key)
        if best is None or (str((p.get("metadata") or {}).get("creationTimestamp") or "")
                            > str((best.get("metadata") or {}).get("creationTimestamp") or "")):
            out[key] = p
    return out


def _overhead_spec(spec: dict, required) -> dict:
    out: dict = {}
    for group in ("initContainers", "containers"):
        cs = spec.get(group)
        if isinstance(cs, list):
            out[group] = [{k: c[k] for k in _OVERHEAD_CONTAINER_KEYS if k in c} if isinstance(c, dict) else c for c in cs]
    for k in _OVERHEAD_SPEC_KEYS:
        if spec.get(k):
            out[k] = spec[k]
    if required:
        out["affinity"] = {"nodeAffinity": {_REQUIRED: required}}
    return out


def counted_daemonsets(daemonsets, pods=(), admission=None, refused: dict | None = None,
                       live: dict | None = None) -> list[dict]:
    """The DaemonSets as their overhead is counted: each one's ``spec.template`` is the pod Karpenter's
    ``getDaemonSetPods`` counts, with only what the overhead reads (requests, host ports, tolerations, node
    selector and required node affinity).

    * A live pod of the DaemonSet among ``pods`` (the newest: :func:`live_daemon_pods`): its spec, which carries what
      the API server's admission gave it (a RuntimeClass's ``overhead``, a LimitRange's default requests), with the
      template's required node affinity instead of the one the DaemonSet controller pins to its node.
    * Else the template's pod, in the DaemonSet's namespace, through ``admission`` (``api.admission.Admission`` or
      anything with its ``admit(pod) -> (pod, problem)``; None: the template as it is): the LimitRanger and the
      RuntimeClass admission a pod of it will get.  A pod the chain refuses is counted as its template (Karpenter's
      fallback); ``refused``, when given, gets ``{"namespace/name": why}``.

    ``live``: :func:`live_daemon_pods` of ``daemonsets`` and ``pods`` when the caller has it.  ``daemonsets`` are not
    modified (shallow copies with a new template)."""
    daemonsets = [ds for ds in daemonsets if isinstance(ds, dict)]
    if live is None:
        live = live_daemon_pods(daemonsets, pods) if pods else {}
    out = []
    for ds in daemonsets:
        meta = ds.get("metadata") or {}
        key = (meta.get("namespace") or "default", meta.get("name"))
        dspec = ds.get("spec") or {}
        tpl = dspec.get("template") or {}
        tspec = tpl.get("spec") or {}
        required = ((tspec.get("affinity") or {}).get("nodeAffinity") or {}).get(_REQUIRED)
        pod = live.get(key)
        if pod is not None:
            spec = pod.get("spec") or {}
        elif admission is not None:
            admitted, problem = admission.admit({"metadata": {**(tpl.get("metadata") or {}), "namespace": key[0],
                                                              "name": key[1]}, "spec": tspec})
            if problem and refused is not None:
                refused[f"{key[0]}/{key[1]}"] = problem
            spec = tspec if problem else (admitted.get("spec") or {})
        else:
            spec = tspec
        out.append({**ds, "spec": {**dspec, "template": {"metadata": tpl.get("metadata") or {},
                                                         "spec": _overhead_spec(spec, required)}}})
    return out
