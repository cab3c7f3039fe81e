"""Load YAML the way NVIDIA's Go tools see it: one document, plain data, errors as one line of text."""

from __future__ import annotations

from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError


class YamlSyntaxError(ValueError):
    """The text is not YAML; the message is one line, with the line number when the parser knows it."""


def load(text: str) -> Any:
    yaml = YAML(typ="safe", pure=True)
    try:
        return yaml.load(text)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise YamlSyntaxError(f"yaml: {where}{problem}") from exc


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
