"""Cost of the bulk packing: mixing request shapes, launching the cheapest type that holds what was placed,
staying near the LP bound on a Karpenter-benchmark-like catalog, and NodePool limits on repeated fills."""

from __future__ import annotations

from karpenter_lambda.api import labels as L
from karpenter_lambda.catalog.types import InstanceType, Offering

from .helpers import GI, MI, catalog, itype, nodepool, pod, pods, run


def _by_name(types):
    return {t.name: t for t in types}


def test_cpu_heavy_and_memory_heavy_pods_share_nodes_and_cost_less():
    cpu_heavy = pods(24, prefix="cpu", cpu="3", memory="512Mi")
    mem_heavy = pods(24, prefix="mem", cpu="250m", memory="11Gi")
    apart = run(cpu_heavy).cost_per_hour + run(mem_heavy).cost_per_hour
    together = run(cpu_heavy + mem_heavy)
    assert not together.unschedulable
    assert sum(len(n.pods) for n in together.nodeclaims) == 48
    # each kind alone fills one resource of its nodes and leaves the other idle; together they fill both
    assert together.cost_per_hour < 0.85 * apart, (together.cost_per_hour, apart)
    mixed = [n for n in together.nodeclaims
             if any(p.startswith("default/cpu-") for p in n.pods) and any(p.startswith("default/mem-") for p in n.pods)]
    assert mixed


def test_launches_cheapest_type_holding_what_was_placed():
    types = catalog()
    res = run(pods(3, prefix="s", cpu="1", memory="1Gi"), types=types)
    assert len(res.nodeclaims) == 1
    nc = res.nodeclaims[0]
    cpu, mem = 3000, 3 * GI
    holding = [t for t in types if t.allocatable["cpu"] >= cpu and t.allocatable["memory"] >= mem
               and t.allocatable["pods"] >= 3 and L.INSTANCE_GPU_COUNT not in t.labels
               and t.labels[L.INSTANCE_SIZE] != "metal"]
    cheapest = min(holding, key=lambda t: t.cheapest_offering(capacity_types=["on-demand"]).price)
    assert nc.instance_type == cheapest.name
    assert nc.price == cheapest.cheapest_offering(capacity_types=["on-demand"]).price
    # every type the plan keeps holds the pods, and the launch choice is the first (cheapest) of them
    by = _by_name(types)
    assert nc.to_dict()["instanceTypes"][0] == cheapest.name
    assert all(by[n].allocatable["cpu"] >= cpu and by[n].allocatable["memory"] >= mem for n in nc.to_dict()["instanceTypes"])


def test_burstable_type_with_no_room_for_a_pod_is_never_launched():
    # a "nano" with lots of cheap CPU but 10Mi of allocatable memory holds no pod: the LP over total CPU and
    # memory would buy its CPU, the packer must not
    types = catalog() + [itype("t4g.nano", 2, 0.5, 0.0042, arch="arm64", pods=4)]
    res = run(pods(40, prefix="n", cpu="500m", memory="128Mi"), types=types)
    assert not res.unschedulable
    assert all(n.instance_type != "t4g.nano" for n in res.nodeclaims)


def _karpenter_like(n):
    """Karpenter's fake.InstanceTypes facts: i+1 vCPU, 2(i+1) GiB, 10(i+1) pods, 100m + 10Mi reserved, linear price."""
    out = []
    for i in range(n):
        v = i + 1
        mem = 2 * v * GI
        price = round(0.1 * v + 0.1 * mem / 1e9, 6)
        out.append(InstanceType(
            name=f"fake-it-{i}", labels={L.ARCH: "amd64", L.OS: "linux", L.INSTANCE_TYPE: f"fake-it-{i}"},
            capacity={"cpu": v * 1000, "memory": mem, "pods": 10 * v}, overhead={"cpu": 100, "memory": 10 * MI},
            offerings=[Offering(z, "on-demand", price) for z in ("test-zone-1", "test-zone-2", "test-zone-3")]))
    return out


def test_generic_mix_within_ten_percent_of_lp_bound_on_linear_price_catalog():
    types = _karpenter_like(64)
    cpus = [100, 250, 500, 1000, 1500]
    mems = [100, 256, 512, 1024, 2048, 4096]
    plist = [pod(f"g{i}", cpu=f"{cpus[i % 5]}m", memory=f"{mems[(i * 7) % 6]}Mi") for i in range(600)]
    res = run(plist, types=types)
    assert not res.unschedulable
    cpu = sum(cpus[i % 5] for i in range(600))
    mem = sum(mems[(i * 7) % 6] for i in range(600)) * MI
    # every type has the same shape: the LP bound is the best price per allocatable unit of the binding resource
    bound = min(max(cpu / t.allocatable["cpu"], mem / t.allocatable["memory"]) * t.offerings[0].price for t in types)
    assert res.cost_per_hour <= 1.10 * bound, (res.cost_per_hour, bound)


def test_repeated_fills_stop_at_nodepool_node_limit():
    res = run(pods(200, prefix="l", cpu="1", memory="1Gi"), pools=[nodepool(limits={"nodes": "3"})])
    assert len(res.nodeclaims) == 3
    placed = sum(len(n.pods) for n in res.nodeclaims)
    assert placed + len(res.unschedulable) == 200 and res.unschedulable
    assert "limits nodes 3 reached" in res.unschedulable[0].reason


def test_repeated_fills_stop_at_nodepool_cpu_limit():
    res = run(pods(100, prefix="c", cpu="1", memory="1Gi"), pools=[nodepool(limits={"cpu": "40"})])
    by = _by_name(catalog())
    assert sum(by[n.instance_type].capacity["cpu"] for n in res.nodeclaims) <= 40000
    assert res.unschedulable and "limits cpu 40 reached" in res.unschedulable[0].reason


def test_small_burstable_types_mixed_well():
    """Regression guard for catalogs like the real one: cheap 2-vCPU burstable types with 4-17 pod slots and
    little memory.  Packing each request shape apart on its own best type costs $5.53/h here; the packer
    must mix shapes to stay under 0.78 of that (the pre-D2 packer, valuing pods only at the CPU/memory LP
    duals, reached 0.80; this one 0.74)."""
    import math
    import random

    types = catalog() + [itype("t4g.micro", 2, 1, 0.0084, arch="arm64", pods=4),
                         itype("t4g.small", 2, 2, 0.0168, arch="arm64", pods=11),
                         itype("t4g.medium", 2, 4, 0.0336, arch="arm64", pods=17),
                         itype("t4g.nano", 2, 0.5, 0.0042, arch="arm64", pods=4)]
    cpus, mems = [100, 250, 500, 1000, 1500], [100, 256, 512, 1024, 2048, 4096]
    r = random.Random(1)
    shapes = [(r.choice(cpus), r.choice(mems)) for _ in range(300)]
    res = run([pod(f"b{i}", cpu=f"{c}m", memory=f"{m}Mi") for i, (c, m) in enumerate(shapes)], types=types)
    assert not res.unschedulable
    apart = 0.0
    for (c, m) in set(shapes):
        n = shapes.count((c, m))
        costs = []
        for t in types:
            if L.INSTANCE_GPU_COUNT in t.labels or t.labels[L.INSTANCE_SIZE] == "metal":
                continue
            a = t.allocatable
            f = min(a["cpu"] // c, a["memory"] // (m * MI), a["pods"])
            if f > 0:
                costs.append(math.ceil(n / f) * t.cheapest_offering(capacity_types=["on-demand"]).price)
        apart += min(costs)
    assert round(apart, 2) == 5.53
    assert res.cost_per_hour <= 0.78 * apart, (res.cost_per_hour, apart)
    assert all(n.instance_type != "t4g.nano" for n in res.nodeclaims)


def test_constrained_pods_use_free_room_of_older_nodeclaims():
    # 60 hostname-anti-affine pods need 60 nodes; the small zone-spread pods that come after them (queue
    # order is cpu desc) fit in the room those nodes' launch types have left, also on the older ones
    # outside the recent window, so no node is added and the launch types do not change
    anti = [pod(f"a{i}", cpu="1", memory="1Gi", labels={"app": "solo"},
                affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "solo"}}, "topologyKey": L.HOSTNAME}]}})
            for i in range(60)]
    alone = run(anti)
    assert len(alone.nodeclaims) == 60
    spread = [pod(f"s{i}", cpu="100m", memory="64Mi", labels={"app": "web"},
                  topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": L.ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                              "labelSelector": {"matchLabels": {"app": "web"}}}])
              for i in range(120)]
    res = run(anti + spread)
    assert not res.unschedulable
    assert len(res.nodeclaims) == 60
    assert abs(res.cost_per_hour - alone.cost_per_hour) < 1e-9
    zones = {}
    for n in res.nodeclaims:
        k = sum(1 for p in n.pods if p.startswith("default/s"))
        if k:
            zones[n.zone] = zones.get(n.zone, 0) + k
            assert n.requirements.get(L.ZONE).values == {n.zone}  # narrowed to the chosen zone
    assert sum(zones.values()) == 120 and max(zones.values()) - min(zones.values()) <= 1 and len(zones) == 3


def test_repack_empties_poorly_filled_nodes_into_free_room():
    from types import SimpleNamespace

    from karpenter_lambda.scheduling.packer import repack
    from karpenter_lambda.scheduling.valuation import TypeView

    def _repack(plan, types):
        return repack(plan, TypeView(types))

    small = SimpleNamespace(name="small", avail=(2000, 4 * GI, 10))
    big = SimpleNamespace(name="big", avail=(8000, 16 * GI, 40))
    types = [(1.0, small), (4.0, big)]
    one = (1000, GI, 1)
    # three nodes each holding one 1-CPU pod: two of them fit in one launch type, so one node goes
    out = _repack([(small, {one: 1}, 3)], types)
    assert sum(n for _, _, n in out) == 2
    assert sorted((fill[one], n) for _, fill, n in out) == [(1, 1), (2, 1)]
    assert sum(p * n for (t, _, n) in out for p, tt in types if tt is t) == 2.0
    # a node planned on the big type but holding little launches as the small one, and no pod is lost
    out = _repack([(big, {one: 1}, 1), (small, {(500, GI, 1): 2}, 1)], types)
    assert sum(fill.get(one, 0) * n for _, fill, n in out) == 1
    assert sum(fill.get((500, GI, 1), 0) * n for _, fill, n in out) == 2
    assert all(t is small for t, _, _ in out)


def test_the_bin_packer_keeps_the_vectors_apart_when_that_is_cheaper(monkeypatch):
    """19 pods of 100m/3Gi and 5 of 250m/512Mi: the two valuations' mixed fills cost more than each shape on its own
    exact cover (packer.apart_plan), which the packer now keeps; without that candidate the plan costs more."""
    from karpenter_lambda.scheduling import packer

    pods = ([pod(f"m-{i}", cpu="100m", memory="3Gi") for i in range(19)]
            + [pod(f"s-{i}", cpu="250m", memory="512Mi") for i in range(5)])
    with_apart = run(pods)
    monkeypatch.setattr(packer, "apart_plan", lambda *a: None)
    without = run(pods)
    assert not with_apart.unschedulable and not without.unschedulable
    assert with_apart.cost_per_hour < without.cost_per_hour - 1e-9, (with_apart.cost_per_hour, without.cost_per_hour)


def test_a_pods_dra_resource_claims_are_not_read():
    """Karpenter's default --ignore-dra-requests=true: a pod asking for a GPU through a DRA claim is scheduled on its
    CPU and memory alone (the same NodeClaim as without the claim), not left unschedulable."""
    plain = pod("dra-0", cpu="1", memory="1Gi")
    claimed = pod("dra-0", cpu="1", memory="1Gi")
    claimed["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}]
    claimed["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    a, b = run([plain]), run([claimed])
    assert not b.unschedulable
    assert [(n.instance_type, n.pods) for n in b.nodeclaims] == [(n.instance_type, n.pods) for n in a.nodeclaims]


def test_the_exact_cover_reads_one_type_per_allocatable_vector():
    """packer.cover_plan takes each allocatable vector's cheapest type only (the others hold as many pods for more):
    its plan costs what the cover over every type costs, and never uses a dearer twin of a vector."""
    import random
    from dataclasses import dataclass

    from karpenter_lambda.scheduling.cover import min_cost_cover
    from karpenter_lambda.scheduling.model import fit_count
    from karpenter_lambda.scheduling.packer import cover_plan
    from karpenter_lambda.scheduling.valuation import TypeView

    @dataclass(frozen=True)
    class Opt:
        name: str
        avail: tuple

    rng = random.Random(7)
    vecs = [(1000 * c, GI * m, 110) for c in (1, 2, 4, 8) for m in (2, 4, 8, 16)]
    types = sorted(((round(rng.uniform(0.01, 0.9), 4), Opt(f"t{i}", rng.choice(vecs))) for i in range(60)),
                   key=lambda x: x[0])
    view = TypeView(types)
    for v, q in (((500, GI, 1), 37), ((1500, 3 * GI, 1), 11), ((250, 5 * GI, 1), 64)):
        every = min_cost_cover([(fit_count(v, t.avail, [0, 0, 0]), p) for p, t in types], q)
        best = sum(n * p for n, (p, _) in zip(every, types))
        plan, placed, _ = cover_plan(view, {v: q}, fit_count)
        assert placed == q and sum(k[v] * n for _, k, n in plan) == q
        assert abs(sum(view.cheapest[t.avail] * n for t, _, n in plan) - best) < 1e-9
        assert all(view.cheapest[t.avail] == p for p, t in types if any(t is x for x, _, _ in plan))
