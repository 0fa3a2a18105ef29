"""Issue 29 item 4: exhaustive crash points.  For the cheapest step of the lifecycle, consolidation and interruption
functions (the provisioner's, drift's and off-peak's run in the bench, ``bench/crashpoints.py``, to keep the suite
within its time; the provisioner's CreateFleet crash is still checked below) the real handler crashes before and after each external call it makes,
the system recovers (SQS redelivery, the next sweeps, the virtual clock) and the end state holds: no leaked
instance, no lost pod, no stranded disrupted taint, no budget slot held, one instance per NodeClaim, DynamoDB
usage equal to the live claims.  The interruption handler's cheapest step is the state change (``stopping``: the
replacement capacity launched at once, the deletion, the taint);
the rebalance path is crashed at its key writes.  The full matrix (every step, every interruption kind) is
``bench/crashpoints.py``; docs/crash-points.md."""

from __future__ import annotations

import os

import pytest

from karpenter_lambda.sim.faults.crashpoint_scenarios import CHEAPEST, SCENARIOS, Provisioner
from karpenter_lambda.sim.faults.crashpoints import (AFTER, BEFORE, Call, crash_points, equivalence, is_read,
                                                     run_scenario)

os.environ.setdefault("KARPENTER_LAMBDA_REPO", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))


def test_reads_and_writes():
    assert is_read("ec2", "DescribeInstances") and is_read("dynamodb", "Query") and is_read("kube", "LIST pods")
    assert is_read("kube", "GET nodes/n1") and is_read("eks", "Get /clusters")
    for svc, op in (("ec2", "CreateFleet"), ("dynamodb", "TransactWriteItems"), ("kube", "EVICT pods default/p"),
                    ("kube", "PATCH nodes/n1"), ("iam", "CreateInstanceProfile"), ("eks", ""), ("sqs", "SendMessage")):
        assert not is_read(svc, op), (svc, op)
    assert Call(3, "kube", "PATCH nodes/ip-10-0-1-2.ec2.internal").site == "kube.PATCH nodes"
    assert Call(4, "kube", "CREATE events -n default").site == "kube.CREATE events"


def test_equivalent_points_are_those_after_the_same_writes():
    calls = [Call(1, "dynamodb", "Query"), Call(2, "ec2", "CreateFleet"), Call(3, "dynamodb", "GetItem"),
             Call(4, "dynamodb", "PutItem"), Call(5, "kube", "GET nodes/a")]
    eq = equivalence(calls)
    assert set(eq) == set(crash_points(calls)) and len(eq) == 10
    # nothing written yet: the representative is "before the first write"
    assert eq[(1, BEFORE)] == eq[(1, AFTER)] == eq[(2, BEFORE)] == (2, BEFORE)
    # after CreateFleet, up to the next write: one class, represented by "after CreateFleet"
    assert eq[(2, AFTER)] == eq[(3, BEFORE)] == eq[(3, AFTER)] == eq[(4, BEFORE)] == (2, AFTER)
    assert eq[(4, AFTER)] == eq[(5, BEFORE)] == eq[(5, AFTER)] == (4, AFTER)
    assert len(set(eq.values())) == 3          # writes + 1 runs cover all ten points


# the suite's share (its 5-minute budget): lifecycle, consolidation and interruption; the provisioner's, drift's and
# off-peak's steps run in the bench (bench/crashpoints.py, every step exhaustively: 1,004 points, 0 failed)
IN_SUITE = [n for n in CHEAPEST if n.split("/")[0] in ("lifecycle", "consolidation", "interruption")]


@pytest.mark.parametrize("name", IN_SUITE)
def test_every_crash_point_recovers(name):
    calls, rows = run_scenario(SCENARIOS[name](), jobs=2)
    baseline, points = rows[0], rows[1:]
    assert baseline.result == "ok", baseline.problems
    # exhaustive: every (call, before|after) of the step has a row, run or equal to a run
    assert [(r.index, r.when) for r in points] == crash_points(calls)
    ran = [r for r in points if not r.result.startswith("same as")]
    assert len(ran) == sum(c.write for c in calls) + 1
    bad = [(r.index, r.when, r.call, r.result, r.problems) for r in ran if r.result != "ok"]
    assert bad == [], bad


def test_rebalance_crashes_around_the_budget_slot_the_launch_and_the_taint():
    """The rebalance path (budget slot in the ledger, replacement, deletion, taint): a crash right after each of
    its key writes recovers (the whole step, every point: bench/crashpoints.py interruption/rebalance)."""

    def key_points(calls):
        sites = [c.site for c in calls]
        reserve = sites.index("dynamodb.UpdateItem") + 1
        fleet = sites.index("ec2.CreateFleet") + 1
        taint = len(sites) - sites[::-1].index("kube.PATCH nodes")
        return [(reserve, AFTER), (fleet, AFTER), (taint, BEFORE), (taint, AFTER)]

    _calls, rows = run_scenario(SCENARIOS["interruption/rebalance"](), only=key_points, jobs=2)
    assert rows[0].result == "ok", rows[0].problems
    assert len(rows) == 5
    bad = [(r.index, r.when, r.call, r.result, r.problems) for r in rows[1:] if r.result != "ok"]
    assert bad == [], bad


def test_the_critical_calls_are_crash_points():
    """The calls where a crash splits state between EC2, DynamoDB and Kubernetes are among the recorded points."""
    sites = {c.site for c in run_scenario(SCENARIOS["provisioner/pending-pods"](), only=[])[0]}
    assert {"ec2.CreateFleet", "dynamodb.TransactWriteItems", "ec2.CreateLaunchTemplate"} <= sites, sites


class _NoRecovery(Provisioner):
    """The provisioner scenario with the recovery switched off (no redelivery, no sweeps)."""

    def after(self, cw, answer, died):
        return None

    def recover(self, cw):
        return []


def test_the_checks_see_an_unrecovered_crash():
    """Crash right after CreateFleet and recover nothing: the instance is leaked and the pods are lost."""
    def after_fleet(calls):   # chosen from the calls the run without a crash recorded (one set-up for both)
        return [(next(c.index for c in calls if c.site == "ec2.CreateFleet"), AFTER)]

    _calls, rows = run_scenario(_NoRecovery(), only=after_fleet)
    (row,) = rows[1:]
    assert row.result == "FAIL", row
    text = "; ".join(row.problems)
    assert "leaked instances" in text and "lost pods: default/web 0 of 2 running" in text, text
