"""Node repair's pure rule (disruption/repair.py) on small Node lists: which unhealthy nodes are due, the 20% rule
per NodePool (rounded up), and the tolerations of Karpenter's AWS repair policies.  Milliseconds, no I/O."""

from __future__ import annotations

import builders
from builders import T0, iso
from karpenter_lambda.disruption.repair import (
    AWS_POLICIES,
    allowed_unhealthy,
    plan_repairs,
    unhealthy_condition,
)

MIN = 60.0


def node(name: str, *conditions: tuple[str, str, float], nodepool: str = "default", created: float = T0 - 86400) -> dict:
    """A Node of ``nodepool`` with the given (type, status, since) conditions (Ready True otherwise)."""
    n = builders.node(name, nodepool=nodepool)
    n["metadata"]["creationTimestamp"] = iso(created)
    conds = [{"type": t, "status": s, "lastTransitionTime": iso(since)} for t, s, since in conditions]
    if not any(c["type"] == "Ready" for c in conds):
        conds.append({"type": "Ready", "status": "True", "lastTransitionTime": iso(created)})
    n["status"]["conditions"] = conds
    return n


def plan(*nodes: dict, deleting=frozenset(), now: float = T0, termination_at=None):
    extra = {"termination_at": termination_at} if termination_at is not None else {}
    return plan_repairs(list(nodes), {(n["metadata"]["name"]): "nc-" + n["metadata"]["name"] for n in nodes},
                        set(deleting), now, **extra)


def healthy(i: int, nodepool: str = "default") -> dict:
    return node(f"ok-{nodepool}-{i}", nodepool=nodepool)


def test_not_ready_31_minutes_is_repaired_29_is_not():
    fleet = [healthy(i) for i in range(9)]
    due = plan(node("sick", ("Ready", "False", T0 - 31 * MIN)), *fleet)
    assert [(r.nodeclaim, r.unhealthy.condition, r.unhealthy.status) for r in due.repairs] == [("nc-sick", "Ready", "False")]
    early = plan(node("sick", ("Ready", "False", T0 - 29 * MIN)), *fleet)
    assert early.repairs == [] and early.blocked == []
    assert early.waiting == {"sick": T0 + MIN}


def test_ready_unknown_is_tolerated_30_minutes_too():
    assert plan(node("sick", ("Ready", "Unknown", T0 - 30 * MIN - 1)), *[healthy(i) for i in range(4)]).repairs
    assert not plan(node("sick", ("Ready", "Unknown", T0 - 30 * MIN + 1)), *[healthy(i) for i in range(4)]).repairs


def test_accelerated_hardware_is_tolerated_10_minutes_and_wins_over_a_later_ready():
    n = node("gpu", ("AcceleratedHardwareReady", "False", T0 - 11 * MIN), ("Ready", "False", T0 - 20 * MIN))
    u = unhealthy_condition(n)
    assert (u.condition, u.due_at) == ("AcceleratedHardwareReady", T0 - MIN)   # due before Ready (T0 + 10m)
    got = plan(n, *[healthy(i) for i in range(4)])
    assert [r.unhealthy.condition for r in got.repairs] == ["AcceleratedHardwareReady"]


def test_node_monitoring_agent_conditions_and_their_tolerations():
    tol = {(p.condition, p.status): p.toleration for p in AWS_POLICIES}
    assert tol == {("Ready", "False"): 1800, ("Ready", "Unknown"): 1800, ("AcceleratedHardwareReady", "False"): 600,
                   ("StorageReady", "False"): 1800, ("NetworkingReady", "False"): 1800, ("KernelReady", "False"): 1800,
                   ("ContainerRuntimeReady", "False"): 1800}
    for cond in ("StorageReady", "NetworkingReady", "KernelReady", "ContainerRuntimeReady"):
        assert plan(node("x", (cond, "False", T0 - 31 * MIN)), *[healthy(i) for i in range(4)]).repairs


def test_conditions_no_policy_names_are_ignored():
    assert unhealthy_condition(node("x", ("MemoryPressure", "True", T0 - 99 * MIN))) is None
    assert unhealthy_condition(node("x", ("KernelReady", "True", T0 - 99 * MIN))) is None
    assert unhealthy_condition(node("x", ("Ready", "True", T0 - 99 * MIN))) is None


def test_transition_before_the_node_existed_counts_from_its_creation():
    n = node("young", ("Ready", "False", T0 - 3 * 3600), created=T0 - 10 * MIN)
    assert unhealthy_condition(n).since == T0 - 10 * MIN
    assert not plan(n, *[healthy(i) for i in range(4)]).repairs


def test_twenty_percent_rounded_up():
    assert [allowed_unhealthy(n) for n in (1, 2, 3, 5, 6, 10, 11)] == [1, 1, 1, 1, 2, 2, 3]


def test_more_than_twenty_percent_unhealthy_blocks_the_whole_nodepool():
    sick = [node(f"sick-{i}", ("Ready", "False", T0 - 40 * MIN)) for i in range(2)]
    got = plan(*sick, *[healthy(i) for i in range(3)])            # 2 of 5 > 1
    assert got.repairs == []
    assert [(b.nodeclaim, b.unhealthy_nodes, b.nodes, b.allowed) for b in got.blocked] == [
        ("nc-sick-0", 2, 5, 1), ("nc-sick-1", 2, 5, 1)]
    assert "more than 20% nodes are unhealthy" in got.blocked[0].message
    ok = plan(*sick, *[healthy(i) for i in range(4)])              # 2 of 6 <= 2
    assert [r.node for r in ok.repairs] == ["sick-0", "sick-1"]


def test_an_unhealthy_node_not_yet_due_still_counts_against_the_threshold():
    due = node("due", ("Ready", "False", T0 - 40 * MIN))
    fresh = node("fresh", ("Ready", "False", T0 - 1 * MIN))
    got = plan(due, fresh, *[healthy(i) for i in range(3)])      # 2 unhealthy of 5
    assert got.repairs == [] and [b.node for b in got.blocked] == ["due"]


def test_the_threshold_is_per_nodepool():
    a = [node("a-sick", ("Ready", "False", T0 - 40 * MIN), nodepool="a"), healthy(0, "a")]
    b = [node(f"b-sick-{i}", ("Ready", "False", T0 - 40 * MIN), nodepool="b") for i in range(2)] + [healthy(0, "b")]
    got = plan(*a, *b)
    assert [r.node for r in got.repairs] == ["a-sick"]            # 1 of 2 <= 1
    assert {x.node for x in got.blocked} == {"b-sick-0", "b-sick-1"}   # 2 of 3 > 1


def test_unmanaged_nodes_are_not_repaired():
    sick = node("sick", ("Ready", "False", T0 - 40 * MIN))
    nodes = [sick, *[healthy(i) for i in range(4)]]
    got = plan_repairs(nodes, {}, set(), T0)          # no NodeClaim: not Karpenter's
    assert got.repairs == [] and got.blocked == []


# -- a NodeClaim already being deleted (Karpenter's Reconcile: annotateTerminationGracePeriod before deleteNodeClaim
# returns on the deletion timestamp) --------------------------------------------------------------------------------

def test_a_due_node_already_deleting_gets_its_drain_made_forceful_not_a_second_disruption():
    gpu = node("gpu", ("AcceleratedHardwareReady", "False", T0 - 11 * MIN))
    got = plan(gpu, *[healthy(i) for i in range(4)], deleting={"nc-gpu"})
    assert got.repairs == [] and got.blocked == []
    assert [(r.nodeclaim, r.node, r.unhealthy.condition) for r in got.force_deleting] == [
        ("nc-gpu", "gpu", "AcceleratedHardwareReady")]
    early = plan(node("gpu", ("AcceleratedHardwareReady", "False", T0 - 9 * MIN)), *[healthy(i) for i in range(4)],
                 deleting={"nc-gpu"})
    assert early.force_deleting == [] and early.waiting == {"gpu": T0 + MIN}


def test_an_earlier_or_equal_termination_timestamp_stands_a_later_one_is_brought_forward():
    sick = node("sick", ("Ready", "False", T0 - 40 * MIN))
    fleet = [healthy(i) for i in range(4)]
    for at, forced in ((T0 - 60, False), (T0, False), (T0 + 1, True), (T0 + 86400, True)):
        got = plan(sick, *fleet, deleting={"nc-sick"}, termination_at={"nc-sick": at})
        assert [r.nodeclaim for r in got.force_deleting] == (["nc-sick"] if forced else []), at
        assert got.repairs == []
    # a timestamp on a NodeClaim not deleting changes nothing: it is repaired (deleted) as any due node
    assert [r.nodeclaim for r in plan(sick, *fleet, termination_at={"nc-sick": T0 - 60}).repairs] == ["nc-sick"]


def test_a_deleting_node_counts_against_the_threshold_and_is_blocked_by_it():
    deleting = node("deleting", ("Ready", "False", T0 - 40 * MIN))
    other = node("other", ("Ready", "False", T0 - 40 * MIN))
    got = plan(deleting, other, *[healthy(i) for i in range(3)], deleting={"nc-deleting"})   # 2 unhealthy of 5 > 1
    assert got.repairs == [] and got.force_deleting == []
    assert [(b.nodeclaim, b.unhealthy_nodes, b.nodes) for b in got.blocked] == [("nc-deleting", 2, 5), ("nc-other", 2, 5)]
    # a healthy node being deleted still counts in the NodePool's size: 2 of 6 <= 2
    got = plan(deleting, other, *[healthy(i) for i in range(4)], deleting={"nc-ok-default-0"})
    assert [r.nodeclaim for r in got.repairs] == ["nc-deleting", "nc-other"]
