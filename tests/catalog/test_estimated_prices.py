"""Estimated spot prices (issue 21, defect 9): an offering priced by the estimate is marked ``price_estimated``;
the launch path's catalog (controllers' default_catalog_loader, behind AWSCloudProvider.instance_types) makes it
unavailable, as Karpenter never launches an offering it has no price for; the simulator opts in to estimates;
``plan`` keeps them, labelled (tests/plan/test_plan_assumptions.py)."""

from datetime import datetime, timezone
from types import SimpleNamespace

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from moto import mock_aws

from karpenter_lambda.adapters.aws import ec2_catalog
from karpenter_lambda.adapters.aws.pricing_cache import PriceCache, ensure_cache_table
from karpenter_lambda.catalog import PriceBook, build_instance_types
from karpenter_lambda.catalog.pricing import Price
from karpenter_lambda.cloudprovider import catalog as catalog_cache
from karpenter_lambda.cloudprovider import AWSCloudProvider
from karpenter_lambda.sim.aws import SimAccount
from karpenter_lambda.sim.world import TEST_MANIFESTS, World, make_pod

REGION = "us-east-1"
ENV = ec2_catalog.ESTIMATED_PRICES_ENV


def _offers(types, name="m5.large"):
    it = next(t for t in types if t.name == name)
    return {(o.zone, o.capacity_type): o for o in it.offerings}


@pytest.fixture
def fresh_caches(monkeypatch, moto_ec2_data):
    """No catalog built by an earlier test and no process-cached spot history (the instance types stay cached)."""
    monkeypatch.setattr(catalog_cache, "_catalog_cache", {})
    monkeypatch.setattr(ec2_catalog, "_cache", {k: v for k, v in ec2_catalog._cache.items() if k[0] != "spot"})
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.delenv(ec2_catalog.SOURCE_ENV, raising=False)


def _launch_catalog(ec2, zones=("us-east-1a",), price_cache=None):
    """The catalog a deployed function launches from: AWSCloudProvider.instance_types for subnets in ``zones``."""
    cloud = AWSCloudProvider(ec2, None, None, SimpleNamespace(name="c1"), region=REGION, price_cache=price_cache)
    return cloud.instance_types(None, SimpleNamespace(subnets=[{"zone": z} for z in zones]), set())


# --- pure ------------------------------------------------------------------------------------------


def test_price_says_whether_it_is_an_estimate():
    book = PriceBook("us-east-1", {"m5.large": 0.096}).with_spot({("m5.large", "us-east-1a"): 0.031})
    real, est, od = book.spot("m5.large", "us-east-1a"), book.spot("m5.large", "us-east-1b"), book.on_demand("m5.large")
    assert isinstance(real, Price) and real == (0.031, "spot-history") and not real.estimated
    assert est.source == "spot-estimate" and est.estimated
    assert od == (0.096, "bundled") and not od.estimated


def test_estimated_offerings_are_unavailable_only_when_asked(moto_ec2_data):
    raw, offerings = moto_ec2_data
    m5 = [t for t in raw if t["InstanceType"] == "m5.large"]
    book = PriceBook.from_bundled(REGION).with_spot({("m5.large", "us-east-1c"): 0.031})
    shown = _offers(build_instance_types(m5, offerings, book, REGION))  # plan / simulator: kept, marked
    launch = _offers(build_instance_types(m5, offerings, book, REGION, estimated_available=False))
    assert shown[("us-east-1a", "spot")].price_estimated and shown[("us-east-1a", "spot")].available
    assert launch[("us-east-1a", "spot")].price_estimated and not launch[("us-east-1a", "spot")].available
    assert launch[("us-east-1a", "spot")].price == shown[("us-east-1a", "spot")].price  # the estimate is still recorded
    real = launch[("us-east-1c", "spot")]
    assert (real.price, real.price_estimated, real.available) == (0.031, False, True)
    assert all(o.available and not o.price_estimated for (z, ct), o in launch.items() if ct == "on-demand")


# --- the launch path (moto) --------------------------------------------------------------------------


def test_launch_catalog_under_moto_has_no_launchable_spot(fresh_caches):
    """moto's spot history is only placeholders: no real spot price, so no spot offering may be launched."""
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        types = _launch_catalog(ec2)
    spot = [o for it in types for o in it.offerings if o.capacity_type == "spot"]
    assert spot and all(o.price_estimated and not o.available for o in spot)
    od = [o for it in types for o in it.offerings if o.capacity_type == "on-demand"]
    assert od and all(o.available and not o.price_estimated for o in od)
    m5 = _offers(types)
    assert m5[("us-east-1a", "spot")].price_source == "spot-estimate"


def test_launch_catalog_uses_real_spot_history(fresh_caches):
    """A real price from DescribeSpotPriceHistory makes that offering launchable; the others stay unavailable."""
    def history(params, **kwargs):
        return AWSResponse("https://ec2.us-east-1.amazonaws.com/", 200, {}, None), {"SpotPriceHistory": [
            {"InstanceType": "m5.large", "AvailabilityZone": "us-east-1a", "SpotPrice": "0.0311",
             "ProductDescription": "Linux/UNIX", "Timestamp": datetime.now(timezone.utc)}]}

    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        ec2.meta.events.register("before-call.ec2.DescribeSpotPriceHistory", history)
        types = _launch_catalog(ec2, zones=("us-east-1a", "us-east-1b"))
    m5 = _offers(types)
    assert (m5[("us-east-1a", "spot")].price, m5[("us-east-1a", "spot")].available) == (0.0311, True)
    assert not m5[("us-east-1a", "spot")].price_estimated
    assert m5[("us-east-1b", "spot")].price_estimated and not m5[("us-east-1b", "spot")].available


def _failing_history(calls):
    def fail(params, **kwargs):
        calls.append(1)
        return AWSResponse("https://ec2.us-east-1.amazonaws.com/", 500, {}, None), {
            "Error": {"Code": "InternalError", "Message": "spot price history is down"}}
    return fail


def test_spot_history_error_makes_spot_unavailable_for_launch(fresh_caches, monkeypatch):
    calls = []
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION, config=Config(retries={"max_attempts": 1}))
        ec2.meta.events.register("before-call.ec2.DescribeSpotPriceHistory", _failing_history(calls))
        types = _launch_catalog(ec2)
        assert calls, "DescribeSpotPriceHistory was not called"
        spot = [o for it in types for o in it.offerings if o.capacity_type == "spot"]
        assert spot and all(o.price_estimated and not o.available for o in spot)

        # the simulator's opt-in keeps them (estimates, marked)
        monkeypatch.setenv(ENV, "available")
        kept = [o for it in _launch_catalog(ec2) for o in it.offerings if o.capacity_type == "spot"]
        assert kept and all(o.price_estimated and o.available for o in kept)


def test_spot_history_error_falls_back_to_the_stale_cached_prices(fresh_caches):
    """Karpenter keeps the last prices it knew: a failed refresh uses the stale DynamoDB entry (real prices)."""
    with mock_aws():
        ddb = boto3.client("dynamodb", region_name=REGION)
        table = ensure_cache_table(ddb, "prices-test")
        t0 = 1_800_000_000.0
        PriceCache(ddb, table, now=lambda: t0).put("spot", REGION, {("m5.large", "us-east-1a"): 0.029}, "spot-history")
        later = PriceCache(ddb, table, now=lambda: t0 + 7200)  # spot entries are fresh for 1 h
        assert not later.get("spot", REGION).fresh
        ec2 = boto3.client("ec2", region_name=REGION, config=Config(retries={"max_attempts": 1}))
        calls = []
        ec2.meta.events.register("before-call.ec2.DescribeSpotPriceHistory", _failing_history(calls))
        types = _launch_catalog(ec2, zones=("us-east-1a", "us-east-1b"), price_cache=later)
    assert calls
    m5 = _offers(types)
    assert (m5[("us-east-1a", "spot")].price, m5[("us-east-1a", "spot")].available) == (0.029, True)
    assert m5[("us-east-1b", "spot")].price_estimated and not m5[("us-east-1b", "spot")].available


def test_policy_values_are_checked(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert ec2_catalog.estimated_prices_available() is False  # deployed functions: estimates are not launched
    monkeypatch.setenv(ENV, "available")
    assert ec2_catalog.estimated_prices_available() is True
    monkeypatch.setenv(ENV, "yes")
    with pytest.raises(ValueError, match=f"\\${ENV}='yes'.*unavailable.*available"):
        ec2_catalog.estimated_prices_available()


# --- the simulator opts in ---------------------------------------------------------------------------


def test_simulator_launches_spot_on_estimates_and_the_default_does_not(monkeypatch):
    """The real provisioner handler in the simulated account: spot on estimated prices (the sim's explicit opt-in);
    with the deployed default the same NodePool launches on-demand, the only offerings with a real price."""
    assert SimAccount("c").environment()[ENV] == "available"
    manifests = TEST_MANIFESTS.replace('values: ["on-demand"]', 'values: ["spot", "on-demand"]') % {"cpu_limit": "1000"}
    assert 'values: ["spot", "on-demand"]' in manifests
    monkeypatch.setattr(catalog_cache, "_catalog_cache", {})
    with World(manifests) as w:
        assert w.provision(w.sqs_event(w.add_pods([make_pod("web-0")]))) == {"batchItemFailures": []}
        (first,) = w.store.list("NodeClaim")
        assert first.labels["karpenter.sh/capacity-type"] == "spot"

        monkeypatch.setenv(ENV, "unavailable")  # as deployed
        assert w.provision(w.sqs_event(w.add_pods([make_pod("big-0", cpu="3", owner="big")]))) == {"batchItemFailures": []}
        second = [nc for nc in w.store.list("NodeClaim") if nc.name != first.name]
        assert len(second) == 1 and second[0].labels["karpenter.sh/capacity-type"] == "on-demand"
