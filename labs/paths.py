"""A tiny path language for lab checks, and the expectations tested on what a path finds.

``spec.containers[*].resources.limits[nvidia.com/gpu]`` walks plain data (Kubernetes objects, answer files):
a dotted name steps into a mapping; ``[N]`` picks a list item; ``[*]`` fans out over every item of a list or
value of a mapping; ``[k=v]`` keeps the list items whose field ``k`` equals ``v``; any other ``[text]`` is a
mapping key (keys with dots or slashes need brackets); ``|yaml`` and ``|json`` parse a string in place (the
device-plugin config inside a ConfigMap). A path yields every value it reaches, possibly none.

This module must not know about labs, clusters or files: it is pure and fast, because offline grading runs
it thousands of times.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import re2

from cluster import quantity
from graders import source

_NAME = re.compile(r"[A-Za-z0-9_\-/]+")
OPS = ("equals", "notEquals", "in", "notIn", "contains", "exists", "matches", "atLeast", "atMost")
_EMBEDDED_LIMITS = source.Limits(max_bytes=256 * 1024, max_depth=32, max_nodes=10_000, max_documents=4)


class PathError(ValueError):
    """A path that cannot be parsed (a lab-spec problem, reported by the loader)."""


@dataclass(frozen=True)
class Step:
    kind: str  # key | index | all | filter | parse
    key: str = ""
    index: int = 0
    value: str = ""


@dataclass(frozen=True)
class Path:
    text: str
    steps: tuple[Step, ...]

    def __str__(self) -> str:
        return self.text


def parse(text: str) -> Path:
    """Parse a path; raises ``PathError`` saying where it is malformed."""
    if not isinstance(text, str) or not text.strip():
        raise PathError("a path must be a non-empty string")
    steps: list[Step] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == ".":
            if i == 0 or i + 1 >= len(text) or text[i + 1] in ".[|":
                raise PathError(f"{text!r}: a '.' must be followed by a name (at {i})")
            i += 1
            continue
        if ch == "[":
            end = text.find("]", i)
            if end < 0 or end == i + 1:
                raise PathError(f"{text!r}: unclosed or empty '[' at {i}")
            steps.append(_bracket(text[i + 1:end]))
            i = end + 1
            continue
        if ch == "|":
            m = _NAME.match(text, i + 1)
            if not m or m.group(0) not in ("yaml", "json"):
                raise PathError(f"{text!r}: '|' must be followed by yaml or json (at {i})")
            steps.append(Step("parse", key=m.group(0)))
            i = m.end()
            continue
        m = _NAME.match(text, i)
        if not m:
            raise PathError(f"{text!r}: unexpected {ch!r} at {i}")
        steps.append(Step("key", key=m.group(0)))
        i = m.end()
    return Path(text, tuple(steps))


def _bracket(inner: str) -> Step:
    if inner == "*":
        return Step("all")
    if re.fullmatch(r"-?[0-9]+", inner):
        return Step("index", index=int(inner))
    if "=" in inner and not inner.startswith("="):
        key, value = inner.split("=", 1)
        return Step("filter", key=key, value=value)
    return Step("key", key=inner)


def walk(path: Path, data: object) -> list[object]:
    """Every value ``path`` reaches in ``data`` (in document order)."""
    current: list[object] = [data]
    for step in path.steps:
        current = [out for value in current for out in _step(step, value)]
    return current


def _step(step: Step, value: object) -> Iterator[object]:
    if step.kind == "key" and isinstance(value, dict) and step.key in value:
        yield value[step.key]
    elif step.kind == "index" and isinstance(value, list) and -len(value) <= step.index < len(value):
        yield value[step.index]
    elif step.kind == "all" and isinstance(value, list):
        yield from value
    elif step.kind == "all" and isinstance(value, dict):
        yield from value.values()
    elif step.kind == "filter" and isinstance(value, list):
        yield from (item for item in value if isinstance(item, dict) and scalar(item.get(step.key)) == step.value)
    elif step.kind == "parse" and isinstance(value, str):
        parsed = _parse_embedded(value, step.key)
        if parsed is not None:
            yield parsed


def _parse_embedded(text: str, how: str) -> object | None:
    if how == "json":
        try:
            return json.loads(text) if len(text) <= _EMBEDDED_LIMITS.max_bytes else None
        except ValueError:
            return None
    parsed = source.parse_text(text, "<embedded>", _EMBEDDED_LIMITS)
    if parsed.findings and any(f.severity.value == "error" for f in parsed.findings):
        return None
    return parsed.documents[0].data if parsed.documents else None


def scalar(value: object) -> str | None:
    """The text form a scalar is compared by (YAML ``true`` and ``"true"`` compare equal); None otherwise."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float, str)):
        return str(value)
    return None


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(quantity.parse_text(value.strip()).value)
        except ValueError:
            return None
    return None


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


@dataclass(frozen=True)
class Expect:
    """One expectation: ``op`` applied to what ``path`` finds. ``every`` demands it of every value found."""

    path: Path
    op: str
    value: object = None
    every: bool = False

    def test(self, data: object) -> tuple[bool, str]:
        """(passed, what ``path`` holds in words: "not set" or the values) for ``data``."""
        found = walk(self.path, data)
        if self.op == "exists":
            want = bool(self.value)
            ok = bool(found) == want and (not want or any(v is not None for v in found))
            return ok, _shown(found)
        if not found:
            return self.op in ("notEquals", "notIn"), "not set"
        results = [self._one(v) for v in found]
        ok = all(results) if self.every else any(results)
        return ok, _shown(found)

    def _one(self, actual: object) -> bool:
        text = scalar(actual)
        if self.op in ("equals", "notEquals"):
            same = _equal(actual, self.value)
            return same if self.op == "equals" else not same
        if self.op in ("in", "notIn"):
            choices = self.value if isinstance(self.value, list) else [self.value]
            inside = any(_equal(actual, c) for c in choices)
            return inside if self.op == "in" else not inside
        if self.op == "contains":
            if isinstance(actual, list):
                return any(_equal(item, self.value) for item in actual)
            return text is not None and _norm(str(self.value)) in _norm(text)
        if self.op == "matches":
            return text is not None and _pattern(str(self.value)).search(text) is not None
        number, bound = _number(actual), _number(self.value)
        if number is None or bound is None:
            return False
        return number >= bound if self.op == "atLeast" else number <= bound

    def describe(self) -> str:
        """The expectation in words, for messages."""
        words = {"equals": "equal", "notEquals": "differ from", "in": "be one of", "notIn": "not be one of",
                 "contains": "contain", "matches": "match", "atLeast": "be at least", "atMost": "be at most"}
        if self.op == "exists":
            return f"{self.path} should {'be set' if self.value else 'not be set'}"
        return f"{self.path} should {words[self.op]} {_show(self.value)}"


def _equal(actual: object, expected: object) -> bool:
    a, e = scalar(actual), scalar(expected)
    if a is not None and e is not None:
        if a == e:
            return True
        na, ne = _number(actual), _number(expected)
        return na is not None and ne is not None and na == ne
    return actual == expected


def _show(value: object) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    text = scalar(value)
    return repr(text) if text is not None else json.dumps(value, sort_keys=True)[:80]


def _shown(found: Sequence[object]) -> str:
    if not found:
        return "not set"
    values = [_show(v) for v in found[:4]]
    more = f" (+{len(found) - 4} more)" if len(found) > 4 else ""
    return f"{', '.join(values)}{more}"


@functools.lru_cache(maxsize=256)
def _pattern(value: str) -> Any:
    """A lab's ``matches`` pattern, compiled by RE2: it runs over the learner's text in time linear in that
    text (Python's ``re`` backtracks, so a long learner text could make one check take minutes)."""
    return re2.compile(value)
