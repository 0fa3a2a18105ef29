"""Parity of the watcher's pod filter with Karpenter's ``IsProvisionable``: the DaemonSet / Node owner check matches
the owner's kind AND apiVersion (``IsOwnedBy``: apps/v1 DaemonSet, v1 Node), so a pod owned by a DaemonSet of another
API group (e.g. OpenKruise's Advanced DaemonSet) is provisionable."""

import pytest

from karpenter_lambda_watcher.handlers import is_provisionable

from watcher_testutil import drain, pending_pod


def _owned(api_version, kind, name="o"):
    p = pending_pod("x")
    ref = {"kind": kind, "name": name, "uid": f"u-{name}", "controller": True}
    if api_version is not None:
        ref["apiVersion"] = api_version
    p["metadata"]["ownerReferences"] = [ref]
    return p


@pytest.mark.parametrize("api_version, kind, provisionable", [
    ("apps/v1", "DaemonSet", False),
    ("v1", "Node", False),
    ("apps.kruise.io/v1alpha1", "DaemonSet", True),     # Karpenter provisions for these
    ("apps.kruise.io/v1beta1", "DaemonSet", True),
    ("extensions/v1beta1", "DaemonSet", True),
    ("example.com/v1", "Node", True),
    ("apps/v1", "ReplicaSet", True),
    ("v1", "DaemonSet", True),                            # the kind alone is not enough
    (None, "DaemonSet", False),                           # no apiVersion (impossible on a real API server): core
])
def test_owner_matches_kind_and_api_version(api_version, kind, provisionable):
    assert is_provisionable(_owned(api_version, kind)) is provisionable


def test_the_owner_check_on_its_own():
    from karpenter_lambda_watcher.handlers import is_owned_by_daemonset_or_node

    assert is_owned_by_daemonset_or_node(_owned("apps/v1", "DaemonSet"))
    assert is_owned_by_daemonset_or_node(_owned("v1", "Node"))
    assert not is_owned_by_daemonset_or_node(_owned("apps.kruise.io/v1alpha1", "DaemonSet"))
    assert not is_owned_by_daemonset_or_node(pending_pod("no-owner"))


def test_any_matching_owner_excludes_the_pod():
    pod = _owned("apps.kruise.io/v1alpha1", "DaemonSet")
    pod["metadata"]["ownerReferences"].append({"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "u2"})
    assert not is_provisionable(pod)


def test_terminating_pending_pods_are_still_not_forwarded():
    """A deliberate difference from Karpenter (docs/watcher.md): the kube-scheduler never binds a pod being deleted."""
    pod = _owned("apps/v1", "ReplicaSet")
    pod["metadata"]["deletionTimestamp"] = "2027-01-01T00:00:00Z"
    assert not is_provisionable(pod)


def test_a_pod_of_a_third_party_daemonset_is_forwarded(kube, sqs, queues, start_watcher):
    pod_url, _ = queues
    kruise = pending_pod("kruise-ds-pod")
    kruise["metadata"]["ownerReferences"] = [{"apiVersion": "apps.kruise.io/v1alpha1", "kind": "DaemonSet",
                                              "name": "agent", "uid": "k1", "controller": True}]
    kube.store.create("pods", kruise)
    ds = pending_pod("ds-pod")
    ds["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "d1",
                                          "controller": True}]
    kube.store.create("pods", ds)
    kube.store.create("pods", pending_pod("web"))
    with start_watcher(pod_url) as w:
        w.wait(lambda s: s.messages_sent >= 2)
    names = sorted(m["pod"]["metadata"]["name"] for m in drain(sqs, pod_url) if m["type"] == "pod")
    assert names == ["kruise-ds-pod", "web"]
