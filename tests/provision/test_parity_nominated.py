"""Parity of the provisioner's pod re-check with Karpenter's ``IsProvisionable`` (pkg/utils/pod/scheduling.go).

* ``IsPreempting``: a pod whose live copy has ``status.nominatedNodeName`` (the kube-scheduler preempted victims for
  it and will bind it there) is skipped, like the other skips (logged ``decision=skip``, listed in the report).
* ``IsOwnedByDaemonSet`` / ``IsOwnedByNode`` match the owner's apiVersion as well as its kind: apps/v1 DaemonSet and
  v1 Node pods are skipped, a pod of a DaemonSet of another API group (OpenKruise) is not."""

import pytest

from karpenter_lambda.controllers import runtime
from karpenter_lambda.sim.world import make_pod


def _provision(world, pods):
    reports = []
    hook = lambda kind, r: reports.append(r) if kind == "provision" else None  # noqa: E731
    runtime.REPORT_HOOKS.append(hook)
    try:
        assert world.provision(world.sqs_event(pods)) == {"batchItemFailures": []}
    finally:
        runtime.REPORT_HOOKS.remove(hook)
    (report,) = reports
    return report


def test_a_pod_the_kube_scheduler_nominated_is_skipped(world):
    pods = world.add_pods([make_pod("preemptor"), make_pod("plain")])
    # the message's copy has no nomination; the live pod has one (the kube-scheduler preempted for it meanwhile)
    world.server.store.patch("pods", "preemptor", {"status": {"nominatedNodeName": "node-a"}}, "default")
    report = _provision(world, pods)
    assert report.skipped == [{"pod": "default/preemptor",
                               "reason": "preempting: the kube-scheduler nominated it to node node-a"}]
    launched = [k for x in report.launched for k in x.pods]
    assert launched == ["default/plain"]
    assert "pod default/preemptor skipped: preempting" in world.logs.getvalue()


def test_a_nominated_pod_alone_launches_nothing(world):
    pods = world.add_pods([make_pod("preemptor")])
    world.server.store.patch("pods", "preemptor", {"status": {"nominatedNodeName": "node-a"}}, "default")
    report = _provision(world, pods)
    assert [s["pod"] for s in report.skipped] == ["default/preemptor"]
    assert report.launched == [] and world.instances() == [] and world.store.list("NodeClaim") == []


def _owned(name, api_version, kind):
    p = make_pod(name)
    p["metadata"]["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": "o", "uid": f"u-{name}",
                                         "controller": True}]
    return p


@pytest.mark.parametrize("api_version, kind, reason", [
    ("apps/v1", "DaemonSet", "DaemonSet pod"),
    ("v1", "Node", "static pod (owned by its Node)"),
    ("apps.kruise.io/v1alpha1", "DaemonSet", None),    # provisionable in Karpenter: not skipped by the re-check
    ("extensions/v1beta1", "DaemonSet", None),
])
def test_the_owner_check_matches_kind_and_api_version(world, api_version, kind, reason):
    pods = world.add_pods([_owned("p", api_version, kind)])
    report = _provision(world, pods)
    assert report.skipped == ([{"pod": "default/p", "reason": reason}] if reason else [])
