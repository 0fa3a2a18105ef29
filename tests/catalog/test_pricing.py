"""PriceBook: bundled tables per partition, overlays, placeholder spot prices, the spot estimate."""

import pytest

from karpenter_lambda.catalog.pricing import (
    PLACEHOLDER_SPOT_PRICE,
    PriceBook,
    bundled_on_demand_prices,
    estimate_spot_price,
    spot_discount,
)


def test_bundled_us_east_1():
    book = PriceBook.from_bundled("us-east-1")
    assert book.on_demand("m5.large") == (0.096, "bundled")
    assert book.on_demand("t3.micro") == (0.0104, "bundled")
    assert len(book) > 1300


def test_other_commercial_region_falls_back_to_us_east_1():
    prices, table_region = bundled_on_demand_prices("eu-west-1")
    assert table_region == "us-east-1"
    assert prices["m5.large"] == 0.096


def test_partitions_use_their_own_tables():
    gov, r = bundled_on_demand_prices("us-gov-east-1")
    assert r == "us-gov-east-1" and gov["c5.large"] == 0.102
    cn, r = bundled_on_demand_prices("cn-north-1")
    assert r == "cn-north-1" and cn and cn != bundled_on_demand_prices("us-east-1")[0]
    _, r = bundled_on_demand_prices("cn-northwest-1")
    assert r == "cn-north-1"


def test_with_on_demand_overlays_and_is_immutable():
    base = PriceBook.from_bundled("us-east-1")
    new = base.with_on_demand({"m5.large": 0.1, "zz.large": 1.5})
    assert new.on_demand("m5.large") == (0.1, "pricing-api")
    assert new.on_demand("zz.large") == (1.5, "pricing-api")
    assert new.on_demand("c5.large") == (0.085, "bundled")  # kept from the table
    assert base.on_demand("m5.large") == (0.096, "bundled")  # original untouched


def test_spot_history_wins_over_estimate_and_placeholders_are_ignored():
    book = PriceBook.from_bundled("us-east-1").with_spot(
        {("m5.large", "us-east-1a"): 0.035, ("m5.large", "us-east-1b"): PLACEHOLDER_SPOT_PRICE, ("c5.large", "us-east-1a"): 0.0}
    )
    assert book.spot("m5.large", "us-east-1a") == (0.035, "spot-history")
    price, source = book.spot("m5.large", "us-east-1b")  # moto's 0.00001 is not a price
    assert source == "spot-estimate" and price > 0.01
    assert book.spot("c5.large", "us-east-1a")[1] == "spot-estimate"
    assert book.spot_prices == {("m5.large", "us-east-1a"): 0.035}


def test_spot_estimate_is_deterministic_and_bounded():
    a = estimate_spot_price("m5.large", "us-east-1a", 0.096)
    assert a == estimate_spot_price("m5.large", "us-east-1a", 0.096)
    # category factor for "m" is 0.36 with a +/-0.05 zone spread
    assert 0.096 * 0.31 - 1e-9 <= a <= 0.096 * 0.41 + 1e-9
    zones = [f"us-east-1{z}" for z in "abcdef"]
    assert len({spot_discount("m5.large", z) for z in zones}) == 6
    # accelerated types are discounted less than general purpose ones on average
    gpu = sum(spot_discount("p3.2xlarge", z) for z in zones) / 6
    gen = sum(spot_discount("m5.large", z) for z in zones) / 6
    assert gpu > gen
    assert all(0 < spot_discount(t, z) < 1 for t in ("t3.micro", "inf2.xlarge", "trn1.2xlarge", "x2gd.large", "zz9.large") for z in zones)


def test_spot_estimate_pinned_value():
    # crc32("m5.large|us-east-1a") pins the spread; a change to the estimate shows up here
    assert estimate_spot_price("m5.large", "us-east-1a", 0.096) == 0.032073


def test_estimate_can_be_disabled():
    book = PriceBook.from_bundled("us-east-1", estimate_spot=False)
    assert book.spot("m5.large", "us-east-1a") is None
    assert book.with_spot({("m5.large", "us-east-1a"): 0.03}).spot("m5.large", "us-east-1a") == (0.03, "spot-history")


def test_unknown_type_has_no_price():
    book = PriceBook.from_bundled("us-east-1")
    assert book.on_demand("zz9.large") is None
    assert book.spot("zz9.large", "us-east-1a") is None


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: PriceBook("us-east-1", {"m5.large": "cheap"}), r"on_demand\['m5.large'\]: price must be a number"),
        (lambda: PriceBook("us-east-1", {"m5.large": -1}), r"finite non-negative"),
        (lambda: PriceBook.from_bundled("us-east-1").with_spot({"m5.large": 0.1}), r"\(instance_type, zone\) tuples"),
        (lambda: PriceBook.from_bundled("us-east-1").with_on_demand([("m5.large", 0.1)]), r"expected a mapping"),
        (lambda: PriceBook.from_bundled(""), r"region: must be a non-empty string"),
    ],
)
def test_bad_prices_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()
