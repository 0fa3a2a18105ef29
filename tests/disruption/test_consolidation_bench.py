"""bench/consolidation.py at a small size: its JSON keys (a contract), and sweeps that only ever lower the cost.

The figures themselves (1,000 nodes, seconds, RSS, the ratio to the bound) are the benchmark's job (``make bench``),
never a timed assert here."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONTRACT = ("nodes_before", "nodes_after", "cost_before", "cost_after", "lower_bound_cost", "seconds", "peak_rss_mb",
            "moves")


def _run(*args) -> dict:
    env = {**os.environ, "KARPENTER_LAMBDA_CATALOG_SOURCE": "moto-bundled"}   # the same data, read directly
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "consolidation.py"), "--json", *args],
                         capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


def test_sweeps_carried_out_lower_the_cost_toward_the_bound():
    pytest.importorskip("scipy", reason="the bounds are LPs (scipy, installed by make test)")
    blockers = "heavy"
    row, err = _run("--nodes", "40", "--pods", "600", "--budget", "100%", "--sweeps", "3", "--blockers", blockers)
    for key in CONTRACT:
        assert key in row, key
    assert row["blockers"] == blockers and row["sweeps"] >= 1
    assert "sweep 1/3:" in err   # progress on stderr for a long run
    assert row["moves"] >= 1 and row["nodes_after"] < row["nodes_before"]
    assert row["cost_after"] < row["cost_before"]
    costs = [row["cost_before"], row["cost_after"]] + [s["cost"] for s in row["later_sweeps"]]
    assert all(b <= a + 1e-6 for a, b in zip(costs, costs[1:])), costs      # every valid step is cheaper
    assert row["cost_final"] >= row["lower_bound_cost"] - 1e-6            # a bound is a bound
    assert row["lower_bound_cost_with_blocked"] >= row["lower_bound_cost"] - 1e-6
    assert row["cancelled"] == 0   # each command re-validated in order on the result of the ones before holds


def test_heavy_blockers_block_more_nodes_on_the_same_cluster():
    pytest.importorskip("scipy", reason="the bounds are LPs (scipy, installed by make test)")
    few, _ = _run("--nodes", "30", "--pods", "400")
    heavy, _ = _run("--nodes", "30", "--pods", "400", "--blockers", "heavy")
    assert few["nodes_before"] == heavy["nodes_before"] and few["cost_before"] == heavy["cost_before"]
    assert heavy["blocked_for_good"] > few["blocked_for_good"]
