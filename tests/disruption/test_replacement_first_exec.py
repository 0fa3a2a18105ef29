"""Replacement before drain, always (issue 28 item 4): the executor's side, through the real drift handler (moto, the
local API server, a virtual clock).  The decisions themselves are tested on snapshots in test_replacement_first.py.

* expiration launches the replacement its pod needs and drains only once it is Initialized (test_drift.py);
* a replacement that never initializes: the node is un-tainted and kept (expiration too), the next sweep tries again;
* at the NodePool's limit, drift's and expiration's replacements launch as if the old node were gone (Karpenter's
  simulation); expiration stays forceful when the limits leave no room for any replacement;
* the last look before the drain: a pod that lost the room counted for it gets one more replacement first.
"""

from __future__ import annotations

from datetime import datetime

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


def test_expiration_stays_forceful_when_the_limits_leave_no_room_for_a_replacement(make_world):
    d = make_world(consolidate_after="Never", expire_after="30m")
    (old,) = d.nodes_with_pods([1])
    _set_nodepool(d, lambda s: s.__setitem__("limits", {"cpu": "1"}))   # no type fits, even with the old node gone
    out = d.tick(31 * 60, "drift")
    (ev,) = out["drift"]["disrupted"]
    assert ev["reason"] == "Expired" and ev["replacements"] == [] and out["drift"]["failed"] == []
    assert d.w.store.get("NodeClaim", old["name"]) is None


def _at_the_limit(d, old) -> None:
    """The NodePool's cpu limit set to what its one node counts: no room for anything more while it stays."""
    cpu = d.w.store.get("NodeClaim", old["name"]).status["capacity"]["cpu"]
    _set_nodepool(d, lambda s: s.__setitem__("limits", {"cpu": str(cpu)}))


def test_an_expired_node_at_the_nodepool_limit_gets_its_replacement_as_if_it_were_gone(make_world):
    """Karpenter's disruption simulation counts the candidates out of the NodePool's usage: at the limit, the
    replacement still launches (the NodePool is over its limit until the old node goes)."""
    d = make_world(consolidate_after="Never", expire_after="30m")
    (old,) = d.nodes_with_pods([1])
    _at_the_limit(d, old)
    out = d.tick(31 * 60, "drift")
    (rep,) = out["drift"]["replacing"][0]["replacements"]
    assert out["drift"]["failed"] == [] and _tainted(d, old["nodeName"])
    out = d.tick(30, "drift")
    (ev,) = out["drift"]["disrupted"]
    assert ev["nodeClaim"] == old["name"] and ev["reason"] == "Expired" and ev["replacements"] == [rep]


def test_a_drifted_node_at_the_nodepool_limit_is_replaced_not_retried_forever(make_world):
    """Seen in a simulation: drift planned a replacement (the candidate counted out, as Karpenter does) and the launch
    refused it ("limits reached (usage cpu 24000/24000)"), DisruptionFailed every minute for half an hour."""
    d = make_world(consolidate_after="Never")
    (old,) = d.nodes_with_pods([1])
    _at_the_limit(d, old)
    _set_nodepool(d, lambda s: s["template"].setdefault("metadata", {}).setdefault("labels", {}).update(team="b"))
    d.tick(30, "drift")                                          # drifted, proposed
    out = d.tick(30, "drift")                                    # re-validated: the replacement launched
    assert out["drift"]["failed"] == []
    (rep,) = out["drift"]["replacing"][0]["replacements"]
    out = d.tick(30, "drift")
    (ev,) = out["drift"]["disrupted"]
    assert ev["nodeClaim"] == old["name"] and ev["reason"] == "Drifted" and ev["replacements"] == [rep]
    d.tick(120, "drift")
    assert old["name"] not in d.alive() and rep in d.alive()
    # the old node gone, the NodePool is back within its limit: the provisioner has no room for more
    totals, _ = d.w.env.claims.usage("default")
    assert totals["cpu"] <= int(d.w.store.get("NodePool", "default").spec["limits"]["cpu"]) * 1000


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


def test_an_expiration_keeps_karpenters_maximum_lifetime_expire_after_plus_termination_grace_period(make_world):
    """With a terminationGracePeriod, Karpenter's node lives at most expireAfter + terminationGracePeriod, and is
    deleted at expiry so its drain has the grace period.  Here the replacement is launched and the deletion requested
    in the same step (its deadline that bound, not the deletion time + the grace period); the drain waits for the
    replacement for at most half the time left, then goes ahead without it (the replacement kept).  Before, the
    deletion waited for the replacement to initialize and could come a second before the deadline."""
    d = make_world(consolidate_after="Never", expire_after="30m", tgp="5m")
    (old,) = d.nodes_with_pods([1])
    nc = d.w.store.get("NodeClaim", old["name"])
    born = datetime.fromisoformat(nc.metadata["creationTimestamp"].replace("Z", "+00:00")).timestamp()
    d.w.clock.advance(31 * 60)
    out = d.w.invoke("drift")                      # no join: the replacement stays pending
    assert out["failed"] == [] and out["replacing"] == []
    (ev,) = out["disrupted"]
    (rep,) = ev["replacements"]
    assert ev["nodeClaim"] == old["name"] and ev["reason"] == "Expired"
    nc = d.w.store.get("NodeClaim", old["name"])
    assert nc.metadata.get("deletionTimestamp")
    stamped = datetime.fromisoformat(nc.annotations["karpenter.sh/nodeclaim-termination-timestamp"]
                                     .replace("Z", "+00:00")).timestamp()
    assert stamped == born + 30 * 60 + 5 * 60      # expiry + terminationGracePeriod, before deletion time + 5m
    d.w.sweep()                                    # the drain waits for the replacement ...
    term = d.w.store.get("NodeClaim", old["name"]).status.get("termination") or {}
    assert term.get("waitingFor") == [rep] and not term.get("startedAt")
    d.w.clock.advance(3 * 60)                      # ... for half the time to the deadline at most
    d.w.sweep()
    left = d.w.store.get("NodeClaim", old["name"])
    assert left is None or (left.status.get("termination") or {}).get("startedAt")
    assert d.w.store.get("NodeClaim", rep) is not None
    assert d.w.invoke("drift")["disrupted"] == []   # one NodeClaimDisrupted per disruption


def test_without_a_termination_grace_period_an_expirations_deadline_is_not_set(make_world):
    d = make_world(consolidate_after="Never", expire_after="30m")
    (old,) = d.nodes_with_pods([1])
    d.w.clock.advance(31 * 60)
    d.w.invoke("drift")
    d.w.join_all(ready=True)
    d.w.sweep()
    out = d.w.invoke("drift")
    (ev,) = out["disrupted"]
    assert ev["reason"] == "Expired"
    nc = d.w.store.get("NodeClaim", old["name"])
    assert nc is None or "karpenter.sh/nodeclaim-termination-timestamp" not in (nc.annotations or {})
