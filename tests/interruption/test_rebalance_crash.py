"""Issue 29 item 6, fixes 1 and 3.

1. A rebalance delivery that dies (crash, Lambda timeout) between taking the NodePool's disruption-budget slot in
   the ledger and requesting the deletion must not hold that slot until the node dies: the redelivery of the same
   message resumes its own slot and completes the disruption; when no redelivery comes, the slot is released after
   a bounded time (the lifecycle sweep).  With a budget of one node, anything else stops every disruption of the
   NodePool.
3. A concurrent sweep's stale-taint cleanup must not remove the interruption handler's ``karpenter.sh/disrupted``
   taint before the deletion starts.
"""

from __future__ import annotations

import json

import pytest

from karpenter_lambda.adapters.store.ledger import DisruptionLedger
from karpenter_lambda.api.labels import has_disrupted_taint
from karpenter_lambda.controllers import interrupt
from karpenter_lambda.controllers.disrupt import DisruptionSweep
from karpenter_lambda.controllers.interrupt import STALE_RESERVATION_AGE, Interruption
from karpenter_lambda.controllers.interruption_messages import parse_message

from .interruption_world import rebalance, state_change


class Crash(BaseException):
    """The Lambda process dies (a BaseException: no ``except Exception`` in the code under test can repair it)."""


def _ledger(w) -> DisruptionLedger:
    return DisruptionLedger(w.env.dynamodb, w.env.config.cluster, w.env.config.state_table)


def _deleting(w, name) -> bool:
    return bool(w.store.get("NodeClaim", name).metadata.get("deletionTimestamp"))


def _crash_after_reservation(iw, monkeypatch, iid):
    """Deliver a rebalance recommendation whose invocation dies right after the budget slot was taken (in the
    replacement launch); the record becomes visible again, as after a crash."""
    w = iw.w

    def die(self, *a, **kw):
        raise Crash("the Lambda process died while launching the replacement")

    iw.put(rebalance(iid, w.clock.isoformat()))
    event = iw.receive(expect=1)
    with monkeypatch.context() as m:
        m.setattr(Interruption, "_replace", die)
        with pytest.raises(Crash):
            iw.invoke(event)
    for r in event["Records"]:   # the crashed invocation never answered: SQS makes the record visible again
        w.sqs.change_message_visibility(QueueUrl=iw.queue_url, ReceiptHandle=r["receiptHandle"], VisibilityTimeout=0)


def test_the_redelivery_of_a_crashed_rebalance_resumes_its_own_budget_slot(iw_factory, monkeypatch):
    iw = iw_factory(rebalance_replace=True, budgets='[{nodes: "1"}]')
    w = iw.w
    a, _b = iw.nodes_with_pods([1, 1], cpu="1500m")
    name = a["nodeClaim"].name
    _crash_after_reservation(iw, monkeypatch, a["instance"]["InstanceId"])
    (e,) = _ledger(w).entries().values()           # the crash left the slot taken, nothing deleting
    assert e.nodeclaim == name and e.sweep == "interruption" and not _deleting(w, name)

    w.clock.advance(90)                               # the queue's visibility timeout: the same message again
    assert iw.invoke(iw.receive(expect=1)) == {"batchItemFailures": []}
    r = iw.report
    assert [d["nodeClaim"] for d in r.disrupted] == [name], r.ignored   # not dropped as "already being disrupted"
    assert len(r.replacements) == 1 and w.store.get("NodeClaim", r.replacements[0]) is not None
    assert _deleting(w, name)
    assert has_disrupted_taint(w.server.store.get("nodes", a["node"]["metadata"]["name"]))
    (e2,) = _ledger(w).entries().values()             # still one slot: the resumed one, counted until the node is gone
    assert e2.nodeclaim == name and e2.proposed_at == e.proposed_at


def test_a_dead_rebalance_slot_is_released_after_a_bounded_time(iw_factory, monkeypatch):
    iw = iw_factory(rebalance_replace=True, budgets='[{nodes: "1"}]')
    w = iw.w
    a, b = iw.nodes_with_pods([1, 1], cpu="1500m")
    _crash_after_reservation(iw, monkeypatch, a["instance"]["InstanceId"])
    iw.receive(expect=1)                              # the redelivery is lost too (e.g. it expired, or the DLQ)
    assert set(_ledger(w).entries()) == {a["nodeClaim"].name}

    w.clock.advance(60)
    w.sweep()                                          # too young: a live delivery may still hold it
    assert set(_ledger(w).entries()) == {a["nodeClaim"].name}

    w.clock.advance(STALE_RESERVATION_AGE)
    out = w.sweep()                                    # the lifecycle sweep, every minute
    assert _ledger(w).entries() == {}, out
    assert not _deleting(w, a["nodeClaim"].name)
    # the NodePool can be disrupted again: a rebalance of b gets the slot
    assert iw.deliver(rebalance(b["instance"]["InstanceId"], w.clock.isoformat())) == {"batchItemFailures": []}
    assert [d["nodeClaim"] for d in iw.report.disrupted] == [b["nodeClaim"].name], iw.report.ignored


def test_a_slot_whose_nodeclaim_is_deleting_is_kept(iw_factory):
    iw = iw_factory(rebalance_replace=True, budgets='[{nodes: "1"}]')
    w = iw.w
    (a,) = iw.nodes_with_pods([1], cpu="1500m")
    assert iw.deliver(rebalance(a["instance"]["InstanceId"], w.clock.isoformat())) == {"batchItemFailures": []}
    assert _deleting(w, a["nodeClaim"].name)
    released = interrupt.release_stale_reservations(_ledger(w), w.store, w.clock.now() + 2 * STALE_RESERVATION_AGE)
    assert released == [] and set(_ledger(w).entries()) == {a["nodeClaim"].name}


def test_a_concurrent_sweep_never_removes_the_interruption_taint(iw):
    """A consolidation sweep runs between each step of the interruption handler (before and after the deletion
    request); its stale-taint cleanup must leave the handler's taint alone."""
    w = iw.w
    (a,) = iw.nodes_with_pods([1])
    node_name = a["node"]["metadata"]["name"]
    sweep = DisruptionSweep.from_environment(w.env, "consolidation")
    handler = Interruption.from_environment(w.env)
    real_request = handler.terminator.request
    untainted: list[str] = []

    def request_with_a_concurrent_sweep(nc, reason, **kw):
        untainted.extend(sweep.sweep().untainted)
        out = real_request(nc, reason, **kw)
        untainted.extend(sweep.sweep().untainted)
        return out

    handler.terminator.request = request_with_a_concurrent_sweep
    msg = parse_message(json.dumps(state_change(a["instance"]["InstanceId"], "stopping",
                                                              w.clock.isoformat())))
    report = handler.handle([msg])
    assert [d["nodeClaim"] for d in report.disrupted] == [a["nodeClaim"].name]
    assert untainted == []
    assert _deleting(w, a["nodeClaim"].name)
    assert has_disrupted_taint(w.server.store.get("nodes", node_name))
    # and after the handler: the taint of a deleting NodeClaim stays
    assert sweep.sweep().untainted == [] and has_disrupted_taint(w.server.store.get("nodes", node_name))
