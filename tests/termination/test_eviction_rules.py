"""The pure drain rules (karpenter_lambda.disruption.eviction)."""

import pytest

from karpenter_lambda.disruption.eviction import (GROUPS, do_not_disrupt_active, drainable, eviction_group,
                                                  next_actions, next_step, tolerates_disrupted)

T0 = 1_767_225_600.0   # 2026-01-01T00:00:00Z


def _p(name, *, owner="ReplicaSet", critical=None, terminating=None, grace=None, dnd=None, tolerations=None,
       phase="Running", mirror=False, start="2026-01-01T00:00:00Z"):
    p = {"metadata": {"name": name, "namespace": "default", "uid": name, "annotations": {},
                      "ownerReferences": [{"kind": owner, "name": "o"}]},
         "spec": {}, "status": {"phase": phase, "startTime": start}}
    if critical:
        p["spec"]["priorityClassName"] = critical
    if terminating:
        p["metadata"]["deletionTimestamp"] = terminating
    if grace is not None:
        p["spec"]["terminationGracePeriodSeconds"] = grace
    if dnd:
        p["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] = dnd
    if tolerations:
        p["spec"]["tolerations"] = tolerations
    if mirror:
        p["metadata"]["annotations"]["kubernetes.io/config.mirror"] = "x"
    return p


def _names(pods):
    return [p["metadata"]["name"] for p in pods]


def test_groups():
    assert GROUPS == ("non-critical", "non-critical DaemonSet", "critical", "critical DaemonSet")
    pods = [_p("a"), _p("b", owner="DaemonSet"), _p("c", critical="system-cluster-critical"),
            _p("d", owner="DaemonSet", critical="system-node-critical"), _p("e", critical="high")]
    assert [eviction_group(p) for p in pods] == [0, 1, 2, 3, 0]


@pytest.mark.parametrize("tols,expected", [
    ([{"key": "karpenter.sh/disrupted", "operator": "Exists", "effect": "NoSchedule"}], True),
    ([{"key": "karpenter.sh/disrupted", "operator": "Exists"}], True),
    ([{"operator": "Exists"}], True),
    ([{"operator": "Exists", "effect": "NoSchedule"}], True),
    ([{"operator": "Exists", "effect": "NoExecute"}], False),
    ([{"key": "karpenter.sh/disrupted", "operator": "Equal", "value": "x", "effect": "NoSchedule"}], False),
    ([{"key": "karpenter.sh/disrupted", "operator": "Equal", "effect": "NoSchedule"}], True),
    ([{"key": "other", "operator": "Exists"}], False),
    (None, False),
])
def test_tolerates_disrupted(tols, expected):
    assert tolerates_disrupted(_p("x", tolerations=tols)) is expected


def test_drainable():
    assert drainable(_p("a"))
    assert not drainable(_p("m", mirror=True)) and not drainable(_p("n", owner="Node"))
    assert not drainable(_p("s", phase="Succeeded")) and not drainable(_p("f", phase="Failed"))
    assert not drainable(_p("t", tolerations=[{"operator": "Exists"}]))
    # terminating: waited for, until stuck (a minute past its deletionTimestamp)
    t = _p("t", terminating="2026-01-01T00:00:00Z")
    assert drainable(t, T0 + 60) and not drainable(t, T0 + 61)


def test_do_not_disrupt():
    assert do_not_disrupt_active(_p("a", dnd="true"), T0 + 10 ** 6)
    assert do_not_disrupt_active(_p("a", dnd="10m"), T0 + 599)
    assert not do_not_disrupt_active(_p("a", dnd="10m"), T0 + 600)
    assert do_not_disrupt_active(_p("a", dnd="10m", start=None), T0 + 10 ** 6)   # no start time: holds
    assert not do_not_disrupt_active(_p("a", dnd="false"), T0)
    assert not do_not_disrupt_active(_p("a", dnd="junk"), T0)
    assert not do_not_disrupt_active(_p("a"), T0)


def test_one_group_at_a_time():
    pods = [_p("a"), _p("b", owner="DaemonSet"), _p("c", critical="system-node-critical"),
            _p("d", owner="DaemonSet", critical="system-node-critical")]
    evict, delete, waiting = next_actions(pods, T0, None)
    assert _names(evict) == ["a"] and delete == [] and _names(waiting) == ["b", "c", "d"]
    # a terminating pod of group 0 is waited for: group 1 does not start, nothing is evicted
    evict, delete, waiting = next_actions([_p("a", terminating="2026-01-01T00:00:00Z")] + pods[1:], T0, None)
    assert evict == [] and delete == [] and len(waiting) == 4
    evict, _, _ = next_actions(pods[1:], T0, None)
    assert _names(evict) == ["b"]
    evict, _, _ = next_actions(pods[2:], T0, None)
    assert _names(evict) == ["c"]
    evict, _, _ = next_actions(pods[3:], T0, None)
    assert _names(evict) == ["d"]
    assert next_actions([], T0, None) == ([], [], [])
    assert next_step([_p("m", mirror=True)], T0, None).done


def test_already_handled_pods():
    pods = [_p("a"), _p("b")]
    evict, delete, waiting = next_actions(pods, T0, None, {"evicted": {"a": "t"}})
    assert _names(evict) == ["b"] and _names(waiting) == ["a"]
    evict, delete, waiting = next_actions(pods, T0, None, {"a", "b"})
    assert evict == [] and len(waiting) == 2


def test_deadline_deletes_any_group_after_deadline_minus_pod_grace():
    pods = [_p("a", dnd="true", grace=60), _p("b", owner="DaemonSet", critical="system-node-critical")]
    deadline = T0 + 1000
    step = next_step(pods, T0 + 100, deadline)
    assert step.evict == [] and step.blocked == {"a": "do-not-disrupt"}
    step = next_step(pods, T0 + 940, deadline)      # deadline - 60 for a; b (30 s default) not yet
    assert _names(step.delete) == ["a"] and _names(step.waiting) == ["b"]
    evict, delete, _ = next_actions(pods, T0 + 970, deadline)
    assert _names(delete) == ["a", "b"] and evict == []
    # never deleted twice; a pod evicted before but still not terminating may be deleted once
    _, delete, _ = next_actions(pods, T0 + 970, deadline, {"deleted": {"a": "t"}, "evicted": {"b": "t"}})
    assert _names(delete) == ["b"]
    # a terminating pod is not deleted again at the deadline
    _, delete, _ = next_actions([_p("x", terminating="2026-01-01T00:16:00Z")], T0 + 990, deadline)
    assert delete == []
