"""A static scale down reads ``karpenter.sh/do-not-disrupt`` as Karpenter's ``pod.IsDoNotDisruptActive`` does
(pkg/controllers/static/deprovisioning): ``"true"`` or a duration not yet elapsed since the pod started -- for the
empty-node test and for the order of the non-empty ones."""

from __future__ import annotations

from builders import T0, claimed_node, pod
from karpenter_lambda.disruption.static import removal_order

from .test_static_rules import snap, static_pool


def _pods_started(at: float, dnd: str, node: str, owner: str = "ReplicaSet"):
    return [pod("keep-0", node=node, owner=owner, created=at, annotations={"karpenter.sh/do-not-disrupt": dnd})]


def test_a_duration_do_not_disrupt_not_yet_elapsed_puts_its_node_last():
    a, b = claimed_node("static-a", nodepool="static"), claimed_node("static-b", nodepool="static")
    pods = _pods_started(T0 - 60, "2h", "node-static-a") + [pod(f"b-{i}", node="node-static-b") for i in range(3)]
    s = snap(a, b, pods=pods, pools=[static_pool(1)])
    assert removal_order(s, s.nodepools["static"]) == ["static-b", "static-a"]


def test_an_elapsed_duration_no_longer_protects():
    a, b = claimed_node("static-a", nodepool="static"), claimed_node("static-b", nodepool="static")
    pods = _pods_started(T0 - 3 * 3600, "2h", "node-static-a") + [pod(f"b-{i}", node="node-static-b") for i in range(3)]
    s = snap(a, b, pods=pods, pools=[static_pool(1)])
    assert removal_order(s, s.nodepools["static"]) == ["static-a", "static-b"]   # the cheaper one to disrupt


def test_a_daemonset_pod_with_an_active_duration_makes_its_node_not_empty():
    a = claimed_node("static-a", nodepool="static")     # a DaemonSet pod with do-not-disrupt: 2h, started 1m ago
    b = claimed_node("static-b", nodepool="static")     # a DaemonSet pod only: empty
    pods = _pods_started(T0 - 60, "2h", "node-static-a", owner="DaemonSet") + [
        pod("ds-b", node="node-static-b", owner="DaemonSet")]
    s = snap(a, b, pods=pods, pools=[static_pool(1)])
    assert removal_order(s, s.nodepools["static"]) == ["static-b", "static-a"]
