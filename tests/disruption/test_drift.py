"""Drift and expiration through the real drift handler: replacement first, then the drain."""

import pytest


def _tick_until(d, pred, sweeps=("drift",), seconds=30, limit=12):
    for _ in range(limit):
        out = d.tick(seconds, *sweeps)
        if pred(out):
            return out
    raise AssertionError("condition not reached")


def _change_nodepool(d, fn):
    def mutate(np):
        fn(np.doc["spec"])
    d.w.store.update("NodePool", "default", mutate)


def test_nodepool_template_change_replaces_first_then_drains(make_world):
    d = make_world(consolidate_after="Never")
    (old,) = d.nodes_with_pods([2])
    _change_nodepool(d, lambda s: s["template"].setdefault("metadata", {}).setdefault("labels", {}).update(team="b"))
    out = d.tick(30, "drift")
    assert out["drift"]["drifted"][0]["kind"] == "NodePoolDrifted"
    assert [p["nodeClaim"] for p in out["drift"]["proposed"]] == [old["name"]]
    out = d.tick(30, "drift")                                  # re-validated: the replacement is launched
    (rep,) = out["drift"]["replacing"][0]["replacements"]
    # the replacement came up (joined and initialized by the lifecycle sweep) while the old node still runs its pods
    assert d.w.store.get("NodeClaim", rep).is_true("Initialized")
    assert not d.w.store.get("NodeClaim", old["name"]).metadata.get("deletionTimestamp")
    assert len(d.pods_on(old["nodeName"])) == 2
    node = d.w.server.store.get("nodes", old["nodeName"])
    assert any(t["key"] == "karpenter.sh/disrupted" for t in node["spec"]["taints"])
    out = d.tick(30, "drift")                                  # replacement Initialized: the old node goes
    (ev,) = out["drift"]["disrupted"]
    assert ev["reason"] == "Drifted" and ev["replacements"] == [rep] and ev["nodePool"] == "default"
    assert {e["pod"] for e in out["lifecycle"]["evicted"]} == {"default/app0-0", "default/app0-1"}
    d.tick(30, "drift")
    assert d.nodeclaims() == {rep} and d.state(old["iid"]) in ("shutting-down", "terminated")


def test_ec2nodeclass_tag_change_drifts(make_world):
    d = make_world(consolidate_after="Never")
    (old,) = d.nodes_with_pods([1])

    def mutate(nc):
        nc.doc["spec"]["tags"]["team"] = "data"
    d.w.store.update("EC2NodeClass", "default", mutate)
    out = d.tick(30, "drift")
    assert [(x["nodeClaim"], x["kind"]) for x in out["drift"]["drifted"]] == [(old["name"], "NodeClassDrift")]
    out = _tick_until(d, lambda o: o["drift"]["disrupted"])
    assert out["drift"]["disrupted"][0]["reason"] == "Drifted" and out["drift"]["disrupted"][0]["replacements"]


@pytest.mark.parametrize("alias,drifts", [("al2023@latest", True), ("al2023@v20250101", False)])
def test_a_new_ami_release_drifts_latest_but_not_a_pinned_alias(make_world, alias, drifts):
    d = make_world(consolidate_after="Never", alias=alias)
    (old,) = d.nodes_with_pods([1])
    image = d.w.store.get("NodeClaim", old["name"]).status["imageID"]
    d.w.account.release_ami("al2023")
    out = d.tick(30, "drift")
    if not drifts:
        assert out["drift"]["drifted"] == [] and out["drift"]["proposed"] == []
        d.tick(30, "drift")
        assert d.alive() == {old["name"]}
        return
    assert [x["kind"] for x in out["drift"]["drifted"]] == ["AMIDrift"] and image in out["drift"]["drifted"][0]["message"]
    out = d.tick(30, "drift")
    (rep,) = out["drift"]["replacing"][0]["replacements"]
    assert d.w.store.get("NodeClaim", rep).status["imageID"] != image
    assert d.w.store.get("NodeClaim", rep).is_true("Initialized") and len(d.pods_on(old["nodeName"])) == 1
    out = d.tick(30, "drift")
    assert [x["nodeClaim"] for x in out["drift"]["disrupted"]] == [old["name"]]


def test_requirement_drift_and_widening_a_list_never_drifts(make_world):
    d = make_world(consolidate_after="Never")
    (old,) = d.nodes_with_pods([1])
    family = d.w.store.get("NodeClaim", old["name"]).labels["karpenter.k8s.aws/instance-family"]

    def set_families(values):
        def fn(spec):
            for r in spec["template"]["spec"]["requirements"]:
                if r["key"] == "karpenter.k8s.aws/instance-family":
                    r["values"] = values
        _change_nodepool(d, fn)

    set_families(["m5", "c5", "m6i", "r5"])                  # wider: still satisfied
    assert d.tick(30, "drift")["drift"]["drifted"] == []
    set_families([f for f in ["m5", "c5", "m6i"] if f != family])
    out = d.tick(30, "drift")
    assert [x["kind"] for x in out["drift"]["drifted"]] == ["RequirementsDrifted"]


def test_expiration_is_forceful_and_not_held_by_budgets(make_world):
    """Not held by a zero budget; the pod that has no other place gets its replacement first (issue 28 item 4): the
    old node is drained only once the replacement is Initialized."""
    d = make_world(consolidate_after="Never", expire_after="30m", budgets='[{nodes: "0"}]')
    (old,) = d.nodes_with_pods([1])
    d.tick(25 * 60, "drift")
    assert d.alive() == {old["name"]}
    out = d.tick(6 * 60, "drift")
    assert out["drift"]["disrupted"] == [] and not out["lifecycle"]["evicted"]
    (rep,) = out["drift"]["replacing"][0]["replacements"]
    assert d.w.store.get("NodeClaim", rep).is_true("Initialized") and len(d.pods_on(old["nodeName"])) == 1
    out = d.tick(30, "drift")
    (ev,) = out["drift"]["disrupted"]
    assert ev["reason"] == "Expired" and ev["replacements"] == [rep] and "30m" in ev["detail"]
    assert out["lifecycle"]["evicted"] and d.w.store.get("NodeClaim", old["name"]) is None
    assert d.state(old["iid"]) in ("shutting-down", "terminated")


def test_a_node_whose_pods_cannot_be_rescheduled_is_skipped(make_world):
    d = make_world(consolidate_after="Never")
    (old,) = d.nodes_with_pods([1])
    _change_nodepool(d, lambda s: s.__setitem__("limits", {"cpu": "0"}))   # drift + no room for a replacement
    _change_nodepool(d, lambda s: s["template"].setdefault("metadata", {}).setdefault("labels", {}).update(team="c"))
    out = d.tick(30, "drift")
    assert out["drift"]["proposed"] == []
    (b,) = out["drift"]["blocked"]
    assert b["nodeClaim"] == old["name"] and b["cause"] == "would leave pods pending" and "app0-0" in b["message"]
    assert d.alive() == {old["name"]}


def test_a_replacement_that_cannot_launch_keeps_the_node_and_removes_the_taint(make_world):
    from karpenter_lambda.sim.faults import FaultInjector, FaultPlan

    d = make_world(consolidate_after="Never")
    (old,) = d.nodes_with_pods([2])
    _change_nodepool(d, lambda s: s["template"].setdefault("metadata", {}).setdefault("labels", {}).update(team="d"))
    assert [p["nodeClaim"] for p in d.tick(30, "drift")["drift"]["proposed"]] == [old["name"]]
    d.w.clock.advance(30)
    # EC2 has no capacity for any of the replacement's offerings (every CreateFleet of the invocation): nothing launches
    with FaultInjector(d.w) as faults:
        with faults.invocation("drift", FaultPlan(aws_errors={("ec2", "CreateFleet"): ["ice", 100]})) as run:
            out = d.w.invoke("drift")
    assert run["error"] is None and faults.counts["ec2_ice"] >= 1
    (f,) = out["failed"]
    assert f["nodeClaim"] == old["name"] and "did not launch" in f["why"] and "capacity" in f["why"].lower()
    node = d.w.server.store.get("nodes", old["nodeName"])
    assert not any(t["key"] == "karpenter.sh/disrupted" for t in node["spec"].get("taints") or [])
    assert d.alive() == {old["name"]} and len(d.pods_on(old["nodeName"])) == 2


def test_a_sweep_that_fails_mid_decision_is_finished_by_the_next(make_world):
    d = make_world(consolidate_after="Never")
    (old,) = d.nodes_with_pods([1])
    _change_nodepool(d, lambda s: s["template"].setdefault("metadata", {}).setdefault("labels", {}).update(team="e"))
    d.tick(30, "drift")
    d.w.server.add_fault(status=403, times=1, method="PATCH", path=rf"/nodes/{old['nodeName']}$")
    out = d.tick(30, "drift")                        # the taint fails: nothing launched, the decision stays
    assert out["drift"]["errors"] and out["drift"]["replacing"] == []
    out = d.tick(30, "drift")
    (rep,) = out["drift"]["replacing"][0]["replacements"]
    _tick_until(d, lambda o: not d.w.store.get("NodeClaim", old["name"]))
    assert d.nodeclaims() == {rep} and d.running() == {d.nodeclaim_of_name(rep)}


@pytest.mark.parametrize("budget,at_once", [('[{nodes: "100%"}]', 3), ('[{nodes: "1"}]', 1)])
def test_drift_rolls_as_many_nodes_at_once_as_the_budget_allows(make_world, budget, at_once):
    """Karpenter's drift makes one command per pass and starts the next pass at once, the drifts in flight counting
    against the budget: the budget sets the pace, not a one-at-a-time rule.  Three drifted nodes, each with a pod:
    all three proposed in one sweep with 100% (each with its own replacement), one at a time with a budget of one."""
    d = make_world(consolidate_after="Never", budgets=budget)
    old = {x["name"] for x in d.nodes_with_pods([1, 1, 1])}
    _change_nodepool(d, lambda s: s["template"].setdefault("metadata", {}).setdefault("labels", {}).update(team="b"))
    out = d.tick(30, "drift")
    assert len(out["drift"]["proposed"]) == at_once
    if at_once == 3:
        out = d.tick(30, "drift")                              # re-validated: launched, each its own replacement
        assert len({r for x in out["drift"]["replacing"] for r in x["replacements"]}) == 3
    for _ in range(20):                                        # every node replaced, never more than the budget at once
        in_flight = {e for e in old if e in d.nodeclaims()
                     and d.w.store.get("NodeClaim", e).metadata.get("deletionTimestamp")}
        assert len(in_flight) <= at_once
        if not old & d.nodeclaims():
            break
        d.tick(30, "drift")
    assert not old & d.nodeclaims()
    assert all(p["spec"].get("nodeName") for p in d.w.server.store.list("pods"))
