"""Notebook cells a learner meets first work and read well: every lab's cells run in a fresh kernel on their own
(a learner may jump straight to the lab), reports show themselves without display imports, and markdown has no
bare ``$`` that JupyterLab would typeset as LaTeX ("$10,000 to $30,000")."""

from __future__ import annotations

import ast
import builtins
import json
import re
from pathlib import Path

import pytest

COURSE = Path(__file__).resolve().parents[2] / "course"
NOTEBOOKS = sorted(p.name for p in COURSE.glob("*.ipynb"))


def _cells(name: str) -> list[dict[str, object]]:
    cells = json.loads((COURSE / name).read_text())["cells"]
    assert isinstance(cells, list)
    return cells


def _source(cell: dict[str, object]) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else str(src)


def lab_sections(name: str) -> list[list[str]]:
    """For each ``labs.start(...)`` cell: it and the code cells after it, up to the next markdown cell."""
    cells = _cells(name)
    out = []
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "code" and "labs.start(" in _source(cell):
            section = [_source(cell)]
            for later in cells[i + 1:]:
                if later["cell_type"] != "code":
                    break
                section.append(_source(later))
            out.append(section)
    return out


def undefined_names(sources: list[str]) -> list[str]:
    """Names the cells read before any of them defines them (in cell order; builtins are known)."""
    known = set(dir(builtins))
    missing: list[str] = []
    for src in sources:
        tree = ast.parse(src)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                known.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                known.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                known.add(node.id)
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in known:
                missing.append(node.id)
    return missing


def test_the_dependency_check_catches_a_name_from_far_above() -> None:
    assert undefined_names(["lab_b = labs.start('x')", "HTML(render.report_html(lab_b.check()))"]) == \
        ["labs", "HTML", "render"]
    assert undefined_names(["import labs\n\nlab = labs.start('x')\nlab.widget()", "lab.check()"]) == []


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_lab_cells_work_in_a_fresh_kernel(name: str) -> None:
    for section in lab_sections(name):
        assert not undefined_names(section), f"{name}: lab cells use names defined elsewhere: {section[0][:60]!r}"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_reports_render_themselves_without_display_imports(name: str) -> None:
    for cell in _cells(name):
        src = _source(cell)
        assert "report_html(" not in src and "IPython.display import HTML" not in src, f"{name}: {src[:80]!r}"


_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_markdown_has_no_bare_dollar_signs(name: str) -> None:
    """JupyterLab typesets text between two ``$`` as math; money must be written ``\\$``."""
    for cell in _cells(name):
        if cell["cell_type"] != "markdown":
            continue
        prose = _CODE.sub("", _source(cell))
        bare = [m.start() for m in re.finditer(r"(?<!\\)\$", prose)]
        assert not bare, f"{name}: unescaped $ in {prose[max(0, bare[0] - 30):bare[0] + 30]!r}"
