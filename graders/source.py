"""Reading learner YAML safely, keeping the line and column of every value.

Input is hostile until proven otherwise: files are size-capped before they are read, binary data and bad
encodings are refused, and the YAML event stream is composed here (not by a YAML library's constructor) so
that nothing is ever instantiated from a tag, nesting depth is capped, and aliases are charged their full
expanded size against a node budget (a "billion laughs" file stops after a few thousand nodes, in
milliseconds). Scalars resolve the way Kubernetes' YAML reader (go-yaml v2 via sigs.k8s.io/yaml) resolves
them, so ``on`` is a bool and ``0.5`` a number, as kubectl would send them.

Every problem becomes a ``Finding``; this module never raises on bad input. It knows nothing about
Kubernetes kinds; ``graders.manifests`` and the rules do.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import yaml

from cluster.gpu import goyaml as _goyaml
from graders import findings, messages

log = logging.getLogger(__name__)

PathPart = Union[str, int]
YPath = tuple[PathPart, ...]

_Parser: Any = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader


@dataclass(frozen=True)
class Mark:
    """A 1-based position in a file."""

    line: int
    column: int


@dataclass(frozen=True)
class Origin:
    """Where a text begins inside its file: lets YAML embedded in a ConfigMap report outer-file lines.

    ``exact`` is false when the embedding cannot be mapped line by line (folded or quoted strings); every
    position then collapses onto the start of the embedded value.
    """

    line: int = 1
    column: int = 1
    exact: bool = True

    def place(self, line0: int, column0: int) -> Mark:
        if not self.exact:
            return Mark(self.line, self.column)
        # A literal block strips the same indentation from every line, so columns shift uniformly.
        return Mark(self.line + line0, self.column + column0)


@dataclass(frozen=True)
class Limits:
    """What one file may cost us. Real manifests are far below every one of these."""

    max_bytes: int = 1024 * 1024
    max_depth: int = 64
    max_nodes: int = 50_000  # after alias expansion
    max_expanded_bytes: int = 4 * 1024 * 1024  # text after alias expansion: an alias costs what it repeats
    max_documents: int = 500  # empty documents count too


DEFAULT_LIMITS = Limits()


@dataclass(frozen=True)
class Document:
    """One YAML document as plain data (dict/list/str/int/float/bool/None) plus where each part was written."""

    file: str
    index: int
    data: object
    marks: Mapping[YPath, Mark]
    blocks: Mapping[YPath, Origin] = field(default_factory=dict)
    start: Mark = Mark(1, 1)
    embedded_in: str = ""

    def locate(self, path: YPath) -> Mark:
        """The position of ``path``, or of its nearest ancestor that was written down."""
        for end in range(len(path), -1, -1):
            mark = self.marks.get(path[:end])
            if mark is not None:
                return mark
        return self.start

    def get(self, path: YPath) -> object:
        """The value at ``path``, or None where the path does not exist or crosses a non-container."""
        node: object = self.data
        for part in path:
            if isinstance(part, int) and isinstance(node, list) and 0 <= part < len(node):
                node = node[part]
            elif isinstance(part, str) and isinstance(node, dict):
                node = node.get(part)
            else:
                return None
        return node


@dataclass(frozen=True)
class SourceFile:
    file: str
    documents: tuple[Document, ...]
    findings: tuple[findings.Finding, ...]
    nodes: int = 0  # what reading it cost, aliases expanded (budgets shared with embedded texts use these)
    expanded_bytes: int = 0


class _Stop(Exception):
    """Composition must end early; carries the finding that says why."""

    def __init__(self, finding: findings.Finding) -> None:
        super().__init__(finding.message)
        self.finding = finding


def make_finding(key: str, file: str, mark: Mark, /, **fields: object) -> findings.Finding:
    said = messages.say(key, **fields)
    return findings.Finding(
        rule=said.rule, severity=said.severity, message=said.message, hint=said.hint,
        file=file, line=mark.line, column=mark.column, section=said.section,
    )


def read_file(path: Path, file: str | None = None, limits: Limits = DEFAULT_LIMITS) -> SourceFile:
    """Read and parse one file; ``file`` is the name findings carry (defaults to ``str(path)``)."""
    name = file if file is not None else str(path)
    try:
        size = path.stat().st_size
        if size > limits.max_bytes:
            return _refused(name, "input-limits/too-large", size=_human(size), limit=_human(limits.max_bytes))
        with path.open("rb") as fh:
            data = fh.read(limits.max_bytes + 1)
    except OSError as exc:
        return _refused(name, "input-encoding/unreadable", problem=exc.strerror or str(exc))
    return parse_bytes(data, name, limits)


def parse_bytes(data: bytes, file: str, limits: Limits = DEFAULT_LIMITS) -> SourceFile:
    if len(data) > limits.max_bytes:
        return _refused(file, "input-limits/too-large", size=_human(len(data)), limit=_human(limits.max_bytes))
    text, problem = _decode(data)
    if problem is not None:
        return SourceFile(file, (), (problem_finding(file, problem),))
    assert text is not None
    return parse_text(text, file, limits)


def problem_finding(file: str, problem: tuple[str, Mark, dict[str, object]]) -> findings.Finding:
    key, mark, fields = problem
    return make_finding(key, file, mark, **fields)


def _decode(data: bytes) -> tuple[str | None, tuple[str, Mark, dict[str, object]] | None]:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16"), None
        except UnicodeDecodeError:
            return None, ("input-encoding/not-utf8", Mark(1, 1), {})
    nul = data.find(b"\x00")
    if nul >= 0:
        return None, ("input-encoding/binary", _byte_mark(data, nul), {})
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError as exc:
        return None, ("input-encoding/not-utf8", _byte_mark(data, exc.start), {})


def _byte_mark(data: bytes, offset: int) -> Mark:
    line_start = data.rfind(b"\n", 0, offset) + 1
    return Mark(data.count(b"\n", 0, offset) + 1, offset - line_start + 1)


def _refused(file: str, key: str, **fields: object) -> SourceFile:
    return SourceFile(file, (), (make_finding(key, file, Mark(0, 0), **fields),))


def _human(size: int) -> str:
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):.1f} MiB"
    return f"{size / 1024:.0f} KiB" if size >= 1024 else f"{size} bytes"


def parse_text(
    text: str, file: str, limits: Limits = DEFAULT_LIMITS, origin: Origin = Origin(), embedded_in: str = ""
) -> SourceFile:
    """Parse every document of ``text``; problems come back as findings next to what could be read."""
    if len(text) > limits.max_bytes:
        return _refused(file, "input-limits/too-large", size=_human(len(text)), limit=_human(limits.max_bytes))
    composer = _Composer(text, file, limits, origin, embedded_in)
    try:
        composer.run()
    except _Stop as stop:
        composer.problems.append(stop.finding)
    except yaml.MarkedYAMLError as exc:
        composer.problems.append(composer.syntax_finding(exc))
    except yaml.YAMLError as exc:  # ReaderError and friends: bad characters
        composer.problems.append(composer.reader_finding(exc))
    except (RecursionError, MemoryError, ValueError, TypeError) as exc:  # never a traceback for the learner
        log.debug("YAML parser failed on %s", file, exc_info=True)
        composer.problems.append(make_finding("yaml-syntax/invalid", file, origin.place(0, 0), problem=str(exc)))
    return SourceFile(file, tuple(composer.documents), tuple(composer.problems), composer.nodes,
                      composer.expanded_bytes)


class _Frame:
    __slots__ = ("value", "path", "key", "key_mark", "discard", "size", "anchor", "merges", "explicit", "is_key", "mark",
                 "bytes")

    def __init__(self, value: dict[str, object] | list[object], path: YPath, anchor: str | None, is_key: bool, mark: Mark) -> None:
        self.value = value
        self.path = path
        self.key: str | None = None  # pending mapping key, waiting for its value
        self.key_mark = mark
        self.discard = False  # the pending key was unusable: drop its value
        self.size = 1
        self.anchor = anchor
        self.merges: list[tuple[object, Mark]] = []
        self.explicit: dict[str, Mark] = {}
        self.is_key = is_key
        self.mark = mark
        self.bytes = 0  # text it holds, aliases expanded


class _Composer:
    """Turns parser events into plain data, marks and findings, within ``Limits``."""

    def __init__(self, text: str, file: str, limits: Limits, origin: Origin, embedded_in: str) -> None:
        self.text = text
        self.file = file
        self.limits = limits
        self.origin = origin
        self.embedded_in = embedded_in
        self.documents: list[Document] = []
        self.problems: list[findings.Finding] = []
        self.nodes = 0
        self.expanded_bytes = 0
        self.seen_documents = 0
        self._lines: list[str] | None = None
        self._reset_document()

    def _reset_document(self) -> None:
        self.stack: list[_Frame] = []
        self.anchors: dict[str, tuple[object, int]] = {}
        self.anchor_bytes: dict[str, int] = {}
        self.marks: dict[YPath, Mark] = {}
        self.blocks: dict[YPath, Origin] = {}
        self.root: object = None
        self.doc_start = self.origin.place(0, 0)

    def mark(self, event: Any) -> Mark:
        m = event.start_mark
        return self.origin.place(m.line, m.column)

    def run(self) -> None:
        loader = _Parser(self.text)
        try:
            while True:
                event = loader.get_event()
                if event is None or isinstance(event, yaml.StreamEndEvent):
                    break
                self._on_event(event)
        finally:
            loader.dispose()
        if not self.documents and not self.problems:
            self.problems.append(make_finding("yaml-syntax/empty", self.file, self.origin.place(0, 0)))

    def _on_event(self, event: Any) -> None:
        if isinstance(event, yaml.DocumentStartEvent):
            self.seen_documents += 1
            if self.seen_documents > self.limits.max_documents:
                raise _Stop(make_finding("input-limits/documents", self.file, self.mark(event), limit=self.limits.max_documents))
            self._reset_document()
            self.doc_start = self.mark(event)
        elif isinstance(event, yaml.DocumentEndEvent):
            self._end_document()
        elif isinstance(event, yaml.ScalarEvent):
            self._on_scalar(event)
        elif isinstance(event, yaml.AliasEvent):
            self._on_alias(event)
        elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            self._on_start(event)
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            self._on_end()

    def _end_document(self) -> None:
        if self.root is None:
            return
        self.documents.append(
            Document(self.file, len(self.documents), self.root, self.marks, self.blocks, self.doc_start, self.embedded_in)
        )

    # -- where the next value goes -------------------------------------------------------------------

    def _slot(self, mark: Mark) -> tuple[YPath | None, bool]:
        """The path of the value about to be composed, and whether it is a mapping key."""
        if not self.stack:
            return (), False
        top = self.stack[-1]
        if isinstance(top.value, list):
            return top.path + (len(top.value),), False
        if top.discard:
            return None, False
        if top.key is None:
            return None, True
        return top.path + (top.key,), False

    def _charge(self, size: int, mark: Mark) -> None:
        self.nodes += size
        if self.nodes > self.limits.max_nodes:
            raise _Stop(make_finding("input-limits/nodes", self.file, mark, limit=self.limits.max_nodes))

    def _charge_bytes(self, size: int, mark: Mark) -> None:
        """Text is charged each time it is used: 2,000 aliases of a 100 KB string cost 200 MB to render, and
        stop here at once instead."""
        self.expanded_bytes += size
        if self.stack:
            self.stack[-1].bytes += size
        if self.expanded_bytes > self.limits.max_expanded_bytes:
            raise _Stop(make_finding("input-limits/expanded-size", self.file, mark,
                                     limit=_human(self.limits.max_expanded_bytes)))

    def _place(self, value: object, size: int, mark: Mark, anchor: str | None) -> None:
        """Attach a finished value to its parent (or make it the document root)."""
        if anchor:
            self.anchors[anchor] = (value, size)
        if not self.stack:
            self.root = value
            return
        top = self.stack[-1]
        top.size += size
        if isinstance(top.value, list):
            top.value.append(value)
            return
        if top.discard:
            top.discard = False
            return
        key = top.key
        assert key is not None
        top.key = None
        if key == "<<" and not top.is_key:
            top.merges.append((value, top.key_mark))
            return
        if key in top.explicit:
            self.problems.append(
                make_finding("yaml-duplicate-key/duplicate", self.file, top.key_mark, key=key, first=top.explicit[key].line)
            )
        top.explicit[key] = top.key_mark
        top.value[key] = value

    def _take_key(self, key: str, mark: Mark) -> None:
        top = self.stack[-1]
        top.key = key
        top.key_mark = mark
        self.marks[top.path + (key,)] = mark

    # -- events -------------------------------------------------------------------------------------

    def _on_scalar(self, event: Any) -> None:
        mark = self.mark(event)
        self._charge(1, mark)
        self._charge_bytes(len(event.value), mark)
        if event.anchor:
            self.anchor_bytes[event.anchor] = len(event.value)
        path, is_key = self._slot(mark)
        if is_key:
            self._check_tag(event, mark)
            key = _key_text(event)
            if event.anchor:
                self.anchors[event.anchor] = (key, 1)
            self._take_key(key, mark)
            return
        value = self._resolve(event, mark)
        if path is not None:
            self.marks.setdefault(path, mark)
            if isinstance(value, str) and "\n" in value:
                self.blocks[path] = self._block_origin(event)
        self._place(value, 1, mark, event.anchor)

    def _on_alias(self, event: Any) -> None:
        mark = self.mark(event)
        found = self.anchors.get(event.anchor)
        if found is None:
            raise _Stop(make_finding("yaml-syntax/undefined-alias", self.file, mark, anchor=event.anchor))
        value, size = found
        self._charge(size, mark)
        self._charge_bytes(self.anchor_bytes.get(event.anchor, 0), mark)
        path, is_key = self._slot(mark)
        if is_key:
            if isinstance(value, (dict, list)):
                self.problems.append(make_finding("yaml-syntax/complex-key", self.file, mark))
                self.stack[-1].discard = True
            else:
                self._take_key(str(value), mark)
            return
        if path is not None:
            self.marks.setdefault(path, mark)
        # Shared, never copied: the node budget already paid for every expansion.
        self._place(value, size, mark, None)

    def _on_start(self, event: Any) -> None:
        mark = self.mark(event)
        self._charge(1, mark)
        if len(self.stack) >= self.limits.max_depth:
            raise _Stop(make_finding("input-limits/depth", self.file, mark, limit=self.limits.max_depth))
        self._check_tag(event, mark)
        path, is_key = self._slot(mark)
        container: dict[str, object] | list[object] = {} if isinstance(event, yaml.MappingStartEvent) else []
        if path is not None:
            self.marks.setdefault(path, mark)
        self.stack.append(_Frame(container, path if path is not None else (), event.anchor, is_key, mark))

    def _on_end(self) -> None:
        frame = self.stack.pop()
        if self.stack:
            self.stack[-1].bytes += frame.bytes  # a container's text counts in its parent's
        if frame.anchor:
            self.anchor_bytes[frame.anchor] = frame.bytes
        if isinstance(frame.value, dict) and frame.merges:
            self._apply_merges(frame)
        if frame.is_key:
            self.problems.append(make_finding("yaml-syntax/complex-key", self.file, frame.mark))
            self.stack[-1].discard = True
            if frame.anchor:
                self.anchors[frame.anchor] = (frame.value, frame.size)
            self.stack[-1].size += frame.size
            return
        self._place(frame.value, frame.size, frame.mark, frame.anchor)

    def _apply_merges(self, frame: _Frame) -> None:
        assert isinstance(frame.value, dict)
        for merged, mark in frame.merges:
            sources = merged if isinstance(merged, list) else [merged]
            for source in sources:
                if not isinstance(source, dict):
                    self.problems.append(make_finding("yaml-syntax/bad-merge", self.file, mark))
                    continue
                for key, value in source.items():
                    if key not in frame.explicit and key not in frame.value:
                        frame.value[key] = value
                        self.marks.setdefault(frame.path + (key,), mark)

    # -- scalars ------------------------------------------------------------------------------------

    def _check_tag(self, event: Any, mark: Mark) -> None:
        tag = event.tag
        if tag and tag not in _KNOWN_TAGS:
            self.problems.append(make_finding("yaml-tag/unsupported", self.file, mark, tag=tag))

    def _resolve(self, event: Any, mark: Mark) -> object:
        tag, text = event.tag, event.value
        if tag in (None, "!") and event.implicit[0] and not event.style:
            return resolve_plain(text)
        if tag in (None, "!", _STR, _BINARY, _TIMESTAMP):
            return text
        if tag in (_INT, _FLOAT, _BOOL, _NULL):
            value = resolve_plain(text)
            wanted = {_INT: int, _FLOAT: float, _BOOL: bool, _NULL: type(None)}[tag]
            if isinstance(value, wanted) and not (wanted is int and isinstance(value, bool)):
                return value
            if wanted is float and isinstance(value, int) and not isinstance(value, bool):
                return float(value)
            self.problems.append(make_finding("yaml-tag/mismatch", self.file, mark, tag=tag, value=_short(text)))
            return text
        self.problems.append(make_finding("yaml-tag/unsupported", self.file, mark, tag=tag))
        return text

    def _block_origin(self, event: Any) -> Origin:
        start = event.start_mark
        if event.style != "|":
            return Origin(*_as_pair(self.origin.place(start.line, start.column)), exact=False)
        lines = self._lines if self._lines is not None else self.text.split("\n")
        self._lines = lines
        indent = 0
        for raw in lines[start.line + 1 : start.line + 50]:
            if raw.strip():
                indent = len(raw) - len(raw.lstrip(" "))
                break
        first = self.origin.place(start.line + 1, indent)
        return Origin(first.line, first.column, exact=self.origin.exact)

    # -- errors from the parser ---------------------------------------------------------------------

    def syntax_finding(self, exc: yaml.MarkedYAMLError) -> findings.Finding:
        mark = exc.problem_mark or exc.context_mark
        where = self.origin.place(mark.line, mark.column) if mark is not None else self.origin.place(0, 0)
        problem = exc.problem or exc.context or "not valid YAML"
        if exc.context and exc.problem:
            problem = f"{exc.context}, {exc.problem}"
        return make_finding("yaml-syntax/invalid", self.file, where, problem=problem)

    def reader_finding(self, exc: yaml.YAMLError) -> findings.Finding:
        position = getattr(exc, "position", None)
        character = getattr(exc, "character", None)
        if isinstance(position, int):
            before = self.text[:position]
            line0 = before.count("\n")
            where = self.origin.place(line0, position - (before.rfind("\n") + 1))
        else:
            where = self.origin.place(0, 0)
        shown = f"U+{ord(character):04X}" if isinstance(character, str) and len(character) == 1 else repr(character)
        return make_finding("input-encoding/control-character", self.file, where, character=shown)


def _as_pair(mark: Mark) -> tuple[int, int]:
    return mark.line, mark.column


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_BINARY = "tag:yaml.org,2002:binary"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_KNOWN_TAGS = frozenset(
    {"!", _STR, _INT, _FLOAT, _BOOL, _NULL, _BINARY, _TIMESTAMP, "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"}
)

# Plain scalars resolve with go-yaml v2's table (YAML 1.1 booleans), which is what kubectl's YAML reader uses: one
# resolver, shared with the device-plugin config decoder.
resolve_plain = _goyaml.resolve_plain


def _key_text(event: Any) -> str:
    """A mapping key as sigs.k8s.io/yaml hands it to encoding/json: plain ``y``/``on`` are booleans and become
    ``"true"``, ``007`` becomes ``"7"`` (go-yaml v2 resolves keys like values)."""
    text = str(event.value)
    if event.style or not event.implicit[0] or event.tag not in (None, "!"):
        return text
    value = resolve_plain(text)
    if value is None or isinstance(value, str):
        return text
    try:
        return _goyaml.json_key(value)
    except ValueError:
        return text


def walk(data: object, path: YPath = ()) -> Iterator[tuple[YPath, object]]:
    """Every (path, value) pair under ``data``, depth first, without recursion."""
    pending: list[tuple[YPath, object]] = [(path, data)]
    while pending:
        here, node = pending.pop()
        yield here, node
        if isinstance(node, dict):
            pending.extend((here + (k,), v) for k, v in reversed(list(node.items())))
        elif isinstance(node, list):
            pending.extend((here + (i,), v) for i, v in reversed(list(enumerate(node))))
