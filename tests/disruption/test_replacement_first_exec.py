"""Replacement before drain, always (issue 28 item 4): the executor's side, through the real drift handler (moto, the
local API server, a virtual clock).  The decisions themselves are tested on snapshots in test_replacement_first.py.

* expiration launches the replacement its pod needs and drains only once it is Initialized (test_drift.py);
* a replacement that never initializes: the node is un-tainted and kept (expiration too), the next sweep tries again;
* expiration stays forceful when the NodePool's limits refuse the replacement;
* the last look before the drain: a pod that lost the room counted for it gets one more replacement first.
"""

from __future__ import annotations

from karpenter_lambda.api import labels as L


def _tainted(d, node_name: str) -> bool:
    node = d.w.server.store.get("nodes", node_name)
    return any(t["key"] == L.DISRUPTED_TAINT_KEY for t in (node["spec"].get("taints") or []))


def _set_nodepool(d, fn):
    def mutate(np):
        fn(np.doc["spec"])
    d.w.store.update("NodePool", "default", mutate)


def test_an_expired_nodes_replacement_that_never_initializes_untaints_and_keeps_it(make_world):
    d = make_world(consolidate_after="Never", expire_after="30m")
    (old,) = d.nodes_with_pods([1])
    d.w.clock.advance(31 * 60)
    out = d.w.invoke("drift")                      # no lifecycle sweep, no join: the replacement stays pending
    (rep,) = out["replacing"][0]["replacements"]
    assert out["disrupted"] == [] and _tainted(d, old["nodeName"])
    d.w.clock.advance(11 * 60)
    out = d.w.invoke("drift")
    (f,) = out["failed"]
    assert f["nodeClaim"] == old["name"] and f["reason"] == "Expired" and "not initialized within 10m" in f["why"]
    assert not _tainted(d, old["nodeName"]) and old["name"] in d.alive() and len(d.pods_on(old["nodeName"])) == 1
    assert d.w.store.get("NodeClaim", rep) is not None          # kept: consolidation judges it
    # the replacement comes up after all: the next sweep expires the node onto it
    d.w.join_all(ready=True)
    d.w.sweep()
    out = d.w.invoke("drift")
    (ev,) = out["disrupted"]
    assert ev["nodeClaim"] == old["name"] and ev["reason"] == "Expired"


def test_expiration_stays_forceful_when_the_limits_refuse_its_replacement(make_world):
    d = make_world(consolidate_after="Never", expire_after="30m")
    (old,) = d.nodes_with_pods([1])
    cpu = d.w.store.get("NodeClaim", old["name"]).status["capacity"]["cpu"]
    _set_nodepool(d, lambda s: s.__setitem__("limits", {"cpu": str(cpu)}))   # no room while the old node counts
    out = d.tick(31 * 60, "drift")
    (ev,) = out["drift"]["disrupted"]
    assert ev["reason"] == "Expired" and ev["replacements"] == [] and out["drift"]["failed"] == []
    assert d.w.store.get("NodeClaim", old["name"]) is None


def test_a_pod_that_lost_its_room_before_the_drain_gets_another_replacement_first(make_world):
    d = make_world(consolidate_after="Never")
    (old,) = d.nodes_with_pods([1])
    _set_nodepool(d, lambda s: s["template"].setdefault("metadata", {}).setdefault("labels", {}).update(team="b"))
    d.tick(30, "drift")                                          # drifted, proposed
    out = d.tick(30, "drift")                                    # re-validated: the replacement launched (and up)
    (rep,) = out["drift"]["replacing"][0]["replacements"]
    assert d.w.store.get("NodeClaim", rep).is_true("Initialized")
    # meanwhile another pod lands on the replacement and fills it
    rep_node = d.w.store.get("NodeClaim", rep).status["nodeName"]
    alloc = d.w.server.store.get("nodes", rep_node)["status"]["allocatable"]["cpu"]
    d.put_pods({"nodeName": rep_node, "name": rep}, 1, cpu=alloc, app="squatter")
    out = d.tick(30, "drift")                                    # the last look: one more replacement, no drain yet
    assert out["drift"]["disrupted"] == [] and not out["lifecycle"]["evicted"]
    (more,) = out["drift"]["replacing"][0]["replacements"]
    assert more != rep and len(d.pods_on(old["nodeName"])) == 1
    out = d.tick(30, "drift")
    (ev,) = out["drift"]["disrupted"]
    assert ev["nodeClaim"] == old["name"] and ev["replacements"] == [rep, more]
    assert out["lifecycle"]["evicted"]
