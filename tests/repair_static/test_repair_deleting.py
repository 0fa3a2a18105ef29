"""Node repair of a node whose NodeClaim is already being deleted, in the World (moto + the local Kubernetes API + the
real lifecycle handler): a drifted node's drain is stuck on a PodDisruptionBudget (maxUnavailable 0, no
terminationGracePeriod: it would wait forever); its GPU goes bad (``AcceleratedHardwareReady=False``).  As Karpenter's
node health controller (``annotateTerminationGracePeriod`` runs before ``deleteNodeClaim`` sees the deletion
timestamp), once the 10-minute toleration is over the NodeClaim gets ``karpenter.sh/nodeclaim-termination-timestamp``
= now: the pod is deleted (not evicted) and the node goes.  It is not a second disruption: no ``disrupted`` entry, so
no ``NodeClaimDisrupted`` in ``simulate``, and the deletion keeps its reason."""

from __future__ import annotations


import pytest

from karpenter_lambda.api import labels as wk
from karpenter_lambda.api.times import to_epoch
from karpenter_lambda.controllers.termination import request_deletion
from karpenter_lambda.sim import nodes as simnodes
from karpenter_lambda.sim.world import World, make_pod, scenario_manifests
from sim_events import Events


@pytest.fixture
def world():
    with World(scenario_manifests()) as w:
        yield w


def test_an_unhealthy_node_stuck_in_its_drain_is_drained_forcefully(world):
    world.provision(world.sqs_event(world.add_pods([make_pod("web-0")])))
    (inst,) = world.instances()
    (nc,) = world.store.list("NodeClaim")
    node = world.join(inst, ready=True)["metadata"]["name"]
    world.sweep()
    world.schedule()
    world.clock.advance(60)
    world.sweep()
    assert world.store.get("NodeClaim", nc.name).is_true("Initialized")
    world.server.store.create("poddisruptionbudgets", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web"}}}}, "default")
    assert world.server.store.get("pods", "web-0", namespace="default")["spec"]["nodeName"] == node

    # drifted: its deletion requested (no termination timestamp, no terminationGracePeriod); the PDB holds the drain
    request_deletion(world.store, nc.name, "Drifted: test", world.clock.now())
    sim = Events(world.store)
    world.clock.advance(60)
    assert sim.lifecycle(world.sweep())["disrupted"] == []
    simnodes.set_node_condition(world.server, node, "AcceleratedHardwareReady", "False")
    bad_since = world.clock.now()
    for _ in range(9):                               # within the 10-minute toleration: the drain still waits
        world.clock.advance(60)
        report = sim.lifecycle(world.sweep())
        assert report["disrupted"] == [] and report["evicted"] == []
    assert world.server.store.get("pods", "web-0", namespace="default") is not None
    assert wk.NODECLAIM_TERMINATION_TIMESTAMP_ANNOTATION not in world.store.get("NodeClaim", nc.name).annotations

    world.clock.advance(61)                          # 10m1s: due
    assert world.clock.now() - bad_since > 600
    report = sim.lifecycle(world.sweep())
    assert report["disrupted"] == [] and report["repair_blocked"] == []
    got = world.store.get("NodeClaim", nc.name)
    if got is not None:                              # stamped now; the deletion keeps its time and reason
        assert to_epoch(got.annotations[wk.NODECLAIM_TERMINATION_TIMESTAMP_ANNOTATION]) == pytest.approx(
            world.clock.now(), abs=1)
        assert got.annotations[wk.DELETION_REASON_ANNOTATION] == "Drifted: test"
    assert [e["how"] for e in report["evicted"]] and all(e["how"] != "eviction" for e in report["evicted"])
    assert "already deleting" in world.logs.getvalue() and "drain made forceful" in world.logs.getvalue()
    for _ in range(4):                               # until it is gone: never disrupted by the lifecycle sweep
        world.clock.advance(60)
        sim.lifecycle(world.sweep())
    assert world.store.get("NodeClaim", nc.name) is None
    assert [e for e in sim.emitted if e[0] == "NodeClaimDisrupted"] == []
