"""The one strict-spec reader's problem list: every problem with its path, its YAML line and a did-you-mean.

Fleets (``cluster.fleet``), labs (``labs.loader``) and quiz banks (``quizzes.schema``) collect their problems
here, so an author sees the same ``spec.pools[0].gpus: unknown field (did you mean 'gpu'?) (line 9)`` shape
everywhere and all problems at once. Lines come from a round-trip (ruamel) document: either the node a problem
is about, or the problem's path looked up in the document the reader was given. This module imports nothing
else of the project (quiz banks, which stand alone, use it too).

``read_yaml`` is the one guarded reader for YAML a user hands us through ruamel (fleets, quiz banks, labs,
kubeconfigs, the GPU tools' configs): the document is composed into ruamel's node tree, where an alias is the
node it names, not a copy, so composing costs what the text costs; the tree is then measured (nesting, and the
values and text it would be once every alias and merge key ``<<`` is followed) before anything is built from
it. A "billion laughs" file is refused in milliseconds with ``YamlRefused`` instead of filling the memory while
ruamel merges or a validator prints what it was given.
"""

from __future__ import annotations

import difflib
import re
import reprlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import ruamel.yaml.composer
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

__all__ = ["Limits", "Problems", "YamlRefused", "closest", "line_of", "load_yaml", "read_yaml", "shown", "type_name"]

_ROOTS = ("(top)", "(root)", "<document>")
_INDEX = re.compile(r"\[([0-9]+)\]")


@dataclass(frozen=True)
class Limits:
    """What one YAML document may cost once its aliases are followed. Real specs are far below every one."""

    max_depth: int = 100
    max_values: int = 200_000  # scalars, lists and mappings, each alias counted as what it repeats
    max_text: int = 8 * 1024 * 1024  # characters of scalars, each alias counted as what it repeats


LIMITS = Limits()
_MAX_DEPTH: tuple[type[YAMLError], ...] = tuple(
    e for e in [getattr(ruamel.yaml.composer, "MaxDepthExceededError", None)] if isinstance(e, type))


class YamlRefused(YAMLError):
    """YAML that ``read_yaml`` does not build: nested too deeply, too large once its aliases are followed, or an
    alias inside the node it names. A ``YAMLError``, so a reader's ``except YAMLError`` reports it too."""


def read_yaml(text: str, *, round_trip: bool = False, limits: Limits = LIMITS) -> Any:
    """One YAML document as data (ruamel's YAML 1.2 ``safe`` reader; ``round_trip``: dict/list subclasses that
    remember their lines), measured before it is built; raises ``YamlRefused`` or another ``YAMLError``."""
    yaml = YAML(typ="rt" if round_trip else "safe", pure=True)
    # A recent ruamel stops composing past max_depth: its scanner's cost grows with the square of the depth (100,000
    # open brackets took 9 s to reach the recursion limit, 0.7 s to reach this one), so stopping early keeps it quick.
    yaml.max_depth = limits.max_depth
    try:
        node = yaml.compose(text)
    except _MAX_DEPTH as exc:
        raise YamlRefused(f"{_line(exc)}nested more than {limits.max_depth} levels deep") from exc
    except RecursionError as exc:  # an older ruamel: composing recursively, a few hundred levels end its stack
        raise YamlRefused(f"nested more than {limits.max_depth} levels deep") from exc
    if node is None:
        return None
    _measure(node, limits)
    return yaml.constructor.construct_document(node)


def _line(exc: YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    return f"line {mark.line + 1}: " if mark is not None else ""


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]  # a merge key's value is the aliased node itself
    return list(node.value) if isinstance(node, SequenceNode) else []


def _measure(root: Node, limits: Limits) -> None:
    """Depth, values and text of the tree with every alias followed, counted once per node (the tree shares an
    aliased node, so the counts grow as the expansion would while the walk stays as small as the text)."""
    cost: dict[int, tuple[int, int, int]] = {}  # id(node) -> (values, characters, depth) of its expansion
    open_nodes: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            parts = [cost[id(c)] for c in _children(node)]
            values = 1 + sum(p[0] for p in parts)
            chars = (len(node.value) if isinstance(node, ScalarNode) else 0) + sum(p[1] for p in parts)
            depth = 1 + max((p[2] for p in parts), default=0)
            where = f"line {node.start_mark.line + 1}: "
            if depth > limits.max_depth:
                raise YamlRefused(f"{where}nested more than {limits.max_depth} levels deep")
            if values > limits.max_values or chars > limits.max_text:
                what = (f"{limits.max_values:,} values" if values > limits.max_values
                        else f"{limits.max_text // (1024 * 1024)} MiB of text")
                raise YamlRefused(f"{where}this value expands to more than {what} once its aliases (*name) and merge "
                                  "keys (<<) are followed: an alias bomb (\"billion laughs\")")
            open_nodes.discard(key)
            cost[key] = (values, chars, depth)
        elif key in open_nodes:
            raise YamlRefused(f"line {node.start_mark.line + 1}: an alias inside the node it names (a value that "
                              "holds itself) cannot be read")
        elif key not in cost:
            open_nodes.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in _children(node))


def load_yaml(text: str) -> Any:
    """A YAML document as round-trip data: plain ``dict``/``list`` subclasses that remember their lines."""
    return read_yaml(text, round_trip=True)


class _Shown(reprlib.Repr):
    """``reprlib`` that also cuts the round-trip reader's dict, list and str subclasses short."""

    def repr1(self, x: Any, level: int) -> str:
        if isinstance(x, dict) and type(x) is not dict:
            return self.repr_dict(x, level)
        if isinstance(x, list) and type(x) is not list:
            return self.repr_list(x, level)
        if isinstance(x, str) and type(x) is not str:
            return self.repr_str(str(x), level)
        return super().repr1(x, level)


_SHOWN = _Shown()
_SHOWN.maxstring, _SHOWN.maxother, _SHOWN.maxlevel, _SHOWN.maxlist, _SHOWN.maxdict = 80, 80, 2, 4, 4


def shown(value: object) -> str:
    """``repr`` of a value from a spec, cut short: a problem quotes what it found without printing megabytes."""
    return _SHOWN.repr(value)


def closest(name: str, allowed: Iterable[str], cutoff: float = 0.75) -> str | None:
    """The allowed name a misspelt one most likely meant (difflib's ratio at least ``cutoff``), or None.

    The one "did you mean" of the project: spec readers keep the default, rules that always want a suggestion
    lower ``cutoff``."""
    match = difflib.get_close_matches(name, sorted(allowed), n=1, cutoff=cutoff)
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
