"""The launch keeps at most 60 instance TYPES and sends each in every zone with a subnet, as upstream
(``pkg/providers/instance/instance.go``: ``filterInstanceTypes`` -> ``InstanceTypes.Truncate(reqs, 60)``, then
``getOverrides`` = every kept type x every zone it is offered in that has a subnet; EC2 documents no override limit
for ``instant`` fleets, only 300 for ``request``/``maintain``, and upstream caps nothing else).  Through
``cloudprovider/launch.launch`` on moto; the CreateFleet request is captured with a botocore hook."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest

from karpenter_lambda.adapters.aws.fleet import MAX_INSTANCE_TYPES, FleetLauncher, LaunchRequest
from karpenter_lambda.adapters.aws.launch_templates import LaunchTemplates
from karpenter_lambda.adapters.aws.userdata import ClusterInfo
from karpenter_lambda.api import labels as wk
from karpenter_lambda.catalog.types import InstanceType, Offering
from karpenter_lambda.cloudprovider.launch import launch
from karpenter_lambda.cloudprovider.types import CreateRequest, NoCapacity
from karpenter_lambda.scheduling.requirements import Requirements

from .conftest import CLUSTER, nodeclass, resolver

ZONES3 = ("us-east-1a", "us-east-1b", "us-east-1c")
FAMILY = "karpenter.k8s.aws/instance-family"


_NAMES: list[str] = []


def _names(ec2, n):
    """``n`` real instance type names moto knows (x86_64), sorted (listed once per run: moto's list is static)."""
    if len(_NAMES) >= n:
        return _NAMES[:n]
    out, token = [], None
    while True:
        kw = {"NextToken": token} if token else {}
        page = ec2.describe_instance_types(**kw)
        out += [t["InstanceType"] for t in page["InstanceTypes"]
                if "x86_64" in t["ProcessorInfo"]["SupportedArchitectures"]]
        token = page.get("NextToken")
        if not token:
            break
    _NAMES[:] = sorted(set(out))
    assert len(_NAMES) >= n
    return _NAMES[:n]


def _types(names, zones=ZONES3, cts=("on-demand",), family=lambda i: "m5", start=0):
    return [InstanceType(name=name, labels={wk.ARCH: "amd64", wk.INSTANCE_TYPE: name, FAMILY: family(i)},
                         capacity={"pods": 29},
                         offerings=[Offering(zone=z, capacity_type=ct, price=round(0.01 * (start + i + 1) + 0.001 * j, 4))
                                    for j, z in enumerate(zones) for ct in cts])
            for i, name in enumerate(names)]


@pytest.fixture
def three_zones(env):
    # zone c's subnet is not tagged for discovery in the shared fixture: select it by its own tag
    r = resolver(env).resolve(nodeclass(subnetSelectorTerms=[{"tags": {"karpenter.sh/discovery": CLUSTER}},
                                                             {"tags": {"other": "x"}}]))
    assert sorted(r.subnets_by_zone()) == list(ZONES3)
    captured = []
    env.ec2.meta.events.register("provide-client-params.ec2.CreateFleet",
                                 lambda params, **kw: captured.append(copy.deepcopy(params)))
    return SimpleNamespace(env=env, resolved=r, captured=captured)


def _launch(t, its, reqs=None, relaxed=False):
    reqs = reqs or [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}]
    plan = SimpleNamespace(instance_types=its, requirements=Requirements.from_list(reqs), min_values_relaxed=relaxed)
    np = SimpleNamespace(name="default", taints=[], startup_taints=[])
    nc = SimpleNamespace(name="default", spec={}, tags={})
    cluster = SimpleNamespace(name=CLUSTER, endpoint="https://k8s.example", ca_b64="Y2E=", service_cidr="10.100.0.0/16")
    provider = SimpleNamespace(ec2=t.env.ec2, cluster=cluster, unavailable=None, beside_karpenter=False)
    return launch(provider, CreateRequest(name="default-t1", plan=plan, nodepool=np, nodeclass=nc, resolved=t.resolved,
                                          labels={wk.NODEPOOL: "default"}, client_token="default-t1"))


def _overrides(params):
    return [o for cfg in params["LaunchTemplateConfigs"] for o in cfg["Overrides"]]


def test_forty_types_in_three_zones_send_all_forty_types_in_every_zone(three_zones):
    t = three_zones
    its = _types(_names(t.env.ec2, 40))
    inst = _launch(t, its)
    (params,) = t.captured
    ovs = _overrides(params)
    assert len({o["InstanceType"] for o in ovs}) == 40  # was 20: the first 60 (type, zone) rows
    assert len(ovs) == 120
    subnet_zone = {s["id"]: z for z, s in t.resolved.subnets_by_zone().items()}
    assert {(o["InstanceType"], subnet_zone[o["SubnetId"]]) for o in ovs} == {(it.name, z) for it in its for z in ZONES3}
    assert inst.instance_type == its[0].name and inst.zone == "us-east-1a"  # moto takes the first: the cheapest


def test_more_than_sixty_types_keep_the_sixty_cheapest_in_every_zone(three_zones):
    t = three_zones
    its = _types(_names(t.env.ec2, 70))
    _launch(t, list(reversed(its)))  # the plan's order does not matter: the cheapest offering does
    ovs = _overrides(t.captured[-1])
    assert {o["InstanceType"] for o in ovs} == {it.name for it in its[:MAX_INSTANCE_TYPES]}
    assert len(ovs) == MAX_INSTANCE_TYPES * 3
    prio = [o["Priority"] for cfg in t.captured[-1]["LaunchTemplateConfigs"] for o in cfg["Overrides"]]
    assert prio == sorted(prio)


def test_truncation_that_breaks_min_values_launches_nothing(three_zones):
    """Upstream ``Truncate``: the 60 cheapest types must still meet every minValues (Strict policy), else the
    launch fails with insufficient capacity."""
    t = three_zones
    its = _types(_names(t.env.ec2, 70), family=lambda i: "m5" if i < 60 else f"c{i}")
    reqs = [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
            {"key": FAMILY, "operator": "Exists", "minValues": 2}]
    with pytest.raises(NoCapacity, match="minValues"):
        _launch(t, its, reqs)
    assert t.captured == []
    # met by the 60 cheapest (two families among them): launched, 60 types
    its = _types(_names(t.env.ec2, 70), family=lambda i: "m5" if i % 2 else "c5")
    _launch(t, its, reqs)
    assert len({o["InstanceType"] for o in _overrides(t.captured[-1])}) == MAX_INSTANCE_TYPES
    # BestEffort (the plan's minValues were relaxed): truncated without the check, as upstream
    its = _types(_names(t.env.ec2, 70), family=lambda i: "m5" if i < 60 else f"c{i}")
    _launch(t, its, reqs, relaxed=True)
    assert len({o["InstanceType"] for o in _overrides(t.captured[-1])}) == MAX_INSTANCE_TYPES


def test_capacity_type_is_chosen_among_the_kept_types(three_zones):
    """Upstream truncates first (cheapest offering of any allowed capacity type), then picks the capacity type from
    what was kept: a spot offering only on a type cut by the truncation does not make the launch spot."""
    t = three_zones
    names = _names(t.env.ec2, 61)
    its = _types(names[:60]) + _types(names[60:], cts=("on-demand", "spot"), start=1000)  # the only one with spot
    reqs = [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand", "spot"]}]
    inst = _launch(t, its, reqs)
    assert inst.capacity_type == "on-demand"
    assert t.captured[-1]["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "on-demand"


def test_fleet_launcher_alone_caps_types_not_overrides(env):
    r = resolver(env).resolve(nodeclass())
    its = _types(_names(env.ec2, 70), zones=("us-east-1a", "us-east-1b"))
    info = ClusterInfo(name=CLUSTER, endpoint="https://k8s.example", ca_b64="Y2E=", cidr="10.100.0.0/16")
    refs = LaunchTemplates(env.ec2, CLUSTER).ensure_for(r, info, its, {}, [], [], None)
    cands = sorted(((it.name, o.zone, o.price) for it in its for o in it.offerings), key=lambda c: c[2])
    req = LaunchRequest("nc", "default", "default", "on-demand", cands, refs, r.subnets)
    launcher = FleetLauncher(env.ec2, CLUSTER, None)
    rows = launcher.plan_overrides(req)
    assert len(rows) == 2 * MAX_INSTANCE_TYPES
    assert {x["type"] for x in rows} == {it.name for it in its[:MAX_INSTANCE_TYPES]}
    params = launcher.build_request(req, rows)
    assert sum(len(c["Overrides"]) for c in params["LaunchTemplateConfigs"]) == 2 * MAX_INSTANCE_TYPES
