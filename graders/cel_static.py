"""Static checks of DRA CEL selectors that the CEL compiler cannot make.

The Kubernetes compiler types ``device.attributes[...]`` as "any", so ``.index`` on a driver that no longer
publishes it, or a version attribute compared with the string ``'8.0'``, compile fine and then fail (or
never match) at allocation time. This module tokenises an expression and checks every
``device.attributes['<domain>'].<name>`` and ``device.capacity['<domain>'].<name>`` against what the
driver publishes (``cluster.gpu.dra_attributes``), how each is compared, and the literals passed to
``quantity()`` and ``semver()``. It is not a CEL parser; it never raises on odd input.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from cluster.gpu import dra_attributes
from cluster import quantity

_TOKEN = re.compile(
    r"""(?P<ws>\s+|//[^\n]*)
      |(?P<str>[rRbB]{0,2}(?:'''(?:.|\n)*?'''|\"\"\"(?:.|\n)*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"))
      |(?P<num>0x[0-9a-fA-F]+u?|[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?u?)
      |(?P<id>[A-Za-z_][A-Za-z0-9_]*)
      |(?P<op>==|!=|<=|>=|&&|\|\||[<>!+\-*/%?:.,\[\](){}])
      |(?P<bad>.)""",
    re.VERBOSE,
)
_COMPARE = frozenset({"==", "!=", "<", "<=", ">", ">="})
_METHODS = frozenset({"compareTo", "isGreaterThan", "isLessThan"})
_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
)
MAX_CHARS = 10 * 1024


@dataclass(frozen=True)
class Token:
    kind: str  # str | num | id | op | bad
    text: str

    @property
    def value(self) -> str:
        """The content of a string literal (escapes other than quotes left as written)."""
        body = self.text.lstrip("rRbB")
        quote = 3 if body[:3] in ("'''", '"""') else 1
        return body[quote:-quote].replace("\\'", "'").replace('\\"', '"')


@dataclass(frozen=True)
class Issue:
    key: str  # message key, "dra-cel/<variant>"
    fields: dict[str, object] = field(default_factory=dict)


def tokenize(expression: str) -> list[Token]:
    return [Token(m.lastgroup or "bad", m.group()) for m in _TOKEN.finditer(expression) if m.lastgroup != "ws"]


@dataclass(frozen=True)
class _Access:
    what: str  # "attributes" | "capacity"
    domain: str
    name: str
    start: int
    end: int  # index after the access


def _accesses(tokens: list[Token]) -> Iterator[_Access]:
    for i in range(len(tokens) - 5):
        t = tokens[i : i + 6]
        if not (t[0].text == "device" and t[1].text == "." and t[2].text in ("attributes", "capacity")
                and t[3].text == "[" and t[4].kind == "str" and t[5].text == "]"):
            continue
        rest = tokens[i + 6 : i + 9]
        if len(rest) >= 2 and rest[0].text == "." and rest[1].kind == "id":
            yield _Access(t[2].text, t[4].value, rest[1].text, i, i + 8)
        elif len(rest) >= 3 and rest[0].text == "[" and rest[1].kind == "str" and rest[2].text == "]":
            yield _Access(t[2].text, t[4].value, rest[1].value, i, i + 9)


def analyse(expression: str) -> list[Issue]:
    """Every problem found in ``expression``; an empty list when nothing is wrong (or nothing is known)."""
    if len(expression) > MAX_CHARS:
        return []  # the compiler (or the length check) reports it
    tokens = tokenize(expression)
    issues: list[Issue] = []
    for access in _accesses(tokens):
        issues.extend(_check_access(access, tokens))
    issues.extend(_literal_calls(tokens))
    issues.extend(_driver_comparisons(tokens))
    return issues


def _check_access(access: _Access, tokens: list[Token]) -> Iterator[Issue]:
    schema = dra_attributes.DRIVERS.get(access.domain)
    ref = f"device.{access.what}['{access.domain}'].{access.name}"
    if access.domain == dra_attributes.STANDARD_DOMAIN and access.what == "attributes":
        if access.name not in dra_attributes.STANDARD_ATTRIBUTES:
            yield Issue("dra-cel/unknown-attribute", _names(ref, access.name, access.domain,
                                                            list(dra_attributes.STANDARD_ATTRIBUTES)))
        return
    if schema is None:
        close = difflib.get_close_matches(access.domain, list(dra_attributes.DRIVERS), n=1, cutoff=0.3)
        yield Issue("dra-cel/unknown-domain", {"ref": ref, "domain": access.domain,
                                               "suggestion": close[0] if close else "gpu.nvidia.com"})
        return
    if access.what == "attributes":
        yield from _check_attribute(access, schema, ref, tokens)
    else:
        yield from _check_capacity(access, schema, ref, tokens)


def _check_attribute(
    access: _Access, schema: dra_attributes.DriverSchema, ref: str, tokens: list[Token]
) -> Iterator[Issue]:
    name = access.name
    if name in schema.removed:
        yield Issue("dra-cel/removed-attribute", {"ref": ref, "name": name, "domain": schema.driver,
                                                  "since": schema.removed[name]})
        return
    if name not in schema.attributes:
        key = "dra-cel/capacity-as-attribute" if schema.has_capacity(name) else "dra-cel/unknown-attribute"
        yield Issue(key, _names(ref, name, schema.driver, list(schema.attributes)))
        return
    kind = schema.attributes[name]
    literal = _compared_literal(tokens, access)
    if kind == dra_attributes.VERSION:
        if literal is not None or _method_arg_is_not(tokens, access.end, "semver"):
            yield Issue("dra-cel/version-vs-string", {"ref": ref, "name": name})
    elif name == "type" and schema.type_values and literal is not None and literal.kind == "str":
        if literal.value not in schema.type_values:
            yield Issue("dra-cel/unknown-type-value", {"ref": ref, "value": literal.value,
                                                       "values": ", ".join(sorted(schema.type_values))})


def _check_capacity(
    access: _Access, schema: dra_attributes.DriverSchema, ref: str, tokens: list[Token]
) -> Iterator[Issue]:
    if not schema.has_capacity(access.name):
        key = "dra-cel/attribute-as-capacity" if access.name in schema.attributes else "dra-cel/unknown-capacity"
        yield Issue(key, _names(ref, access.name, schema.driver, sorted(schema.capacities)))
        return
    literal = _compared_literal(tokens, access)
    if literal is not None or _method_arg_is_not(tokens, access.end, "quantity"):
        yield Issue("dra-cel/capacity-vs-literal", {"ref": ref, "name": access.name})


def _names(ref: str, name: str, domain: str, known: list[str]) -> dict[str, object]:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    return {"ref": ref, "name": name, "domain": domain, "known": ", ".join(sorted(known)),
            "suggestion": close[0] if close else ""}


def _compared_literal(tokens: list[Token], access: _Access) -> Token | None:
    """A string or number literal compared directly with the access, on either side."""
    after = tokens[access.end : access.end + 2]
    if len(after) == 2 and after[0].text in _COMPARE and after[1].kind in ("str", "num"):
        return after[1]
    before = tokens[max(0, access.start - 2) : access.start]
    if len(before) == 2 and before[1].text in _COMPARE and before[0].kind in ("str", "num"):
        return before[0]
    return None


def _method_arg_is_not(tokens: list[Token], end: int, constructor: str) -> bool:
    """``.compareTo(x)`` style call right after the access whose argument is not ``constructor(...)``."""
    call = tokens[end : end + 4]
    if len(call) < 4 or call[0].text != "." or call[1].text not in _METHODS or call[2].text != "(":
        return False
    return call[3].text != constructor


def _literal_calls(tokens: list[Token]) -> Iterator[Issue]:
    for i in range(len(tokens) - 3):
        name, paren, arg, close = tokens[i : i + 4]
        if paren.text != "(" or arg.kind != "str" or (i > 0 and tokens[i - 1].text == "."):
            continue
        if name.text == "quantity":
            try:
                quantity.parse_text(arg.value)
            except quantity.QuantityError as exc:
                yield Issue("dra-cel/bad-quantity", {"literal": arg.value, "error": str(exc)})
        elif name.text == "semver" and close.text == ")" and not _SEMVER.fullmatch(arg.value):
            yield Issue("dra-cel/bad-semver", {"literal": arg.value})


def _driver_comparisons(tokens: list[Token]) -> Iterator[Issue]:
    known = sorted(dra_attributes.DRIVERS)
    for i in range(len(tokens) - 4):
        t = tokens[i : i + 5]
        if t[0].text == "device" and t[1].text == "." and t[2].text == "driver" and t[3].text in ("==", "!=") \
                and t[4].kind == "str" and t[4].value not in dra_attributes.DRIVERS:
            close = difflib.get_close_matches(t[4].value, known, n=1, cutoff=0.3)
            yield Issue("dra-cel/unknown-driver", {"driver": t[4].value, "suggestion": close[0] if close else known[0]})
