"""CreateFleet launches against moto; the exact request is captured with botocore event hooks,
insufficient capacity is injected the same way."""

import copy

import pytest

from karpenter_lambda.adapters.aws.fleet import (
    FleetLauncher,
    FleetLaunchError,
    InsufficientCapacityError,
    LaunchRequest,
    candidates_from_instance_types,
)
from karpenter_lambda.adapters.aws.launch_templates import LaunchTemplates
from karpenter_lambda.adapters.aws.unavailable import UnavailableOfferings
from karpenter_lambda.adapters.aws.userdata import ClusterInfo
from karpenter_lambda.catalog.types import InstanceType, Offering

from .conftest import CLUSTER, nodeclass, resolver

INFO = ClusterInfo(name=CLUSTER, endpoint="https://k8s.example", ca_b64="Y2E=", cidr="10.100.0.0/16")
ZONES = ("us-east-1a", "us-east-1b")


class Clock:
    def __init__(self, t=1_000_000.0):
        self.t = t

    def __call__(self):
        return self.t


class Http:
    def __init__(self, status=200):
        self.status_code = status


def _types(n=4, arch="amd64"):
    out = []
    for i in range(n):
        name = f"m{5 + i // 10}.{['large', 'xlarge', '2xlarge', '4xlarge', '8xlarge', '12xlarge', '16xlarge', '24xlarge', 'metal', 'medium'][i % 10]}"
        offs = [Offering(zone=z, capacity_type=ct, price=round(0.1 * (i + 1) + (0.01 if z.endswith("b") else 0) - (0.05 if ct == "spot" else 0), 4))
                for z in ZONES + ("us-east-1c",) for ct in ("on-demand", "spot")]
        out.append(InstanceType(name=name, labels={"kubernetes.io/arch": arch}, capacity={"pods": 29}, offerings=offs))
    return out


@pytest.fixture
def launch_env(env):
    clock = Clock()
    cache = UnavailableOfferings(ttl_seconds=180, clock=clock, cluster_name=CLUSTER, client=env.ddb)
    cache.ensure_table()
    r = resolver(env).resolve(nodeclass(tags={"team": "ml", "Name": "from-nodeclass"}))
    its = _types(4)
    refs = LaunchTemplates(env.ec2, CLUSTER).ensure_for(r, INFO, its, {"karpenter.sh/nodepool": "default"}, [], [], None)
    captured = []

    def capture(params, **kwargs):
        captured.append(copy.deepcopy(params))

    env.ec2.meta.events.register("provide-client-params.ec2.CreateFleet", capture)
    return {"env": env, "clock": clock, "cache": cache, "resolved": r, "types": its, "refs": refs, "captured": captured}


def _request(le, ct="on-demand", name="default-abc12", **kw):
    cands = candidates_from_instance_types(le["types"], ct, zones=ZONES)
    return LaunchRequest(
        nodeclaim_name=name, nodepool_name="default", nodeclass_name="default", capacity_type=ct, candidates=cands,
        launch_templates=le["refs"], subnets=le["resolved"].subnets, tags=dict(le["resolved"].tags), **kw,
    )


def _instance(ec2, iid):
    return ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]


def test_on_demand_launch_request_and_result(launch_env):
    le, env = launch_env, launch_env["env"]
    res = FleetLauncher(env.ec2, CLUSTER, le["cache"]).launch(_request(le))
    (p,) = le["captured"]
    assert p["Type"] == "instant"
    assert p["TargetCapacitySpecification"] == {"TotalTargetCapacity": 1, "DefaultTargetCapacityType": "on-demand"}
    assert p["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"} and "SpotOptions" not in p
    (cfg,) = p["LaunchTemplateConfigs"]  # all 4 types share an AMI and max pods -> one template
    assert cfg["LaunchTemplateSpecification"] == {"LaunchTemplateName": le["refs"]["m5.large"].name, "Version": "$Latest"}
    ovs = cfg["Overrides"]
    assert len(ovs) == 8  # 4 types x 2 zones with subnets (zone c has none matching)
    assert [o["Priority"] for o in ovs] == [float(i) for i in range(8)]
    assert ovs[0]["InstanceType"] == "m5.large" and ovs[0]["SubnetId"] == env.subnets["a-big"]["id"]  # most free IPs in zone a
    assert {o["SubnetId"] for o in ovs} == {env.subnets["a-big"]["id"], env.subnets["b"]["id"]}
    assert all(o["ImageId"] == le["refs"]["m5.large"].image_id for o in ovs)
    assert p["ClientToken"].startswith("kl-")
    for spec in p["TagSpecifications"]:
        assert spec["ResourceType"] in ("instance", "volume", "fleet")
    # result: moto takes the first override, i.e. the cheapest
    assert (res.instance_type, res.zone, res.subnet_id, res.capacity_type) == ("m5.large", "us-east-1a", env.subnets["a-big"]["id"], "on-demand")
    assert res.price == pytest.approx(0.1) and res.image_id == le["refs"]["m5.large"].image_id
    inst = _instance(env.ec2, res.instance_id)
    tags = {t["Key"]: t["Value"] for t in inst["Tags"]}
    assert tags[f"kubernetes.io/cluster/{CLUSTER}"] == "owned"
    assert tags["karpenter.sh/nodepool"] == "default" and tags["karpenter.sh/nodeclaim"] == "default-abc12"
    assert tags["karpenter.k8s.aws/ec2nodeclass"] == "default" and tags["eks:eks-cluster-name"] == CLUSTER
    assert tags["team"] == "ml" and tags["Name"] == "from-nodeclass"
    assert inst["InstanceType"] == "m5.large" and inst["ImageId"] == res.image_id


def test_spot_options_and_our_tags_win(launch_env):
    le, env = launch_env, launch_env["env"]
    req = _request(le, "spot")
    req.tags = {"karpenter.sh/nodepool": "spoofed", "team": "ml"}
    res = FleetLauncher(env.ec2, CLUSTER, le["cache"]).launch(req)
    p = le["captured"][-1]
    assert p["SpotOptions"] == {"AllocationStrategy": "price-capacity-optimized"} and "OnDemandOptions" not in p
    assert p["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "spot"
    assert res.capacity_type == "spot" and res.price == pytest.approx(0.05)
    tags = {t["Key"]: t["Value"] for t in _instance(env.ec2, res.instance_id)["Tags"]}
    assert tags["karpenter.sh/nodepool"] == "default" and tags["Name"] == "default-abc12"


def test_every_zone_of_forty_types_is_an_override(env):
    """Upstream caps instance types (60), not overrides: 40 types x 2 zones are 80 overrides (tests/launch/
    test_fleet_types.py has the 60-type cap)."""
    r = resolver(env).resolve(nodeclass())
    its = _types(40)
    refs = LaunchTemplates(env.ec2, CLUSTER).ensure_for(r, INFO, its, {}, [], [], None)
    launcher = FleetLauncher(env.ec2, CLUSTER, None)
    req = LaunchRequest("nc", "default", "default", "on-demand", candidates_from_instance_types(its, "on-demand", zones=ZONES), refs, r.subnets)
    rows = launcher.plan_overrides(req)
    assert len(req.candidates) == 80 and len(rows) == 80 and len({x["type"] for x in rows}) == 40
    prices = [x["price"] for x in rows]
    assert prices == sorted(prices)
    params = launcher.build_request(req, rows)
    assert sum(len(c["Overrides"]) for c in params["LaunchTemplateConfigs"]) == 80


def test_client_token_deterministic_for_duplicates_and_changes_with_overrides(launch_env):
    le, env = launch_env, launch_env["env"]
    launcher = FleetLauncher(env.ec2, CLUSTER, None)
    a = launcher.build_request(_request(le), launcher.plan_overrides(_request(le)))["ClientToken"]
    b = launcher.build_request(_request(le), launcher.plan_overrides(_request(le)))["ClientToken"]
    assert a == b and len(a) <= 64
    fewer = launcher.plan_overrides(_request(le), {("m5.large", "us-east-1a", "on-demand")})
    assert launcher.build_request(_request(le), fewer)["ClientToken"] != a
    assert launcher.build_request(_request(le, name="other"), fewer)["ClientToken"] != launcher.build_request(_request(le), fewer)["ClientToken"]


def _inject_ice_for_first_override(ec2, code="InsufficientInstanceCapacity", times=1):
    state = {"n": 0}

    def handler(model, params, **kwargs):
        if state["n"] >= times:
            return None
        state["n"] += 1
        # the query-serialized request: the first override of the first config
        it = params["body"]["LaunchTemplateConfigs.1.Overrides.1.InstanceType"]
        subnet = params["body"]["LaunchTemplateConfigs.1.Overrides.1.SubnetId"]
        lt = params["body"]["LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName"]
        return Http(200), {
            "FleetId": "fleet-injected",
            "Errors": [{
                "LaunchTemplateAndOverrides": {"LaunchTemplateSpecification": {"LaunchTemplateName": lt},
                                               "Overrides": {"InstanceType": it, "SubnetId": subnet}},
                "Lifecycle": "on-demand",
                "ErrorCode": code,
                "ErrorMessage": f"We currently do not have sufficient {it} capacity in the Availability Zone you requested.",
            }],
            "Instances": [],
        }

    ec2.meta.events.register("before-call.ec2.CreateFleet", handler)
    return handler


def test_ice_marks_offering_and_retry_uses_what_remains(launch_env):
    le, env = launch_env, launch_env["env"]
    launcher = FleetLauncher(env.ec2, CLUSTER, le["cache"])
    _inject_ice_for_first_override(env.ec2)
    with pytest.raises(InsufficientCapacityError) as ei:
        launcher.launch(_request(le))
    assert ei.value.unavailable == [("m5.large", "us-east-1a", "on-demand")]
    assert "InsufficientInstanceCapacity" in str(ei.value) and "m5.large" in str(ei.value)
    assert le["cache"].all() == {("m5.large", "us-east-1a", "on-demand")}
    (entry,) = le["cache"].entries()
    assert entry["expiresAt"] == pytest.approx(le["clock"].t + 180) and "InsufficientInstanceCapacity" in entry["reason"]
    # the same plan again: the unavailable offering is skipped, the next cheapest launches
    res = launcher.launch(_request(le))
    assert (res.instance_type, res.zone) == ("m5.large", "us-east-1b")
    second = le["captured"][-1]["LaunchTemplateConfigs"][0]["Overrides"]
    assert ("m5.large", env.subnets["a-big"]["id"]) not in {(o["InstanceType"], o["SubnetId"]) for o in second}
    assert len(second) == 7
    # spot for the same type and zone is not affected
    assert not le["cache"].is_unavailable("m5.large", "us-east-1a", "spot")


def test_unavailable_expires_with_the_injected_clock(launch_env):
    le = launch_env
    le["cache"].mark("m5.large", "us-east-1a", "spot", "InsufficientInstanceCapacity: test")
    le["clock"].t += 179.9
    assert le["cache"].all() == {("m5.large", "us-east-1a", "spot")}
    le["clock"].t += 0.2
    assert le["cache"].all() == set()
    # the DynamoDB TTL attribute is integer epoch seconds past the expiry
    item = le["env"].ddb.scan(TableName=le["cache"].table_name)["Items"][0]
    assert int(item["ttl"]["N"]) >= 1_000_180 and item["pk"]["S"] == f"unavailable#{CLUSTER}"
    assert item["sk"]["S"] == "m5.large|us-east-1a|spot"


def test_partial_errors_still_marked_when_an_instance_launches(launch_env):
    le, env = launch_env, launch_env["env"]

    def add_error(parsed, **kwargs):
        parsed.setdefault("Errors", []).append({
            "LaunchTemplateAndOverrides": {"Overrides": {"InstanceType": "m5.xlarge", "AvailabilityZone": "us-east-1b"}},
            "Lifecycle": "spot", "ErrorCode": "UnfulfillableCapacity", "ErrorMessage": "no capacity"})

    env.ec2.meta.events.register("after-call.ec2.CreateFleet", add_error)
    res = FleetLauncher(env.ec2, CLUSTER, le["cache"]).launch(_request(le, "spot"))
    assert res.instance_type == "m5.large"
    assert res.errors[0]["code"] == "UnfulfillableCapacity"
    assert le["cache"].all() == {("m5.xlarge", "us-east-1b", "spot")}


def test_non_capacity_errors_raise_with_ec2_message_and_mark_nothing(launch_env):
    le, env = launch_env, launch_env["env"]
    _inject_ice_for_first_override(env.ec2, code="InvalidParameterValue")
    with pytest.raises(FleetLaunchError, match="InvalidParameterValue: We currently do not have sufficient m5.large"):
        FleetLauncher(env.ec2, CLUSTER, le["cache"]).launch(_request(le))
    assert le["cache"].all() == set()


def test_call_level_ice_marks_every_override(launch_env):
    le, env = launch_env, launch_env["env"]

    def fail(**kwargs):
        return Http(500), {"Error": {"Code": "InsufficientInstanceCapacity", "Message": "none anywhere"}}

    env.ec2.meta.events.register("before-call.ec2.CreateFleet", fail)
    with pytest.raises(InsufficientCapacityError) as ei:
        FleetLauncher(env.ec2, CLUSTER, le["cache"]).launch(_request(le))
    assert len(ei.value.unavailable) == 8 and le["cache"].all() == set(ei.value.unavailable)


def test_nothing_left_is_insufficient_capacity(launch_env):
    le, env = launch_env, launch_env["env"]
    req = _request(le)
    le["cache"].mark_many([(c[0], c[1], "on-demand") for c in req.candidates], "test")
    with pytest.raises(InsufficientCapacityError, match="no launchable on-demand offering left"):
        FleetLauncher(env.ec2, CLUSTER, le["cache"]).launch(req)
    assert le["captured"] == []  # no CreateFleet call
    with pytest.raises(ValueError, match="capacity_type must be spot, on-demand or reserved"):
        FleetLauncher(env.ec2, CLUSTER, None).launch(_request(le, "dedicated"))


def test_mixed_arch_overrides_use_the_matching_template_and_image(env):
    r = resolver(env).resolve(nodeclass())
    arm = _types(2, "arm64")
    for it in arm:
        it.name = it.name.replace("m5", "m7g")
        it.offerings = [Offering(o.zone, o.capacity_type, o.price - 0.09) for o in it.offerings]  # arm is cheaper
    its = arm + _types(2)
    refs = LaunchTemplates(env.ec2, CLUSTER).ensure_for(r, INFO, its, {}, [], [], "on-demand")
    assert refs["m7g.large"].name != refs["m5.large"].name
    req = LaunchRequest("nc-mixed", "default", "default", "on-demand", candidates_from_instance_types(its, "on-demand", zones=ZONES),
                        refs, r.subnets_by_zone())
    captured = []
    env.ec2.meta.events.register("provide-client-params.ec2.CreateFleet", lambda params, **kw: captured.append(copy.deepcopy(params)))
    res = FleetLauncher(env.ec2, CLUSTER, None).launch(req)
    by_lt = {c["LaunchTemplateSpecification"]["LaunchTemplateName"]: {o["InstanceType"] for o in c["Overrides"]} for c in captured[0]["LaunchTemplateConfigs"]}
    assert by_lt == {refs["m7g.large"].name: {"m7g.large", "m7g.xlarge"}, refs["m5.large"].name: {"m5.large", "m5.xlarge"}}
    arm_ami = r.ami_for({"kubernetes.io/arch": "arm64"})
    assert res.instance_type == "m7g.large" and res.image_id == arm_ami.id
    assert _instance(env.ec2, res.instance_id)["ImageId"] == arm_ami.id
