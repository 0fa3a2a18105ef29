"""A stored NodeOverlay's price reaches EC2: the provisioner plans by the overlaid price, the NodeClaim record carries
``karpenter.sh/price-overlay-applied`` (core ``nodeclaimtemplate.go``) and CreateFleet is asked to launch by the
overrides' Priority (aws ``instance.go`` / ``types.go``: ``prioritized``), so EC2 launches the plan's m6i, not the
c5.large it prices lowest (moto + local Kubernetes API; CreateFleet read with a botocore hook on the world's client)."""

from __future__ import annotations

import copy

from karpenter_lambda.api.manifests import load_text
from karpenter_lambda.catalog.overlay import PRICE_OVERLAY_APPLIED
from karpenter_lambda.cloudprovider import catalog as catalog_cache
from karpenter_lambda.sim.world import World, make_pod, scenario_manifests

SAVINGS_PLAN = """
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata:
  name: m6i-savings-plan
spec:
  weight: 10
  requirements:
    - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m6i]}
    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  priceAdjustment: "-30%"
"""


def _launch(monkeypatch, extra: str = ""):
    monkeypatch.setattr(catalog_cache, "_catalog_cache", {})
    objs = load_text(scenario_manifests(), "<world>").objects + (load_text(extra, "overlay.yaml").objects if extra else [])
    with World(objs) as world:
        captured: list[dict] = []
        world.ec2.meta.events.register("provide-client-params.ec2.CreateFleet",
                                       lambda params, **kw: captured.append(copy.deepcopy(params)))
        assert world.provision(world.sqs_event(world.add_pods([make_pod("web-0", cpu="1")]))) == {"batchItemFailures": []}
        (nc,) = world.store.list("NodeClaim")
        (params,) = captured
        ovs = sorted((o for cfg in params["LaunchTemplateConfigs"] for o in cfg["Overrides"]), key=lambda o: o["Priority"])
        return dict(nc.annotations), params, ovs


def test_an_overlaid_price_is_the_one_ec2_launches_by(monkeypatch):
    ann, params, ovs = _launch(monkeypatch, SAVINGS_PLAN)
    assert ann[PRICE_OVERLAY_APPLIED] == "true"
    assert params["OnDemandOptions"] == {"AllocationStrategy": "prioritized"}
    assert ovs[0]["InstanceType"] == "m6i.large"


def test_without_an_overlay_ec2_launches_by_its_own_prices(monkeypatch):
    ann, params, ovs = _launch(monkeypatch)
    assert PRICE_OVERLAY_APPLIED not in ann
    assert params["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    assert ovs[0]["InstanceType"] == "c5.large"
