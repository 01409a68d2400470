"""Kubernetes quantities (k8s.io/apimachinery resource.Quantity), parsed purely."""

from __future__ import annotations

from decimal import Decimal

import pytest

from airflow_provider_gang.reservation import quantity

VALID = [
    ("integer", "4", Decimal(4)),
    ("int-type", 8, Decimal(8)),
    ("milli", "500m", Decimal("0.5")),
    ("nano", "5n", Decimal("5e-9")),
    ("micro", "2u", Decimal("2e-6")),
    ("kilo", "1k", Decimal(1000)),
    ("mega", "3M", Decimal(3_000_000)),
    ("giga", "1G", Decimal(10**9)),
    ("tera-peta-exa", "1E", Decimal(10**18)),
    ("kibi", "1Ki", Decimal(1024)),
    ("gibi-fraction", "1.5Gi", Decimal(1.5 * 2**30)),
    ("exponent", "1e3", Decimal(1000)),
    ("negative-exponent", "25E-2", Decimal("0.25")),
    ("explicit-plus", "+2", Decimal(2)),
    ("leading-dot", ".5", Decimal("0.5")),
    ("trailing-dot", "5.", Decimal(5)),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in VALID], ids=[c[0] for c in VALID])
def test_parse(text, expected):
    assert quantity.parse_quantity(text) == expected
    assert quantity.is_quantity(text)


INVALID = [
    ("empty", "", "not a quantity"),
    ("suffix-only", "Gi", "not a quantity"),
    ("space", "1 Gi", "not a quantity"),
    ("si-bytes", "16GB", "unknown suffix 'GB'"),
    ("lower-gi", "1gi", "unknown suffix"),
    ("suffix-then-digits", "1Ki2", "unknown suffix 'Ki2'"),
    ("bool", True, "not a quantity"),
    ("e-without-digits", "1e", "unknown suffix 'e'"),
]


@pytest.mark.parametrize(("text", "fragment"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid(text, fragment):
    with pytest.raises(quantity.QuantityError, match=fragment):
        quantity.parse_quantity(text)
    assert not quantity.is_quantity(text)
