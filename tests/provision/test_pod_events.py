"""Kubernetes Events on pods, as Karpenter: ``Nominated`` names where a pod should schedule, ``FailedScheduling``
says why it cannot; writing them never fails the provisioning round."""

from karpenter_lambda.api import events as ev
from karpenter_lambda.sim.world import make_pod


def _pod_events(world, name: str) -> list[dict]:
    return [e for e in world.server.store.list("events")
            if (e.get("involvedObject") or {}).get("kind") == "Pod" and e["involvedObject"].get("name") == name]


def test_placed_pod_gets_a_nominated_event_naming_its_nodeclaim(world):
    pods = world.add_pods([make_pod(f"web-{i}", cpu="1", memory="1Gi") for i in range(2)])
    assert world.provision(world.sqs_event(pods)) == {"batchItemFailures": []}
    (claim,) = world.store.list("NodeClaim")
    for i in range(2):
        (e,) = _pod_events(world, f"web-{i}")
        assert e["reason"] == "Nominated" and e["type"] == "Normal"
        assert e["message"] == f"Pod should schedule on: nodeclaim/{claim.name}"
        assert e["involvedObject"]["namespace"] == "default" and e["involvedObject"]["uid"]
        assert e["source"]["component"] == ev.SOURCE
    # a redelivery of still-pending pods nominated to the in-flight NodeClaim writes nothing more
    assert world.provision(world.sqs_event(pods)) == {"batchItemFailures": []}
    assert len(_pod_events(world, "web-0")) == 1


def test_pod_that_cannot_be_placed_gets_a_failed_scheduling_warning_with_the_reason(world):
    pods = world.add_pods([make_pod("huge", cpu="5000", memory="1Gi")])
    assert world.provision(world.sqs_event(pods)) == {"batchItemFailures": []}
    assert world.store.list("NodeClaim") == []
    (e,) = _pod_events(world, "huge")
    assert e["reason"] == "FailedScheduling" and e["type"] == "Warning"
    assert e["message"].startswith("Failed to schedule pod, ")
    assert len(e["message"]) > len("Failed to schedule pod, ") + 5, e["message"]


def test_event_write_failure_does_not_fail_the_round(world):
    world.server.add_fault(status=403, times=100, method="POST", path=r"/events")
    pods = world.add_pods([make_pod(f"api-{i}", cpu="1", memory="1Gi") for i in range(2)])
    assert world.provision(world.sqs_event(pods)) == {"batchItemFailures": []}
    assert len(world.store.list("NodeClaim")) == 1, "the launch must stand when Events cannot be written"
    assert _pod_events(world, "api-0") == []
    world.server.clear_faults()


def test_pod_events_are_bounded_per_round(world, monkeypatch):
    monkeypatch.setattr(ev, "MAX_POD_EVENTS_PER_ROUND", 3)
    pods = world.add_pods([make_pod(f"small-{i}", cpu="100m", memory="64Mi") for i in range(6)])
    assert world.provision(world.sqs_event(pods)) == {"batchItemFailures": []}
    written = [e for e in world.server.store.list("events") if e["reason"] == "Nominated"]
    assert len(written) == 3
