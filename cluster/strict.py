"""The one strict-spec reader's problem list: every problem with its path, its YAML line and a did-you-mean.

Fleets (``cluster.fleet``), labs (``labs.loader``) and quiz banks (``quizzes.schema``) collect their problems
here, so an author sees the same ``spec.pools[0].gpus: unknown field (did you mean 'gpu'?) (line 9)`` shape
everywhere and all problems at once. Lines come from a round-trip (ruamel) document: either the node a problem
is about, or the problem's path looked up in the document the reader was given. This module imports nothing
else of the project (quiz banks, which stand alone, use it too).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ruamel.yaml import YAML

__all__ = ["Problems", "closest", "line_of", "load_yaml", "type_name"]

_ROOTS = ("(top)", "(root)", "<document>")
_INDEX = re.compile(r"\[([0-9]+)\]")


def load_yaml(text: str) -> Any:
    """A YAML document as round-trip data: plain ``dict``/``list`` subclasses that remember their lines."""
    return YAML(typ="rt", pure=True).load(text)


def closest(name: str, allowed: Iterable[str]) -> str | None:
    """The allowed name a misspelt one most likely meant, or None."""
    match = difflib.get_close_matches(name, sorted(allowed), n=1, cutoff=0.75)
    return match[0] if match else None


def line_of(node: object, key: object = None) -> int | None:
    """1-based YAML line of ``node`` (or of ``key`` inside it, a mapping key or a list index) when known."""
    lc = getattr(node, "lc", None)
    if lc is None:
        return None
    try:
        if key is not None:
            return int((lc.item(key) if isinstance(key, int) else lc.key(key))[0]) + 1
        return int(lc.line) + 1
    except (KeyError, TypeError, AttributeError, IndexError):
        return None


def type_name(value: object) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    return f"{type(value).__name__} {value!r}"


class Problems:
    """Every problem found while reading a spec, each as ``path: message (line N)``, reported all at once.

    ``document``: the round-trip document being read (``load_yaml``), used to find the line of a path when a
    problem names no node; or ``lines``, a function that reads it, called only when a problem needs a line
    (a valid spec then costs one plain parse, not a round-trip one). Without either (a spec built in Python)
    problems carry no line."""

    def __init__(self, document: object = None, *, lines: Callable[[], object] | None = None) -> None:
        self.items: list[str] = []
        self._document = document
        self._lines = lines

    def add(self, path: str, message: str, node: object = None, key: object = None) -> None:
        line = (line_of(node, key) if node is not None else None) or self._line_of_path(path)
        self.items.append(f"{path}: {message} (line {line})" if line else f"{path}: {message}")

    def unknown(self, path: str, data: Mapping[str, Any], allowed: Iterable[str]) -> None:
        """A problem for each key of ``data`` not in ``allowed``, with the closest allowed name when there is one."""
        names = sorted(allowed)
        for key in data:
            if key in names:
                continue
            hint = closest(str(key), names)
            said = f"did you mean '{hint}'?" if hint else f"allowed: {', '.join(names)}"
            self.add(f"{path}.{key}", f"unknown field ({said})", data, key)

    def __bool__(self) -> bool:
        return bool(self.items)

    def _line_of_path(self, path: str) -> int | None:
        """The line of ``spec.pools[0].cpu`` in the document: the deepest part of the path that exists."""
        if self._document is None and self._lines is not None:
            self._document, self._lines = self._lines(), None
        node, best = self._document, None
        rest = path
        for root in _ROOTS:
            rest = rest.removeprefix(root)
        rest = _INDEX.sub(r".[\1]", rest).strip(".")
        parts = [p for p in rest.split(".") if p] if rest else []
        i = 0
        while i < len(parts) and node is not None:
            part = parts[i]
            if part.startswith("[") and isinstance(node, list):
                index = int(part[1:-1])
                if index >= len(node):
                    break
                best, node, i = line_of(node, index) or best, node[index], i + 1
                continue
            if not isinstance(node, Mapping):
                break
            # A key may hold dots (``nvidia.com/gpu``): take the longest run of parts that names one.
            for j in range(len(parts), i, -1):
                key = ".".join(parts[i:j])
                if key in node:
                    best, node, i = line_of(node, key) or best, node[key], j
                    break
            else:
                break
        return best
