"""Load YAML the way NVIDIA's Go tools see it: one document, plain data, errors as one line of text.

``load`` is the general reader. ``load_go`` is ``sigs.k8s.io/yaml``'s first step exactly: go-yaml v2 reads the
*first* document only (YAML 1.1 scalars: ``yes`` is true, ``010`` is 8, ``1e1`` is a float), merge keys are
applied, duplicate keys keep the last value, and map keys become strings (``true``, ``7``), ready for the JSON
round trip. Aliases are charged by the size of what they expand to, so an alias bomb is refused quickly.
"""

from __future__ import annotations

import math
import re
import struct
from decimal import Decimal
from typing import Any

import yaml as pyyaml
from ruamel.yaml.error import YAMLError

from cluster import strict

_Loader: Any = getattr(pyyaml, "CSafeLoader", None) or pyyaml.SafeLoader
MAX_NODES = 100_000  # go-yaml refuses far less aliasing than this; a real config has a few dozen nodes
MAX_DEPTH = 200  # well inside Python's recursion limit, with room for the decoder's own frames


class YamlSyntaxError(ValueError):
    """The text is not YAML; the message is one line, with the line number when the parser knows it."""


def load(text: str) -> Any:
    """One document, YAML 1.2, through the guarded reader (``cluster.strict.read_yaml``: an alias bomb or deep
    nesting is a ``YamlSyntaxError`` at once)."""
    try:
        return strict.read_yaml(text)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise YamlSyntaxError(f"yaml: {where}{problem}") from exc


def load_go(text: str, max_nodes: int = MAX_NODES) -> Any:
    """The first document as ``sigs.k8s.io/yaml`` hands it to encoding/json (None for an empty one)."""
    loader = _Loader(text)
    try:
        node = loader.get_node() if loader.check_node() else None
    except pyyaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise YamlSyntaxError(f"yaml: {where}{exc.problem or exc.context or 'not valid YAML'}") from exc
    except pyyaml.YAMLError as exc:
        raise YamlSyntaxError(f"yaml: {str(exc).splitlines()[0]}") from exc
    finally:
        loader.dispose()
    if node is None:
        return None
    return _Converter(max_nodes).value(node, 0)


class _Converter:
    def __init__(self, max_nodes: int) -> None:
        self.left = max_nodes

    def _charge(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise YamlSyntaxError("yaml: document contains excessive aliasing")

    def value(self, node: Any, depth: int) -> Any:
        self._charge()
        if depth > MAX_DEPTH:
            raise YamlSyntaxError(f"yaml: nested more than {MAX_DEPTH} levels deep (gpulab's limit; a config needs 6)")
        if isinstance(node, pyyaml.ScalarNode):
            return scalar(node)
        if isinstance(node, pyyaml.SequenceNode):
            return [self.value(item, depth + 1) for item in node.value]
        out: dict[str, Any] = {}
        merged: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if isinstance(key_node, pyyaml.ScalarNode) and key_node.tag == "tag:yaml.org,2002:merge":
                sources = value_node.value if isinstance(value_node, pyyaml.SequenceNode) else [value_node]
                for source in sources:
                    got = self.value(source, depth + 1)
                    if not isinstance(got, dict):
                        raise YamlSyntaxError("yaml: map merge requires map or sequence of maps as the value")
                    for k, v in got.items():
                        merged.setdefault(k, v)
                continue
            key = self.value(key_node, depth + 1)
            out[json_key(key)] = self.value(value_node, depth + 1)
        for k, v in merged.items():
            out.setdefault(k, v)
        return dict(sorted(out.items()))  # encoding/json writes a Go map's keys sorted


def scalar(node: Any) -> Any:
    if not node.style and node.tag in _IMPLICIT:  # plain: '' from the C parser, None from the pure one
        return resolve_plain(node.value)
    return node.value


_IMPLICIT = frozenset({"tag:yaml.org,2002:" + t for t in ("str", "int", "float", "bool", "null", "timestamp", "value",
                                                             "merge")})


def json_key(key: Any) -> str:
    """``convertToJSONableObject``: map keys of other types become strings."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key)
    if isinstance(key, float):
        return format_float32_g(key)
    raise YamlSyntaxError(f"unsupported map key of type: {go_yaml_type(key)}, key: {key!r}")


def go_yaml_type(value: Any) -> str:
    return {type(None): "<nil>", list: "[]interface {}", dict: "map[interface {}]interface {}"}.get(type(value), "string")


# go-yaml v2's resolve table (YAML 1.1 booleans).
_BOOLS = {
    **{w: True for w in ("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON")},
    **{w: False for w in ("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF")},
}
_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
_INT_RE = re.compile(r"[-+]?(?:0b[01]+|0o[0-7]+|0x[0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")
_FLOAT_RE = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_SPECIAL_FLOATS = {
    **{w: math.inf for w in (".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF")},
    **{w: -math.inf for w in ("-.inf", "-.Inf", "-.INF")},
    **{w: math.nan for w in (".nan", ".NaN", ".NAN")},
}
_INT64 = (-(2**63), 2**64 - 1)  # ParseInt, then ParseUint


def resolve_plain(text: str) -> object:
    """Resolve a plain (unquoted, untagged) scalar as go-yaml v2 does."""
    if text in _NULLS:
        return None
    if text in _BOOLS:
        return _BOOLS[text]
    if len(text) > 256 or not text or text[0] not in "+-.0123456789":
        return text
    plain = text.replace("_", "")
    if _INT_RE.fullmatch(plain) and len(plain) <= 70:
        value = _parse_int(plain)
        if value is not None and _INT64[0] <= value <= _INT64[1]:
            return value
    if text in _SPECIAL_FLOATS:
        return _SPECIAL_FLOATS[text]
    if _FLOAT_RE.fullmatch(plain):
        return float(plain)
    return text


def _parse_int(plain: str) -> int | None:
    sign = -1 if plain.startswith("-") else 1
    body = plain.lstrip("+-")
    try:
        if body.startswith(("0b", "0o", "0x")):
            return sign * int(body, 0)
        if len(body) > 1 and body.startswith("0"):
            return sign * int(body, 8)
        return sign * int(body)
    except ValueError:
        return None


def format_float32_g(value: float) -> str:
    """``strconv.FormatFloat(v, 'g', -1, 32)``: shortest float32 digits, %e when the exponent is < -4 or >= 6."""
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    f32 = struct.unpack("f", struct.pack("f", value))[0]
    if f32 == 0:
        return "0"
    for digits in range(1, 10):
        text = f"{f32:.{digits - 1}e}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == f32:
            break
    mantissa, exp_text = text.split("e")
    exp = int(exp_text)
    if exp < -4 or exp >= 6:
        return f"{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    return format(Decimal(mantissa).scaleb(exp).normalize(), "f")


def go_json_number(value: int | float) -> str:
    """How encoding/json writes a number: integral floats without a decimal point, 'e' only outside 1e-6..1e21."""
    if isinstance(value, int):
        return str(value)
    if value == 0:
        return "0" if math.copysign(1, value) > 0 else "-0"
    if abs(value) < 1e-6 or abs(value) >= 1e21:
        mantissa, exp = repr(value).replace("E", "e").split("e") if "e" in repr(value) else (repr(value), "0")
        e = int(exp)
        return f"{mantissa.rstrip('0').rstrip('.') if '.' in mantissa else mantissa}e{'-' if e < 0 else '+'}{abs(e)}"
    return format(Decimal(repr(value)).normalize(), "f")


def go_type(value: Any) -> str:
    """How encoding/json names a JSON value's kind in ``cannot unmarshal X into ...`` errors."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"
