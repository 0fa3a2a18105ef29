"""Offerings: zones from DescribeInstanceTypeOfferings, capacity types, prices, availability."""

import pytest

from karpenter_lambda.catalog import PriceBook, build_instance_types

REGION = "us-east-1"


def test_offerings_follow_moto_zones(default_catalog, moto_ec2_data):
    _, offerings = moto_ec2_data
    zones = sorted({o["Location"] for o in offerings if o["InstanceType"] == "m5.large"})
    assert zones == ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1f"]
    it = default_catalog["m5.large"]
    assert sorted({o.zone for o in it.offerings}) == zones
    assert len(it.offerings) == 2 * len(zones)
    od = [o for o in it.offerings if o.capacity_type == "on-demand"]
    assert {o.price for o in od} == {0.096} and {o.price_source for o in od} == {"bundled"}
    spot = [o for o in it.offerings if o.capacity_type == "spot"]
    assert all(o.price_source == "spot-estimate" and 0 < o.price < 0.096 for o in spot)
    assert len({o.price for o in spot}) > 1  # varies per zone
    assert it.cheapest_offering().capacity_type == "spot"


def test_on_demand_only_type_has_no_spot(default_catalog):
    it = default_catalog["hpc7g.4xlarge"]  # SupportedUsageClasses: on-demand only
    assert it.offerings and {o.capacity_type for o in it.offerings} == {"on-demand"}


def test_zone_restriction(moto_ec2_data):
    raw, offerings = moto_ec2_data
    types = build_instance_types(raw, offerings, PriceBook.from_bundled(REGION), REGION, zones=["us-east-1a", "us-east-1e"])
    zones = {o.zone for it in types for o in it.offerings}
    assert zones <= {"us-east-1a", "us-east-1e"}
    by = {it.name: it for it in types}
    assert {o.zone for o in by["m5.large"].offerings} == {"us-east-1a"}  # m5.large is not offered in us-east-1e


def test_unavailable_offerings_kept_but_marked(moto_ec2_data):
    raw, offerings = moto_ec2_data
    unavailable = {("m5.large", "us-east-1a", "spot"), ("m5.large", "us-east-1b", "on-demand")}
    m5 = [r for r in raw if r["InstanceType"] == "m5.large"]
    [it] = build_instance_types(m5, offerings, PriceBook.from_bundled(REGION), REGION, unavailable=unavailable)
    off = {(o.zone, o.capacity_type): o for o in it.offerings}
    assert off[("us-east-1a", "spot")].available is False
    assert off[("us-east-1b", "on-demand")].available is False
    assert off[("us-east-1a", "on-demand")].available is True
    assert len(it.available_offerings()) == len(it.offerings) - 2
    assert it.cheapest_offering(zones={"us-east-1a"}, capacity_types={"spot"}) is None


def test_real_spot_prices_and_injected_on_demand(moto_ec2_data):
    raw, offerings = moto_ec2_data
    book = PriceBook.from_bundled(REGION).with_on_demand({"m5.large": 0.1}).with_spot({("m5.large", "us-east-1c"): 0.031})
    [it] = build_instance_types([r for r in raw if r["InstanceType"] == "m5.large"], offerings, book, REGION)
    off = {(o.zone, o.capacity_type): o for o in it.offerings}
    assert (off[("us-east-1c", "spot")].price, off[("us-east-1c", "spot")].price_source) == (0.031, "spot-history")
    assert off[("us-east-1a", "spot")].price_source == "spot-estimate"
    assert (off[("us-east-1a", "on-demand")].price, off[("us-east-1a", "on-demand")].price_source) == (0.1, "pricing-api")


def test_zone_ids_attached(moto_ec2_data):
    raw, offerings = moto_ec2_data
    types = build_instance_types(raw[:20], offerings, PriceBook.from_bundled(REGION), REGION, zone_ids={"us-east-1a": "use1-az6"})
    offs = [o for it in types for o in it.offerings]
    assert offs and all((o.zone_id == "use1-az6") == (o.zone == "us-east-1a") for o in offs)


def test_type_without_any_price_is_dropped(moto_ec2_data):
    raw, offerings = moto_ec2_data
    book = PriceBook("us-east-1", {"m5.large": 0.096}, estimate_spot=False)
    skipped = {}
    types = build_instance_types(raw, offerings, book, REGION, skipped=skipped)
    assert [it.name for it in types] == ["m5.large"]
    assert {o.capacity_type for o in types[0].offerings} == {"on-demand"}  # no spot estimate, no spot history
    assert skipped["c5.large"] == "no offering: no price known"


def test_catalog_is_sorted_and_covers_moto(default_catalog):
    names = list(default_catalog)
    assert names == sorted(names)
    assert len(names) > 1300


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(raw_types=[{"VCpuInfo": {}}]), r"raw_types\[0\]: InstanceType is required"),
        (dict(offerings=[{"InstanceType": "m5.large"}]), r"offerings\[0\]: InstanceType and Location are required"),
        (dict(offerings=[{"InstanceType": "m5.large", "Location": "use1-az1", "LocationType": "availability-zone-id"}]), r"offerings\[0\]\.LocationType"),
        (dict(prices={"m5.large": 1.0}), r"prices: expected a PriceBook"),
        (dict(region=""), r"region: must be a non-empty string"),
    ],
)
def test_bad_input_is_named(raw, kwargs, match):
    args = dict(raw_types=[raw("m5.large")], offerings=[{"InstanceType": "m5.large", "Location": "us-east-1a"}], prices=PriceBook.from_bundled(REGION), region=REGION)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        build_instance_types(**args)


def test_malformed_description_is_named(moto_ec2_data):
    info = {"InstanceType": "m5.large", "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]}, "SupportedUsageClasses": ["on-demand"]}
    with pytest.raises(ValueError, match=r"m5.large: VCpuInfo.DefaultVCpus missing"):
        build_instance_types([info], moto_ec2_data[1], PriceBook.from_bundled(REGION), REGION)
