"""Issue 29 item 6, fix 2: an unknown launch outcome (an EC2 5xx after retries, a read timeout, a crash right at
CreateFleet) is resolved by the next provisioning round within seconds -- the instance tagged for the NodeClaim is
adopted, else the same NodeClaim is launched again -- not after the lifecycle sweep's 5-minute backstop."""

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


class LostAnswer:
    """The real cloud provider whose ``create`` fails after (``launch=True``) or before the real CreateFleet: a read
    timeout (the launcher survives it) or a crash (``crash=True``: it does not)."""

    def __init__(self, cloud, launch: bool, crash: bool = False):
        self._cloud, self.launch, self.crash = cloud, launch, crash

    def create(self, request, on_retry=None):
        if self.launch:
            self._cloud.create(request, on_retry)
        if self.crash:
            raise Crash("the provisioner died at CreateFleet")
        raise ReadTimeoutError(endpoint_url="https://ec2.us-east-1.amazonaws.com/")

    def __getattr__(self, name):
        return getattr(self._cloud, name)


def provisioner(world, cloud=None) -> Provisioner:
    return Provisioner(world.store, world.env.kube, cloud or AWSCloudProvider.from_environment(world.env),
                       world.env.claims, world.clock)


def tagged(world, name) -> list[dict]:
    return [i for i in world.instances() if {t["Key"]: t["Value"] for t in i.get("Tags", [])}.get(NODECLAIM_TAG) == name]


def first_round(world, launch: bool, crash: bool = False):
    pods = world.add_pods([make_pod("web-0", cpu="1")])
    p = provisioner(world, LostAnswer(AWSCloudProvider.from_environment(world.env), launch, crash))
    if crash:
        with pytest.raises(Crash):
            p.provision(pods)
        report = None
    else:
        report = p.provision(pods)
        assert report.launched == [] and report.errors and "NodeClaim" in report.errors[0]
    (nc,) = world.store.list("NodeClaim")
    assert not nc.status.get("providerID")
    return pods, nc, report


@pytest.mark.parametrize("launched", [True, False], ids=["launched-answer-lost", "not-launched"])
def test_the_next_round_resolves_an_unknown_launch_within_seconds(world, launched):
    pods, nc, _report = first_round(world, launch=launched)
    assert nc.condition("Launched")["reason"] == OUTCOME_UNKNOWN
    assert len(tagged(world, nc.name)) == (1 if launched else 0)

    world.clock.advance(5)                       # the next batch (the watcher's resync, another pod, a redelivery)
    report = provisioner(world).provision(world.add_pods([make_pod("other-0", cpu="100m")]) + pods)
    (r,) = report.resolved
    assert (r["nodeClaim"], r["outcome"]) == (nc.name, "adopted" if launched else "relaunched")
    (inst,) = tagged(world, nc.name)             # exactly one instance for the NodeClaim: no double launch
    fresh = world.store.get("NodeClaim", nc.name)
    assert fresh.status["providerID"].endswith("/" + inst["InstanceId"]) and fresh.is_true("Launched")
    assert r["detail"] == inst["InstanceId"]
    # the pod stays nominated to its NodeClaim (now launched), not re-planned onto another one
    assert {"pod": "default/web-0", "reason": f"nominated to in-flight NodeClaim {nc.name}"} in report.skipped
    assert len(world.instances()) == 1 + len(report.launched)


def test_a_crash_at_createfleet_is_resolved_after_the_lease_not_the_liveness_timeout(world):
    pods, nc, _ = first_round(world, launch=False, crash=True)
    assert nc.condition("Launched")["reason"] == "Launching"     # the crashed launcher marked nothing

    world.clock.advance(10)                      # a live launcher may still hold it: left alone
    report = provisioner(world).provision(pods)
    assert report.resolved == [] and not world.store.get("NodeClaim", nc.name).status.get("providerID")
    assert tagged(world, nc.name) == []

    world.clock.advance(LAUNCH_LEASE)            # the launcher's lease is over (well before the 5-minute liveness)
    assert LAUNCH_LEASE + 10 < LAUNCH_TIMEOUT
    report = provisioner(world).provision(pods)
    assert [(r["nodeClaim"], r["outcome"]) for r in report.resolved] == [(nc.name, "relaunched")]
    (inst,) = tagged(world, nc.name)
    assert world.store.get("NodeClaim", nc.name).status["providerID"].endswith("/" + inst["InstanceId"])


def test_two_rounds_never_relaunch_the_same_nodeclaim(world):
    """The first resolver takes the NodeClaim (a new lease) before launching; a concurrent round skips it."""
    pods, nc, _ = first_round(world, launch=False)
    world.clock.advance(5)
    slow = provisioner(world, LostAnswer(AWSCloudProvider.from_environment(world.env), launch=False, crash=True))
    with pytest.raises(Crash):                   # the first resolver dies in its relaunch
        slow.provision(pods)
    world.clock.advance(5)
    report = provisioner(world).provision(pods)  # within the first resolver's lease: skipped
    assert report.resolved == [] and tagged(world, nc.name) == []
    assert world.store.get("NodeClaim", nc.name).condition("Launched")["reason"] == "Relaunching"
    world.clock.advance(LAUNCH_LEASE)
    report = provisioner(world).provision(pods)
    assert [r["outcome"] for r in report.resolved] == ["relaunched"] and len(tagged(world, nc.name)) == 1
