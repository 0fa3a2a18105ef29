"""Issue 29 (the launch_retry mutation): the lifecycle sweep resolves an unknown launch by itself, as Karpenter's
launch reconciler retries a NodeClaim's launch whether or not pods wait for it -- not only the next provisioning
round (which comes only while pods are pending), and not after the 5-minute backstop."""

from __future__ import annotations

import pytest
from botocore.exceptions import ReadTimeoutError

from karpenter_lambda.api.labels import NODECLAIM_TAG
from karpenter_lambda.cloudprovider import AWSCloudProvider
from karpenter_lambda.controllers.launcher import LAUNCH_LEASE, OUTCOME_UNKNOWN
from karpenter_lambda.controllers.lifecycle import LAUNCH_TIMEOUT
from karpenter_lambda.controllers.provision import Provisioner
from karpenter_lambda.sim.world import make_pod


class Crash(BaseException):
    """The Lambda process dies."""


class DiesAtCreateFleet:
    """The real cloud provider whose ``create`` never reaches EC2: the process dies (``crash``) or the answer is a
    read timeout (the launcher survives and marks the outcome unknown)."""

    def __init__(self, cloud, crash: bool):
        self._cloud, self.crash = cloud, crash

    def create(self, request, on_retry=None):
        if self.crash:
            raise Crash("the provisioner died at CreateFleet")
        raise ReadTimeoutError(endpoint_url="https://ec2.us-east-1.amazonaws.com/")

    def __getattr__(self, name):
        return getattr(self._cloud, name)


def tagged(world, name) -> list[dict]:
    return [i for i in world.instances() if {t["Key"]: t["Value"] for t in i.get("Tags", [])}.get(NODECLAIM_TAG) == name]


def stuck_launch(world, crash: bool):
    cloud = DiesAtCreateFleet(AWSCloudProvider.from_environment(world.env), crash)
    p = Provisioner(world.store, world.env.kube, cloud, world.env.claims, world.clock)
    pods = world.add_pods([make_pod("web-0", cpu="1")])
    if crash:
        with pytest.raises(Crash):
            p.provision(pods)
    else:
        p.provision(pods)
    (nc,) = world.store.list("NodeClaim")
    assert not nc.status.get("providerID") and tagged(world, nc.name) == []
    return nc


def test_the_sweep_relaunches_a_crashed_launch_once_the_lease_is_over(world):
    nc = stuck_launch(world, crash=True)
    world.clock.advance(30)                      # a live launcher may still hold it: the sweep leaves it alone
    report = world.sweep()
    assert report["resolved"] == [] and tagged(world, nc.name) == []
    world.clock.advance(LAUNCH_LEASE)            # no provisioning round comes (no pod waits); the sweep does it
    assert 30 + LAUNCH_LEASE < LAUNCH_TIMEOUT
    report = world.sweep()
    (inst,) = tagged(world, nc.name)
    assert report["resolved"] == [{"nodeClaim": nc.name, "outcome": "relaunched", "detail": inst["InstanceId"]}]
    assert report["deleted"] == []
    fresh = world.store.get("NodeClaim", nc.name)
    assert fresh.status["providerID"].endswith("/" + inst["InstanceId"]) and fresh.is_true("Launched")
    world.clock.advance(30)                      # launched now: the next sweep neither relaunches nor deletes it
    report = world.sweep()
    assert report["resolved"] == [] and report["deleted"] == [] and len(tagged(world, nc.name)) == 1


def test_an_outcome_marked_unknown_is_relaunched_by_the_next_sweep(world):
    nc = stuck_launch(world, crash=False)
    assert nc.condition("Launched")["reason"] == OUTCOME_UNKNOWN
    world.clock.advance(5)
    report = world.sweep()
    assert [(r["nodeClaim"], r["outcome"]) for r in report["resolved"]] == [(nc.name, "relaunched")]
    assert len(tagged(world, nc.name)) == 1
