"""Compile DRA device-selector CEL expressions with the real Kubernetes compiler (the ``celcheck`` helper).

``celcheck`` is a small Go program (``cluster/gosrc/celcheck``) built against
``k8s.io/dynamic-resource-allocation/cel`` of our pinned Kubernetes release; it reports compile errors and
cost-limit violations with the apiserver's own field-error text, and (``evaluate``) runs a selector against
ResourceSlice devices as the scheduler's DRA allocator does, runtime cost limit included, and (``parse``) returns
an expression's syntax tree as cel-go's own parser builds it, for static checks. This is the project's
one CEL engine: nothing here or in the graders evaluates CEL itself. One process checks a whole batch, so a
lint run pays its start-up once. When the binary is missing this module raises ``BinariesUnavailable``;
callers decide how to degrade.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


from cluster import errors, gobuild, settings, versions

log = logging.getLogger(__name__)

KUBERNETES_VERSION = versions.KUBERNETES_VERSION  # celcheck is built against the same release
BINARY = gobuild.extra_binary_name("celcheck")  # celcheck-3: evaluates selectors and returns syntax trees
EVAL_TIMEOUT_S = 2.0  # the longest one device's evaluation may take (celcheck -eval-timeout)
# Verdicts already computed by a binary: the compiler is deterministic, and batch grading compiles the same
# few expressions once per submission otherwise (one process start each).
_MEMO: dict[tuple[str, str, str], "Verdict"] = {}
_MEMO_MAX = 4096
PARSE_TIMEOUT_S = 10.0  # the budget of one batch of parses (the parser's own depth and recovery limits bound each)
_TREES: dict[tuple[str, str], "Parsed"] = {}


@dataclass(frozen=True)
class Verdict:
    ok: bool
    error: str  # the apiserver's field error, e.g. 'spec...expression: Invalid value: "...": compilation failed: ...'
    detail: str
    cost: int


def candidates() -> list[Path]:
    """Where ``celcheck`` is looked for, in order."""
    out: list[Path] = []
    given = settings.current()
    if given.celcheck:
        out.append(given.celcheck)
    if given.bin_dir:
        out.append(given.bin_dir / BINARY)
    cache = settings.cache_root()
    out.extend(sorted((cache / "bin").glob(f"k8s-{KUBERNETES_VERSION}-*/{BINARY}")))
    out.append(cache / "bin" / KUBERNETES_VERSION / BINARY)
    return out


def first_executable(paths: Sequence[Path]) -> Path | None:
    """The first of ``paths`` that is an executable file (a Go helper's lookup order)."""
    return next((p for p in paths if p.is_file() and os.access(p, os.X_OK)), None)


def find_binary() -> Path | None:
    return first_executable(candidates())


def check(
    items: Sequence[tuple[str, str]], *, binary: Path | None = None, timeout: float = 20.0,
    parse_too: bool = False,
) -> list[Verdict]:
    """Compile each ``(expression, field_path)``; verdicts come back in the same order. With ``parse_too`` the
    same celcheck process also parses each expression, so a later ``parse`` of them starts no process.

    Raises ``BinariesUnavailable`` when no binary is found and ``CommandFailed`` when it crashes,
    times out or answers out of step.
    """
    if not items:
        return []
    path = _binary(binary, "checker")
    todo = sorted({(expr, field) for expr, field in items if (str(path), expr, field) not in _MEMO})
    trees = sorted({expr for expr, _ in items if (str(path), expr) not in _TREES}) if parse_too else []
    if todo or trees:
        _run_batch(path, todo, trees, timeout)
    return [_MEMO[(str(path), expr, field)] for expr, field in items]


@dataclass(frozen=True)
class Parsed:
    """An expression parsed by cel-go: ``tree`` is its syntax tree as celcheck's ``astJSON`` renders it, or None
    with ``error`` (the parser's message) when it does not parse or is too deep or long to analyse."""

    tree: Mapping[str, Any] | None
    error: str = ""


def parse(expressions: Sequence[str], *, binary: Path | None = None,
          timeout: float = PARSE_TIMEOUT_S) -> list[Parsed]:
    """Parse each expression with cel-go's parser (standard macros expanded); results in the same order.

    Raises ``BinariesUnavailable`` when no celcheck is found and ``CommandFailed`` when it crashes or overruns
    ``timeout``."""
    if not expressions:
        return []
    path = _binary(binary, "parser")
    trees = sorted({e for e in expressions if (str(path), e) not in _TREES})
    if trees:
        _run_batch(path, [], trees, timeout)
    return [_TREES[(str(path), e)] for e in expressions]


def _binary(given: Path | None, role: str) -> Path:
    path = given or find_binary()
    if path is None:
        raise errors.BinariesUnavailable(f"the CEL {role} (celcheck) is not installed",
                                         hint="run `gpulab binaries ensure`")
    return path


def _run_batch(path: Path, compile_items: Sequence[tuple[str, str]], parse_items: Sequence[str],
               timeout: float) -> None:
    """One celcheck process: compile ``compile_items`` (ids ``c<i>``) and parse ``parse_items`` (ids ``p<i>``);
    the answers go into the memos."""
    lines = "".join(json.dumps({"id": f"c{i}", "expression": expr, "path": field}) + "\n"
                    for i, (expr, field) in enumerate(compile_items))
    lines += "".join(json.dumps({"id": f"p{i}", "expression": e, "mode": "parse"}) + "\n"
                     for i, e in enumerate(parse_items))
    cmd = [str(path)]
    answers = _answers(run_helper(path, lines, timeout), cmd)
    wanted = [f"c{i}" for i in range(len(compile_items))] + [f"p{i}" for i in range(len(parse_items))]
    if sorted(answers) != sorted(wanted):
        raise errors.CommandFailed(cmd, 0, f"expected {len(wanted)} answers, got {len(answers)}")
    if len(_MEMO) + len(compile_items) > _MEMO_MAX:
        _MEMO.clear()
    if len(_TREES) + len(parse_items) > _MEMO_MAX:
        _TREES.clear()
    for i, (expr, field) in enumerate(compile_items):
        raw = answers[f"c{i}"]
        try:
            _MEMO[(str(path), expr, field)] = Verdict(bool(raw["ok"]), str(raw.get("error", "")),
                                                      str(raw.get("detail", "")), int(raw.get("cost", 0)))
        except (ValueError, KeyError, TypeError) as exc:
            raise errors.CommandFailed(cmd, 0, f"unexpected answer: {str(raw)[:200]!r}") from exc
    for i, expr in enumerate(parse_items):
        raw = answers[f"p{i}"]
        tree = raw.get("ast")
        _TREES[(str(path), expr)] = Parsed(tree if raw.get("ok") and isinstance(tree, dict) else None,
                                           str(raw.get("error", "")))


def _answers(stdout: str, cmd: list[str]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for line in stdout.splitlines():
        try:
            raw = json.loads(line)
            found[str(raw["id"])] = raw
        except (ValueError, KeyError, TypeError) as exc:
            raise errors.CommandFailed(cmd, 0, f"unexpected output line: {line[:200]!r}") from exc
    return found


def run_helper(path: Path, lines: str, timeout: float, args: Sequence[str] = ()) -> str:
    """Feed a Go helper its JSON lines on stdin and return its stdout; a crash, time-out or non-zero exit is
    ``CommandFailed`` (the protocol celcheck and dpcheck share)."""
    cmd = [str(path), *args]
    try:
        proc = subprocess.run(cmd, input=lines, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise errors.CommandFailed(cmd, -1, f"timed out after {timeout:.0f}s") from exc
    except OSError as exc:
        raise errors.CommandFailed(cmd, -1, str(exc)) from exc
    if proc.returncode != 0:
        raise errors.CommandFailed(cmd, proc.returncode, proc.stderr)
    return proc.stdout


@dataclass(frozen=True)
class DeviceVerdict:
    """One device against one selector: ``match`` True/False, or None when CEL could not decide (``error``: a
    compile error, or the allocator's runtime error such as a missing attribute or the cost limit)."""

    name: str
    match: bool | None
    error: str = ""


def evaluate(expression: str, devices: Sequence[Mapping[str, Any]], *, binary: Path | None = None,
             timeout: float = 20.0) -> list[DeviceVerdict]:
    """Run ``expression`` against each device (``{"name", "driver", "attributes", "capacity"}`` as a
    ResourceSlice lists them) with the Kubernetes CEL library; verdicts come back in the same order.

    Raises ``BinariesUnavailable`` when no celcheck is found and ``CommandFailed`` when it crashes or times out
    (the caller's budget: ``timeout`` for the whole batch, ``EVAL_TIMEOUT_S`` for one device)."""
    if not devices:
        return []
    path = binary or find_binary()
    if path is None:
        raise errors.BinariesUnavailable(
            "the CEL engine (celcheck) is not installed", hint="run `gpulab binaries ensure`")
    line = json.dumps({"id": "0", "expression": expression, "path": "expression", "stored": True,
                       "devices": [dict(d) for d in devices]}) + "\n"
    cmd = [str(path), f"-eval-timeout={EVAL_TIMEOUT_S}s"]
    out = run_helper(path, line, timeout, args=cmd[1:])
    try:
        raw = json.loads(out.splitlines()[0])
    except (ValueError, IndexError) as exc:
        raise errors.CommandFailed(cmd, 0, f"unexpected output: {out[:200]!r}") from exc
    if not raw.get("ok"):
        return [DeviceVerdict(str(d.get("name", "")), None, str(raw.get("error", ""))) for d in devices]
    answers = raw.get("devices")
    if not isinstance(answers, list) or len(answers) != len(devices):
        raise errors.CommandFailed(cmd, 0, f"expected {len(devices)} device verdicts, got {answers!r}"[:300])
    return [DeviceVerdict(str(a.get("name", "")), None if a.get("error") else bool(a.get("match")),
                          str(a.get("error", ""))) for a in answers]
