"""Kubernetes quantities: parsing, exactness and the canonical text the apiserver prints in its errors."""

from __future__ import annotations

from fractions import Fraction

import pytest

from cluster import quantity


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


# The tables of k8s.io/apimachinery/pkg/api/resource/quantity_test.go (TestQuantityParse, its invalid list,
# TestQuantityString and TestQuantityParseEmit): (input, unscaled value, exponent, format).
_D, _B, _X = "DecimalSI", "BinarySI", "DecimalExponent"
UPSTREAM_PARSE = [
    ("0", 0, 0, _D), ("0n", 0, 0, _D), ("0u", 0, 0, _D), ("0m", 0, 0, _D), ("0Ki", 0, 0, _B), ("0k", 0, 0, _D),
    ("0Mi", 0, 0, _B), ("0M", 0, 0, _D), ("0Gi", 0, 0, _B), ("0G", 0, 0, _D), ("0Ti", 0, 0, _B), ("0T", 0, 0, _D),
    ("1", 1, 0, _D), ("1Ki", 1024, 0, _B), ("8Ki", 8 * 1024, 0, _B), ("7Mi", 7 * 1024**2, 0, _B),
    ("6Gi", 6 * 1024**3, 0, _B), ("5Ti", 5 * 1024**4, 0, _B), ("4Pi", 4 * 1024**5, 0, _B),
    ("3Ei", 3 * 1024**6, 0, _B), ("10Ti", 10 * 1024**4, 0, _B), ("100Ti", 100 * 1024**4, 0, _B),
    ("5n", 5, -9, _D), ("4u", 4, -6, _D), ("3m", 3, -3, _D), ("9", 9, 0, _D), ("8k", 8, 3, _D), ("50k", 5, 4, _D),
    ("7M", 7, 6, _D), ("6G", 6, 9, _D), ("5T", 5, 12, _D), ("40T", 4, 13, _D), ("300T", 3, 14, _D), ("2P", 2, 15, _D),
    ("1E", 1, 18, _D), ("1E-3", 1, -3, _X), ("1e3", 1, 3, _X), ("1E6", 1, 6, _X), ("1e9", 1, 9, _X),
    ("1E12", 1, 12, _X), ("1e15", 1, 15, _X), ("1E18", 1, 18, _X), ("1e14", 1, 14, _X), ("1e13", 1, 13, _X),
    ("100.035k", 100035, 0, _D), ("0.001", 1, -3, _D), ("0.0005k", 5, -1, _D), ("0.005", 5, -3, _D),
    ("0.05", 5, -2, _D), ("0.5", 5, -1, _D), ("0.00050k", 5, -1, _D), ("0.00500", 5, -3, _D), ("0.05000", 5, -2, _D),
    ("0.50000", 5, -1, _D), ("0.5e0", 5, -1, _X), ("0.5e-1", 5, -2, _X), ("0.5e-2", 5, -3, _X),
    ("10.035M", 10035, 3, _D), ("1.2e3", 12, 2, _X), ("1.3E+6", 13, 5, _X), ("1.40e9", 14, 8, _X),
    ("1.53E12", 153, 10, _X), ("1.6e15", 16, 14, _X), ("1.7E18", 17, 17, _X), ("9.01", 901, -2, _D),
    ("8.1k", 81, 2, _D), ("7.123456M", 7123456, 0, _D), ("6.987654321G", 6987654321, 0, _D), ("5.444T", 5444, 9, _D),
    ("40.1T", 401, 11, _D), ("300.2T", 3002, 11, _D), ("2.5P", 25, 14, _D), ("1.01E", 101, 16, _D),
    ("3.001n", 4, -9, _D), ("1.1E-9", 2, -9, _X), ("0.0000000001", 1, -9, _D), ("0.0000000005", 1, -9, _D),
    ("0.00000000050", 1, -9, _D), ("0.5e-9", 1, -9, _X), ("0.9n", 1, -9, _D), ("0.00000012345", 124, -9, _D),
    ("0.00000012354", 124, -9, _D), ("9Ei", 2**63 - 1, 0, _B), ("9223372036854775807Ki", 2**63 - 1, 0, _B),
    ("12E", 12, 18, _D), ("100.035Ki", 10243584, -2, _B), ("0.5Mi", 512 * 1024, 0, _B),
    ("0.05Gi", 536870912, -1, _B), ("0.025Ti", 274877906944, -1, _B),
    ("0.000000000001Ki", 2, -9, _D), (".001", 1, -3, _D), (".0001k", 100, -3, _D), ("1.", 1, 0, _D),
    ("1.G", 1, 9, _D),
]


@pytest.mark.parametrize("text,unscaled,exponent,fmt", UPSTREAM_PARSE)
def test_upstream_parse_table(text: str, unscaled: int, exponent: int, fmt: str) -> None:
    """Every case of upstream's TestQuantityParse, also negated and with an explicit plus sign."""
    want = Fraction(unscaled) * Fraction(10) ** exponent
    for sign, factor in (("", 1), ("-", -1), ("+", 1)):
        got = quantity.parse_text(sign + text)
        assert (got.value, got.format) == (want * factor, fmt), sign + text


@pytest.mark.parametrize("text", ["", "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-",
                                  "1e4294967297", " 1", "1 "])
def test_upstream_invalid_table(text: str) -> None:
    with pytest.raises(quantity.QuantityError):
        quantity.parse_text(text)


@pytest.mark.parametrize("text,canonical", [
    # TestQuantityParseEmit
    ("1Ki", "1Ki"), ("1Mi", "1Mi"), ("1Gi", "1Gi"), ("1024Mi", "1Gi"), ("1000M", "1G"), (".001Ki", "1024m"),
    (".000001Ki", "1024u"), (".000000001Ki", "1024n"), (".000000000001Ki", "2n"),
    # TestQuantityString's alternates (parse the alternate, print the canonical)
    ("1024Mi", "1Gi"), ("307200Ki", "300Mi"), ("1025024Mi", "1001Gi"), ("1024Gi", "1Ti"), ("1000M", "1G"),
    ("0.001T", "1G"), ("1000u", "1m"), ("1.08", "1080m"), ("1080000000n", "1080m"), ("1000E", "1e21"),
    ("5000E", "5e21"), ("1000000E", "1e24"), (".001e12", "1e9"), ("0.001e0", "1e-3"), ("1000e-12", "1e-9"),
    ("00", "0"), ("300e6", "300e6"), ("80e-3", "80e-3"), ("1080u", "1080u"), ("80n", "80n"), ("3k", "3k"),
    ("1025", "1025"), ("6Ki", "6Ki"), ("1234567M", "1234567M"),
])
def test_upstream_canonical_text(text: str, canonical: str) -> None:
    assert str(quantity.parse_text(text)) == canonical
    if quantity.parse_text(text).value:
        assert str(quantity.parse_text("-" + text)) == "-" + canonical
