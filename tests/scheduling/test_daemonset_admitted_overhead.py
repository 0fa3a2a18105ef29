"""The DaemonSet overhead a NodeClaim is sized with counts what the API server's admission gives the DaemonSet's pods
(``scheduling.nodeclaim.counted_daemonsets``, Karpenter's ``getDaemonSetPods``):

* a live pod of the DaemonSet, when there is one, is counted as it is (its requests, the RuntimeClass ``overhead``
  it was admitted with), with the template's required node affinity instead of the one pinning it to its node;
* otherwise the template, admitted as its pods will be in the DaemonSet's namespace: a RuntimeClass's
  ``overhead.podFixed``, a LimitRange's default requests.

Before, the template was counted as written: a 10m agent of a RuntimeClass with a 1-CPU overhead counted 10m, an
agent without requests in a namespace defaulting them to 1 CPU counted nothing, and a 1-CPU pod got an m5.large
(1.9 CPU allocatable here) with 2 CPU of pods on it."""

from __future__ import annotations

import copy

from karpenter_lambda.api import labels as L
from karpenter_lambda.api.admission import Admission
from karpenter_lambda.scheduling.model import NodePoolInput
from karpenter_lambda.scheduling.nodeclaim import NodeClaimTemplate, counted_daemonsets, live_daemon_pods

from .helpers import itype, nodepool, pod, run

RINDEX = ["cpu", "memory", "pods"]
KATA = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "kata"}, "handler": "kata",
        "overhead": {"podFixed": {"cpu": "1"}}, "scheduling": {"tolerations": [{"key": "kata", "operator": "Exists"}]}}
DEFAULTS = {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "lr", "namespace": "kube-system"},
            "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "1"}, "default": {"cpu": "1"}}]}}


def m5():
    return [itype("m5.large", 2, 8, 0.096, spot=0), itype("m5.xlarge", 4, 16, 0.192, spot=0),
            itype("m5.2xlarge", 8, 32, 0.384, spot=0)]


def daemonset(name="agent", ns="kube-system", uid="ds-uid", resources=None, **spec):
    ctr = {"name": "d", "image": "agent", "volumeMounts": [{"name": "host", "mountPath": "/host"}]}
    if resources is not None:
        ctr["resources"] = resources
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": ns, "uid": uid},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [ctr], "volumes": [{"name": "host", "hostPath": {"path": "/"}}],
                                           **spec}}}}


def daemon_pod(ds, node="n1", created="2026-01-01T00:00:00Z", uid=None, cpu=None, **extra):
    """A pod the DaemonSet controller created from ``ds`` on ``node`` (pinned there by its node affinity), as the
    API server admitted it (``extra``: what the admission added)."""
    meta = ds["metadata"]
    spec = copy.deepcopy(ds["spec"]["template"]["spec"])
    if cpu is not None:
        spec["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    spec.update(extra, nodeName=node, affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}})
    spec["volumes"] = spec.get("volumes", []) + [{"name": f"kube-api-access-{node}", "projected": {"sources": []}}]
    return {"metadata": {"name": f"{meta['name']}-{node}", "namespace": meta["namespace"], "creationTimestamp": created,
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": meta["name"],
                                              "uid": uid or meta["uid"], "controller": True}]},
            "spec": spec, "status": {"phase": "Running"}}


def overhead(daemonsets, pool=None):
    tpl = NodeClaimTemplate(NodePoolInput(pool or nodepool(), m5()), RINDEX, daemonsets, None)
    return tpl.daemon


def placed(daemonsets):
    res = run([pod("p", cpu="1", memory=None)], types=m5(), daemonsets=daemonsets)
    assert not res.unschedulable
    (claim,) = res.nodeclaims
    return claim.instance_type, claim.requests["cpu"]


# ------------------------------------------------------------------------------------- a template, no pod of it yet
def test_a_runtimeclass_overhead_counts_for_the_daemonset_template():
    ds = daemonset(resources={"requests": {"cpu": "10m"}}, runtimeClassName="kata")
    counted = counted_daemonsets([ds], admission=Admission.of([KATA]))
    assert overhead(counted)["cpu"] == 1010
    assert placed(counted) == ("m5.xlarge", 2010)       # 2010m do not fit an m5.large's 1900m
    # the class's tolerations came with it; the input DaemonSet is left as it was
    assert {"key": "kata", "operator": "Exists"} in counted[0]["spec"]["template"]["spec"]["tolerations"]
    assert "overhead" not in ds["spec"]["template"]["spec"] and "tolerations" not in ds["spec"]["template"]["spec"]
    # the template as written (what the overhead counted before): 10m, and the m5.large
    assert overhead([ds])["cpu"] == 10 and placed([ds]) == ("m5.large", 1010)


def test_limitrange_defaults_of_the_daemonset_namespace_count():
    ds = daemonset()    # no requests at all
    counted = counted_daemonsets([ds], admission=Admission.of([DEFAULTS]))
    assert overhead(counted)["cpu"] == 1000
    assert placed(counted) == ("m5.xlarge", 2000)
    assert overhead([ds]).get("cpu", 0) == 0 and placed([ds])[0] == "m5.large"
    # a LimitRange of another namespace is not the DaemonSet's
    elsewhere = copy.deepcopy(DEFAULTS)
    elsewhere["metadata"]["namespace"] = "default"
    assert overhead(counted_daemonsets([ds], admission=Admission.of([elsewhere]))).get("cpu", 0) == 0
    # a request of its own is kept (the default only fills what is missing)
    own = daemonset(resources={"requests": {"cpu": "100m"}})
    assert overhead(counted_daemonsets([own], admission=Admission.of([DEFAULTS])))["cpu"] == 100


def test_a_template_the_admission_refuses_counts_as_written_and_is_named():
    gvisor = {**KATA, "metadata": {"name": "gvisor"}}
    ds = daemonset(resources={"requests": {"cpu": "10m"}}, runtimeClassName="kata")
    refused: dict = {}
    counted = counted_daemonsets([ds], admission=Admission.of([gvisor]), refused=refused)
    assert refused == {"kube-system/agent": "RuntimeClass kata not found"}
    assert overhead(counted)["cpu"] == 10


# ------------------------------------------------------------------------------------------------ a live pod of it
def test_a_live_pod_is_counted_as_admitted_not_its_template():
    """The cluster's pod carries what the cluster's admission gave it (here a 1-CPU overhead and a 500m request its
    template does not have); no RuntimeClass or LimitRange needs to be known."""
    ds = daemonset(resources={"requests": {"cpu": "10m"}}, runtimeClassName="kata")
    live = daemon_pod(ds, cpu="500m", overhead={"cpu": "1"})
    counted = counted_daemonsets([ds], [live])
    assert overhead(counted)["cpu"] == 1500
    assert placed(counted) == ("m5.xlarge", 2500)
    # the live pod wins over the admission of the template
    assert counted_daemonsets([ds], [live], Admission.of([KATA])) == counted


def test_the_newest_live_pod_of_the_same_daemonset_is_counted():
    ds = daemonset(resources={"requests": {"cpu": "10m"}})
    old = daemon_pod(ds, "n1", "2026-01-01T00:00:00Z", cpu="200m")
    new = daemon_pod(ds, "n2", "2026-01-02T00:00:00Z", cpu="300m")
    orphan = daemon_pod(ds, "n3", "2026-01-03T00:00:00Z", uid="former-ds-uid", cpu="900m")   # a former DaemonSet's
    other = daemon_pod(daemonset("other", uid="other-uid"), "n4", "2026-01-04T00:00:00Z", cpu="2")
    assert live_daemon_pods([ds], [old, new, orphan, other]) == {("kube-system", "agent"): new}
    assert overhead(counted_daemonsets([ds], [new, old, orphan, other]))["cpu"] == 300
    # same name in another namespace: not this DaemonSet's
    elsewhere = daemon_pod(ds, "n5", "2026-01-05T00:00:00Z", cpu="4")
    elsewhere["metadata"]["namespace"] = "default"
    assert overhead(counted_daemonsets([ds], [old, elsewhere]))["cpu"] == 200


def test_a_live_pod_keeps_the_templates_node_affinity_not_its_node_pin():
    """The DaemonSet controller pins each pod to its node (matchFields metadata.name); the overhead reads the
    template's required node affinity instead (Karpenter's getDaemonSetPods), so an amd64-only agent's live pod
    is still not charged to arm64 types, and the pin does not make it a conditional daemon."""
    amd = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": L.ARCH, "operator": "In", "values": ["amd64"]}]}]}}
    ds = daemonset(resources={"requests": {"cpu": "10m"}}, affinity={"nodeAffinity": amd})
    live = daemon_pod(ds, cpu="1")
    (counted,) = counted_daemonsets([ds], [live])
    spec = counted["spec"]["template"]["spec"]
    assert spec["affinity"] == {"nodeAffinity": amd}
    both = nodepool(requirements=[{"key": L.ARCH, "operator": "In", "values": ["amd64", "arm64"]},
                                  {"key": L.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}])
    types = m5() + [itype("m6g.large", 2, 8, 0.077, arch="arm64", spot=0)]
    tpl = NodeClaimTemplate(NodePoolInput(both, types), RINDEX, [counted], None)
    by = {t.name: t for t in tpl.types}
    assert by["m6g.large"].daemon == {} and by["m5.large"].daemon["cpu"] == 1000
    # without a template affinity the pin is dropped: the daemon runs on every type
    plain = daemonset(resources={"requests": {"cpu": "10m"}})
    (counted,) = counted_daemonsets([plain], [daemon_pod(plain, cpu="1")])
    assert "affinity" not in counted["spec"]["template"]["spec"]


def test_only_what_the_overhead_reads_is_kept_so_the_newest_pod_does_not_change_the_template():
    """A live pod's node, its token volume, its image and mounts are not read by the overhead: two pods of the same
    DaemonSet give the same counted template (the template cache's key), the host ports and tolerations are kept."""
    ds = daemonset(resources={"requests": {"cpu": "10m"}}, tolerations=[{"operator": "Exists"}])
    ds["spec"]["template"]["spec"]["containers"][0]["ports"] = [{"containerPort": 9100, "hostPort": 9100}]
    a = counted_daemonsets([ds], [daemon_pod(ds, "n1", "2026-01-01T00:00:00Z")])
    b = counted_daemonsets([ds], [daemon_pod(ds, "n2", "2026-01-02T00:00:00Z")])
    assert a == b
    spec = a[0]["spec"]["template"]["spec"]
    assert spec == {"containers": [{"name": "d", "resources": {"requests": {"cpu": "10m"}},
                                    "ports": [{"containerPort": 9100, "hostPort": 9100}]}],
                    "tolerations": [{"operator": "Exists"}]}
