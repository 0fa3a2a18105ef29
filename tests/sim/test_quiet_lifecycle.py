"""The lifecycle sweep's shortcut (controllers/quiet_lifecycle.py) on the real handler, moto and the local API.

A settled NodeClaim: the sweep that finds nothing to do records the marker, the next ones are skipped with no EC2
call; an orphan instance that appears meanwhile is found by the instance check once it is due (every GC_INTERVAL, as
Karpenter's garbage collection) and terminated by the full sweep it forces; a NodeClaim marked deleting is handled
at once (forced), whatever the marker says.
"""

from __future__ import annotations

import pytest

from karpenter_lambda.controllers.quiet_lifecycle import CHECKED, GC_INTERVAL, SKIPPED
from karpenter_lambda.controllers.sweep_shortcuts import SHORTCUTS_ENV
from karpenter_lambda.sim.world import World, make_pod, scenario_manifests


@pytest.fixture
def world(monkeypatch):
    monkeypatch.setenv(SHORTCUTS_ENV, "true")
    with World(scenario_manifests()) as w:
        yield w


def _settled(world):
    world.provision(world.sqs_event(world.add_pods([make_pod("web-0")])))
    (inst,) = world.instances()
    world.join(inst, ready=True)
    report = world.sweep()              # registered, initialized
    assert report["registered"] and report["initialized"], report
    return inst


def _quiet_sweep(world) -> tuple[dict, str]:
    before = len(world.logs.getvalue())
    report = world.sweep()
    return report, world.logs.getvalue()[before:]


def test_a_settled_cluster_skips_and_the_instance_check_finds_an_orphan(world):
    _settled(world)
    world.clock.advance(60)
    _report, logs = _quiet_sweep(world)        # full, nothing to do: the marker is recorded
    assert SKIPPED not in logs
    world.clock.advance(30)
    report, logs = _quiet_sweep(world)
    assert SKIPPED in logs and not any(report.values())
    # an instance of this deployment that no NodeClaim names appears (a leaked launch)
    image = world.ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    tags = [{"Key": f"kubernetes.io/cluster/{world.cluster}", "Value": "owned"},
            {"Key": "karpenter.sh/nodeclaim", "Value": "ghost"},
            {"Key": "karpenter-lambda.io/cluster", "Value": world.cluster}]
    orphan = world.ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, InstanceType="m5.large",
                                     TagSpecifications=[{"ResourceType": "instance", "Tags": tags}]
                                     )["Instances"][0]["InstanceId"]
    world.clock.advance(35)                    # old enough to be collected, the instance check not yet due
    report, logs = _quiet_sweep(world)
    assert SKIPPED in logs and report["terminated"] == []
    world.clock.advance(GC_INTERVAL)           # the check is due: the listing differs, the full sweep collects it
    report, logs = _quiet_sweep(world)
    assert SKIPPED not in logs and CHECKED not in logs
    assert [t["instanceId"] for t in report["terminated"]] == [orphan]


def test_the_instance_check_skips_when_nothing_changed(world):
    _settled(world)
    world.clock.advance(60)
    world.sweep()                              # records the marker
    world.clock.advance(GC_INTERVAL + 1)
    report, logs = _quiet_sweep(world)
    assert CHECKED in logs and not any(report.values())


def test_a_deletion_is_handled_at_once_whatever_the_marker(world):
    _settled(world)
    world.clock.advance(60)
    world.sweep()                              # records the marker
    (nc,) = world.store.list("NodeClaim")

    def mark(obj):
        obj.metadata["deletionTimestamp"] = world.clock.isoformat()
        return obj

    world.store.update("NodeClaim", nc.name, mark)
    world.clock.advance(10)
    report, logs = _quiet_sweep(world)
    assert SKIPPED not in logs
    assert report["terminated"] or report["draining"] or report["deleted"], report
