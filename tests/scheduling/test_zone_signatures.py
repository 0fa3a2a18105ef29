"""The shared work of zone-pinned signatures (issue 28): a zone-restricted signature derives its types and
offerings from the zone-free one, and the packer's valuations work per allocatable vector.  Each is checked against
the direct computation it replaces."""

from __future__ import annotations

import random

import pytest

from karpenter_lambda.api import labels as L
from karpenter_lambda.catalog.types import Offering
from karpenter_lambda.scheduling.model import INF, NodePoolInput
from karpenter_lambda.scheduling.nodeclaim import NodeClaimTemplate
from karpenter_lambda.scheduling.requirements import Requirement, Requirements
from karpenter_lambda.scheduling.valuation import BestFirst, TypeView, lp_pair, standalone_values, value_bounds

from .helpers import GI, ZONES, catalog, itype, nodepool


def _zonal_catalog():
    """The test catalog plus types whose on-demand price differs by zone and types offered in some zones only."""
    out = catalog()
    t = itype("m5.12xlarge", 48, 192, 2.304)
    t.offerings = [Offering(z, "on-demand", 2.304 + 0.1 * i) for i, z in enumerate(ZONES)]
    out.append(t)
    out.append(itype("c5.12xlarge", 48, 96, 2.04, zones=ZONES[1:], spot_zones=ZONES[2:]))
    out.append(itype("r5.12xlarge", 48, 384, 3.024, zones=ZONES[:1], spot=0))
    return out


def _direct(pool: NodeClaimTemplate, reqs: Requirements) -> list:
    out = []
    for t in pool.types:
        if t.reqs.intersects(reqs) is None:
            o = t.cheapest(reqs)
            if o is not None:
                out.append((o.price, o, t))
    return sorted(out, key=lambda x: (x[0], x[2].name))


@pytest.mark.parametrize("pool_reqs", [
    [{"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}],
    [{"key": L.CAPACITY_TYPE, "operator": "In", "values": ["spot", "on-demand"]}],
    [{"key": L.CAPACITY_TYPE, "operator": "NotIn", "values": ["reserved"]}],
    [],
])
def test_zone_restricted_types_and_offerings_are_the_direct_ones(pool_reqs):
    pool = NodeClaimTemplate.for_nodepool(NodePoolInput(nodepool(requirements=pool_reqs), _zonal_catalog()))
    zone_sets = [(False, ZONES[:1]), (False, ZONES[1:2]), (False, ZONES[2:]), (False, ZONES[:2]), (False, ZONES[1:]),
                 (True, ZONES[:1])]
    for complement, zones in zone_sets:
        for arch in (None, "arm64"):
            reqs = pool.reqs.copy()
            if arch:
                reqs.add(Requirement(L.ARCH, False, (arch,)))
            reqs.add(Requirement(L.ZONE, complement, zones))
            got = pool.priced(reqs)
            want = _direct(pool, reqs)
            assert [(p, o.zone, o.capacity_type, t.name) for p, o, t in got] == \
                   [(p, o.zone, o.capacity_type, t.name) for p, o, t in want]
            assert {t.name for t in pool.compat_types(reqs)} == {t.name for _, _, t in want}
    # the zone-dependent price: zone c's offering of m5.12xlarge is its own, and sorts by that price
    reqs = pool.reqs.copy().add(Requirement(L.ZONE, False, ZONES[2:]))
    m5 = next(x for x in pool.priced(reqs) if x[2].name == "m5.12xlarge")
    if not pool_reqs or "on-demand" in str(pool_reqs):
        assert m5[1].zone == ZONES[2]


def _types(n=60, seed=7):
    r = random.Random(seed)
    pool = NodeClaimTemplate.for_nodepool(NodePoolInput(nodepool(), catalog()))
    types = [(p, t) for p, _, t in pool.priced(pool.reqs)]
    return [types[r.randrange(len(types))] for _ in range(n)]   # repeats: types sharing allocatable vectors


def _naive_value_bounds(types, values):
    ubs = {}
    for p, t in types:
        dens = None
        for v, u in values.items():
            if all(x <= a for x, a in zip(v, t.avail)):
                d = [u / x if x else 0.0 for x in v]
                dens = d if dens is None else [max(y, z) for y, z in zip(d, dens)]
        ub = 0.0
        if dens is not None:
            ub = INF
            for i, d in enumerate(dens):
                if d > 0:
                    ub = min(ub, t.avail[i] * d)
        ubs[t.name] = ub
    return ubs


def test_valuations_per_allocatable_vector_equal_the_per_type_ones():
    types = sorted(_types(), key=lambda x: (x[0], x[1].name))
    counts = {(500, GI, 1): 10, (2000, 8 * GI, 1): 3, (250, 512 * 2**20, 1): 40}
    values = {v: 0.01 * (i + 1) for i, v in enumerate(counts)}
    cache: dict = {}
    assert value_bounds(types, values) == _naive_value_bounds(types, values)
    view = TypeView(types)

    def per_type(vals):
        ubs = view.bounds(vals)
        return [ubs[i] for i in view.index]
    # the view's bounds, grouped by fitting set: the per-type numbers, again from the view's memo, for other values
    # on the same vectors, and with a request vector no type holds
    for vals in (values, values, {v: 0.02 / (i + 1) for i, v in enumerate(counts)},
                 {**values, (10**9, 10**15, 1): 1.0}):
        assert per_type(vals) == [_naive_value_bounds(types, vals)[t.name] for _, t in types]
    # the LP's front kept on the view gives the LP's optimum
    assert lp_pair(view.lp_items, 40_000, 200 * GI, view.lp_front()) == lp_pair(view.lp_items, 40_000, 200 * GI)
    # stand-alone values with and without the cache and the view
    assert standalone_values(types, counts, cache, view) == standalone_values(types, counts)
    # the LP over one representative per vector has the optimum of the LP over every type
    full = lp_pair([(t, t.avail[0], t.avail[1], p) for p, t in types], 40_000, 200 * GI)
    reps = lp_pair(view.lp_items, 40_000, 200 * GI)
    assert [(o.name, x) for o, x, _ in reps] == [(o.name, x) for o, x, _ in full]


def test_best_first_reads_in_sorted_order_and_drops():
    r = random.Random(3)
    items = [(r.random(), r.random(), f"t{i}") for i in range(200)]
    order = BestFirst(list(items))
    first = []
    for x in order:
        first.append(x)
        if len(first) == 20:
            break
    assert first == sorted(items)[:20]
    assert list(order) == sorted(items)                         # a second pass reads the prefix again
    dropped = order.without(lambda x: x[2].endswith("7"))
    assert list(dropped) == sorted(x for x in items if not x[2].endswith("7"))
