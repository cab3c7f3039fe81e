"""Why a node cannot satisfy a pod's ResourceClaims: its published devices, which are free, which match.

Devices come from the ResourceSlices of each node; a device is taken when any claim's allocation names it.
Selectors (the DeviceClass's and the request's) are CEL. We cannot run CEL here, so ``match`` understands only
the common idioms joined by ``&&`` (driver and attribute equality, ``matches``, capacity ``compareTo`` /
``isGreaterThan`` with ``quantity()``, version comparisons with ``semver()``, ``has``/``in``); anything else
makes the verdict "unknown", and the reason is then marked uncertain rather than guessed. Explanation only:
the scheduler's allocator decides.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import Any

import re2

from cluster import quantity
from graders import live, nodefit, schedmsg
from graders.view import ClusterView, Obj, as_list, as_map, as_str, dig, name_of

STAGE = 8  # DynamicResources runs after the resource and topology filters
_STR = r"""(?:'([^'\\]*)'|"([^"\\]*)")"""
_ATTR = rf"device\.attributes\[{_STR}\]\.([A-Za-z_]\w*)"
_CAP = rf"device\.capacity\[{_STR}\]\.([A-Za-z_]\w*)"
_DRIVER = re.compile(rf"^device\.driver\s*(==|!=)\s*{_STR}$")
_ATTR_EQ = re.compile(rf"^{_ATTR}\s*(==|!=)\s*(?:{_STR}|(true|false)|(-?\d+))$")
_ATTR_MATCH = re.compile(rf"^{_ATTR}(\.lowerAscii\(\))?\.matches\({_STR}\)$")
_CAP_CMP = re.compile(rf"^{_CAP}\.compareTo\(quantity\({_STR}\)\)\s*(==|!=|>=|<=|>|<)\s*(-?\d+)$")
_CAP_METHOD = re.compile(rf"^{_CAP}\.(isGreaterThan|isLessThan)\(quantity\({_STR}\)\)$")
_VER_CMP = re.compile(rf"^{_ATTR}\.compareTo\(semver\({_STR}\)\)\s*(==|!=|>=|<=|>|<)\s*(-?\d+)$")
_VER_METHOD = re.compile(rf"^{_ATTR}\.(isGreaterThan|isLessThan)\(semver\({_STR}\)\)$")
_HAS = re.compile(rf"^has\({_ATTR}\)$|^{_STR}\s+in\s+device\.attributes\[{_STR}\]$")


@dataclass(frozen=True)
class Device:
    name: str
    driver: str
    pool: str
    attributes: dict[str, object] = field(default_factory=dict)  # "<domain>/<name>" -> value
    capacity: dict[str, Fraction] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.name)


def devices_of(slice_obj: Obj) -> list[Device]:
    driver = as_str(dig(slice_obj, "spec", "driver"))
    pool = as_str(dig(slice_obj, "spec", "pool", "name"))
    out = []
    for raw in (d for d in as_list(dig(slice_obj, "spec", "devices")) if isinstance(d, dict)):
        attrs: dict[str, object] = {}
        for key, value in as_map(dig(raw, "attributes")).items():
            typed = next(iter(as_map(value).values()), None)
            attrs[key if "/" in key else f"{driver}/{key}"] = typed
        caps: dict[str, Fraction] = {}
        for key, value in as_map(dig(raw, "capacity")).items():
            try:
                caps[key if "/" in key else f"{driver}/{key}"] = quantity.parse(dig(value, "value")).value
            except quantity.QuantityError:
                continue
        out.append(Device(as_str(dig(raw, "name")), driver, pool, attrs, caps))
    return out


def _lit(a: str | None, b: str | None) -> str:
    return a if a is not None else (b or "")


def _compare(left: object, op: str, right: object) -> bool:
    ops = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, ">=": lambda a, b: a >= b,
           "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, "<": lambda a, b: a < b}
    return bool(ops[op](left, right))


def _semver(text: object) -> tuple[int, ...] | None:
    m = re.match(r"^(\d+)\.(\d+)\.(\d+)", str(text))
    return tuple(int(x) for x in m.groups()) if m else None


def _sign(a: Fraction | tuple[int, ...], b: Fraction | tuple[int, ...]) -> int:
    return int(a > b) - int(a < b)  # type: ignore[operator]


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
_RE2_CACHE: dict[str, Any] = {}


def _re2(pattern: str) -> Any:
    """CEL's ``matches`` is RE2 (linear time, no backreferences): a learner's ``^(.|.|.)*!$`` cannot hang us the
    way Python's backtracking ``re`` does. None for a pattern RE2 refuses (CEL refuses it too)."""
    if pattern not in _RE2_CACHE:
        if len(_RE2_CACHE) > 1024:
            _RE2_CACHE.clear()
        try:
            _RE2_CACHE[pattern] = re2.compile(pattern, _RE2_OPTIONS)
        except re2.error:
            _RE2_CACHE[pattern] = None
    return _RE2_CACHE[pattern]


def _clause(clause: str, dev: Device) -> bool | None:
    text = clause.strip()
    while text.startswith("(") and text.endswith(")") and _balanced(text[1:-1]):
        text = text[1:-1].strip()
    if m := _DRIVER.match(text):
        return _compare(dev.driver, m.group(1), _lit(m.group(2), m.group(3)))
    if m := _ATTR_EQ.match(text):
        value = dev.attributes.get(f"{_lit(m.group(1), m.group(2))}/{m.group(3)}")
        want: object = _lit(m.group(5), m.group(6)) if m.group(5) is not None or m.group(6) is not None else \
            (m.group(7) == "true") if m.group(7) else int(m.group(8))
        return None if value is None else _compare(value, m.group(4), want)
    if m := _ATTR_MATCH.match(text):
        value = dev.attributes.get(f"{_lit(m.group(1), m.group(2))}/{m.group(3)}")
        if not isinstance(value, str):
            return None
        pattern = _re2(_lit(m.group(5), m.group(6)))
        return None if pattern is None else pattern.search(value.lower() if m.group(4) else value) is not None
    return _numeric_clause(text, dev)


def _numeric_clause(text: str, dev: Device) -> bool | None:
    if (m := _CAP_CMP.match(text)) or (m := _CAP_METHOD.match(text)):
        method = m.re is _CAP_METHOD
        have = dev.capacity.get(f"{_lit(m.group(1), m.group(2))}/{m.group(3)}")
        try:
            want = quantity.parse(_lit(m.group(5), m.group(6)) if method else _lit(m.group(4), m.group(5))).value
        except quantity.QuantityError:
            return None
        if have is None:
            return None
        if method:
            return have > want if m.group(4) == "isGreaterThan" else have < want
        return _compare(_sign(have, want), m.group(6), int(m.group(7)))
    if (m := _VER_CMP.match(text)) or (m := _VER_METHOD.match(text)):
        have_v = _semver(dev.attributes.get(f"{_lit(m.group(1), m.group(2))}/{m.group(3)}"))
        if m.re is _VER_METHOD:
            want_v = _semver(_lit(m.group(5), m.group(6)))
            if have_v is None or want_v is None:
                return None
            return have_v > want_v if m.group(4) == "isGreaterThan" else have_v < want_v
        want_v = _semver(_lit(m.group(4), m.group(5)))
        if have_v is None or want_v is None:
            return None
        return _compare(_sign(have_v, want_v), m.group(6), int(m.group(7)))
    if m := _HAS.match(text):
        if m.group(3):
            return f"{_lit(m.group(1), m.group(2))}/{m.group(3)}" in dev.attributes
        return f"{_lit(m.group(6), m.group(7))}/{_lit(m.group(4), m.group(5))}" in dev.attributes
    return None


def _balanced(text: str) -> bool:
    depth = 0
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if depth < 0:
            return False
    return depth == 0


def split_and(expression: str) -> list[str] | None:
    """Top-level ``&&`` clauses, or None when the expression uses ``||``/``!``/``?`` at the top level."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(expression):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif depth == 0 and expression.startswith("&&", i):
            parts.append(expression[start:i])
            start = i + 2
        elif depth == 0 and (expression.startswith("||", i) or ch == "?" or
                             (ch == "!" and not expression.startswith("!=", i))):
            return None
    parts.append(expression[start:])
    return [p for p in parts if p.strip()]


def match(expression: str, dev: Device) -> bool | None:
    """True/False when every clause is an idiom we understand, else None (unknown)."""
    clauses = split_and(expression) if len(expression) <= 10 * 1024 else None
    if not clauses:
        return None
    verdicts = [_clause(c, dev) for c in clauses]
    if any(v is False for v in verdicts):
        return False
    return None if any(v is None for v in verdicts) else True


# -- per-node verdicts for one pod ------------------------------------------------------------------------

@dataclass(frozen=True)
class Request:
    claim: str
    name: str
    device_class: str
    selectors: tuple[str, ...]  # the class's and the request's CEL expressions
    count: int  # devices needed (1 for allocationMode All: at least one)
    exact: bool  # False for firstAvailable (we look at its first choice only)


@dataclass
class DraState:
    """What the explainer needs to judge a pod's claims node by node."""

    pending: list[Request]  # requests of claims that are not allocated yet
    allocated: dict[str, str]  # claim -> node it was allocated on
    missing_classes: list[str]
    devices_by_node: dict[str, list[Device]]
    taken: set[tuple[str, str, str]]

    def reasons(self, node: Obj) -> list[nodefit.Reason]:
        name = name_of(node)
        out = [nodefit.Reason("dra-elsewhere", schedmsg.DRA_NOT_ON_NODE, STAGE,
                              MappingProxyType({"claim": claim, "node": where}))
               for claim, where in sorted(self.allocated.items()) if where and where != name]
        if not self.pending or self.missing_classes:
            return out
        devices = self.devices_by_node.get(name, [])
        if not devices:
            return out + [nodefit.Reason("dra-no-devices", schedmsg.DRA_CANNOT_ALLOCATE, STAGE)]
        free = [d for d in devices if d.key not in self.taken]
        for req in self.pending:
            verdicts = [match_all(req.selectors, d) for d in free]
            sure, maybe = verdicts.count(True), verdicts.count(None)
            facts = {"claim": req.claim, "request": req.name, "class": req.device_class, "need": str(req.count),
                     "free": str(len(free)), "total": str(len(devices)), "matching": str(sure),
                     "selectors": " && ".join(f"({s})" for s in req.selectors) or "(none)",
                     "offer": offer(free or devices)}
            if sure >= req.count:
                chosen = {d.key for d, v in zip(free, verdicts) if v is True}
                chosen = set(sorted(chosen)[: req.count])
                free = [d for d in free if d.key not in chosen]
                continue
            if sure + maybe >= req.count:
                out.append(nodefit.Reason("dra-unknown", schedmsg.DRA_CANNOT_ALLOCATE, STAGE,
                                          MappingProxyType(facts), certain=False))
            else:
                code = "dra-all-taken" if not free else "dra-no-match"
                out.append(nodefit.Reason(code, schedmsg.DRA_CANNOT_ALLOCATE, STAGE, MappingProxyType(facts)))
        return out


def match_all(selectors: Iterable[str], dev: Device) -> bool | None:
    verdicts = [match(s, dev) for s in selectors]
    if any(v is False for v in verdicts):
        return False
    return None if any(v is None for v in verdicts) else True


def offer(devices: list[Device]) -> str:
    """A short inventory: ``2 x NVIDIA A100-SXM4-80GB (80Gi)``."""
    counts: dict[str, int] = {}
    for d in devices:
        product = next((str(v) for k, v in d.attributes.items() if k.endswith("/productName")), d.name)
        profile = next((f" {v}" for k, v in d.attributes.items() if k.endswith("/profile")), "")
        memory = next((v for k, v in d.capacity.items() if k.endswith("/memory")), None)
        shown = f"{product}{profile}" + (f" ({quantity.canonical(quantity.Quantity(memory, 'BinarySI'))})" if memory else "")
        counts[shown] = counts.get(shown, 0) + 1
    return ", ".join(f"{n} x {what}" for what, n in sorted(counts.items())) or "no devices"


def prepare(view: ClusterView, pod: Obj) -> DraState | None:
    """The DRA picture for a pod with resource claims, or None when it has none."""
    entries = [e for e in as_list(dig(pod, "spec", "resourceClaims")) if isinstance(e, dict)]
    if not entries:
        return None
    ns = as_str(dig(pod, "metadata", "namespace"))
    names = live.claim_names_of_pod(pod)
    claims = {name_of(c): c for c in view.resource_claims(ns)}
    classes = {name_of(c): c for c in view.device_classes()}
    state = DraState([], {}, [], {}, set())
    for entry in entries:
        claim = claims.get(names.get(as_str(entry.get("name")), ""))
        if claim is None:
            continue
        alloc = live.allocation_of(claim)
        if alloc is not None:
            state.allocated[name_of(claim)] = alloc.node
            continue
        for req in _requests(claim, classes):
            if req.device_class in classes:
                state.pending.append(req)
            else:
                state.missing_classes.append(req.device_class)
    for slice_obj in view.resource_slices():
        node = as_str(dig(slice_obj, "spec", "nodeName"))
        if node:
            state.devices_by_node.setdefault(node, []).extend(devices_of(slice_obj))
    for other in view.resource_claims(None):
        alloc = live.allocation_of(other)
        state.taken.update(alloc.devices if alloc else ())
    return state


def _requests(claim: Obj, classes: dict[str, Obj]) -> list[Request]:
    out = []
    for raw in as_list(dig(claim, "spec", "devices", "requests")):
        first = as_list(dig(raw, "firstAvailable"))
        body = as_map(dig(raw, "exactly")) or (as_map(first[0]) if first else {})
        class_name = as_str(body.get("deviceClassName"))
        selectors = [as_str(dig(s, "cel", "expression")) for s in as_list(dig(classes.get(class_name), "spec", "selectors"))]
        selectors += [as_str(dig(s, "cel", "expression")) for s in as_list(body.get("selectors"))]
        raw_count = body.get("count")
        count = raw_count if isinstance(raw_count, int) and not isinstance(raw_count, bool) else 1
        out.append(Request(name_of(claim), as_str(dig(raw, "name")), class_name,
                           tuple(s for s in selectors if s), max(1, count), not first))
    return out
