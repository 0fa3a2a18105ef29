"""Manual NodeClaims (Karpenter's concepts/nodeclaims: "create NodeClaims manually to request capacity outside of the
standard provisioning workflow"): stored by `karpenter-lambda apply`, launched by the real lifecycle handler against
moto and the local API server, then registered, initialized and expired as any NodeClaim; an impossible one is
deleted with Karpenter's reason; a sweep that dies after CreateFleet never makes a second instance."""

from __future__ import annotations

import contextlib
import io

import pytest

from karpenter_lambda.api.labels import LAUNCH_TOKEN_ANNOTATION, NODECLAIM_TAG, TERMINATION_FINALIZER
from karpenter_lambda.api.times import to_epoch
from karpenter_lambda.cli.main import main
from karpenter_lambda.cloudprovider import AWSCloudProvider
from karpenter_lambda.cloudprovider.types import LaunchFailed
from karpenter_lambda.controllers.launcher import LAUNCH_LEASE
from karpenter_lambda.controllers.lifecycle import Lifecycle
from karpenter_lambda.controllers.manual_launch import LAUNCH_TIMEOUT
from karpenter_lambda.controllers.manual_nodeclaims import MANUAL_ANNOTATION
from karpenter_lambda.controllers.provision import Provisioner
from karpenter_lambda.sim.world import make_pod

MANUAL = """\
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: %(name)s
  labels:
    team: data
%(extra_labels)sspec:
  nodeClassRef:
    group: karpenter.k8s.aws
    kind: EC2NodeClass
    name: %(nodeclass)s
  requirements:
    - key: karpenter.k8s.aws/instance-family
      operator: In
      values: ["c5"]
    - key: karpenter.sh/capacity-type
      operator: In
      values: ["on-demand"]
    - key: kubernetes.io/arch
      operator: In
      values: ["amd64"]
  resources:
    requests:
      cpu: "%(cpu)s"
      memory: 4Gi
  taints:
    - key: example.com/manual
      effect: NoSchedule
  startupTaints:
    - key: example.com/agent
      effect: NoSchedule
  expireAfter: 2h
"""


def manual(name="manual-a", cpu="3", nodeclass="default", nodepool=None) -> str:
    extra = f"    karpenter.sh/nodepool: {nodepool}\n" if nodepool else ""
    return MANUAL % {"name": name, "cpu": cpu, "nodeclass": nodeclass, "extra_labels": extra}


def apply(world, tmp_path, text: str) -> str:
    """`karpenter-lambda apply -f FILE` in-process, against the world's state table (moto)."""
    path = tmp_path / "nodeclaim.yaml"
    path.write_text(text)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["--cluster", world.cluster, "--region", world.region, "apply", "-f", str(path)])
    assert rc == 0, err.getvalue()
    return out.getvalue()


def tagged(world, name) -> list[dict]:
    return [i for i in world.launched_instances()
            if {t["Key"]: t["Value"] for t in i.get("Tags", [])}.get(NODECLAIM_TAG) == name]


class Crash(BaseException):
    """The Lambda process dies."""


class DyingCloud:
    """The real cloud provider, but the sweep dies at CreateFleet: after it (``after=True``: the instance runs, its
    NodeClaim is not written) or before it (nothing launched)."""

    def __init__(self, cloud, after: bool):
        self._cloud, self.after = cloud, after

    def create(self, request, on_retry=None):
        if self.after:
            self._cloud.create(request, on_retry)
        raise Crash("the lifecycle sweep died at CreateFleet")

    def __getattr__(self, name):
        return getattr(self._cloud, name)


class RefusingCloud:
    """EC2 answers every CreateFleet with an error that is not insufficient capacity (nothing launched)."""

    def __init__(self, cloud):
        self._cloud = cloud

    def create(self, request, on_retry=None):
        raise LaunchFailed("InvalidParameterCombination: the request was refused")

    def __getattr__(self, name):
        return getattr(self._cloud, name)


def lifecycle_with(world, cloud) -> Lifecycle:
    return Lifecycle(world.store, cloud, world.env.kube, world.cluster, claims=world.env.claims, clock=world.clock)


def test_an_applied_nodeclaim_is_launched_registered_initialized_and_expires(world, tmp_path):
    assert apply(world, tmp_path, manual()) == "nodeclaim/manual-a created\n"
    stored = world.store.get("NodeClaim", "manual-a")
    assert stored.annotations[MANUAL_ANNOTATION] == "true" and not stored.status.get("providerID")

    report = world.sweep()
    assert [(r["nodeClaim"], r["outcome"]) for r in report["resolved"]] == [("manual-a", "launched")]
    (inst,) = tagged(world, "manual-a")
    nc = world.store.get("NodeClaim", "manual-a")
    # a type meeting its requirements and holding its requests: c5, on-demand, 3 CPU (c5.xlarge)
    assert inst["InstanceType"] == "c5.xlarge" and nc.labels["node.kubernetes.io/instance-type"] == "c5.xlarge"
    assert nc.labels["karpenter.sh/capacity-type"] == "on-demand" and "karpenter.sh/nodepool" not in nc.labels
    assert nc.status["providerID"].endswith("/" + inst["InstanceId"]) and nc.is_true("Launched")
    assert TERMINATION_FINALIZER in nc.metadata["finalizers"] and nc.annotations[LAUNCH_TOKEN_ANNOTATION]
    assert nc.annotations["karpenter.k8s.aws/ec2nodeclass-hash"]
    assert nc.spec["requirements"] == stored.spec["requirements"]    # the user's spec is left as it was
    tags = {t["Key"]: t["Value"] for t in inst["Tags"]}
    assert tags["karpenter.sh/nodepool"] == "" and tags["karpenter-lambda.io/cluster"] == world.cluster

    # the next sweep launches nothing more
    world.clock.advance(30)
    report = world.sweep()
    assert report["resolved"] == [] and report["deleted"] == [] and len(tagged(world, "manual-a")) == 1

    node = world.join(inst)    # its kubelet registers with the NodeClaim's taints (userData), startup taint removed
    report = world.sweep()
    assert [r["nodeClaim"] for r in report["registered"]] == ["manual-a"]
    world.sweep()
    nc = world.store.get("NodeClaim", "manual-a")
    assert nc.is_true("Registered") and nc.is_true("Initialized")
    node = world.server.store.get("nodes", node["metadata"]["name"])
    assert node["metadata"]["labels"]["team"] == "data"
    assert node["metadata"]["labels"]["karpenter.sh/initialized"] == "true"
    assert {"key": "example.com/manual", "effect": "NoSchedule"} in [
        {k: t[k] for k in ("key", "effect")} for t in node["spec"]["taints"]]

    # no NodePool: no disruption candidate, but its own expireAfter (2h) still applies
    world.clock.advance(2 * 3600)
    report = world.sweep()
    assert [(d["nodeClaim"], d["reason"]) for d in report["disrupted"]] == [("manual-a", "Expired")]
    assert world.store.get("NodeClaim", "manual-a").metadata["deletionTimestamp"]
    deleted = []
    for _ in range(4):
        world.clock.advance(30)
        deleted += world.sweep()["deleted"]
    assert [d["nodeClaim"] for d in deleted] == ["manual-a"] and deleted[0]["reason"].startswith("Expired")
    assert world.store.get("NodeClaim", "manual-a") is None and tagged(world, "manual-a") == []   # terminated


def test_a_nodeclaim_nothing_can_launch_is_deleted_with_karpenters_reason(world, tmp_path):
    apply(world, tmp_path, manual(name="too-big", cpu="1000"))
    report = world.sweep()
    assert tagged(world, "too-big") == [] and world.instances() == []
    (d,) = report["deleted"]
    assert d["nodeClaim"] == "too-big"
    assert d["reason"].startswith("InsufficientCapacity: all requested instance types were unavailable during launch")
    assert "hold the requests" in d["reason"] or "holds the requests" in d["reason"]
    assert world.store.get("NodeClaim", "too-big") is None

    apply(world, tmp_path, manual(name="no-class", nodeclass="missing"))
    report = world.sweep()
    assert [(d["nodeClaim"], d["reason"]) for d in report["deleted"]] == [
        ("no-class", "InsufficientCapacity: resolving EC2NodeClass 'missing': not found")]
    assert world.instances() == []


def test_a_crash_after_createfleet_is_adopted_never_launched_twice(world, tmp_path):
    apply(world, tmp_path, manual())
    with pytest.raises(Crash):
        lifecycle_with(world, DyingCloud(AWSCloudProvider.from_environment(world.env), after=True)).sweep()
    (inst,) = tagged(world, "manual-a")
    nc = world.store.get("NodeClaim", "manual-a")
    assert not nc.status.get("providerID") and nc.condition("Launched")["reason"] == "Launching"

    world.clock.advance(10)
    report = world.sweep()
    assert report["adopted"] == [{"nodeClaim": "manual-a", "instanceId": inst["InstanceId"]}]
    assert report["resolved"] == [] and len(tagged(world, "manual-a")) == 1
    nc = world.store.get("NodeClaim", "manual-a")
    assert nc.status["providerID"].endswith("/" + inst["InstanceId"]) and nc.is_true("Launched")
    world.clock.advance(LAUNCH_LEASE + 60)    # and it stays the one instance
    world.sweep()
    assert len(tagged(world, "manual-a")) == 1


def test_a_crash_before_createfleet_is_launched_again_once_the_lease_is_over_with_the_same_token(world, tmp_path):
    apply(world, tmp_path, manual())
    with pytest.raises(Crash):
        lifecycle_with(world, DyingCloud(AWSCloudProvider.from_environment(world.env), after=False)).sweep()
    token = world.store.get("NodeClaim", "manual-a").annotations[LAUNCH_TOKEN_ANNOTATION]
    assert tagged(world, "manual-a") == []
    world.clock.advance(30)                      # its attempt may still be running: left alone
    report = world.sweep()
    assert report["resolved"] == [] and tagged(world, "manual-a") == []
    # a provisioning round meanwhile leaves it to the lifecycle sweep (no rollback of a manual NodeClaim)
    world.clock.advance(LAUNCH_LEASE)
    Provisioner(world.store, world.env.kube, AWSCloudProvider.from_environment(world.env), world.env.claims,
                world.clock).provision(world.add_pods([make_pod("web-0", cpu="1")]))
    assert world.store.get("NodeClaim", "manual-a") is not None and tagged(world, "manual-a") == []
    report = world.sweep()
    assert [(r["nodeClaim"], r["outcome"]) for r in report["resolved"]] == [("manual-a", "launched")]
    assert len(tagged(world, "manual-a")) == 1
    assert world.store.get("NodeClaim", "manual-a").annotations[LAUNCH_TOKEN_ANNOTATION] == token


def test_a_refused_launch_is_retried_then_deleted_after_the_launch_timeout(world, tmp_path):
    apply(world, tmp_path, manual())
    refusing = lifecycle_with(world, RefusingCloud(AWSCloudProvider.from_environment(world.env)))
    report = refusing.sweep().to_dict()
    nc = world.store.get("NodeClaim", "manual-a")
    cond = nc.condition("Launched")
    assert (cond["status"], cond["reason"]) == ("Unknown", "LaunchFailed") and "refused" in cond["message"]
    assert report["deleted"] == [] and any("LaunchFailed" in e for e in report["errors"])
    world.clock.advance(60)                      # retried by the next sweep: EC2 takes it now
    report = world.sweep()
    assert [(r["nodeClaim"], r["outcome"]) for r in report["resolved"]] == [("manual-a", "launched")]

    apply(world, tmp_path, manual(name="manual-b"))
    created = to_epoch(world.store.get("NodeClaim", "manual-b").metadata["creationTimestamp"])
    while world.clock() < created + LAUNCH_TIMEOUT - 61:     # refused every minute: kept, retried
        refusing.sweep()
        assert world.store.get("NodeClaim", "manual-b").condition("Launched")["reason"] == "LaunchFailed"
        world.clock.advance(61)
    world.clock.advance(61)
    report = refusing.sweep().to_dict()
    assert [d["nodeClaim"] for d in report["deleted"]] == ["manual-b"]
    assert report["deleted"][0]["reason"].startswith("launch did not complete within 5m: LaunchFailed")
    assert tagged(world, "manual-b") == []


def test_a_nodeclaim_of_a_nodepool_counts_in_its_usage_until_deleted(world, tmp_path):
    apply(world, tmp_path, manual(nodepool="default"))
    world.sweep()
    (inst,) = tagged(world, "manual-a")
    totals, claims = world.env.claims.usage("default")
    assert list(claims) == ["manual-a"] and totals["nodes"] == 1 and totals["cpu"] == 4000   # c5.xlarge
    nc = world.store.get("NodeClaim", "manual-a")
    assert nc.labels["karpenter.sh/nodepool"] == "default"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--cluster", world.cluster, "--region", world.region, "delete", "nodeclaim", "manual-a"]) == 0
    for _ in range(4):
        world.clock.advance(30)
        world.sweep()
    assert world.store.get("NodeClaim", "manual-a") is None
    totals, claims = world.env.claims.usage("default")
    assert claims == {} and totals["nodes"] == 0
