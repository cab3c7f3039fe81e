"""How each lab is graded, in figures, and whether its tasks can be solved by copying its module's cells.

``gpulab lab audit`` prints, per lab: its checks, the share of them that read the cluster (live state or an
evidence bundle), the share of its points that come from worksheet answers (``answer`` checks read
``answers.yaml``, which the learner merely claims), and every solution object that a code cell of the lab's
own module already shows. A lab asks for transfer when that list is empty: the learner applies the module's
skill to a different object, not the demo directly above it.

Objects are compared by kind and content with ``metadata`` and ``status`` dropped (renaming a demo object does
not make it new), and embedded YAML (a ConfigMap's config) is compared parsed, so whitespace and comments do
not matter either; each config in a ConfigMap is also compared on its own. Code cells are read for YAML in the cell itself (``%%bash`` heredocs, ``%%writefile``), in
every string literal of a Python cell, and in the files a cell applies with ``-f``.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from labs import catalog
from labs.checks import static
from labs.spec import LabSpec

COURSE = Path(__file__).resolve().parent.parent / "course"
MAX_ANSWER_SHARE = 0.20
_MAX_TEXT = 256 * 1024
_APPLIED = re.compile(r"-f\s+([\w./-]+\.ya?ml)")


@dataclass(frozen=True)
class Copy:
    """A solution object that a module cell already shows."""

    lab_file: str
    kind: str
    name: str
    notebook: str
    cell: int  # index among the notebook's cells

    def __str__(self) -> str:
        return f"{self.lab_file}: {self.kind} {self.name} is in {self.notebook}, cell {self.cell}"


@dataclass(frozen=True)
class LabFigures:
    lab: str
    checks: int
    live_checks: int
    points: float
    answer_points: float
    notebooks: tuple[str, ...]
    copies: tuple[Copy, ...]

    @property
    def live_share(self) -> float:
        return self.live_checks / self.checks if self.checks else 0.0

    @property
    def answer_share(self) -> float:
        return self.answer_points / self.points if self.points else 0.0

    @property
    def problems(self) -> list[str]:
        out = [f"{c} (the lab can be solved by copying a cell)" for c in self.copies]
        if self.answer_share > MAX_ANSWER_SHARE:
            out.append(f"{self.answer_share:.0%} of the points come from answers.yaml "
                       f"(at most {MAX_ANSWER_SHARE:.0%})")
        if not self.notebooks:
            out.append("no course notebook starts this lab (labs.start)")
        return out


def _docs(text: str) -> Iterator[Any]:
    if len(text) > _MAX_TEXT or "kind" not in text:
        return
    try:
        yield from yaml.safe_load_all(text)
    except yaml.YAMLError:
        return


def _objects(values: Iterable[Any]) -> Iterator[dict[str, Any]]:
    for value in values:
        if isinstance(value, dict) and isinstance(value.get("kind"), str):
            yield value
        elif isinstance(value, dict) and isinstance(value.get("items"), list):
            yield from _objects(value["items"])
        elif isinstance(value, list):
            yield from _objects(value)


def _canonical(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    if isinstance(value, str) and "\n" in value.strip():
        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            parsed = None
        if isinstance(parsed, (dict, list)):
            return _canonical(parsed)
        return "\n".join(line.rstrip() for line in value.strip().splitlines())
    return value


def fingerprints(obj: dict[str, Any]) -> list[str]:
    """The object's kind and content without ``metadata``/``status``, as comparable text; for a ConfigMap also
    each data entry on its own (a lab's device-plugin config may hold the demo's config under another key)."""
    body = {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion")}
    out = [json.dumps(_canonical(body), sort_keys=True, default=str)]
    data = obj.get("data")
    if obj.get("kind") == "ConfigMap" and isinstance(data, dict):
        out.extend(json.dumps(["ConfigMap data", _canonical(v)], sort_keys=True, default=str)
                   for v in data.values() if isinstance(v, str) and "\n" in v.strip())
    return out


def _cell_texts(source: str, base: Path) -> Iterator[str]:
    lines = source.splitlines()
    body = "\n".join(lines[1:]) if lines and lines[0].startswith("%%") else source
    yield body
    for match in re.finditer(r"<<-?\s*['\"]?(\w+)['\"]?[^\n]*\n(.*?)\n\s*\1\b", source, re.S):
        yield match.group(2)
    try:
        tree = ast.parse(body)
    except SyntaxError:
        tree = None
    if tree is not None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) > 20:
                yield node.value
            elif isinstance(node, ast.Dict):
                try:
                    yield json.dumps(ast.literal_eval(node))
                except (ValueError, TypeError, SyntaxError, RecursionError):
                    pass
    for name in _APPLIED.findall(source):
        for folder in (base, base.parent):
            path = (folder / name).resolve()
            if path.is_file() and path.stat().st_size <= _MAX_TEXT:
                yield path.read_text(encoding="utf-8", errors="replace")
                break


def module_objects(notebook: Path) -> list[tuple[int, dict[str, Any]]]:
    """(cell index, object) for every Kubernetes object a code cell of ``notebook`` shows."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    out: list[tuple[int, dict[str, Any]]] = []
    for i, cell in enumerate(cells):
        if cell.get("cell_type") != "code":
            continue
        src = cell["source"]
        text = "".join(src) if isinstance(src, list) else str(src)
        for chunk in _cell_texts(text, notebook.parent):
            out.extend((i, obj) for obj in _objects(_docs(chunk)))
    return out


def notebooks_of(lab_id: str, course: Path = COURSE) -> list[Path]:
    """The course notebooks whose cells start ``lab_id`` (its module)."""
    pattern = re.compile(r"labs\.start\(\s*['\"]" + re.escape(lab_id) + r"['\"]")
    return [nb for nb in sorted(course.glob("*.ipynb")) if any(pattern.search(src) for src in _code(nb))]


def _code(notebook: Path) -> list[str]:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) if isinstance(c["source"], list) else str(c["source"])
            for c in cells if c.get("cell_type") == "code"]


def solution_objects(spec: LabSpec) -> list[tuple[str, dict[str, Any]]]:
    """(file, object) for every object in the lab's solution files and the files its solve steps apply."""
    files = sorted({p for p in (spec.directory / "solution").glob("*.y*ml")}
                   | {spec.directory / f for f in (getattr(s, "file", None) for s in spec.solve) if f})
    out: list[tuple[str, dict[str, Any]]] = []
    for path in files:
        if path.is_file():
            rel = str(path.relative_to(spec.directory))
            out.extend((rel, obj) for obj in _objects(_docs(path.read_text(encoding="utf-8"))))
    return out


def figures(spec: LabSpec, course: Path = COURSE) -> LabFigures:
    checks = spec.checks
    answer_points = sum(c.points for c in checks if isinstance(c.rule, static.AnswerRule))
    notebooks = notebooks_of(spec.id, course)
    shown: dict[str, tuple[str, int]] = {}
    for nb in notebooks:
        for cell, obj in module_objects(nb):
            for fp in fingerprints(obj):
                shown.setdefault(fp, (nb.name, cell))
    copies = []
    for file, obj in solution_objects(spec):
        hit = next((shown[fp] for fp in fingerprints(obj) if fp in shown), None)
        if hit is not None:
            name = str((obj.get("metadata") or {}).get("name", "")) if isinstance(obj.get("metadata"), dict) else ""
            copies.append(Copy(file, str(obj["kind"]), name, hit[0], hit[1]))
    return LabFigures(spec.id, len(checks), sum(1 for c in checks if c.cluster), spec.max_score, answer_points,
                      tuple(nb.name for nb in notebooks), tuple(copies))


def all_figures(course: Path = COURSE) -> list[LabFigures]:
    return [figures(catalog.get(i), course) for i in catalog.ids()]
