"""Budgets, do-not-disrupt and PDBs, and concurrent sweeps, through the real handlers."""

import threading
from datetime import datetime, timezone

from karpenter_lambda.sim.world import atomic_aws_requests


def _proposed(out, sweep="consolidation"):
    return [p["nodeClaim"] for p in out[sweep]["proposed"]]


def test_budget_nodes_zero_blocks_with_an_explanation(make_world):
    d = make_world(consolidate_after="0s", budgets='[{nodes: "0"}]')
    empty, busy = d.nodes_with_pods([0, 1])
    out = d.tick(30, "consolidation")
    assert _proposed(out) == []
    (b,) = out["consolidation"]["blocked"]
    assert (b["nodeClaim"], b["cause"], b["reason"]) == (empty["name"], "budget", "Empty")
    assert "0 of 0 left" in b["message"]
    # reported once per node and cause, not every sweep
    assert d.tick(30, "consolidation")["consolidation"]["blocked"] == []
    assert d.w.store.get("NodeClaim", empty["name"]).status["disruptionBlocked"]["cause"] == "budget"


def _advance_to_hour(d, hour: int, minute: int = 0) -> None:
    """Advance the virtual clock to the next HH:MM UTC."""
    now = d.w.clock.now()
    day = 86400
    target = (now // day) * day + hour * 3600 + minute * 60
    if target <= now:
        target += day
    d.w.clock.advance(target - now)


def test_a_zero_budget_inside_its_cron_window(make_world):
    budgets = '[{nodes: "0", schedule: "0 9 * * *", duration: 8h}, {nodes: "100%"}]'
    d = make_world(consolidate_after="0s", budgets=budgets)
    empty, busy = d.nodes_with_pods([0, 1])
    _advance_to_hour(d, 10)                       # inside 09:00-17:00 UTC: the zero budget is active
    out = d.tick(30, "consolidation")
    assert _proposed(out) == [] and out["consolidation"]["blocked"][0]["cause"] == "budget"
    _advance_to_hour(d, 17, 1)                    # the window is over: the 100% budget alone applies
    out = d.tick(30, "consolidation")
    assert _proposed(out) == [empty["name"]]


def test_thirty_percent_of_ten_empty_nodes_is_three_per_sweep(make_world):
    d = make_world(consolidate_after="0s", budgets='[{nodes: "30%"}]')
    nodes = d.nodes_with_pods([0] * 10)
    out = d.tick(30, "consolidation")
    assert len(_proposed(out)) == 3
    assert sum(1 for b in out["consolidation"]["blocked"] if b["cause"] == "budget") == 7
    out = d.tick(30, "consolidation")          # the three execute; they still count until they are gone
    assert len(out["consolidation"]["disrupted"]) == 3 and _proposed(out) == []
    out = d.tick(30, "consolidation")          # gone: three more
    assert len(d.nodeclaims()) == 7 and len(_proposed(out)) == 3
    assert {x["name"] for x in nodes} >= d.nodeclaims()


def test_do_not_disrupt_on_a_pod_and_on_a_node(make_world):
    d = make_world(consolidate_after="Never")
    a, b = d.nodes_with_pods([1, 1])
    d.w.server.store.patch("pods", a["pods"][0]["metadata"]["name"],
                           {"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}, namespace="default")
    d.w.server.store.patch("nodes", b["nodeName"], {"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}})

    def mutate(np):
        np.doc["spec"]["template"].setdefault("metadata", {}).setdefault("labels", {})["team"] = "z"
    d.w.store.update("NodePool", "default", mutate)
    out = d.tick(30, "drift")
    assert out["drift"]["proposed"] == []
    causes = {x["nodeClaim"]: (x["cause"], x["message"]) for x in out["drift"]["blocked"]}
    assert causes[a["name"]][0] == "do-not-disrupt" and "pod default/app0-0" in causes[a["name"]][1]
    assert causes[b["name"]][0] == "do-not-disrupt" and f"node {b['nodeName']}" in causes[b["name"]][1]
    # the annotation removed: the drift goes ahead
    d.w.server.store.patch("nodes", b["nodeName"], {"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": None}}})
    out = d.tick(30, "drift")
    assert [p["nodeClaim"] for p in out["drift"]["proposed"]] == [b["name"]]


def _pdb(d, max_unavailable=0):
    d.w.server.store.create("poddisruptionbudgets", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "app0", "namespace": "default"},
        "spec": {"maxUnavailable": max_unavailable, "selector": {"matchLabels": {"app": "app0"}}}}, "default")


def _ready(d, pods):
    for p in pods:
        d.w.server.store.patch("pods", p["metadata"]["name"], {"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True"}]}}, namespace="default", subresource="status")


def test_a_pdb_blocks_emptiness_style_graceful_methods_without_a_grace_period(make_world):
    d = make_world(consolidate_after="Never")
    (a,) = d.nodes_with_pods([1])
    _ready(d, a["pods"])
    _pdb(d)

    def mutate(np):
        np.doc["spec"]["template"].setdefault("metadata", {}).setdefault("labels", {})["team"] = "z"
    d.w.store.update("NodePool", "default", mutate)
    out = d.tick(30, "drift")
    (b,) = out["drift"]["blocked"]
    assert b["cause"] == "PDB" and "default/app0" in b["message"]


def test_a_pdb_holds_a_drift_until_the_termination_grace_period(make_world):
    d = make_world(consolidate_after="Never", tgp="10m")
    (a,) = d.nodes_with_pods([1])
    _ready(d, a["pods"])
    _pdb(d)

    def mutate(np):
        np.doc["spec"]["template"].setdefault("metadata", {}).setdefault("labels", {})["team"] = "z"
    d.w.store.update("NodePool", "default", mutate)
    out = None
    for _ in range(4):                  # with a terminationGracePeriod the drift proceeds (eventual disruption)
        out = d.tick(30, "drift")
        if out["drift"]["disrupted"]:
            break
    assert out["drift"]["disrupted"]
    deleted_at = datetime.fromisoformat(d.w.store.get("NodeClaim", a["name"]).metadata["deletionTimestamp"].replace("Z", "+00:00")).timestamp()
    pod = a["pods"][0]["metadata"]["name"]
    # the PDB refuses every eviction (429), retried, until a sweep before the pod's delete time (deadline - its 30 s)
    while d.w.clock.now() < deleted_at + 600 - 30 - 2 * 60:
        out = d.tick(60, "drift")
        assert d.w.server.store.get("pods", pod, "default") is not None
        assert a["name"] in out["lifecycle"]["draining"]
        assert d.state(a["iid"]) == "running"
    status = d.w.store.get("NodeClaim", a["name"]).status["termination"]
    assert "PDB default/app0" in next(iter(status["blocked"].values()))
    for _ in range(3):                  # the deadline (minus the pod's 30 s grace): deleted, then the instance goes
        out = d.tick(60, "drift")
    assert d.w.server.store.get("pods", pod, "default") is None
    assert d.w.store.get("NodeClaim", a["name"]) is None and d.state(a["iid"]) in ("shutting-down", "terminated")


def test_two_concurrent_sweeps_stay_within_one_budget(make_world):
    d = make_world(consolidate_after="0s", budgets='[{nodes: "2"}]')
    nodes = d.nodes_with_pods([0, 0, 0, 0, 0])

    def mutate(np):   # drift them too: the drift and the consolidation sweep both want every node
        np.doc["spec"]["template"].setdefault("metadata", {}).setdefault("labels", {})["team"] = "z"
    d.w.store.update("NodePool", "default", mutate)
    d.w.clock.advance(30)
    results = {}

    def run(i, name):
        results[i] = d.w.invoke(name)

    with atomic_aws_requests():
        threads = [threading.Thread(target=run, args=(i, n)) for i, n in enumerate(("consolidation", "drift", "consolidation"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    from karpenter_lambda.adapters.store.ledger import DisruptionLedger

    proposed = [p["nodeClaim"] for r in results.values() for p in r["proposed"]]
    assert len(proposed) == len(set(proposed)) <= 2, results
    ledger = DisruptionLedger(d.w.env.dynamodb, d.w.cluster, d.w.env.config.state_table).entries()
    assert len(ledger) == 2, ledger
    assert len({n for n in ledger}) == 2


def test_a_cause_told_for_one_disruption_reason_is_told_again_for_another(make_world):
    """A PDB holding a node is explained once per reason: told for Underutilized by the consolidation sweep, it is
    told again when it holds the node's drift (status.disruptionBlocked.seen keeps the reason/cause pairs), and not
    again at the next sweep of either."""
    d = make_world(policy="WhenEmptyOrUnderutilized", consolidate_after="0s")
    (a, _b) = d.nodes_with_pods([1, 1])
    _ready(d, a["pods"])
    _pdb(d)
    out = d.tick(30, "consolidation")
    told = [(x["reason"], x["cause"]) for x in out["consolidation"]["blocked"] if x["nodeClaim"] == a["name"]]
    assert ("Underutilized", "PDB") in told

    def mutate(np):
        np.doc["spec"]["template"].setdefault("metadata", {}).setdefault("labels", {})["team"] = "z"
    d.w.store.update("NodePool", "default", mutate)
    out = d.tick(30, "drift")
    assert [(x["reason"], x["cause"]) for x in out["drift"]["blocked"] if x["nodeClaim"] == a["name"]] == \
        [("Drifted", "PDB")]
    status = d.w.store.get("NodeClaim", a["name"]).status["disruptionBlocked"]
    assert {"Underutilized/PDB", "Drifted/PDB"} <= set(status["seen"]) and status["causes"].count("PDB") == 1
    out = d.tick(30, "consolidation", "drift")
    assert not [x for s in ("consolidation", "drift") for x in out[s]["blocked"] if x["nodeClaim"] == a["name"]]
