"""Static drift carried out, in the World (moto + the local Kubernetes API + the real drift and lifecycle handlers):
a static NodePool (``replicas: 2``) running one pod per node drifts (its EC2NodeClass's tags change).  Each drifted
NodeClaim gets a replacement from the NodePool's template, launched while the old node keeps its pods, and the old
one is deleted only once the replacement is Initialized; the static controller launches nothing beside them and
removes nothing while the replacements are in flight.  A replacement that never comes up is deleted after the 10
minutes (no consolidation would ever remove it) and the old node kept, untainted, for the next try."""

from __future__ import annotations

import manifests as shared
from karpenter_lambda.api import labels as wk
from karpenter_lambda.sim.world import World, make_pod

ANTI = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": wk.HOSTNAME}]}}


def static_world(budgets) -> World:
    np = shared.nodepool("static", families=("c5",), capacity_types=("on-demand",), cpu_limit=None,
                         policy="WhenEmpty", consolidate_after="30s", budgets=budgets)
    np["spec"]["replicas"] = 2
    return World(shared.to_yaml(np, shared.nodeclass(tags={"team": "platform"})))


def alive(w) -> set[str]:
    return {nc.name for nc in w.store.list("NodeClaim") if not nc.metadata.get("deletionTimestamp")}


def bound(w) -> dict[str, str]:
    return {p["metadata"]["name"]: (p.get("spec") or {}).get("nodeName") for p in w.server.store.list("pods")}


def node_of(w, nodeclaim: str) -> str | None:
    nc = w.store.get("NodeClaim", nodeclaim)
    pid = (nc.status.get("providerID") if nc else None) or ""
    return next((n["metadata"]["name"] for n in w.server.store.list("nodes") if n["spec"].get("providerID") == pid), None)


def tainted(w, nodeclaim: str) -> bool:
    node = w.server.store.get("nodes", node_of(w, nodeclaim))
    return any(t["key"] == "karpenter.sh/disrupted" for t in node["spec"].get("taints") or [])


def up(w) -> list[str]:
    """Two static NodeClaims, Initialized, each running one web pod (hostname anti-affinity); their names."""
    w.sweep()
    w.join_all(ready=True)
    w.sweep()
    claims = sorted(alive(w))
    assert len(claims) == 2 and all(w.store.get("NodeClaim", n).is_true("Initialized") for n in claims)
    w.add_pods([make_pod(f"web-{i}", cpu="1500m", owner="web", tolerate=False, affinity=ANTI) for i in range(2)])
    w.schedule()
    assert sorted(bound(w).values()) == sorted(node_of(w, n) for n in claims)

    def retag(nc):
        nc.doc["spec"]["tags"]["team"] = "data"
    w.store.update("EC2NodeClass", "default", retag)
    return claims


def step(w, seconds: float = 60, join: bool = True) -> tuple[dict, dict]:
    """One minute: the drift sweep, the lifecycle sweep (static controller, drain), nodes join, pods bind."""
    w.clock.advance(seconds)
    drift = w.invoke("drift")
    life = w.sweep()
    assert life.get("static_launched", []) == [], life       # nothing launched beside the replacements
    assert not [d for d in life.get("disrupted", []) if d["reason"] == "Overprovisioned"], life
    if join:
        w.join_all(ready=True)
        w.sweep()
    w.schedule()
    return drift, life


def test_each_drifted_static_node_is_replaced_from_the_template_before_it_is_drained():
    with static_world([{"nodes": "100%"}]) as w:
        old = up(w)
        drift, _ = step(w)
        assert sorted(p["nodeClaim"] for p in drift["proposed"]) == old
        drift, _ = step(w, join=False)                        # re-validated: one replacement each, launched first
        reps = {r["nodeClaim"]: r["replacements"] for r in drift["replacing"]}
        assert sorted(reps) == old and all(len(r) == 1 for r in reps.values())
        new = sorted(r for rs in reps.values() for r in rs)
        for r in new:
            nc = w.store.get("NodeClaim", r)
            assert nc.labels[wk.NODEPOOL] == "static" and wk.decode_replaces(nc.annotations[wk.REPLACES_ANNOTATION])
        assert alive(w) == set(old) | set(new)                # 4 for 2 replicas while they come up: no scale down
        assert all(tainted(w, n) for n in old) and sorted(bound(w).values()) == sorted(node_of(w, n) for n in old)
        w.join_all(ready=True)
        w.sweep()
        assert all(w.store.get("NodeClaim", r).is_true("Initialized") for r in new)
        drift, life = step(w)                                 # replacements Initialized: the old ones go
        assert sorted((d["nodeClaim"], d["reason"], tuple(d["replacements"])) for d in drift["disrupted"]) == sorted(
            (o, "Drifted", tuple(reps[o])) for o in old)
        for _ in range(3):
            step(w)
        assert {nc.name for nc in w.store.list("NodeClaim")} == set(new)   # 2 before, 2 after
        # (the World's pods have no controller to make them again: simulate's run checks they are bound again,
        # tests/repair_static/test_static_drift_sim.py)


def test_a_replacement_that_never_comes_up_is_deleted_and_the_old_node_kept():
    with static_world([{"nodes": "1"}]) as w:
        old = up(w)
        step(w)                                               # proposed (one: the budget)
        drift, _ = step(w, join=False)
        ((lead, (rep,)),) = [(r["nodeClaim"], r["replacements"]) for r in drift["replacing"]]
        failed = []
        for _ in range(10):                                   # its instance never registers
            drift, _ = step(w, join=False)
            failed += drift["failed"]
            if failed:
                break
        assert [f["nodeClaim"] for f in failed] == [lead] and "replacements deleted (static NodePool)" in failed[0]["why"]
        got = w.store.get("NodeClaim", rep)
        assert got is None or got.metadata.get("deletionTimestamp")
        assert alive(w) == set(old) and not tainted(w, lead)   # kept, untainted: the next sweep tries again
        assert sorted(bound(w).values()) == sorted(node_of(w, n) for n in old)
        proposed = []
        for _ in range(3):                                    # no static launch for it; the drift is tried again
            drift, _ = step(w, join=False)
            proposed += [p["nodeClaim"] for p in drift["proposed"]]
        assert proposed and set(proposed) <= set(old)
