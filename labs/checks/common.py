"""Small parsing helpers the check kinds share: typed fields with every problem recorded at its path."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from labs import paths
from labs.spec import Problems


def mapping(p: Problems, where: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        p.add(where, f"must be a mapping, got {type(value).__name__}")
        return {}
    return value


def text(p: Problems, where: str, value: Any, *, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value.strip():
        p.add(where, "must be a non-empty string")
        return ""
    return value


def strings(p: Problems, where: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        p.add(where, "must be a list of non-empty strings")
        return ()
    return tuple(value)


def path(p: Problems, where: str, value: Any) -> paths.Path | None:
    try:
        return paths.parse(value)
    except paths.PathError as exc:
        p.add(where, str(exc))
        return None


def expectation(p: Problems, where: str, raw: Mapping[str, Any], path_key: str = "path") -> paths.Expect | None:
    """``{path: ..., <op>: value, every?: bool}`` with exactly one op from ``paths.OPS``."""
    p.unknown(where, raw, (path_key, "every", *paths.OPS))
    parsed = path(p, f"{where}.{path_key}", raw.get(path_key))
    ops = [op for op in paths.OPS if op in raw]
    if len(ops) != 1:
        p.add(where, f"needs exactly one of {', '.join(paths.OPS)} (found {len(ops)})")
        return None
    op, value = ops[0], raw[ops[0]]
    if op in ("in", "notIn") and not isinstance(value, list):
        p.add(f"{where}.{op}", "must be a list")
    if op == "exists" and not isinstance(value, bool):
        p.add(f"{where}.{op}", "must be true or false")
    if op in ("atLeast", "atMost") and (isinstance(value, bool) or not isinstance(value, (int, float, str))):
        p.add(f"{where}.{op}", "must be a number")
    every = raw.get("every", False)
    if not isinstance(every, bool):
        p.add(f"{where}.every", "must be true or false")
    if parsed is None:
        return None
    return paths.Expect(parsed, op, value, bool(every))


def expectations(p: Problems, where: str, raw: Any) -> tuple[paths.Expect, ...]:
    if not isinstance(raw, list) or not raw:
        p.add(where, "must be a non-empty list of {path, <op>} expectations")
        return ()
    out = []
    for i, item in enumerate(raw):
        got = expectation(p, f"{where}[{i}]", mapping(p, f"{where}[{i}]", item))
        if got is not None:
            out.append(got)
    return tuple(out)
