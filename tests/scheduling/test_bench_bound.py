"""bench/scheduling.py's fit-aware LP bound drops dominated node types (``undominated``); the optimum must not move."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location("bench_scheduling", Path(__file__).resolve().parents[2] / "bench" / "scheduling.py")
bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)


class _Offering:
    def __init__(self, price: float):
        self.price = price


class _Type:
    def __init__(self, cpu: int, mem_mib: int, pods: int, price: float):
        self.allocatable = {"cpu": cpu, "memory": mem_mib * 2**20, "pods": pods}
        self._o = _Offering(price)

    def cheapest_offering(self):
        return self._o


def _lp(types, vectors, prune: bool):
    if prune:
        return bench.fit_lower_bound(types, vectors)
    keep = bench.undominated
    bench.undominated = lambda items: items
    try:
        return bench.fit_lower_bound(types, vectors)
    finally:
        bench.undominated = keep


@pytest.mark.parametrize("seed", range(6))
def test_dropping_dominated_types_keeps_the_lp_optimum(seed):
    pytest.importorskip("scipy", reason="the bound is an LP (scipy, installed by make test)")

    rnd = random.Random(seed)
    types = []
    for _ in range(60):
        cpu = rnd.choice([1000, 2000, 4000, 8000, 16000])
        mem = cpu // 1000 * rnd.choice([1024, 2048, 4096, 8192])
        types.append(_Type(cpu, mem, rnd.choice([8, 29, 58, 110]), round(rnd.uniform(0.3, 1.5) * cpu / 4000, 4)))
    types.append(types[3])   # an identical twin: exactly one of the two is kept
    vectors = {(rnd.choice([100, 250, 500, 1500, 3000]), rnd.choice([128, 512, 2048, 6000]) * 2**20): rnd.randint(1, 40)
               for _ in range(12)}
    items = [(t.allocatable["cpu"], t.allocatable["memory"] / 2**20, t.allocatable["pods"], t.cheapest_offering().price,
              [j for j, (c, m) in enumerate(vectors) if c <= t.allocatable["cpu"] and m <= t.allocatable["memory"]])
             for t in types]
    items = [i for i in items if i[4]]
    kept = bench.undominated(items)
    assert 0 < len(kept) < len(items)          # something was dropped, something kept
    full, pruned = _lp(types, vectors, prune=False), _lp(types, vectors, prune=True)
    assert full is not None and pruned == pytest.approx(full, rel=1e-7)
