"""Beyond Karpenter's prefixes: multi-node consolidation's packed groups (disruption/underutilized.py)."""

from .test_consolidation import _big_nodes

ANTI = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "solo"}}, "topologyKey": "kubernetes.io/hostname"}]}}}


def _snapshot(d):
    from karpenter_lambda.cloudprovider import AWSCloudProvider
    from karpenter_lambda.controllers.snapshot import SnapshotLoader

    env = d.w.env
    return SnapshotLoader(env.store, env.kube, env.claims, AWSCloudProvider.from_environment(env)).load(d.w.clock.now(), pdbs=True)


def test_a_packed_group_of_underused_nodes_consolidates_where_no_prefix_does(make_world):
    """Two full nodes, each running one 3-CPU pod that refuses to share a node with the other (required
    anti-affinity), are the cheapest to disrupt (one pod each): every prefix of Karpenter's order holds both, and
    the small underused nodes have no room for either, so every prefix would need two new nodes.  Four underused
    nodes (1.5 of ~3.9 CPU each) would fit one node cheaper than they cost together: the packed group finds that
    command, it passes the validity test and the executor's second look."""
    from karpenter_lambda.disruption.candidates import build_candidates
    from karpenter_lambda.disruption.consolidation import apply_option, consolidation_option, ordered, window_nodes
    from karpenter_lambda.disruption.plan import SweepBudgets
    from karpenter_lambda.disruption.underutilized import MultiNodeConsolidation

    d = make_world(policy="WhenEmptyOrUnderutilized", consolidate_after="0s")
    nodes = _big_nodes(d, 6, cpu="3")                                  # six c5.xlarge, one 3-CPU pod each
    solo, small = nodes[:2], nodes[2:]
    for x in solo:
        d.put_pods(x, 1, cpu="3", app="solo", **ANTI)
    for x in small:
        d.put_pods(x, 3, cpu="500m")
    snap = _snapshot(d)
    cands, _ = build_candidates(snap)
    assert len(cands) == 6
    order = ordered(cands)
    assert {c.name for c in order[:2]} == {x["name"] for x in solo}     # the cheapest to disrupt come first
    window = window_nodes(snap)
    for n in range(2, len(order) + 1):                                   # no prefix of Karpenter's order is valid
        assert not consolidation_option(snap, order[:n], None, window=window).valid, n

    method = MultiNodeConsolidation()
    cmds, _ = method.compute_commands(SweepBudgets(snap, {}), cands, snap)
    (cmd,) = cmds
    names = {c.name for c in cmd.candidates}
    assert {x["name"] for x in small} <= names and len(names) >= 4
    assert len(cmd.replacements) <= 1 and cmd.savings_per_hour > 0
    today = sum(c.price for c in cmd.candidates)
    assert (cmd.replacements[0].price if cmd.replacements else 0.0) < today
    # every pod of the group placed (on the remaining node or the one replacement), and the executor's second look
    moved = {k for c in cmd.candidates for k in (f"default/{p['metadata']['name']}" for p in c.reschedulable)}
    assert moved <= set(cmd.option.placements) | set(cmd.replacements[0].pods if cmd.replacements else [])
    again, why = method.validate(snap, cmd.candidates, SweepBudgets(snap, {}),
                                 cmd.replacements[0].price if cmd.replacements else None)
    assert again is not None and why == "", why
    after = apply_option(snap, cmd.option)
    assert len(after.nodeclaims) == 6 - len(names) + len(cmd.replacements)
    assert d.alive() == {x["name"] for x in solo + small}                 # pure: nothing changed


def _spread_pod(name: str, app: str, node: str) -> dict:
    return {"metadata": {"name": name, "namespace": "default", "labels": {"app": app},
                         "ownerReferences": [{"kind": "ReplicaSet", "name": app, "uid": f"rs-{app}"}]},
            "spec": {"nodeName": node, "topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
                 "labelSelector": {"matchLabels": {"app": app}}}]}}


def test_packed_groups_pack_last_the_nodes_whose_zone_spread_pods_could_leave_the_zone():
    """A Deployment spread over zones (maxSkew 1) with 2/1/1 pods: once its pods in zone a move, the solver may put
    one of them in zone b or c, where the group's one new node is not.  The nodes holding such a pod are packed
    last (the first bins from nodes whose pods must land in the zone); a Deployment with 1/1/1 pods must come back
    to zone a and does not put its node last."""
    from types import SimpleNamespace

    from karpenter_lambda.disruption.underutilized import _may_leave_zone, _zone_spread_counts

    zone = "topology.kubernetes.io/zone"
    nodes = [{"metadata": {"name": n, "labels": {zone: z}}} for n, z in
             (("a1", "us-east-1a"), ("a2", "us-east-1a"), ("b1", "us-east-1b"), ("c1", "us-east-1c"))]
    pods = [_spread_pod("x-0", "x", "a1"), _spread_pod("x-1", "x", "a2"), _spread_pod("x-2", "x", "b1"),
            _spread_pod("x-3", "x", "c1"),
            _spread_pod("y-0", "y", "a2"), _spread_pod("y-1", "y", "b1"), _spread_pod("y-2", "y", "c1"),
            {"metadata": {"name": "plain", "namespace": "default"}, "spec": {"nodeName": "a1"}}]
    snap = SimpleNamespace(nodes=nodes, pods=pods)
    counts, zones = _zone_spread_counts(snap)
    assert zones == {"us-east-1a", "us-east-1b", "us-east-1c"}
    assert counts[("default", "rs-x")] == {"us-east-1a": 2, "us-east-1b": 1, "us-east-1c": 1}

    def cand(node, zone_):
        return SimpleNamespace(zone=zone_, reschedulable=[p for p in pods if p["spec"]["nodeName"] == node])

    assert _may_leave_zone(cand("a1", "us-east-1a"), counts, zones)        # x: 2 in a, 1 in b and c
    assert not _may_leave_zone(cand("b1", "us-east-1b"), counts, zones)    # x and y: b holds no more than a or c
    only_y = SimpleNamespace(zone="us-east-1a", reschedulable=[pods[4]])
    assert not _may_leave_zone(only_y, counts, zones)


def test_packed_bins_mix_cpu_heavy_and_memory_heavy_nodes():
    """The dot-product rule fills a bin in both resources: with six CPU-heavy and six memory-heavy nodes (in that
    order, as first-fit would meet them), the bins take both kinds and need one bin fewer than first-fit; a
    risky node (zone spread) only goes in when nothing else fits; two nodes with pods that must stay apart never
    share a bin."""
    from types import SimpleNamespace

    from karpenter_lambda.disruption.underutilized import _pack

    gib = 2**30
    cands = [SimpleNamespace(name=f"cpu{i}") for i in range(6)] + [SimpleNamespace(name=f"mem{i}") for i in range(6)]
    req = {**{f"cpu{i}": (2000, 1 * gib, 5) for i in range(6)}, **{f"mem{i}": (500, 6 * gib, 5) for i in range(6)}}
    apart = {c.name: set() for c in cands}
    cap = (8000, 16 * gib, 100)
    # first-fit in this order: [cpu0-3] (CPU full, memory a quarter), [cpu4, cpu5, mem0, mem1], [mem2, mem3],
    # [mem4, mem5]: four bins; balanced: three, each with both kinds
    firstfit: list = []
    for c in cands:
        r = req[c.name]
        b = next((b for b in firstfit if b[0] + r[0] <= cap[0] and b[1] + r[1] <= cap[1]), None)
        if b is None:
            firstfit.append([r[0], r[1]])
        else:
            b[0], b[1] = b[0] + r[0], b[1] + r[1]
    assert len(firstfit) == 4
    bins = _pack(cands, req, apart, set(), cap)
    assert len(bins) == 3, [[c.name for c in b[3]] for b in bins]   # 42 GiB in 16 GiB bins: three is the least
    assert all({c.name[:3] for c in b[3]} == {"cpu", "mem"} for b in bins[:2])   # the first bins mix both kinds
    for b in bins:
        assert b[0] <= cap[0] and b[1] <= cap[1]
    assert sorted(c.name for b in bins for c in b[3]) == sorted(c.name for c in cands)

    # a risky node is packed only when no other candidate fits the bin
    bins = _pack(cands, req, apart, {"cpu0", "mem0"}, cap)
    first = {c.name for c in bins[0][3]}
    assert not first & {"cpu0", "mem0"}

    # required anti-affinity: the two nodes of one "apart" owner never share a bin
    apart2 = dict(apart, cpu1={("default", "solo")}, cpu2={("default", "solo")})
    for b in _pack(cands, req, apart2, set(), cap):
        assert not {"cpu1", "cpu2"} <= {c.name for c in b[3]}


def test_a_packed_group_is_sized_directly_in_one_validity_test(make_world):
    """``one_node`` (packed groups): the one replacement is sized from the pods' needs on new capacity alone and the
    cluster is simulated once with it -- one validity test where the solver's own way takes two (its packing over
    several new nodes, then the one-node retry) -- with the same answer: every pod placed on the remaining nodes or
    that one node, in the group's zone, strictly cheaper; the executor's second look accepts it at the planned price.
    A group whose pods cannot share one node cheaper than the group stays invalid."""
    from karpenter_lambda.disruption.candidates import build_candidates
    from karpenter_lambda.disruption.consolidation import consolidation_option, window_nodes
    from karpenter_lambda.disruption.plan import SweepBudgets
    from karpenter_lambda.disruption.underutilized import MultiNodeConsolidation

    d = make_world(policy="WhenEmptyOrUnderutilized", consolidate_after="0s")
    nodes = _big_nodes(d, 4, cpu="3")
    for x in nodes:
        d.put_pods(x, 3, cpu="500m")
    snap = _snapshot(d)
    cands, _ = build_candidates(snap)
    by_zone: dict = {}
    for c in cands:
        by_zone.setdefault(c.zone, []).append(c)
    zone, group = max(by_zone.items(), key=lambda kv: len(kv[1]))
    assert len(group) >= 3, {z: len(g) for z, g in by_zone.items()}
    window = window_nodes(snap)

    direct, solver_way = SweepBudgets(snap, {}), SweepBudgets(snap, {})
    opt = consolidation_option(snap, group, direct, window=window, one_node=zone)
    ref = consolidation_option(snap, group, solver_way, window=window)
    assert opt.valid and ref.valid, (opt.reason, ref.reason)
    # the direct way needs one evaluation; the solver way needed two while the solver spread one request vector over
    # several new nodes (before its exact single-vector cover), and one now
    assert direct.evaluations == 1 and solver_way.evaluations <= 2
    assert opt.replacement is not None and opt.replacement.zone == zone
    assert opt.replacement.price < sum(c.price for c in group)
    moved = {f"default/{p['metadata']['name']}" for c in group for p in c.reschedulable}
    assert moved == set(opt.placements) | set(opt.replacement.pods)
    assert opt.replacement.price <= ref.replacement.price + 1e-9
    again, why = MultiNodeConsolidation().validate(snap, group, SweepBudgets(snap, {}), opt.replacement.price)
    assert again is not None and why == "" and again.replacements[0].price <= opt.replacement.price + 1e-9

    # four 3.5-CPU pods: no one node cheaper than the four nodes holds them
    for x in nodes:
        d.put_pods(x, 1, cpu="3500m")
    snap = _snapshot(d)
    cands, _ = build_candidates(snap)
    same = [c for c in cands if c.zone == zone]
    bad = consolidation_option(snap, same, SweepBudgets(snap, {}), window=window_nodes(snap), one_node=zone)
    assert not bad.valid and bad.replacement is None, bad.reason
