"""The disruption executor leaves no node stranded (issue 21 defect 6): a replacement that never initializes is
abandoned after 10 minutes (taint removed, budget slot released, replacement kept); a cancellation on re-validation
removes a taint an interrupted step left; a stale karpenter.sh/disrupted taint with nothing in flight is removed."""

from karpenter_lambda.controllers.disruption_exec import REPLACEMENT_TIMEOUT
from karpenter_lambda.adapters.store.ledger import DisruptionLedger

DISRUPTED = "karpenter.sh/disrupted"


def _change_nodepool(d, fn):
    def mutate(np):
        fn(np.doc["spec"])
    d.w.store.update("NodePool", "default", mutate)


def _tainted(d, node_name: str) -> bool:
    node = d.w.server.store.get("nodes", node_name)
    return any(t["key"] == DISRUPTED for t in (node.get("spec") or {}).get("taints") or [])


def _ledger(d) -> dict:
    env = d.w.env
    return DisruptionLedger(env.dynamodb, env.config.cluster, env.config.state_table).entries()


def _tick_without_joining(d, seconds: float, sweep: str = "drift") -> dict:
    """Advance the clock and run the sweep and the lifecycle, but no new instance registers a Node."""
    d.w.clock.advance(seconds)
    out = {sweep: d.w.invoke(sweep)}
    out["lifecycle"] = d.w.sweep()
    return out


def test_a_replacement_that_never_initializes_is_abandoned_after_ten_minutes(make_world):
    d = make_world(consolidate_after="Never")
    (old,) = d.nodes_with_pods([2])
    _change_nodepool(d, lambda s: s["template"].setdefault("metadata", {}).setdefault("labels", {}).update(team="x"))
    assert [p["nodeClaim"] for p in _tick_without_joining(d, 30)["drift"]["proposed"]] == [old["name"]]
    out = _tick_without_joining(d, 30)
    (rep,) = out["drift"]["replacing"][0]["replacements"]
    assert _tainted(d, old["nodeName"]) and old["name"] in _ledger(d)
    waited = 0.0
    while waited + 60 < REPLACEMENT_TIMEOUT:       # still waiting: nothing abandoned yet
        out = _tick_without_joining(d, 60)
        waited += 60
        assert out["drift"]["failed"] == [] and _tainted(d, old["nodeName"])
    out = _tick_without_joining(d, 61)
    (f,) = out["drift"]["failed"]
    assert f["nodeClaim"] == old["name"] and "not initialized within 10m" in f["why"] and rep in f["why"]
    assert not _tainted(d, old["nodeName"])          # the old node schedules again
    assert old["name"] not in _ledger(d)             # its budget slot is free
    assert d.alive() == {old["name"], rep}           # the replacement is left to consolidation
    assert len(d.pods_on(old["nodeName"])) == 2


def test_a_cancellation_on_revalidation_removes_a_taint_left_by_an_interrupted_step(make_world):
    d = make_world(consolidate_after="Never")
    (old,) = d.nodes_with_pods([1])
    _change_nodepool(d, lambda s: s["template"].setdefault("metadata", {}).setdefault("labels", {}).update(team="y"))
    assert [p["nodeClaim"] for p in d.tick(5, "drift")["drift"]["proposed"]] == [old["name"]]
    # an earlier execution tainted the node and stopped (crash) before launching; meanwhile the node got protected
    d.w.env.kube.patch_node_taints(old["nodeName"], add=[{"key": DISRUPTED, "effect": "NoSchedule"}])
    d.w.server.store.patch("nodes", old["nodeName"], {"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}})
    out = d.tick(30, "drift")
    assert [c["nodeClaim"] for c in out["drift"]["cancelled"]] == [old["name"]]
    assert not _tainted(d, old["nodeName"])
    assert _ledger(d) == {}


def test_a_stale_disrupted_taint_is_removed_but_a_deleting_node_keeps_its_taint(make_world):
    d = make_world(consolidate_after="Never")
    a, b = d.nodes_with_pods([1, 1])
    for x in (a, b):
        d.w.env.kube.patch_node_taints(x["nodeName"], add=[{"key": DISRUPTED, "effect": "NoSchedule"}])
    # b is being deleted (its drain holds: a finalizer-free pod would go at once, so check right after the request)
    from karpenter_lambda.controllers.termination import Terminator

    env = d.w.env
    Terminator(env.store, env.kube, None, env.claims).request(
        env.store.get("NodeClaim", b["name"]), "test")
    d.w.clock.advance(10)
    out = d.w.invoke("consolidation")
    assert out["untainted"] == [a["nodeName"]]
    assert not _tainted(d, a["nodeName"]) and _tainted(d, b["nodeName"])
    assert d.w.invoke("consolidation")["untainted"] == []
