"""A NodeClaim whose instance types carry a NodeOverlay's price is launched by that price: Karpenter annotates it
``karpenter.sh/price-overlay-applied`` (core ``nodeclaimtemplate.go``) and the AWS provider then asks CreateFleet for
the ``prioritized`` (on-demand) / ``capacity-optimized-prioritized`` (spot) strategies, the overrides' Priority
following the overlaid prices (aws ``pkg/providers/instance/instance.go`` ``launchInstance`` -> ``WithOverlay``,
``types.go`` ``Build``).  Without it EC2's ``lowest-price`` would launch the type EC2 prices lowest, not the one the
plan chose.  Through ``cloudprovider/launch.launch`` on moto; the CreateFleet request is captured with a botocore hook."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest

from karpenter_lambda.adapters.aws.fleet import FleetLauncher, LaunchRequest
from karpenter_lambda.api import labels as wk
from karpenter_lambda.api.objects import NodeOverlay
from karpenter_lambda.catalog.overlay import CAPACITY_OVERLAY_APPLIED, PRICE_OVERLAY_APPLIED, apply_overlays
from karpenter_lambda.catalog.types import InstanceType, Offering
from karpenter_lambda.cloudprovider.launch import launch, price_overlay
from karpenter_lambda.cloudprovider.types import CreateRequest
from karpenter_lambda.scheduling.model import NodeClaimPlan
from karpenter_lambda.scheduling.requirements import Requirements

from .conftest import CLUSTER, nodeclass, resolver

ZONES = ("us-east-1a", "us-east-1b")
OD, SPOT = wk.CAPACITY_TYPE_ON_DEMAND, wk.CAPACITY_TYPE_SPOT
# EC2's prices: m5a.large is the cheaper on-demand type; a Savings Plan takes 30% off m6i (docs/api.md's example)
PRICES = {"m5a.large": {OD: 0.086, SPOT: 0.030}, "m6i.large": {OD: 0.096, SPOT: 0.035}}


def _types() -> list[InstanceType]:
    return [InstanceType(name=n, labels={wk.ARCH: "amd64", wk.INSTANCE_TYPE: n, wk.INSTANCE_FAMILY: n.split(".")[0]},
                         capacity={"cpu": 2000, "memory": 8 * 2**30, "pods": 29},
                         offerings=[Offering(zone=z, capacity_type=ct, price=p) for z in ZONES for ct, p in ps.items()])
            for n, ps in PRICES.items()]


def _overlay(name: str, ct: str, **spec) -> NodeOverlay:
    reqs = [{"key": wk.INSTANCE_FAMILY, "operator": "In", "values": ["m6i"]},
            {"key": wk.CAPACITY_TYPE, "operator": "In", "values": [ct]}]
    return NodeOverlay({"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name},
                        "spec": {"requirements": reqs, **spec}})


def _plan(its: list[InstanceType], ct: str) -> NodeClaimPlan:
    reqs = Requirements.from_list([{"key": wk.CAPACITY_TYPE, "operator": "In", "values": [ct]}])
    best = min(((o.price, it.name, o.zone) for it in its for o in it.offerings if o.capacity_type == ct))
    return NodeClaimPlan(name="default-ov1", nodepool="default", requirements=reqs, instance_types=its,
                         instance_type=best[1], zone=best[2], capacity_type=ct, price=best[0], pods=["default/p"],
                         requests={"cpu": 1000}, reason="test")


@pytest.fixture
def fleet_env(env):
    captured: list[dict] = []
    env.ec2.meta.events.register("provide-client-params.ec2.CreateFleet",
                                 lambda params, **kw: captured.append(copy.deepcopy(params)))
    return SimpleNamespace(env=env, resolved=resolver(env).resolve(nodeclass()), captured=captured)


def _launch(f, plan: NodeClaimPlan):
    np = SimpleNamespace(name="default", taints=[], startup_taints=[])
    nc = SimpleNamespace(name="default", spec={}, tags={})
    cluster = SimpleNamespace(name=CLUSTER, endpoint="https://k8s.example", ca_b64="Y2E=", service_cidr="10.100.0.0/16")
    provider = SimpleNamespace(ec2=f.env.ec2, cluster=cluster, unavailable=None, beside_karpenter=False)
    inst = launch(provider, CreateRequest(name=plan.name, plan=plan, nodepool=np, nodeclass=nc, resolved=f.resolved,
                                          labels={wk.NODEPOOL: "default"}, client_token=plan.name))
    (params,) = f.captured
    return inst, params


def _by_priority(params: dict) -> list[tuple[str, float]]:
    ovs = [o for cfg in params["LaunchTemplateConfigs"] for o in cfg["Overrides"]]
    return [(o["InstanceType"], o["Priority"]) for o in sorted(ovs, key=lambda o: o["Priority"])]


def test_an_overlaid_on_demand_price_launches_by_priority(fleet_env):
    its = apply_overlays(_types(), [_overlay("m6i-savings-plan", OD, priceAdjustment="-30%")])
    plan = _plan(its, OD)
    assert (plan.instance_type, plan.price) == ("m6i.large", pytest.approx(0.0672))   # the plan chose m6i
    assert plan.annotations()[PRICE_OVERLAY_APPLIED] == "true"                         # the NodeClaim says so
    inst, params = _launch(fleet_env, plan)
    assert params["OnDemandOptions"] == {"AllocationStrategy": "prioritized"} and "SpotOptions" not in params
    order = _by_priority(params)
    assert [n for n, _ in order[:2]] == ["m6i.large", "m6i.large"]   # both zones of m6i before m5a
    assert [p for _, p in order] == sorted(p for _, p in order)
    assert inst.instance_type == "m6i.large" and inst.price == pytest.approx(0.0672)


def test_an_overlaid_spot_price_launches_capacity_optimized_prioritized(fleet_env):
    its = apply_overlays(_types(), [_overlay("m6i-spot", SPOT, price="0.001")])
    inst, params = _launch(fleet_env, _plan(its, SPOT))
    assert params["SpotOptions"] == {"AllocationStrategy": "capacity-optimized-prioritized"}
    assert "OnDemandOptions" not in params
    assert _by_priority(params)[0][0] == "m6i.large" and inst.instance_type == "m6i.large"


def test_the_annotation_not_the_launched_capacity_type_switches_the_strategy(fleet_env):
    """Upstream reads the NodeClaim's annotation, set when any offering of its instance types is overlaid: an
    on-demand overlay makes a spot launch of the same NodeClaim prioritized too (the spot prices are EC2's)."""
    its = apply_overlays(_types(), [_overlay("m6i-savings-plan", OD, priceAdjustment="-30%")])
    inst, params = _launch(fleet_env, _plan(its, SPOT))
    assert params["SpotOptions"] == {"AllocationStrategy": "capacity-optimized-prioritized"}
    assert _by_priority(params)[0][0] == "m5a.large" and inst.instance_type == "m5a.large"   # the cheaper spot


@pytest.mark.parametrize("overlays", [[], [_overlay("fuse", OD, capacity={"smarter-devices/fuse": "1"})]],
                         ids=["no-overlay", "capacity-only"])
def test_without_an_overlaid_price_ec2_chooses_by_its_own_prices(fleet_env, overlays):
    its = apply_overlays(_types(), overlays)
    plan = _plan(its, OD)
    assert PRICE_OVERLAY_APPLIED not in plan.annotations() and not price_overlay(plan)
    assert (CAPACITY_OVERLAY_APPLIED in plan.annotations()) == bool(overlays)
    inst, params = _launch(fleet_env, plan)
    assert params["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    assert _by_priority(params)[0][0] == "m5a.large" and inst.instance_type == "m5a.large"


@pytest.mark.parametrize("rtype,options", [
    ("default", {"OnDemandOptions": {"AllocationStrategy": "prioritized"}}),
    ("capacity-block", {}),
])
def test_a_reserved_launch_with_an_overlay(rtype, options):
    """An ODCR launch sends OnDemandOptions, prioritized with an overlay; a capacity block sends none (upstream
    ``Build``)."""
    req = LaunchRequest("default-r1", "default", "default", "reserved", [("m6i.large", ZONES[0], 0.0)],
                        {("m6i.large", ZONES[0]): "lt-r"}, {ZONES[0]: "subnet-1"},
                        reservations={("m6i.large", ZONES[0]): "cr-1"}, reservation_type=rtype, price_overlay=True)
    fl = FleetLauncher(None, CLUSTER)
    params = fl.build_request(req, fl.plan_overrides(req, set()))
    assert {k: params[k] for k in ("OnDemandOptions", "SpotOptions") if k in params} == options
