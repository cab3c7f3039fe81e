"""Static checks of DRA CEL selectors that the CEL compiler cannot make.

The Kubernetes compiler types ``device.attributes[...]`` as "any", so ``.index`` on a driver that no longer
publishes it, or a version attribute compared with the string ``'8.0'``, compile fine and then fail (or
never match) at allocation time. This module reads the expression's syntax tree, as cel-go's own parser builds
it (``cluster.gpu.cel.parse``, the ``celcheck`` helper), and checks every ``device.attributes['<domain>'].<name>``
and ``device.capacity['<domain>'].<name>`` against what the driver publishes (``cluster.gpu.dra_attributes``),
how each is compared, and the literals passed to ``quantity()`` and ``semver()``. It never raises: an expression
that does not parse, or a machine without celcheck, gives no issues (the compiler step reports those).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from cluster import errors, quantity, strict
from cluster.gpu import cel, dra_attributes

log = logging.getLogger(__name__)

_COMPARE = frozenset({"_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_"})
_METHODS = frozenset({"compareTo", "isGreaterThan", "isLessThan"})
_NUMBERS = frozenset({"int", "uint", "double"})
_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
)
MAX_CHARS = 10 * 1024
Node = Mapping[str, Any]


@dataclass(frozen=True)
class Issue:
    key: str  # message key, "dra-cel/<variant>"
    fields: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class _Access:
    what: str  # "attributes" | "capacity"
    domain: str
    name: str
    node: Node  # the access itself
    parent: Node | None  # the node it is an argument, operand or target of


def analyse(expression: str) -> list[Issue]:
    """Every problem found in ``expression``; an empty list when nothing is wrong (or nothing is known)."""
    if len(expression) > MAX_CHARS:
        return []  # the compiler (or the length check) reports it
    try:
        tree = cel.parse([expression])[0].tree
    except (errors.BinariesUnavailable, errors.CommandFailed) as exc:
        log.debug("CEL not parsed: %s", exc)
        return []
    if tree is None:
        return []  # does not parse: the compiler's error says why
    nodes = list(_walk(tree))
    issues: list[Issue] = []
    for node, parent in nodes:
        access = _access(node, parent)
        if access is not None:
            issues.extend(_check_access(access))
    issues.extend(_literal_calls(node for node, _ in nodes))
    issues.extend(_driver_comparisons(node for node, _ in nodes))
    return issues


def _children(node: Node) -> list[Node]:
    """A node's sub-expressions, left to right (receiver before arguments), as celcheck's tree lists them."""
    out: list[Any] = []
    if "operand" in node:
        out.append(node["operand"])
    if "target" in node:
        out.append(node["target"])
    out.extend(node.get("args", ()))
    out.extend(node.get("list", ()))
    for entry in node.get("map", ()):
        out += [entry.get("key"), entry.get("value")]
    out.extend(f.get("value") for f in node.get("fields", ()))
    comp = node.get("comprehension")
    if isinstance(comp, Mapping):
        out += [comp.get(k) for k in ("range", "init", "condition", "step", "result")]
    return [c for c in out if isinstance(c, Mapping)]


def _walk(tree: Node) -> Iterator[tuple[Node, Node | None]]:
    """Every node with its parent, in source order (pre-order); iterative, so depth costs no stack."""
    stack: list[tuple[Node, Node | None]] = [(tree, None)]
    while stack:
        node, parent = stack.pop()
        yield node, parent
        stack.extend((child, node) for child in reversed(_children(node)))


def _string(node: Any) -> str | None:
    return str(node["value"]) if isinstance(node, Mapping) and node.get("lit") == "string" else None


def _is_device_field(node: Any, name: str) -> bool:
    return (isinstance(node, Mapping) and node.get("select") == name and not node.get("test")
            and node.get("operand") == {"ident": "device"})


def _index(node: Any) -> tuple[Any, str] | None:
    """``x['key']`` as (x, key)."""
    if isinstance(node, Mapping) and node.get("call") == "_[_]" and "target" not in node:
        args = node.get("args", ())
        if len(args) == 2 and _string(args[1]) is not None:
            return args[0], str(_string(args[1]))
    return None


def _access(node: Node, parent: Node | None) -> _Access | None:
    """``device.<what>['<domain>'].<name>`` or ``device.<what>['<domain>']['<name>']`` (has() included)."""
    if "select" in node:
        inner, name = node.get("operand"), str(node["select"])
    else:
        pair = _index(node)
        if pair is None:
            return None
        inner, name = pair
    outer = _index(inner)
    if outer is None:
        return None
    for what in ("attributes", "capacity"):
        if _is_device_field(outer[0], what):
            return _Access(what, outer[1], name, node, parent)
    return None


def _check_access(access: _Access) -> Iterator[Issue]:
    schema = dra_attributes.DRIVERS.get(access.domain)
    ref = f"device.{access.what}['{access.domain}'].{access.name}"
    if access.domain == dra_attributes.STANDARD_DOMAIN and access.what == "attributes":
        if access.name not in dra_attributes.STANDARD_ATTRIBUTES:
            yield Issue("dra-cel/unknown-attribute", _names(ref, access.name, access.domain,
                                                            list(dra_attributes.STANDARD_ATTRIBUTES)))
        return
    if schema is None:
        close = strict.closest(access.domain, dra_attributes.DRIVERS, cutoff=0.3)
        yield Issue("dra-cel/unknown-domain", {"ref": ref, "domain": access.domain,
                                               "suggestion": close or "gpu.nvidia.com"})
        return
    if access.what == "attributes":
        yield from _check_attribute(access, schema, ref)
    else:
        yield from _check_capacity(access, schema, ref)


def _check_attribute(access: _Access, schema: dra_attributes.DriverSchema, ref: str) -> Iterator[Issue]:
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
    literal = _compared_literal(access)
    if kind == dra_attributes.VERSION:
        if literal is not None or _method_arg_is_not(access, "semver"):
            yield Issue("dra-cel/version-vs-string", {"ref": ref, "name": name})
    elif name == "type" and schema.type_values and literal is not None and literal.get("lit") == "string":
        if literal["value"] not in schema.type_values:
            yield Issue("dra-cel/unknown-type-value", {"ref": ref, "value": literal["value"],
                                                       "values": ", ".join(sorted(schema.type_values))})


def _check_capacity(access: _Access, schema: dra_attributes.DriverSchema, ref: str) -> Iterator[Issue]:
    if not schema.has_capacity(access.name):
        key = "dra-cel/attribute-as-capacity" if access.name in schema.attributes else "dra-cel/unknown-capacity"
        yield Issue(key, _names(ref, access.name, schema.driver, sorted(schema.capacities)))
        return
    literal = _compared_literal(access)
    if literal is not None or _method_arg_is_not(access, "quantity"):
        yield Issue("dra-cel/capacity-vs-literal", {"ref": ref, "name": access.name})


def _names(ref: str, name: str, domain: str, known: list[str]) -> dict[str, object]:
    close = strict.closest(name, known, cutoff=0.5)
    return {"ref": ref, "name": name, "domain": domain, "known": ", ".join(sorted(known)),
            "suggestion": close or ""}


def _compared_literal(access: _Access) -> Node | None:
    """A string or number literal compared directly with the access, on either side."""
    parent = access.parent
    if parent is None or parent.get("call") not in _COMPARE or "target" in parent:
        return None
    args = list(parent.get("args", ()))
    if len(args) != 2 or not any(a is access.node for a in args):
        return None
    other = args[1] if args[0] is access.node else args[0]
    if isinstance(other, Mapping) and (other.get("lit") == "string" or other.get("lit") in _NUMBERS):
        return other
    return None


def _method_arg_is_not(access: _Access, constructor: str) -> bool:
    """``.compareTo(x)`` style call on the access whose argument is not ``constructor(...)``."""
    call = access.parent
    if call is None or call.get("call") not in _METHODS or call.get("target") is not access.node:
        return False
    args = call.get("args", ())
    return not (args and isinstance(args[0], Mapping) and args[0].get("call") == constructor
                and "target" not in args[0])


def _literal_calls(nodes: Iterator[Node]) -> Iterator[Issue]:
    for node in nodes:
        name, args = node.get("call"), node.get("args", ())
        if name not in ("quantity", "semver") or "target" in node or not args:
            continue
        literal = _string(args[0])
        if literal is None:
            continue
        if name == "quantity":
            try:
                quantity.parse_text(literal)
            except quantity.QuantityError as exc:
                yield Issue("dra-cel/bad-quantity", {"literal": literal, "error": str(exc)})
        elif len(args) == 1 and not _SEMVER.fullmatch(literal):
            yield Issue("dra-cel/bad-semver", {"literal": literal})


def _driver_comparisons(nodes: Iterator[Node]) -> Iterator[Issue]:
    known = sorted(dra_attributes.DRIVERS)
    for node in nodes:
        args = node.get("args", ())
        if node.get("call") not in ("_==_", "_!=_") or len(args) != 2:
            continue
        for this, other in ((args[0], args[1]), (args[1], args[0])):
            driver = _string(other)
            if _is_device_field(this, "driver") and driver is not None and driver not in dra_attributes.DRIVERS:
                close = strict.closest(driver, known, cutoff=0.3)
                yield Issue("dra-cel/unknown-driver", {"driver": driver, "suggestion": close or known[0]})
