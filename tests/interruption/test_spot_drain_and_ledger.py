"""Issue 21 defect 10: a spot warning starts the drain in the same invocation (not at the next lifecycle tick, up to
60 s of the 2-minute notice later); a rebalance replacement takes its budget slot in the sweeps' ledger, so an
in-flight sweep disruption counts against it and the sweeps see the rebalance."""

from karpenter_lambda.adapters.store.ledger import DELETING, DisruptionLedger, Entry

from .interruption_world import rebalance, spot_warning


def _ledger(w) -> DisruptionLedger:
    return DisruptionLedger(w.env.dynamodb, w.env.config.cluster, w.env.config.state_table)


def test_a_spot_warning_evicts_the_pods_in_the_same_invocation(iw):
    w = iw.w
    (a,) = iw.nodes_with_pods([3])
    iid, node = a["instance"]["InstanceId"], a["node"]["metadata"]["name"]
    before = len(w.server.requests("POST", r"/eviction$"))
    assert iw.deliver(spot_warning(iid, w.clock.isoformat())) == {"batchItemFailures": []}
    # no lifecycle sweep has run: the handler itself evicted the node's pods
    evicted = [path for _m, path, code in w.server.requests("POST", r"/eviction$")[before:] if code < 300]
    assert sorted(p.split("/pods/")[1].split("/")[0] for p in evicted) == sorted(p["metadata"]["name"] for p in a["pods"])
    assert [p for p in w.server.store.list("pods") if (p.get("spec") or {}).get("nodeName") == node] == []
    nc = w.store.get("NodeClaim", a["nodeClaim"].name)
    assert nc.status["termination"]["startedAt"] and len(nc.status["termination"]["evicted"]) == 3
    assert iw.state(iid) == "running"            # the instance is left to the lifecycle sweep (drained first)


def test_a_sweeps_in_flight_disruption_counts_against_the_rebalance_budget(iw_factory):
    iw = iw_factory(rebalance_replace=True, budgets='[{nodes: "1"}]')
    w = iw.w
    a, b = iw.nodes_with_pods([1, 1], cpu="1500m")
    ledger = _ledger(w)
    # a drift sweep proposed node a (recorded in the ledger, not deleting yet): the budget's one slot is taken
    assert ledger.reserve(Entry(nodeclaim=a["nodeClaim"].name, nodepool=a["nodeClaim"].nodepool_name, reason="Drifted",
                                sweep="drift", proposed_at=w.clock.now()),
                          max_before=0)
    assert iw.deliver(rebalance(b["instance"]["InstanceId"], w.clock.isoformat())) == {"batchItemFailures": []}
    r = iw.report
    assert r.disrupted == [] and r.rebalance[0]["replace"] is False
    (ignored,) = [x for x in r.ignored if "disruption budget" in x["reason"]]
    assert ignored["nodeClaim"] == b["nodeClaim"].name and "1 in flight" in ignored["reason"]
    assert not w.store.get("NodeClaim", b["nodeClaim"].name).metadata.get("deletionTimestamp")
    assert set(ledger.entries()) == {a["nodeClaim"].name}


def test_a_rebalance_is_recorded_in_the_ledger_for_the_sweeps(iw_factory):
    iw = iw_factory(rebalance_replace=True, budgets='[{nodes: "1"}]')
    w = iw.w
    a, b = iw.nodes_with_pods([1, 1], cpu="1500m")
    assert iw.deliver(rebalance(a["instance"]["InstanceId"], w.clock.isoformat())) == {"batchItemFailures": []}
    assert len(iw.report.disrupted) == 1
    (e,) = _ledger(w).entries().values()
    assert (e.nodeclaim, e.reason, e.sweep, e.state) == (a["nodeClaim"].name, "RebalanceRecommendation", "interruption",
                                                         DELETING)
    # the NodePool's one slot is used: a drift sweep's reservation for b is refused by the same ledger
    b_entry = Entry(nodeclaim=b["nodeClaim"].name, nodepool=b["nodeClaim"].nodepool_name, reason="Drifted", sweep="drift")
    assert _ledger(w).reserve(b_entry, max_before=0) is False
