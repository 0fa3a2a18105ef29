"""The provisioner prices on-demand offerings from the AWS Pricing API (through the DynamoDB price cache),
not only from the bundled table: a deployed function must see today's prices."""

import json

from botocore.awsrequest import AWSResponse

from karpenter_lambda.adapters.aws.pricing_cache import PriceCache
from karpenter_lambda.cloudprovider import catalog as catalog_cache
from karpenter_lambda.controllers import provision
from karpenter_lambda.sim.world import make_pod


def _price_item(instance_type: str, usd: float) -> str:
    return json.dumps({
        "product": {"attributes": {"instanceType": instance_type}},
        "terms": {"OnDemand": {"T1": {"priceDimensions": {"D1": {"pricePerUnit": {"USD": f"{usd:.6f}"}}}}}},
    })


def test_on_demand_prices_come_from_the_pricing_api_and_are_cached(world, monkeypatch):
    monkeypatch.setattr(catalog_cache, "_catalog_cache", {})  # no instance types built by an earlier test
    calls = []
    # m6i.xlarge made the cheapest of every type the NodePool allows (m5, c5, m6i): only the API says so
    prices = {t: 5.0 for t in ("m5.large", "m5.xlarge", "c5.large", "c5.xlarge", "m6i.large", "m6i.xlarge")}
    prices["m6i.xlarge"] = 0.0123

    def get_products(params, **kwargs):
        calls.append(params)
        return AWSResponse("https://api.pricing.us-east-1.amazonaws.com/", 200, {}, None), {
            "FormatVersion": "aws_v1", "PriceList": [_price_item(t, p) for t, p in prices.items()]}

    world.env.pricing.meta.events.register("before-call.pricing.GetProducts", get_products)
    resp = world.provision(world.sqs_event(world.add_pods([make_pod("web-0")])))
    assert resp == {"batchItemFailures": []}
    assert calls and all(b"us-east-1" in c["body"] and b"regionCode" in c["body"] for c in calls)
    (inst,) = world.instances()
    assert inst["InstanceType"] == "m6i.xlarge"
    (nc,) = world.store.list("NodeClaim")
    assert float(nc.annotations[provision.PRICE_ANNOTATION]) == 0.0123
    cached = PriceCache(world.env.dynamodb, world.account.cache_table).get("on-demand", "us-east-1")
    assert cached is not None and cached.fresh and cached.prices["m6i.xlarge"] == 0.0123

    # a new container (empty process caches) reads the fresh DynamoDB entry: no second Pricing API call
    n = len(calls)
    monkeypatch.setattr(catalog_cache, "_catalog_cache", {})
    world.provision(world.sqs_event(world.add_pods([make_pod("web-1", cpu="3", owner="other")])))
    assert len(calls) == n
