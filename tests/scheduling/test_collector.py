"""scheduling/collector.py: the collector is off inside the scheduler's calls and as it was after them."""

from __future__ import annotations

import gc

import pytest

from builders import pod, pv, pvc, snapshot, storageclass, with_claims
from karpenter_lambda.scheduling import solve
from karpenter_lambda.scheduling.collector import paused
from karpenter_lambda.scheduling.inputs import scheduling_input


@pytest.fixture(autouse=True)
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


def test_paused_turns_the_collector_off_and_restores_it_even_on_errors_and_when_nested():
    with paused():
        assert not gc.isenabled()
        with paused():
            assert not gc.isenabled()
        assert not gc.isenabled()   # the inner block does not turn on what the outer one paused
    assert gc.isenabled()
    with pytest.raises(ValueError), paused():
        raise ValueError("boom")
    assert gc.isenabled()
    gc.disable()
    with paused():
        pass
    assert not gc.isenabled()      # off before, off after


def test_the_scheduler_calls_leave_the_collector_as_they_found_it():
    storage = [storageclass(), pv("pv-0", claim="data"), pvc("data", volume="pv-0")]
    snap = snapshot(pods=[with_claims(pod("db-0", cpu="1"), "data")], storage=storage)
    inp, _ = scheduling_input(snap, snap.pending_pods())
    assert gc.isenabled()
    res = solve(inp)
    assert gc.isenabled() and res.unschedulable == [] and len(res.nodeclaims) == 1
