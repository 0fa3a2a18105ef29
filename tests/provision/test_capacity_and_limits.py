"""Insufficient capacity fallback, and concurrent provisioner invocations against a NodePool limit."""

import json
import threading

from botocore.awsrequest import AWSResponse

from karpenter_lambda.controllers import runtime
from karpenter_lambda.controllers.provision import NOMINATED_UIDS_ANNOTATION
from karpenter_lambda.sim.world import atomic_aws_requests, make_pod


def inject_ice(ec2, calls, fail):
    """CreateFleet answers InsufficientInstanceCapacity for every override of a type ``fail(type)`` selects,
    when moto would pick such a type (moto always takes the first override)."""
    last = {}

    def remember(params, **kwargs):
        last["params"] = params

    def hook(**kwargs):
        params = last.pop("params")
        overrides = [o for cfg in params["LaunchTemplateConfigs"] for o in cfg["Overrides"]]
        calls.append(overrides)
        first = overrides[0]["InstanceType"]
        if not fail(first):
            return None
        errors = [{"LaunchTemplateAndOverrides": {"Overrides": {"InstanceType": o["InstanceType"], "SubnetId": o["SubnetId"]}},
                   "Lifecycle": "on-demand", "ErrorCode": "InsufficientInstanceCapacity",
                   "ErrorMessage": f"We currently do not have sufficient {o['InstanceType']} capacity"}
                  for o in overrides if fail(o["InstanceType"])]
        return AWSResponse("https://ec2.amazonaws.com/", 200, {}, None), {"FleetId": "fleet-ice", "Errors": errors, "Instances": []}

    ec2.meta.events.register("provide-client-params.ec2.CreateFleet", remember)
    ec2.meta.events.register("before-call.ec2.CreateFleet", hook)


def test_ice_falls_back_to_the_remaining_offerings(world):
    calls, failed = [], set()

    def fail(t):
        if not failed:
            failed.add(t)
        return t in failed

    inject_ice(world.ec2, calls, fail)
    world.provision(world.sqs_event(world.add_pods([make_pod("web-0")])))
    (t_failed,) = failed
    assert len(calls) == 2
    assert all(o["InstanceType"] != t_failed for o in calls[1])
    (inst,) = world.instances()
    assert inst["InstanceType"] != t_failed
    marked = world.env.unavailable.all()
    assert {(t, ct) for t, _z, ct in marked} == {(t_failed, "on-demand")}
    # marked for 3 minutes only
    world.clock.advance(181)
    assert world.env.unavailable.all() == set()


def test_no_capacity_anywhere_reports_pods_unschedulable(world):
    calls, reports = [], []
    inject_ice(world.ec2, calls, lambda t: True)
    runtime.REPORT_HOOKS.append(lambda kind, r: reports.append(r))
    try:
        resp = world.provision(world.sqs_event(world.add_pods([make_pod("web-0"), make_pod("web-1")])))
    finally:
        runtime.REPORT_HOOKS.clear()
    assert resp == {"batchItemFailures": []}
    assert world.instances() == []
    assert world.store.list("NodeClaim") == []
    (report,) = reports
    assert sorted(u["pod"] for u in report.unschedulable) == ["default/web-0", "default/web-1"]
    assert all("insufficient capacity" in u["reason"].lower() or "InsufficientInstanceCapacity" in u["reason"]
               for u in report.unschedulable)
    totals, claims = world.env.claims.usage("default")
    assert claims == {} and all(v == 0 for v in totals.values())
    assert world.env.claims.reservations() == {}


def test_concurrent_invocations_never_exceed_the_limit_nor_double_launch(world_factory):
    w = world_factory(cpu_limit="4")
    pods = w.add_pods([make_pod(f"job-{i}", cpu="1500m", memory="1Gi", owner=f"job{i}") for i in range(6)])
    # four invocations at once, overlapping pods (as SQS may hand the same messages to two pollers)
    events = [w.sqs_event([pods[i % 6], pods[(i + 1) % 6], pods[(i + 3) % 6]]) for i in range(4)]
    errors = []

    def invoke(ev):
        try:
            w.provision(ev)
        except Exception as e:  # pragma: no cover - surfaced below
            errors.append(e)

    threads = [threading.Thread(target=invoke, args=(ev,)) for ev in events]
    with atomic_aws_requests():
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors
    instances = w.instances()
    types = {i["InstanceType"] for i in instances}
    vcpus = {t["InstanceType"]: t["VCpuInfo"]["DefaultVCpus"]
             for t in w.ec2.describe_instance_types(InstanceTypes=sorted(types))["InstanceTypes"]} if types else {}
    assert instances, "something must have been launched"
    assert sum(vcpus[i["InstanceType"]] for i in instances) <= 4
    # every pod is nominated to at most one NodeClaim
    nominated = [u for c in w.store.list("NodeClaim") for u in json.loads(c.annotations[NOMINATED_UIDS_ANNOTATION])]
    assert len(nominated) == len(set(nominated))
    assert len(instances) == len(w.store.list("NodeClaim"))
    totals, _ = w.env.claims.usage("default")
    assert totals["cpu"] <= 4000
