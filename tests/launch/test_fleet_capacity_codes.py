"""CreateFleet answers upstream counts as unavailable capacity (``pkg/errors/errors.go``, ``instance.go``
``updateUnavailableOfferingsCache`` / ``combineFleetErrors``): ``MaxFleetCountExceeded`` is one of the unfulfillable
capacity codes, and ``AuthFailure.ServiceLinkedRoleCreationNotPermitted`` marks every spot offering unavailable for
the cache's TTL so launches fall back to on-demand.  moto, with the answers injected through botocore's events."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest

from karpenter_lambda.adapters.aws.fleet import FleetLauncher, InsufficientCapacityError, LaunchRequest
from karpenter_lambda.adapters.aws.unavailable import UnavailableOfferings
from karpenter_lambda.api import labels as wk
from karpenter_lambda.catalog.instancetypes import build_instance_types
from karpenter_lambda.catalog.pricing import PriceBook
from karpenter_lambda.cloudprovider.launch import launch
from karpenter_lambda.cloudprovider.types import CreateRequest, NoCapacity
from karpenter_lambda.scheduling.requirements import Requirements

from .conftest import CLUSTER, REGION, nodeclass, resolver
from .test_fleet import Clock, Http

SLR = "AuthFailure.ServiceLinkedRoleCreationNotPermitted"
SPOT_ANYWHERE = ("any", "any", "spot")


@pytest.fixture
def codes_env(env):
    clock = Clock()
    cache = UnavailableOfferings(ttl_seconds=180, clock=clock, cluster_name=CLUSTER, client=env.ddb)
    cache.ensure_table()
    resolved = resolver(env).resolve(nodeclass())
    raw = env.ec2.describe_instance_types(InstanceTypes=["m5.large", "m5.xlarge"])["InstanceTypes"]
    offerings = [{"InstanceType": t, "Location": z, "LocationType": "availability-zone"}
                 for t in ("m5.large", "m5.xlarge") for z in ("us-east-1a", "us-east-1b")]
    its = build_instance_types(raw, offerings, PriceBook.from_bundled(REGION), REGION, zones=["us-east-1a", "us-east-1b"])
    calls = []
    env.ec2.meta.events.register("provide-client-params.ec2.CreateFleet",
                                 lambda params, **kw: calls.append(copy.deepcopy(params)))
    return SimpleNamespace(env=env, clock=clock, cache=cache, resolved=resolved, types=its, calls=calls)


def _answer_once(ec2, code, lifecycle):
    """The next CreateFleet answers ``code`` for its first override and launches nothing."""
    state = {"done": False}

    def handler(model, params, **kwargs):
        if state["done"]:
            return None
        state["done"] = True
        body = params["body"]
        return Http(), {"FleetId": "fleet-injected", "Instances": [], "Errors": [{
            "LaunchTemplateAndOverrides": {"Overrides": {
                "InstanceType": body["LaunchTemplateConfigs.1.Overrides.1.InstanceType"],
                "SubnetId": body["LaunchTemplateConfigs.1.Overrides.1.SubnetId"]}},
            "Lifecycle": lifecycle, "ErrorCode": code, "ErrorMessage": f"{code} (injected)"}]}

    ec2.meta.events.register("before-call.ec2.CreateFleet", handler)


def _fleet_request(k, ct, name="default-f1"):
    from karpenter_lambda.adapters.aws.fleet import candidates_from_instance_types
    from karpenter_lambda.adapters.aws.launch_templates import LaunchTemplates
    from karpenter_lambda.adapters.aws.userdata import ClusterInfo

    info = ClusterInfo(name=CLUSTER, endpoint="https://k8s.example", ca_b64="Y2E=", cidr="10.100.0.0/16")
    refs = LaunchTemplates(k.env.ec2, CLUSTER).ensure_for(k.resolved, info, k.types, {wk.NODEPOOL: "default"}, [], [], ct)
    return LaunchRequest(nodeclaim_name=name, nodepool_name="default", nodeclass_name="default", capacity_type=ct,
                         candidates=candidates_from_instance_types(k.types, ct), launch_templates=refs,
                         subnets=k.resolved.subnets, tags={}, client_token=name)


def _create_request(k, name="default-c1"):
    plan = SimpleNamespace(instance_types=k.types, requirements=Requirements.from_list(
        [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot", "on-demand"]}]))
    return CreateRequest(name=name, plan=plan, nodepool=SimpleNamespace(name="default", taints=[], startup_taints=[]),
                         nodeclass=SimpleNamespace(name="default", spec={}, tags={}), resolved=k.resolved,
                         labels={wk.NODEPOOL: "default"}, client_token=name)


def _provider(k):
    cluster = SimpleNamespace(name=CLUSTER, endpoint="https://k8s.example", ca_b64="Y2E=", service_cidr="10.100.0.0/16")
    return SimpleNamespace(ec2=k.env.ec2, cluster=cluster, unavailable=k.cache, beside_karpenter=False)


def test_max_fleet_count_exceeded_is_insufficient_capacity(codes_env):
    k = codes_env
    _answer_once(k.env.ec2, "MaxFleetCountExceeded", "on-demand")
    with pytest.raises(InsufficientCapacityError) as ei:
        FleetLauncher(k.env.ec2, CLUSTER, k.cache).launch(_fleet_request(k, "on-demand"))
    assert ei.value.unavailable == [("m5.large", "us-east-1a", "on-demand")]
    assert k.cache.all() == {("m5.large", "us-east-1a", "on-demand")}


def test_no_spot_service_linked_role_makes_spot_unavailable_everywhere(codes_env):
    k = codes_env
    launcher = FleetLauncher(k.env.ec2, CLUSTER, k.cache)
    _answer_once(k.env.ec2, SLR, "spot")
    with pytest.raises(InsufficientCapacityError) as ei:
        launcher.launch(_fleet_request(k, "spot"))
    assert ei.value.unavailable == [SPOT_ANYWHERE]
    (entry,) = k.cache.entries()
    assert (entry["instanceType"], entry["zone"], entry["capacityType"]) == SPOT_ANYWHERE and SLR in entry["reason"]
    assert entry["expiresAt"] == pytest.approx(k.clock.t + 180)
    # another spot launch within the TTL is refused without calling EC2; on-demand is not affected
    sent = len(k.calls)
    with pytest.raises(InsufficientCapacityError) as ei:
        launcher.launch(_fleet_request(k, "spot", name="default-f2"))
    assert ei.value.unavailable == [SPOT_ANYWHERE] and len(k.calls) == sent
    assert launcher.launch(_fleet_request(k, "on-demand", name="default-f3")).capacity_type == "on-demand"
    # after the TTL spot is tried again
    k.clock.t += 181
    assert launcher.launch(_fleet_request(k, "spot", name="default-f4")).capacity_type == "spot"


def test_a_launch_allowing_on_demand_falls_back_when_spot_has_no_service_linked_role(codes_env):
    k = codes_env
    _answer_once(k.env.ec2, SLR, "spot")
    retries = []
    inst = launch(_provider(k), _create_request(k), on_retry=lambda why, offs: retries.append((why, offs)))
    assert inst.capacity_type == "on-demand"
    assert [c["TargetCapacitySpecification"]["DefaultTargetCapacityType"] for c in k.calls] == ["spot", "on-demand"]
    assert SLR in retries[0][0] and retries[0][1] == [list(SPOT_ANYWHERE)]
    # the next NodeClaim, in a later invocation (the cache only): on-demand at once after the spot refusal
    inst = launch(_provider(k), _create_request(k, name="default-c2"))
    assert inst.capacity_type == "on-demand" and len(k.calls) == 3
    # a spot-only NodeClaim launches nothing meanwhile
    spot_only = _create_request(k, name="default-c3")
    spot_only.plan.requirements = Requirements.from_list([{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot"]}])
    with pytest.raises(NoCapacity):
        launch(_provider(k), spot_only)
    assert len(k.calls) == 3
