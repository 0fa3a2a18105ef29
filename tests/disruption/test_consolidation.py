"""Underutilization through the real consolidation handler: delete, multi-node replace, single-node replace,
and every reason a move is not made."""

from karpenter_lambda.sim.world import make_pod


def _settle(d, seconds=30, rounds=6):
    """Run sweeps until nothing is in flight; returns every consolidation report."""
    outs = []
    for _ in range(rounds):
        outs.append(d.tick(seconds, "consolidation")["consolidation"])
    return outs


def _all(outs, key):
    return [x for o in outs for x in o[key]]


def test_an_underused_node_is_deleted_and_its_pods_moved(make_world):
    d = make_world(policy="WhenEmptyOrUnderutilized", consolidate_after="0s")
    a, b = d.nodes_with_pods([1, 1], cpu="500m")      # two c5.large, each a quarter used
    outs = _settle(d)
    (ev,) = _all(outs, "disrupted")
    assert ev["reason"] == "Underutilized" and ev["replacements"] == [] and ev["savingsPerHour"] > 0
    gone = ev["nodeClaim"]
    kept = ({a["name"], b["name"]} - {gone}).pop()
    assert d.nodeclaims() == {kept}
    assert d.state({a["name"]: a["iid"], b["name"]: b["iid"]}[gone]) in ("shutting-down", "terminated")


def test_when_empty_never_consolidates_a_non_empty_node(make_world):
    d = make_world(policy="WhenEmpty", consolidate_after="0s")
    a, b = d.nodes_with_pods([1, 1], cpu="500m")
    outs = _settle(d, rounds=3)
    assert _all(outs, "proposed") == [] and d.alive() == {a["name"], b["name"]}


def _big_nodes(d, n, cpu="6"):
    return d.nodes_with_pods([1] * n, cpu=cpu)


def _until_disrupted(d, rounds=6):
    """Tick until the consolidation sweep reports disruptions (this World has no workload controller: evicted pods
    are gone, so the state is checked right when the old nodes go)."""
    for _ in range(rounds):
        out = d.tick(30, "consolidation")["consolidation"]
        if out["disrupted"]:
            return out["disrupted"]
    raise AssertionError("nothing disrupted")


def test_three_expensive_one_pod_nodes_are_replaced_by_one(make_world):
    d = make_world(policy="WhenEmptyOrUnderutilized", consolidate_after="0s")
    nodes = d.nodes_with_pods([1, 1, 1], cpu="6", memory="20Gi")     # three memory-sized m5/m6i.2xlarge
    for x in nodes:                                    # each now runs one small pod
        d.put_pods(x, 1, cpu="500m")
    before = sum(float(d.w.store.get("NodeClaim", x["name"]).annotations["karpenter-lambda.io/price-per-hour"]) for x in nodes)
    dis = _until_disrupted(d)
    assert {e["nodeClaim"] for e in dis} == {x["name"] for x in nodes}
    (rep,) = {r for e in dis for r in e["replacements"]}
    assert all(e["reason"] == "Underutilized" and e["replacements"] == [rep] for e in dis)
    new = d.w.store.get("NodeClaim", rep)
    after = float(new.annotations["karpenter-lambda.io/price-per-hour"])
    assert new.is_true("Initialized") and after < before and sum(e["savingsPerHour"] for e in dis) > 0
    assert d.alive() == {rep}


def test_a_single_expensive_node_is_replaced_by_a_cheaper_type(make_world):
    d = make_world(policy="WhenEmptyOrUnderutilized", consolidate_after="0s")
    (x,) = _big_nodes(d, 1)
    d.put_pods(x, 1, cpu="500m")
    old_type = x["instance"]["InstanceType"]
    (ev,) = _until_disrupted(d)
    (rep,) = ev["replacements"]
    nc = d.w.store.get("NodeClaim", rep)
    assert nc.labels["node.kubernetes.io/instance-type"] != old_type
    assert float(nc.annotations["karpenter-lambda.io/price-per-hour"]) < float(
        x["nodeClaim"].annotations["karpenter-lambda.io/price-per-hour"])


def test_no_move_when_the_replacement_would_not_be_cheaper(make_world):
    d = make_world(policy="WhenEmptyOrUnderutilized", consolidate_after="0s")
    (x,) = d.nodes_with_pods([1], cpu="1500m")          # the cheapest type that fits is the one it runs
    outs = _settle(d, rounds=3)
    assert _all(outs, "proposed") == []
    (b,) = [b for b in _all(outs, "blocked") if b["nodeClaim"] == x["name"]]
    assert b["cause"] == "no cheaper replacement" and "cheapest possible $" in b["message"] and " vs $" in b["message"]
    # the explanation is also a Kubernetes Event on the Node (as Karpenter's Unconsolidatable)
    events = [ev for ev in d.w.server.store.list("events") if ev["involvedObject"].get("name") == x["nodeName"]]
    assert any(ev["reason"] == "Unconsolidatable" and "no cheaper replacement" in ev["message"] for ev in events)


def test_spot_to_spot_needs_fifteen_cheaper_types(make_world):
    d = make_world(policy="WhenEmptyOrUnderutilized", consolidate_after="0s", capacity_types=("spot",),
                   families=("c5", "m5"))
    (x,) = _big_nodes(d, 1)
    assert x["nodeClaim"].labels["karpenter.sh/capacity-type"] == "spot"
    d.put_pods(x, 1, cpu="500m")
    outs = _settle(d, rounds=3)
    assert _all(outs, "proposed") == []
    (b,) = [b for b in _all(outs, "blocked") if b["nodeClaim"] == x["name"]]
    assert "spot to spot needs 15 cheaper spot instance types" in b["message"]


def test_a_move_that_would_break_required_anti_affinity_is_not_taken(make_world):
    d = make_world(policy="WhenEmptyOrUnderutilized", consolidate_after="0s")
    a, b = d.nodes_with_pods([1, 1], cpu="500m")
    anti = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "solo"}}, "topologyKey": "kubernetes.io/hostname"}]}}}
    for x in (a, b):
        d.put_pods(x, 1, cpu="250m", app="solo", **anti)
    outs = _settle(d, rounds=3)
    assert _all(outs, "disrupted") == []
    blocked = {b_["nodeClaim"]: b_ for b_ in _all(outs, "blocked")}
    assert all(blocked[n]["cause"] in ("would leave pods pending", "no cheaper replacement") for n in (a["name"], b["name"]))


def test_a_destination_inside_its_consolidate_after_window_is_not_used(make_world):
    d = make_world(policy="WhenEmptyOrUnderutilized", consolidate_after="5m")
    a, b = d.nodes_with_pods([1, 1], cpu="500m")
    d.tick(30, "consolidation")                  # t=30: the first look starts both windows
    (late,) = d.w.add_pods([make_pod("late", cpu="100m", tolerate=False, nodeName=b["nodeName"])])
    d.w.server.store.patch("pods", "late", {"status": {"phase": "Running"}}, namespace="default", subresource="status")
    d.tick(210, "consolidation")                 # t=240: b's window restarts (a pod landed)
    out = d.tick(90, "consolidation")["consolidation"]      # t=330: a is consolidatable, b is not
    assert out["proposed"] == [] and out["disrupted"] == []
    why = {x["nodeClaim"]: x for x in out["blocked"]}
    # a's pod would fit on b, but b may not receive it: only a new (not cheaper) node would do
    assert why[a["name"]]["cause"] == "no cheaper replacement"
    assert d.w.store.get("NodeClaim", b["name"]).status["disruptionBlocked"]["cause"] == "consolidateAfter"


def test_budgets_per_reason(make_world):
    d = make_world(policy="WhenEmptyOrUnderutilized", consolidate_after="0s",
                   budgets='[{nodes: "0", reasons: [Underutilized]}, {nodes: "100%"}]')
    a, b, e = d.nodes_with_pods([1, 1, 0], cpu="500m")
    outs = _settle(d, rounds=3)
    assert [x["nodeClaim"] for x in _all(outs, "disrupted")] == [e["name"]]      # Empty still goes
    assert any(x["cause"] == "budget" and x["reason"] == "Underutilized" for x in _all(outs, "blocked"))
    assert d.alive() == {a["name"], b["name"]}


def test_do_not_disrupt_and_pdb_hold_consolidation(make_world):
    d = make_world(policy="WhenEmptyOrUnderutilized", consolidate_after="0s")
    a, b = d.nodes_with_pods([1, 1], cpu="500m")
    d.put_pods(a, 1, cpu="250m", app="keep")
    d.w.server.store.patch("pods", d.pods_on(a["nodeName"])[0]["metadata"]["name"],
                           {"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}, namespace="default")
    d.put_pods(b, 1, cpu="250m", app="guarded")
    d.w.server.store.create("poddisruptionbudgets", {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "guard", "namespace": "default"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "guarded"}}}}, "default")
    outs = _settle(d, rounds=3)
    assert _all(outs, "proposed") == []
    causes = {x["nodeClaim"]: x["cause"] for x in _all(outs, "blocked")}
    assert causes == {a["name"]: "do-not-disrupt", b["name"]: "PDB"}


def test_a_decision_is_cancelled_when_validation_finds_a_change(make_world):
    d = make_world(policy="WhenEmptyOrUnderutilized", consolidate_after="0s")
    a, b = d.nodes_with_pods([1, 1], cpu="500m")
    out = d.tick(30, "consolidation")["consolidation"]
    (p,) = out["proposed"]
    target = {a["name"]: a, b["name"]: b}[p["nodeClaim"]]
    # meanwhile a pod that must not be disrupted lands on the candidate
    d.put_pods(target, 1, cpu="100m", app="new")
    d.w.server.store.patch("pods", d.pods_on(target["nodeName"])[0]["metadata"]["name"],
                           {"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}, namespace="default")
    d.w.clock.advance(20)
    out = d.w.invoke("consolidation")
    assert [c["nodeClaim"] for c in out["cancelled"]] == [target["name"]] and out["disrupted"] == []
    assert d.alive() == {a["name"], b["name"]}


def test_pending_pods_arriving_during_a_replacement_do_not_get_a_duplicate_node(make_world):
    d = make_world(policy="WhenEmptyOrUnderutilized", consolidate_after="0s")
    (x,) = _big_nodes(d, 1)
    (small,) = d.put_pods(x, 1, cpu="500m")
    d.tick(30, "consolidation")                                       # proposed
    out = d.tick(30, "consolidation")["consolidation"]                # replacement launched (and initialized here)
    (rep,) = out["replacing"][0]["replacements"]
    assert d.w.store.get("NodeClaim", rep).is_true("Initialized")
    # a pod arrives that would fit on the replacement only by taking the room launched for the moving pod
    before = d.nodeclaims()
    (intruder,) = d.w.add_pods([make_pod("intruder", cpu="1600m", memory="256Mi", tolerate=False)])
    resp = d.w.provision(d.w.sqs_event([intruder]))
    assert resp["batchItemFailures"] == []
    assert len(d.nodeclaims() - before) == 1                          # it got its own node, not the reserved room
    d.w.server.store.delete("pods", "intruder", "default")
    # the old node goes; its pod comes back pending (as its ReplicaSet would) and lands on the replacement
    dis = _until_disrupted(d)
    assert dis[0]["replacements"] == [rep]
    assert d.w.store.get("NodeClaim", x["name"]) is None               # drained and gone in the same tick
    launched_before = d.nodeclaims()
    (again,) = d.w.add_pods([make_pod(small["metadata"]["name"] + "-new", cpu="500m", memory="256Mi", tolerate=False)])
    d.w.provision(d.w.sqs_event([again]))
    assert d.nodeclaims() == launched_before                          # no duplicate node
    d.w.schedule()
    rep_node = d.w.store.get("NodeClaim", rep).status["nodeName"]
    assert d.w.server.store.get("pods", again["metadata"]["name"], "default")["spec"]["nodeName"] == rep_node


def test_repack_moves_toward_the_cheapest_packing_in_a_valid_step(make_world):
    from karpenter_lambda.controllers.snapshot import SnapshotLoader
    from karpenter_lambda.disruption.candidates import build_candidates
    from karpenter_lambda.disruption.plan import SweepBudgets
    from karpenter_lambda.disruption.repack import Repack, target_packing

    d = make_world(policy="WhenEmptyOrUnderutilized", consolidate_after="0s")
    nodes = d.nodes_with_pods([1, 1, 1], cpu="6", memory="20Gi")
    for x in nodes:
        d.put_pods(x, 1, cpu="500m")
    env = d.w.env
    from karpenter_lambda.cloudprovider import AWSCloudProvider

    snap = SnapshotLoader(env.store, env.kube, env.claims, AWSCloudProvider.from_environment(env)).load(d.w.clock.now(), pdbs=True)
    cands, _ = build_candidates(snap)
    target, groups = target_packing(snap, cands)
    today = sum(c.price for c in cands)
    assert target < today / 2 and groups and len(groups[0]) == 3      # one small node holds the three pods
    cmds, _ = Repack().compute_commands(SweepBudgets(snap, {}), cands, snap)
    (cmd,) = cmds
    assert cmd.reason == "Underutilized" and len(cmd.candidates) == 3 and len(cmd.replacements) == 1
    assert cmd.replacements[0].price < today and cmd.detail.startswith("repack toward $")
    assert d.alive() == {x["name"] for x in nodes}                       # pure: nothing changed


def test_a_move_that_would_break_zone_spread_is_not_taken(make_world):
    d = make_world(policy="WhenEmptyOrUnderutilized", consolidate_after="0s")
    a, b = d.nodes_with_pods([1, 1], cpu="500m")
    # put b in another zone than a (the World launches in one zone by default): move its NodeClaim/Node labels
    zone_a = a["nodeClaim"].labels["topology.kubernetes.io/zone"]
    other = "us-east-1b" if zone_a != "us-east-1b" else "us-east-1c"
    d.w.server.store.patch("nodes", b["nodeName"], {"metadata": {"labels": {"topology.kubernetes.io/zone": other}}})

    def mutate(nc):
        nc.doc["metadata"]["labels"]["topology.kubernetes.io/zone"] = other
    d.w.store.update("NodeClaim", b["name"], mutate)
    spread = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                             "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "zs"}}}]}
    for x in (a, b):
        d.put_pods(x, 1, cpu="250m", app="zs", **spread)
    outs = _settle(d, rounds=3)
    # deleting either node would put both zs pods in one zone (skew 2 > 1): only a new node in the same zone could
    # take the pod, and it is not cheaper
    assert _all(outs, "disrupted") == [] and _all(outs, "proposed") == []
    assert d.alive() == {a["name"], b["name"]}


def test_one_sweep_plans_several_commands_each_on_the_cluster_the_earlier_ones_leave(make_world):
    """Beyond Karpenter (one command per sweep): three expensive nodes, each running one pod that refuses to share a
    node with the others (required anti-affinity), so no multi-node move exists and single-node replaces one node
    at a time.  One sweep now proposes all three replacements, planned in sequence (each on the snapshot with the
    earlier ones carried out) and re-validated in that order; every one is a valid replace-by-one-cheaper."""
    d = make_world(policy="WhenEmptyOrUnderutilized", consolidate_after="0s")
    nodes = _big_nodes(d, 3)
    anti = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "solo"}}, "topologyKey": "kubernetes.io/hostname"}]}}}
    for x in nodes:
        d.put_pods(x, 1, cpu="500m", app="solo", **anti)
    out = d.tick(30, "consolidation")["consolidation"]
    proposed = out["proposed"]
    assert {p["nodeClaim"] for p in proposed} == {x["name"] for x in nodes}      # one sweep, three commands
    assert len({p["command"] for p in proposed}) == 3 and all(p["command"].startswith("seq-") for p in proposed)
    assert all(p["replacements"] == 1 for p in proposed)
    dis = []
    for _ in range(6):
        o = d.tick(30, "consolidation")["consolidation"]
        assert o["cancelled"] == [] and o["failed"] == []
        dis += o["disrupted"]
        if len(dis) == 3:
            break
    assert {e["nodeClaim"] for e in dis} == {x["name"] for x in nodes}
    reps = [r for e in dis for r in e["replacements"]]
    assert len(set(reps)) == 3                                                     # never one node into several
    for x in nodes:
        (e,) = [e for e in dis if e["nodeClaim"] == x["name"]]
        new = d.w.store.get("NodeClaim", e["replacements"][0])
        assert float(new.annotations["karpenter-lambda.io/price-per-hour"]) < float(
            x["nodeClaim"].annotations["karpenter-lambda.io/price-per-hour"])


def test_spread_nodes_of_one_zone_are_merged_and_the_spread_still_holds(make_world):
    """Six big nodes, two per zone, each running one pod of a zone-spread Deployment (a node per pod, as an old plan or
    a scale-up leaves it).  Consolidation replaces each zone's nodes by cheaper capacity in that zone: no command takes
    pods out of their zone, and the validity test does not answer with a node per pod again."""
    d = make_world(policy="WhenEmptyOrUnderutilized", consolidate_after="0s")
    nodes = _big_nodes(d, 6)
    zones = ["us-east-1a", "us-east-1a", "us-east-1b", "us-east-1b", "us-east-1c", "us-east-1c"]
    for x, zone in zip(nodes, zones):
        d.w.server.store.patch("nodes", x["nodeName"], {"metadata": {"labels": {"topology.kubernetes.io/zone": zone}}})

        def mutate(nc, zone=zone):
            nc.doc["metadata"]["labels"]["topology.kubernetes.io/zone"] = zone
        d.w.store.update("NodeClaim", x["name"], mutate)
    spread = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                             "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "zs"}}}]}
    for x in nodes:
        d.put_pods(x, 1, cpu="1", app="zs", **spread)
    zone_of = {x["name"]: z for x, z in zip(nodes, zones)}
    price = {x["name"]: float(x["nodeClaim"].annotations["karpenter-lambda.io/price-per-hour"]) for x in nodes}
    dis, new = [], {}
    for _ in range(8):
        out = d.tick(30, "consolidation")["consolidation"]
        assert out["failed"] == []
        dis += [e for e in out["disrupted"] if e["nodeClaim"] in zone_of]
        for e in out["disrupted"]:   # read now: this World has no workload controller, so replacements empty out later
            for r in e["replacements"]:
                new.setdefault(r, d.w.store.get("NodeClaim", r))
    assert len({e["nodeClaim"] for e in dis}) >= 4, dis   # most of the one-pod nodes went
    by_replacement: dict = {}
    for e in dis:
        for r in e["replacements"]:
            by_replacement.setdefault(r, set()).add(zone_of[e["nodeClaim"]])
    assert by_replacement and any(len([e for e in dis if r in e["replacements"]]) >= 2 for r in by_replacement)  # merged
    for r, zs in by_replacement.items():
        assert len(zs) == 1 and new[r].labels.get("topology.kubernetes.io/zone") in zs, (r, zs, new[r].labels)
    # the replacements cost less than the nodes they replaced
    gone_price = sum(price[e["nodeClaim"]] for e in dis)
    new_price = sum(float(new[r].annotations["karpenter-lambda.io/price-per-hour"]) for r in by_replacement)
    assert new_price < gone_price
