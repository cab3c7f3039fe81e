"""Kubernetes quantities: parsing, exactness and the canonical text the apiserver prints in its errors."""

from __future__ import annotations

from fractions import Fraction

import pytest

from graders import quantity


@pytest.mark.parametrize("raw,text", [
    (0.5, "500m"), ("0.5", "500m"), (1, "1"), ("1000", "1k"), ("1.5", "1500m"), (-1, "-1"), ("100m", "100m"),
    ("1024Mi", "1Gi"), ("0.5Gi", "512Mi"), ("1e3", "1e3"), (0, "0"), ("2", "2"),
])
def test_canonical_text(raw: object, text: str) -> None:
    assert str(quantity.parse(raw)) == text


@pytest.mark.parametrize("raw", ["one", "1 GPU", "1GB", "", "1.2.3", True, None, [1], float("inf"), "9" * 200])
def test_not_a_quantity(raw: object) -> None:
    with pytest.raises(quantity.QuantityError):
        quantity.parse(raw)


def test_integer_check_matches_milli_value_rule() -> None:
    assert quantity.parse("2").is_integer and quantity.parse("2000m").is_integer
    assert not quantity.parse("1001m").is_integer
    assert quantity.parse("1n").value == Fraction(1, 10**9)
    assert quantity.parse("0.0000000001").value == Fraction(1, 10**9)  # rounded up to nano precision
