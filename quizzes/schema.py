"""Strict decoding of a ``gpulab.dev/v1`` QuizBank document into ``quizzes.model`` values.

Unknown fields are rejected, defaults are applied here and nowhere else, and every problem is collected with
its path (and YAML line where known) so an author sees them all at once. Rules that look across items
(duplicates, outcomes, counts per phase) live in ``quizzes.validate``; this module only checks shapes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from cluster import strict
from quizzes import model

_TOP = {"apiVersion", "kind", "metadata", "spec"}
_METADATA = {"name", "title", "version"}
_SPEC = {"seed", "policy", "outcomes", "items"}
_POLICY = {"maxAttempts", "counts", "revealAnswer"}
_OUTCOME = {"id", "text"}
_ITEM = {
    "id", "section", "outcome", "type", "prompt", "phases", "options", "answer", "tolerance", "unit",
    "explanation", "distractors", "shuffleOptions", "sources",
}  # fmt: skip
_OPTION = {"id", "text", "manifest", "correct", "explanation"}
_DISTRACTOR = {"value", "explanation"}
_SOURCE = re.compile("|".join(f"(?:{form})" for form in model.SOURCE_FORMS))


def read_text(text: str) -> object:
    """A bank's YAML as round-trip data (lines kept), through the one guarded reader: an alias bomb or deep nesting
    is a ``YAMLError`` at once (``cluster.strict.read_yaml``)."""
    return strict.load_yaml(text)


class Reader(strict.Problems):
    """Collects problems as ``path: message (line N)`` (``cluster.strict``, the one strict-spec reader) while
    reading loosely typed YAML data."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped_items = 0  # items too broken to decode (their absence must not look like a count problem)

    @property
    def problems(self) -> list[str]:
        return self.items

    def problem(self, path: str, message: str, node: object = None, key: object = None) -> None:
        self.add(path, message, node, key)

    def mapping(self, node: object, path: str, allowed: set[str]) -> Mapping[str, Any] | None:
        if not isinstance(node, Mapping):
            self.problem(path, f"must be a mapping, got {_type_name(node)}", node)
            return None
        self.unknown(path, node, allowed)
        return node

    def sequence(self, node: Mapping[str, Any], key: str, path: str) -> Sequence[Any]:
        value = node.get(key)
        if value is None:
            self.problem(path, f"missing required field '{key}'", node)
            return []
        if not isinstance(value, list) or not value:
            self.problem(f"{path}.{key}", "must be a non-empty list", node, key)
            return []
        return value

    def text(self, node: Mapping[str, Any], key: str, path: str, *, required: bool = True) -> str:
        value = node.get(key)
        if value is None:
            if required:
                self.problem(path, f"missing required field '{key}'", node)
            return ""
        if not isinstance(value, str) or not value.strip():
            self.problem(f"{path}.{key}", "must be a non-empty string", node, key)
            return ""
        return value.strip()

    def number(self, node: Mapping[str, Any], key: str, path: str, *, required: bool) -> float | None:
        value = node.get(key)
        if value is None:
            if required:
                self.problem(path, f"missing required field '{key}'", node)
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.problem(f"{path}.{key}", f"must be a number, got {_type_name(value)}", node, key)
            return None
        return float(value)

    def flag(self, node: Mapping[str, Any], key: str, path: str, default: bool) -> bool:
        value = node.get(key, default)
        if not isinstance(value, bool):
            self.problem(f"{path}.{key}", f"must be true or false, got {_type_name(value)}", node, key)
            return default
        return value


def decode(doc: object, source: str, reader: Reader) -> model.Bank | None:
    """Decode one bank document; problems go to ``reader``; returns None when the shape is unusable."""
    top = reader.mapping(doc, "<document>", _TOP)
    if top is None:
        return None
    if not _check_header(top, reader):
        return None
    meta = _required_mapping(top, "metadata", _METADATA, reader)
    spec = _required_mapping(top, "spec", _SPEC, reader)
    if meta is None or spec is None:
        return None
    section = reader.text(meta, "name", "metadata")
    version = reader.number(meta, "version", "metadata", required=False)
    if version is not None and (version < 1 or version != int(version)):
        reader.problem("metadata.version", "must be a whole number >= 1", meta, "version")
    return model.Bank(
        section=section,
        title=reader.text(meta, "title", "metadata"),
        version=int(version) if version and version >= 1 else 1,
        seed=reader.text(spec, "seed", "spec", required=False) or section,
        policies=_policies(spec, reader),
        outcomes=tuple(_outcome(o, f"spec.outcomes[{i}]", reader) for i, o in
                       enumerate(reader.sequence(spec, "outcomes", "spec"))),
        items=_items(spec, reader),
        source=source,
    )  # fmt: skip


def _required_mapping(top: Mapping[str, Any], key: str, allowed: set[str], reader: Reader) -> Mapping[str, Any] | None:
    if key not in top:
        reader.problem("<document>", f"missing required field '{key}'", top)
        return None
    return reader.mapping(top[key], key, allowed)


def _check_header(top: Mapping[str, Any], reader: Reader) -> bool:
    api = top.get("apiVersion")
    kind = top.get("kind")
    ok = True
    if api != model.API_VERSION:
        ok = False
        if api is None:
            reader.problem("apiVersion", f"missing; expected '{model.API_VERSION}'", top)
        elif isinstance(api, str) and api.startswith("gpulab.dev/"):
            reader.problem("apiVersion", f"'{api}' is not supported by this gpulab (it reads "
                           f"'{model.API_VERSION}'); upgrade gpulab or rewrite the bank", top, "apiVersion")
        else:
            reader.problem("apiVersion", f"'{api}' is not a gpulab quiz bank; expected '{model.API_VERSION}'",
                           top, "apiVersion")  # fmt: skip
    if kind != model.BANK_KIND:
        ok = False
        reader.problem("kind", f"must be '{model.BANK_KIND}', got {kind!r}", top, "kind")
    return ok


def _policies(spec: Mapping[str, Any], reader: Reader) -> dict[str, model.Policy]:
    raw = spec.get("policy")
    if raw is None:
        return {}
    node = reader.mapping(raw, "spec.policy", set(model.PHASES))
    if node is None:
        return {}
    return {phase: _policy(node[phase], f"spec.policy.{phase}", reader) for phase in model.PHASES if phase in node}


def _policy(raw: object, path: str, reader: Reader) -> model.Policy:
    node = reader.mapping(raw, path, _POLICY)
    if node is None:
        return model.Policy()
    attempts = reader.number(node, "maxAttempts", path, required=False)
    if attempts is not None and (attempts < 1 or attempts != int(attempts)):
        reader.problem(f"{path}.maxAttempts", "must be a whole number >= 1", node, "maxAttempts")
        attempts = None
    counts_raw = node.get("counts", model.Counts.FIRST.value)
    try:
        counts = model.Counts(counts_raw)
    except ValueError:
        reader.problem(f"{path}.counts", f"must be one of first, last, best; got {counts_raw!r}", node, "counts")
        counts = model.Counts.FIRST
    return model.Policy(
        max_attempts=int(attempts) if attempts else 1,
        counts=counts,
        reveal_answer=reader.flag(node, "revealAnswer", path, True),
    )


def _outcome(raw: object, path: str, reader: Reader) -> model.Outcome:
    node = reader.mapping(raw, path, _OUTCOME) or {}
    return model.Outcome(id=reader.text(node, "id", path), text=reader.text(node, "text", path))


def _item(raw: object, path: str, reader: Reader) -> model.Item | None:
    node = reader.mapping(raw, path, _ITEM)
    if node is None:
        return None
    type_raw = node.get("type")
    try:
        item_type = model.ItemType(type_raw)
    except ValueError:
        reader.problem(f"{path}.type", "must be one of single, multiple, numeric, manifest; "
                       f"got {type_raw!r}", node, "type")  # fmt: skip
        return None
    options = _options(node, path, item_type, reader)
    tolerance = reader.number(node, "tolerance", path, required=False)
    if tolerance is not None and tolerance < 0:
        reader.problem(f"{path}.tolerance", "must be >= 0", node, "tolerance")
    return model.Item(
        id=reader.text(node, "id", path),
        section=reader.text(node, "section", path),
        outcome=reader.text(node, "outcome", path),
        type=item_type,
        prompt=reader.text(node, "prompt", path),
        phases=_phases(node, path, reader),
        options=options,
        answer=reader.number(node, "answer", path, required=item_type is model.ItemType.NUMERIC),
        tolerance=tolerance if tolerance is not None and tolerance >= 0 else 0.0,
        unit=reader.text(node, "unit", path, required=False),
        explanation=reader.text(node, "explanation", path, required=item_type is model.ItemType.NUMERIC),
        distractors=_distractors(node, path, item_type, reader),
        shuffle_options=reader.flag(node, "shuffleOptions", path, True),
        sources=_sources(node, path, reader),
        line=_line_of(node, None) or 0,
    )


def _items(spec: Mapping[str, Any], reader: Reader) -> tuple[model.Item, ...]:
    items = []
    for index, node in enumerate(reader.sequence(spec, "items", "spec")):
        item = _item(node, f"spec.items[{index}]", reader)
        if item is None:
            reader.dropped_items += 1
        else:
            items.append(item)
    return tuple(items)


def _phases(node: Mapping[str, Any], path: str, reader: Reader) -> tuple[str, ...]:
    raw = node.get("phases", list(model.PHASES))
    if not isinstance(raw, list) or not raw or any(p not in model.PHASES for p in raw):
        reader.problem(f"{path}.phases", f"must be a non-empty list of {', '.join(model.PHASES)}; got {raw!r}",
                       node, "phases")  # fmt: skip
        return model.PHASES
    return tuple(p for p in model.PHASES if p in raw)


def _options(node: Mapping[str, Any], path: str, item_type: model.ItemType, reader: Reader) -> tuple[model.Option, ...]:
    if not item_type.has_options:
        for key in ("options",):
            if key in node:
                reader.problem(f"{path}.{key}", "numeric items have no options", node, key)
        return ()
    body = "manifest" if item_type is model.ItemType.MANIFEST else "text"
    other = "text" if body == "manifest" else "manifest"
    result = []
    for i, raw in enumerate(reader.sequence(node, "options", path)):
        opath = f"{path}.options[{i}]"
        onode = reader.mapping(raw, opath, _OPTION)
        if onode is None:
            continue
        if other in onode:
            reader.problem(f"{opath}.{other}", f"{item_type.value} items use '{body}' for options", onode, other)
        correct = onode.get("correct", False)
        if not isinstance(correct, bool):
            reader.problem(f"{opath}.correct", f"must be true or false, got {_type_name(correct)}", onode, "correct")
            correct = False
        text = reader.text(onode, body, opath)
        result.append(model.Option(
            id=reader.text(onode, "id", opath),
            explanation=reader.text(onode, "explanation", opath),
            correct=correct,
            text=text if body == "text" else "",
            manifest=text if body == "manifest" else "",
        ))  # fmt: skip
    return tuple(result)


def _sources(node: Mapping[str, Any], path: str, reader: Reader) -> tuple[str, ...]:
    """The item's upstream sources; optional here (the bank check's item-source rule asks for one)."""
    if "sources" not in node:
        return ()
    result = []
    listed = reader.sequence(node, "sources", path)
    for i, raw in enumerate(listed):
        if not isinstance(raw, str) or not _SOURCE.fullmatch(raw.strip()):
            reader.problem(f"{path}.sources[{i}]", f"{raw!r} is not a source: write OWNER/REPO@TAG:PATH (a file of "
                           "a repository at a tag) or the https:// address of a documentation page", listed, i)  # fmt: skip
            continue
        result.append(raw.strip())
    return tuple(result)


def _distractors(
    node: Mapping[str, Any], path: str, item_type: model.ItemType, reader: Reader
) -> tuple[model.Distractor, ...]:
    if "distractors" not in node:
        return ()
    if item_type is not model.ItemType.NUMERIC:
        reader.problem(f"{path}.distractors", "only numeric items have distractors", node, "distractors")
        return ()
    result = []
    for i, raw in enumerate(reader.sequence(node, "distractors", path)):
        dpath = f"{path}.distractors[{i}]"
        dnode = reader.mapping(raw, dpath, _DISTRACTOR) or {}
        value = reader.number(dnode, "value", dpath, required=True)
        explanation = reader.text(dnode, "explanation", dpath)
        if value is not None:
            result.append(model.Distractor(value=value, explanation=explanation))
    return tuple(result)


_line_of = strict.line_of
_type_name = strict.type_name
