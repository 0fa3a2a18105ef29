"""AWS adapters of the catalog: EC2 describe calls and spot history (moto), the Pricing API
(moto's 404 path, and a real local HTTP server speaking the GetProducts JSON protocol),
and the DynamoDB price cache (moto)."""

import json
import logging
import threading
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import boto3
import pytest
from moto import mock_aws

from karpenter_lambda.adapters.aws import ec2_catalog
from karpenter_lambda.adapters.aws.ec2_catalog import (
    fetch_instance_types,
    fetch_spot_prices,
    latest_spot_prices,
    load_catalog,
    load_price_book,
)
from karpenter_lambda.adapters.aws.pricing import fetch_on_demand_prices, on_demand_prices, parse_price_list
from karpenter_lambda.adapters.aws.pricing_cache import PriceCache, cache_table_name, ensure_cache_table
from karpenter_lambda.api.objects import EC2NodeClass

REGION = "us-east-1"


def price_doc(instance_type, usd, sku="JRTCKXETXF", region_code="us-east-1", family="Compute Instance"):
    """One GetProducts PriceList entry, shaped like the real AmazonEC2 price list (trimmed)."""
    return {
        "product": {
            "productFamily": family,
            "attributes": {
                "enhancedNetworkingSupported": "Yes",
                "intelTurboAvailable": "Yes",
                "memory": "8 GiB",
                "dedicatedEbsThroughput": "Up to 4750 Megabps",
                "vcpu": "2",
                "capacitystatus": "Used",
                "locationType": "AWS Region",
                "storage": "EBS only",
                "instanceFamily": "General purpose",
                "operatingSystem": "Linux",
                "regionCode": region_code,
                "physicalProcessor": "Intel Xeon Platinum 8175",
                "servicename": "Amazon Elastic Compute Cloud",
                "networkPerformance": "Up to 10 Gigabit",
                "instanceType": instance_type,
                "tenancy": "Shared",
                "usagetype": f"BoxUsage:{instance_type}",
                "normalizationSizeFactor": "4",
                "licenseModel": "No License required",
                "servicecode": "AmazonEC2",
                "marketoption": "OnDemand",
                "preInstalledSw": "NA",
                "location": "US East (N. Virginia)",
                "operation": "RunInstances",
            },
            "sku": f"{sku}SKU",
        },
        "serviceCode": "AmazonEC2",
        "terms": {
            "OnDemand": {
                f"{sku}SKU.JRTCKXETXF": {
                    "priceDimensions": {
                        f"{sku}SKU.JRTCKXETXF.6YS6EN2CT7": {
                            "unit": "Hrs",
                            "endRange": "Inf",
                            "description": f"${usd} per On Demand Linux {instance_type} Instance Hour",
                            "appliesTo": [],
                            "rateCode": f"{sku}SKU.JRTCKXETXF.6YS6EN2CT7",
                            "beginRange": "0",
                            "pricePerUnit": {"USD": f"{usd:.10f}"},
                        }
                    },
                    "sku": f"{sku}SKU",
                    "effectiveDate": "2026-11-01T00:00:00Z",
                    "offerTermCode": "JRTCKXETXF",
                    "termAttributes": {},
                }
            }
        },
        "version": "20261120000000",
        "publicationDate": "2026-11-20T00:00:00Z",
    }


# --- Pricing API parsing --------------------------------------------------------------------


def test_parse_price_list_realistic_documents():
    docs = [json.dumps(price_doc("m5.large", 0.096)), json.dumps(price_doc("c6g.xlarge", 0.136, sku="ABC")), price_doc("t3.micro", 0.0104, sku="T3")]
    zero = price_doc("m5.xlarge", 0.0, sku="Z")  # zero-priced dimensions are skipped
    no_type = {"product": {"attributes": {}}, "terms": {}}
    assert parse_price_list(docs + [json.dumps(zero), json.dumps(no_type)]) == {"m5.large": 0.096, "c6g.xlarge": 0.136, "t3.micro": 0.0104}


def test_parse_price_list_cny_and_lowest_wins():
    doc = price_doc("m5.large", 0.5)
    dim = next(iter(next(iter(doc["terms"]["OnDemand"].values()))["priceDimensions"].values()))
    dim["pricePerUnit"] = {"CNY": "0.7480000000"}
    cheaper = price_doc("m5.large", 0.6)
    cheaper_dim = next(iter(next(iter(cheaper["terms"]["OnDemand"].values()))["priceDimensions"].values()))
    cheaper_dim["pricePerUnit"] = {"CNY": "0.7000000000"}
    assert parse_price_list([json.dumps(doc), json.dumps(cheaper)]) == {"m5.large": 0.7}


def test_parse_price_list_errors_name_the_entry():
    with pytest.raises(ValueError, match=r"PriceList\[1\]: invalid JSON"):
        parse_price_list([json.dumps(price_doc("m5.large", 0.1)), "{not json"])
    bad = price_doc("m5.large", 0.1)
    next(iter(next(iter(bad["terms"]["OnDemand"].values()))["priceDimensions"].values()))["pricePerUnit"]["USD"] = "n/a"
    with pytest.raises(ValueError, match=r"PriceList\[0\]\.terms\.OnDemand\..*pricePerUnit\.USD: not a number"):
        parse_price_list([json.dumps(bad)])


def test_moto_pricing_404_falls_back_to_bundled(caplog):
    with mock_aws():
        pricing = boto3.client("pricing", region_name="us-east-1")
        with caplog.at_level(logging.WARNING, logger="karpenter_lambda.adapters.aws.pricing"):
            res = on_demand_prices(pricing, REGION)
    assert res.prices is None and res.source == "bundled"
    assert "404" in res.reason and "bundled table used" in res.reason
    assert any("using the bundled table" in r.getMessage() for r in caplog.records)


def test_govcloud_never_calls_the_pricing_api():
    res = on_demand_prices(object(), "us-gov-west-1")  # the client would fail if it were used
    assert res.prices is None and "not reachable from aws-us-gov" in res.reason


# --- a local Pricing API (real HTTP, JSON protocol) ------------------------------------------


class _PricingHandler(BaseHTTPRequestHandler):
    pages: list = []
    requests: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        type(self).requests.append((self.headers.get("X-Amz-Target"), body))
        idx = int(body.get("NextToken") or 0)
        family = {f["Field"]: f["Value"] for f in body.get("Filters", [])}.get("productFamily")
        pages = self.pages if family == "Compute Instance" else [[]]
        out = {"FormatVersion": "aws_v1", "PriceList": [json.dumps(d) for d in pages[idx]]}
        if idx + 1 < len(pages):
            out["NextToken"] = str(idx + 1)
        data = json.dumps(out).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-amz-json-1.1")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def pricing_server():
    _PricingHandler.pages = [[price_doc("m5.large", 0.1)], [price_doc("c5.large", 0.08, sku="C5")]]
    _PricingHandler.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _PricingHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def local_pricing_client(url):
    return boto3.client("pricing", region_name="us-east-1", endpoint_url=url, aws_access_key_id="x", aws_secret_access_key="y")


def test_fetch_on_demand_prices_paginates_with_karpenter_filters(pricing_server):
    prices = fetch_on_demand_prices(local_pricing_client(pricing_server), REGION)
    assert prices == {"m5.large": 0.1, "c5.large": 0.08}
    targets = {t for t, _ in _PricingHandler.requests}
    assert targets == {"AWSPriceListService.GetProducts"}
    filters = [{f["Field"]: f["Value"] for f in body["Filters"]} for _, body in _PricingHandler.requests]
    assert all(f["regionCode"] == REGION and f["operatingSystem"] == "Linux" and f["capacitystatus"] == "Used" for f in filters)
    assert {(f["tenancy"], f["productFamily"]) for f in filters} == {("Shared", "Compute Instance"), ("Dedicated", "Compute Instance (bare metal)")}
    assert len(_PricingHandler.requests) == 3  # two pages for Compute Instance, one for bare metal


# --- DynamoDB price cache (moto) -------------------------------------------------------------


class Clock:
    def __init__(self, t=1_800_000_000.0):
        self.t = t

    def __call__(self):
        return self.t


@pytest.fixture
def ddb():
    with mock_aws():
        client = boto3.client("dynamodb", region_name=REGION)
        ensure_cache_table(client)
        yield client


def test_cache_table_name_from_env(monkeypatch):
    monkeypatch.delenv("KARPENTER_LAMBDA_CACHE_TABLE", raising=False)
    assert cache_table_name() == "karpenter-lambda-cache"
    monkeypatch.setenv("KARPENTER_LAMBDA_CACHE_TABLE", "other-cache")
    assert cache_table_name() == "other-cache"


def test_price_cache_freshness_and_ttl(ddb):
    clock = Clock()
    cache = PriceCache(ddb, refresh_seconds={"on-demand": 3600}, retention_seconds=7200, now=clock)
    assert cache.get("on-demand", REGION) is None
    cache.put("on-demand", REGION, {"m5.large": 0.1}, "pricing-api")
    item = ddb.get_item(TableName="karpenter-lambda-cache", Key={"pk": {"S": "prices#on-demand#us-east-1"}, "sk": {"S": "latest"}})["Item"]
    assert int(item["ttl"]["N"]) == int(clock.t + 7200)
    hit = cache.get("on-demand", REGION)
    assert hit.fresh and hit.prices == {"m5.large": 0.1} and hit.source == "pricing-api"
    clock.t += 3599
    assert cache.get("on-demand", REGION).fresh
    clock.t += 2  # past the refresh interval: still returned, but stale
    stale = cache.get("on-demand", REGION)
    assert stale is not None and not stale.fresh
    clock.t += 7200  # past ttl: gone even if DynamoDB has not deleted it yet
    assert cache.get("on-demand", REGION) is None
    desc = ddb.describe_time_to_live(TableName="karpenter-lambda-cache")["TimeToLiveDescription"]
    assert desc["AttributeName"] == "ttl"


def test_price_cache_spot_roundtrip_and_default_refresh(ddb):
    clock = Clock()
    cache = PriceCache(ddb, now=clock)
    cache.put("spot", REGION, {("m5.large", "us-east-1a"): 0.03}, "spot-history")
    assert cache.get("spot", REGION).prices == {("m5.large", "us-east-1a"): 0.03}
    clock.t += 3601  # spot refresh defaults to 1 h, on-demand to 12 h
    assert not cache.get("spot", REGION).fresh
    with pytest.raises(ValueError, match="kind"):
        cache.get("reserved", REGION)


def test_fresh_cache_is_used_instead_of_the_api(ddb):
    clock = Clock()
    cache = PriceCache(ddb, now=clock)
    cache.put("on-demand", REGION, {"m5.large": 0.2}, "pricing-api")
    pricing = boto3.client("pricing", region_name="us-east-1")  # moto: would answer 404
    res = on_demand_prices(pricing, REGION, cache)
    assert res.prices == {"m5.large": 0.2} and res.source == "pricing-api" and res.reason == "fresh cache entry"


def test_stale_cache_used_when_the_api_fails(ddb):
    clock = Clock()
    cache = PriceCache(ddb, now=clock)
    cache.put("on-demand", REGION, {"m5.large": 0.2}, "pricing-api")
    clock.t += 13 * 3600
    res = on_demand_prices(boto3.client("pricing", region_name="us-east-1"), REGION, cache)
    assert res.prices == {"m5.large": 0.2} and "stale cache entry used" in res.reason


def test_api_result_is_cached(ddb, pricing_server):
    clock = Clock()
    cache = PriceCache(ddb, now=clock)
    res = on_demand_prices(local_pricing_client(pricing_server), REGION, cache)
    assert res.prices == {"m5.large": 0.1, "c5.large": 0.08} and res.reason == "fetched from the Pricing API"
    assert cache.get("on-demand", REGION).prices == {"m5.large": 0.1, "c5.large": 0.08}
    n = len(_PricingHandler.requests)
    on_demand_prices(local_pricing_client(pricing_server), REGION, cache)
    assert len(_PricingHandler.requests) == n  # second call served from the cache


# --- spot history ----------------------------------------------------------------------------


def test_latest_spot_prices_ignores_placeholders():
    t = lambda d: datetime(2026, 11, d, tzinfo=timezone.utc)  # noqa: E731
    history = [
        {"InstanceType": "m5.large", "AvailabilityZone": "us-east-1a", "SpotPrice": "0.0350", "Timestamp": t(1)},
        {"InstanceType": "m5.large", "AvailabilityZone": "us-east-1a", "SpotPrice": "0.0310", "Timestamp": t(3)},
        {"InstanceType": "m5.large", "AvailabilityZone": "us-east-1a", "SpotPrice": "0.0400", "Timestamp": t(2)},
        {"InstanceType": "m5.large", "AvailabilityZone": "us-east-1b", "SpotPrice": "0.00001", "Timestamp": t(3)},
        {"InstanceType": "c5.large", "AvailabilityZone": "us-east-1a", "SpotPrice": "0.05", "Timestamp": datetime(2006, 1, 2, 15, 4, 5)},
        {"InstanceType": "c5.large", "AvailabilityZone": "us-east-1b", "SpotPrice": "abc", "Timestamp": t(3)},
    ]
    assert latest_spot_prices(history) == {("m5.large", "us-east-1a"): 0.031}


def test_moto_spot_history_is_all_placeholders():
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        history = ec2.describe_spot_price_history(InstanceTypes=["m5.large"], AvailabilityZone="us-east-1a")["SpotPriceHistory"]
        assert history and {h["SpotPrice"] for h in history} == {"0.00001"}
        assert fetch_spot_prices(ec2) == {}  # process-cached for 5 min: moto pays this once


# --- EC2 describe + load_catalog -------------------------------------------------------------


def test_instance_types_are_fetched_once_per_process(moto_ec2_data):
    calls = []
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        ec2.meta.events.register("before-call.ec2.DescribeInstanceTypes", lambda **kw: calls.append(1))
        first = fetch_instance_types(ec2)
        second = fetch_instance_types(ec2)
        assert calls == []  # the session fixture already paid for it
        assert len(first) == len(second) == 1395
        first.pop()
        assert len(fetch_instance_types(ec2)) == 1395  # callers get their own list


def test_load_catalog_through_moto(moto_ec2_data, ddb):
    cache = PriceCache(ddb, now=Clock())
    session = boto3.Session(region_name=REGION)
    types = {it.name: it for it in load_catalog(session, REGION, cache=cache)}
    m5 = types["m5.large"]
    assert m5.capacity["pods"] == 29
    off = {(o.zone, o.capacity_type): o for o in m5.offerings}
    assert off[("us-east-1a", "on-demand")].zone_id == "use1-az6"
    assert off[("us-east-1a", "on-demand")].price_source == "bundled"  # moto has no Pricing API
    assert off[("us-east-1a", "spot")].price_source == "spot-estimate"  # moto has only placeholder spot prices
    assert cache.get("spot", REGION) is not None  # the (empty) spot history was cached


def test_load_catalog_with_clients_nodeclass_and_unavailable(moto_ec2_data):
    nc = EC2NodeClass({"kind": "EC2NodeClass", "metadata": {"name": "br"}, "spec": {"role": "r", "amiSelectorTerms": [{"alias": "bottlerocket@latest"}], "kubelet": {"maxPods": 40}}})
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        types = {
            it.name: it
            for it in load_catalog(
                {"ec2": ec2}, REGION, nodeclass=nc, unavailable={("c5.large", "us-east-1a", "spot")}, zones=["us-east-1a", "us-east-1b"]
            )
        }
        only_ec2 = load_catalog(ec2, REGION)
    assert types["m5.large"].capacity["pods"] == 40
    assert {o.zone for o in types["m5.large"].offerings} == {"us-east-1a", "us-east-1b"}
    assert not {o.available for o in types["c5.large"].offerings if (o.zone, o.capacity_type) == ("us-east-1a", "spot")}.pop()
    assert len(only_ec2) > 1300


def test_load_price_book_uses_injected_pricing(moto_ec2_data, pricing_server):
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        book = load_price_book(ec2, local_pricing_client(pricing_server), REGION)
    assert book.on_demand("m5.large") == (0.1, "pricing-api")
    assert book.on_demand("t3.micro") == (0.0104, "bundled")


def test_load_catalog_rejects_bad_clients():
    with pytest.raises(ValueError, match="session_or_clients"):
        load_catalog("ec2", REGION)
    with pytest.raises(ValueError, match="'ec2' client"):
        load_catalog({"pricing": None}, REGION)


def test_process_cache_can_be_cleared():
    ec2_catalog._cache[("instance-types", "x", "y")] = (0.0, [1])
    ec2_catalog.clear_process_cache()
    assert ("instance-types", "x", "y") not in ec2_catalog._cache
