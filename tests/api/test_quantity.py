"""Kubernetes quantities parse exactly (api/quantity.py)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from karpenter_lambda.api.quantity import QuantityError, format_resource, parse_quantity, parse_resource_list, resource_value


@pytest.mark.parametrize(
    "text,expected",
    [
        ("100", Fraction(100)),
        ("500m", Fraction(1, 2)),
        ("4Gi", Fraction(4 * 2**30)),
        ("1.5", Fraction(3, 2)),
        ("1e3", Fraction(1000)),
        (".5", Fraction(1, 2)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("128974848", Fraction(128974848)),
        ("129e6", Fraction(129_000_000)),
        ("129M", Fraction(129_000_000)),
        ("123Mi", Fraction(123 * 2**20)),
        ("1k", Fraction(1000)),
        ("100u", Fraction(1, 10_000)),
        ("5n", Fraction(5, 10**9)),
        ("2E", Fraction(2 * 10**18)),
        ("1Ei", Fraction(2**60)),
        ("-1", Fraction(-1)),
        ("+2", Fraction(2)),
        ("1E-2", Fraction(1, 100)),
        ("0", Fraction(0)),
        (7, Fraction(7)),
        (1.5, Fraction(3, 2)),
    ],
)
def test_parse(text, expected):
    assert parse_quantity(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "10GB", "1Kb", "Gi", "1 Gi", "--1", "1e", "0x10", "1ki", True, None, [1], float("inf")])
def test_invalid(text):
    with pytest.raises(QuantityError):
        parse_quantity(text)


def test_resource_units():
    assert resource_value("cpu", "500m") == 500
    assert resource_value("cpu", "1.5") == 1500
    assert resource_value("cpu", "1m") == 1
    assert resource_value("cpu", "0.1m") == 1  # rounds up like Kubernetes
    assert resource_value("memory", "4Gi") == 4 * 2**30
    assert resource_value("memory", "1.5k") == 1500
    assert parse_resource_list({"cpu": "250m", "memory": "1Gi", "pods": 3}) == {"cpu": 250, "memory": 2**30, "pods": 3}


def test_format_round_trips():
    for name, text in [("cpu", "1500m"), ("cpu", "2"), ("memory", "4Gi"), ("memory", "512Mi"), ("pods", "110")]:
        assert format_resource(name, resource_value(name, text)) == text


def test_limits_in_nodepool_accept_quantities():
    from karpenter_lambda.api.validation import validate_and_default

    from .helpers import manifest

    doc = manifest("NodePool", "spec:\n  limits:\n    cpu: 100\n    memory: 1.5Ti\n    nvidia.com/gpu: '8'\n    nodes: '10'\n    ephemeral-storage: 1e12\n")
    out, errors = validate_and_default("NodePool", doc)
    assert errors == []
    assert out["spec"]["limits"]["memory"] == "1.5Ti"
