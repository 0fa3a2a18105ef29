"""Beyond Karpenter's prefixes: multi-node consolidation's packed groups (disruption/underutilized.py)."""

from .test_consolidation import _big_nodes

ANTI = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"labelSelector": {"matchLabels": {"app": "solo"}}, "topologyKey": "kubernetes.io/hostname"}]}}}


def _snapshot(d):
    from karpenter_lambda.controllers.cloudprovider import AWSCloudProvider
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
