"""Issue 21: each launch attempt is its own (name and CreateFleet ClientToken), throttling sends the records back."""

import json

from karpenter_lambda.controllers.launcher import LAUNCH_TOKEN_ANNOTATION
from karpenter_lambda.sim.world import make_pod


def _fleet_calls(world):
    calls = []

    def hook(params, **kwargs):
        tags = {t["Key"]: t["Value"] for s in params["TagSpecifications"] if s["ResourceType"] == "instance"
                for t in s["Tags"]}
        nc = world.store.get("NodeClaim", tags["karpenter.sh/nodeclaim"])
        calls.append({"name": tags["karpenter.sh/nodeclaim"], "token": params["ClientToken"],
                      "recorded": (nc.annotations or {}).get(LAUNCH_TOKEN_ANNOTATION) if nc else None})

    world.ec2.meta.events.register("provide-client-params.ec2.CreateFleet", hook)
    return calls


def test_a_re_plan_of_the_same_pods_gets_a_new_name_and_client_token(world):
    calls = _fleet_calls(world)
    pods = world.add_pods([make_pod("web-0")])
    world.provision(world.sqs_event(pods))
    (first,) = world.store.list("NodeClaim")
    (inst,) = world.instances()
    # never registers: terminated and deleted after 15 minutes; the pod is pending again
    world.clock.advance(16 * 60)
    world.sweep()
    assert world.store.get("NodeClaim", first.name) is None
    world.provision(world.sqs_event(world.server.store.list("pods")))
    (second,) = world.store.list("NodeClaim")
    assert second.name != first.name         # the old instance (tagged with the old name) may still be shutting down
    assert [c["name"] for c in calls] == [first.name, second.name]
    assert calls[0]["token"] != calls[1]["token"]   # EC2 cannot hand the dead instance back
    # the attempt's token is on the NodeClaim before CreateFleet is called
    assert calls[0]["recorded"] and calls[1]["recorded"] and calls[0]["recorded"] != calls[1]["recorded"]
    assert second.annotations[LAUNCH_TOKEN_ANNOTATION] == calls[1]["recorded"]
    (new,) = world.instances()
    assert new["InstanceId"] != inst["InstanceId"]


def test_redelivery_and_concurrent_delivery_still_launch_once(world):
    """With names no longer deterministic, the pod reservations keep a redelivered message from launching twice."""
    pods = world.add_pods([make_pod(f"api-{i}", cpu="1") for i in range(2)])
    event = world.sqs_event(pods)
    world.provision(event)
    world.clock.advance(7)
    world.provision(event)       # the same message, a little later (a new attempt time)
    assert len(world.instances()) == 1 and len(world.store.list("NodeClaim")) == 1
    (nc,) = world.store.list("NodeClaim")
    assert sorted(json.loads(nc.annotations["karpenter-lambda.io/nominated-pods"])) == ["default/api-0", "default/api-1"]


def test_throttled_create_fleet_fails_the_records_and_marks_nothing(world):
    class Http:
        status_code = 400

    def throttle(**kwargs):
        return Http(), {"Error": {"Code": "RequestLimitExceeded", "Message": "Request limit exceeded."}}

    world.ec2.meta.events.register("before-call.ec2.CreateFleet", throttle)
    pods = world.add_pods([make_pod("web-0")])
    event = world.sqs_event(pods)
    resp = world.provision(event)
    assert {f["itemIdentifier"] for f in resp["batchItemFailures"]} == {r["messageId"] for r in event["Records"]}
    assert world.instances() == [] and world.store.list("NodeClaim") == []
    assert world.env.unavailable.all() == set()               # the offerings are fine
    assert world.env.claims.reservations() == {}              # released: the redelivery may take the pod
    world.ec2.meta.events.unregister("before-call.ec2.CreateFleet", throttle)
    assert world.provision(event) == {"batchItemFailures": []}
    assert len(world.instances()) == 1


def test_attempt_names_repeat_on_the_simulators_clock_and_not_on_the_wall_clock():
    """Names stay reproducible in `simulate` (virtual clock: the time since the run's start) but differ per attempt."""
    from karpenter_lambda.controllers import runtime
    from karpenter_lambda.controllers.launcher import launch_token, nodeclaim_name
    from karpenter_lambda.sim.clock import VirtualClock

    names = []
    try:
        for start in (1_000_000.0, 2_000_000.0):       # two runs started at different times
            clock = VirtualClock(start)
            runtime.set_clock(clock)
            clock.advance(90)
            stamp = runtime.attempt_stamp(clock())
            names.append((nodeclaim_name("default", ["u1"], attempt=stamp), launch_token("default-x", clock())))
            clock.advance(60)                          # a later attempt of the same run
            assert nodeclaim_name("default", ["u1"], attempt=runtime.attempt_stamp(clock())) != names[-1][0]
        runtime.set_clock(lambda: 1_500_000.0)
        assert runtime.attempt_stamp() == repr(1_500_000.0)
    finally:
        runtime.set_clock(None)
    assert names[0] == names[1]
