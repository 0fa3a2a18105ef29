"""Every recovery path proven by a fault run that fails without it (issue 29 item 1): the scripted run through
every path (karpenter_lambda/sim/faults/targeted.py) holds every invariant and loses nothing; with each recovery
path switched off (sim/faults/mutations.py) it FAILS, caught by the invariant the mutation names."""

from __future__ import annotations

import pytest

from karpenter_lambda.sim.faults import LOSS_KEYS
from karpenter_lambda.sim.faults.mutations import MUTATIONS, switched_off
from karpenter_lambda.sim.faults.targeted import run_targeted


def test_targeted_run_holds_without_mutations():
    r = run_targeted()
    assert r["stopped"] is None
    assert not any(r["invariant_violations"].values()), r["violations"]
    for k in LOSS_KEYS:
        assert r[k] == 0, (k, r["detail"])
    # the scripted faults all hit: two crashes around CreateFleet, one after the claim transaction, throttled writes
    # of the interruption handler, a drift replacement whose node never becomes Ready
    assert r["faults"]["crash"] == 3 and r["faults"]["kubelet_broken"] >= 1 and r["faults"]["ddb_throttle"] > 0, r["faults"]
    assert r["retries"].get("sqs_redelivery", 0) > 0, r["retries"]   # the throttled interruption record came back
    assert r["scenario_events"].get("planted") == 2, r["scenario_events"]   # the orphan instance and the taint


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_each_mutation_is_caught(name):
    """Each run stops at the first violation of an invariant its mutation names (9-20 virtual minutes)."""
    m = MUTATIONS[name]
    r = run_targeted(name)
    caught = [k for k in m.caught_by if r["invariant_violations"].get(k)]
    assert caught, (name, r["invariant_violations"], r["violations"], r["detail"])
    assert r["stopped"], r["stopped"]


def test_switches_restore_the_code():
    from karpenter_lambda.controllers import disruption_exec, lifecycle
    from karpenter_lambda.controllers.launcher import Launcher

    adopt, resolve = Launcher.adopt, Launcher.resolve
    timeout, age = disruption_exec.REPLACEMENT_TIMEOUT, lifecycle.STALE_CLAIM_AGE
    for name in MUTATIONS:
        with switched_off(name):
            pass
    assert (Launcher.adopt, Launcher.resolve) == (adopt, resolve)
    assert (disruption_exec.REPLACEMENT_TIMEOUT, lifecycle.STALE_CLAIM_AGE) == (timeout, age)
    with switched_off("replacement_timeout"):
        assert disruption_exec.REPLACEMENT_TIMEOUT == float("inf")
