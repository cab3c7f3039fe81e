"""Kubernetes resource quantities (``resource.Quantity``): parsing, exact comparison, canonical text.

The one quantity parser of the project (fleets, the simulator, graders and labs all use it). The apiserver
prints quantities in canonical form in its errors (``0.5`` becomes ``"500m"``), so the rules need the same
formatting to quote what kubectl would show. Values are exact fractions; nothing here rounds except what
k8s.io/apimachinery/pkg/api/resource/quantity.go does itself (nano-precision round-up, the BinarySI cap at
2^63-1); tests/unit/test_lint_quantity.py runs upstream's quantity_test.go tables.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from fractions import Fraction

# The exact pattern and error text of k8s.io/apimachinery/pkg/api/resource (ErrFormatWrong, ErrSuffix).
PATTERN = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
FORMAT_ERROR = f"quantities must match the regular expression '{PATTERN}'"
SUFFIX_ERROR = "unable to parse quantity's suffix"

_RE = re.compile(PATTERN)
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_BY_EXP = {v: k for k, v in _DECIMAL.items()}
_NANO = Fraction(1, 10**9)
_MAX_ALLOWED = 2**63 - 1  # quantity.go's maxAllowed: BinarySI values are capped there

__all__ = ["Quantity", "QuantityError", "parse", "parse_text", "canonical", "display", "PATTERN", "FORMAT_ERROR",
           "SUFFIX_ERROR"]


class QuantityError(ValueError):
    """The text is not a Kubernetes quantity; the message is the apiserver's own."""


@dataclass(frozen=True)
class Quantity:
    value: Fraction
    format: str  # "DecimalSI" | "BinarySI" | "DecimalExponent"

    @property
    def is_integer(self) -> bool:
        """What ``MilliValue() % 1000 == 0`` decides in the apiserver's integer-resource check."""
        return self.value.denominator == 1

    def __str__(self) -> str:
        return canonical(self)


def parse(raw: object) -> Quantity:
    """Parse a YAML/JSON value (string, int or float) as the apiserver would decode it."""
    if isinstance(raw, bool) or raw is None or isinstance(raw, (dict, list)):
        raise QuantityError(FORMAT_ERROR)
    if isinstance(raw, float):
        if not math.isfinite(raw):
            raise QuantityError(FORMAT_ERROR)
        text = repr(raw)
    else:
        text = str(raw)
    return parse_text(text.strip() if isinstance(raw, str) else text)


@functools.lru_cache(maxsize=4096)
def parse_text(text: str) -> Quantity:
    if len(text) > 128:
        raise QuantityError(FORMAT_ERROR)
    match = _RE.match(text)
    if match is None:
        raise QuantityError(FORMAT_ERROR)
    number, suffix = match.group(1), match.group(2)
    if number.count(".") > 1 or number.strip("+-") in ("", "."):
        raise QuantityError(FORMAT_ERROR)
    mantissa = Fraction(number)
    if suffix in _BINARY:
        value, fmt = mantissa * (1024 ** _BINARY[suffix]), "BinarySI"
    elif suffix in _DECIMAL:
        value, fmt = mantissa * Fraction(10) ** _DECIMAL[suffix], "DecimalSI"
    elif suffix[:1] in ("e", "E") and re.fullmatch(r"[eE][-+]?[0-9]+", suffix) and abs(int(suffix[1:])) <= 300:
        value, fmt = mantissa * Fraction(10) ** int(suffix[1:]), "DecimalExponent"
    else:
        raise QuantityError(SUFFIX_ERROR)
    # Kubernetes keeps nano precision and rounds anything finer up (away from zero).
    sign = -1 if value < 0 else 1
    value = abs(value)
    if (value / _NANO).denominator != 1:
        value = Fraction(math.ceil(value / _NANO), 10**9)
    if fmt == "BinarySI" and value > _MAX_ALLOWED:
        value = Fraction(_MAX_ALLOWED)
    if fmt == "BinarySI" and 0 < value < 1:  # quantity.go: "this avoids rounding and hopefully confusion, too"
        fmt = "DecimalSI"
    return Quantity(value * sign, fmt)


def canonical(q: Quantity) -> str:
    """The canonical text Kubernetes prints (``0.5`` -> ``500m``, ``1024Mi`` -> ``1Gi``)."""
    if q.value == 0:
        return "0"
    if q.format == "BinarySI" and q.value.denominator == 1 and abs(q.value) >= 1024:
        for power in range(6, 0, -1):
            unit = 1024**power
            if q.value % unit == 0:
                name = next(k for k, v in _BINARY.items() if v == power)
                return f"{q.value // unit}{name}"
    exponent = -9
    while (q.value / Fraction(10) ** exponent).denominator != 1:  # below nano only from arithmetic, not a parse
        exponent -= 3
    mantissa = q.value / Fraction(10) ** exponent
    # Prefer the largest exponent (a multiple of three) that still gives an integer mantissa.
    while mantissa % 1000 == 0:
        mantissa /= 1000
        exponent += 3
    if q.format == "DecimalExponent" or exponent not in _DECIMAL_BY_EXP:  # no SI suffix past E or below n
        return f"{mantissa}" if exponent == 0 else f"{mantissa}e{exponent}"
    return f"{mantissa}{_DECIMAL_BY_EXP[exponent]}"


def display(raw: object) -> str:
    """Canonical text when ``raw`` parses, else the raw text (for quoting learner input)."""
    try:
        return canonical(parse(raw))
    except QuantityError:
        return str(raw)
