"""Karpenter's catalog settings from the functions' environment to their decisions (moto + the local Kubernetes API,
the real handlers): ``KARPENTER_LAMBDA_VM_MEMORY_OVERHEAD_PERCENT`` and ``KARPENTER_LAMBDA_RESERVED_ENIS`` reach the
catalog the provisioner launches from (the NodeClaim, the launch template's max pods) and the one the disruption sweeps
decide on; the simulated kubelet registers the node with the same figures.  The settings themselves:
tests/catalog/test_catalog_settings.py."""

from __future__ import annotations

import base64

import manifests as shared
from karpenter_lambda.api.manifests import load_text
from karpenter_lambda.controllers.disrupt import DisruptionSweep
from karpenter_lambda.sim.kubelet_flags import read_user_data
from karpenter_lambda.sim.world import World, make_pod

MIB = 1 << 20
# a NodePool that launches m5.large only (8192 MiB: 6903 MiB allocatable by default, 7108 MiB at 0.05)
POOL = shared.pair(requirements=[shared.requirement("node.kubernetes.io/instance-type", ["m5.large"]),
                                 shared.requirement(shared.CAPACITY_TYPE, ["on-demand"])])
# fits m5.large only with the smaller overhead
BIG = make_pod("big-0", cpu="1", memory="7000Mi", tolerate=False)


def _world():
    return World(load_text(POOL, "pool.yaml").objects)


def _max_pods(world, instance) -> int:
    ud = world.ec2.describe_instance_attribute(InstanceId=instance["InstanceId"], Attribute="userData")
    return read_user_data(base64.b64decode(ud["UserData"]["Value"]).decode()).max_pods


def test_the_settings_reach_the_launch_the_node_and_the_sweeps(monkeypatch):
    monkeypatch.delenv("KARPENTER_LAMBDA_VM_MEMORY_OVERHEAD_PERCENT", raising=False)
    monkeypatch.delenv("KARPENTER_LAMBDA_RESERVED_ENIS", raising=False)
    with _world() as world:   # by default the pod fits no type of the NodePool: nothing is launched
        world.provision(world.sqs_event(world.add_pods([BIG])))
        assert world.store.list("NodeClaim") == [] and world.launched_instances() == []

    monkeypatch.setenv("KARPENTER_LAMBDA_VM_MEMORY_OVERHEAD_PERCENT", "0.05")
    monkeypatch.setenv("KARPENTER_LAMBDA_RESERVED_ENIS", "1")
    with _world() as world:
        assert (world.env.config.vm_memory_overhead_percent, world.env.config.reserved_enis) == (0.05, 1)
        assert world.provision(world.sqs_event(world.add_pods([BIG]))) == {"batchItemFailures": []}
        (nc,) = world.store.list("NodeClaim")
        assert nc.status["capacity"]["memory"] == "7782Mi" and nc.status["allocatable"]["memory"] == "7108Mi"
        assert nc.status["capacity"]["pods"] == "20"                    # (3 - 1) ENIs x 9 + 2
        (instance,) = world.launched_instances()
        assert instance["InstanceType"] == "m5.large"
        assert _max_pods(world, instance) == 20                         # the launch template's userData
        # the kubelet registers what the NodeClaim was planned with, and the pod binds there
        node = world.join(instance)
        assert node["status"]["allocatable"]["memory"] == "7108Mi" and node["status"]["capacity"]["pods"] == "20"
        world.sweep()                                                   # registration: the unregistered taint goes
        world.schedule()
        assert world.server.store.get("pods", "big-0", "default")["spec"].get("nodeName") == node["metadata"]["name"]
        # the disruption sweeps' snapshot: the same catalog
        snap = DisruptionSweep.from_environment(world.env, "consolidation").loader.load(world.clock.now())
        m5 = next(it for it in snap.instance_types["default"] if it.name == "m5.large")
        assert m5.allocatable["memory"] == 7108 * MIB and m5.capacity["pods"] == 20
