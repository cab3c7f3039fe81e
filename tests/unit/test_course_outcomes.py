"""The course covers every outcome, task and topic of the seeds (course/outcomes.yaml), and its notebooks hang together.

Each entry of outcomes.yaml must name an existing notebook heading, existing quiz items and existing lab checks,
and have the coverage its kind needs. The notebooks are committed without outputs, import only the public API of
labs, graders and quizzes, and every "Read: <module>, "<section>"" a lab hint gives leads to a real heading.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import nbformat
import pytest
import yaml

import labs
from graders import findings, messages
from quizzes import bank
from prerequisites import SEEDS, seed_text

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
COURSE = ROOT / "course"
OUTCOMES = COURSE / "outcomes.yaml"

# Module notebooks, the quiz section each one asks, in course order.
MODULES = {
    "01-gpu-fundamentals-device-plugins": "gpu-fundamentals",
    "02-gpu-operator": "gpu-operator",
    "03-scheduling": "scheduling",
    "04-time-slicing-and-mps": "sharing",
    "04b-mig": "mig",
    "05-dra": "dra",
    "06-troubleshooting-operations": "operations",
}
# The capstone combines the modules: a notebook and a lab of its own, no quiz bank or static-rule section.
CAPSTONE = {"07-capstone": "capstone"}
NOTEBOOKS = ("00-start-here", *MODULES, *CAPSTONE)
KINDS = ("outcome", "task", "topic")
ENTRY_KEYS = {"id", "kind", "text", "notebook", "sections", "quiz", "labChecks", "labReset", "note"}
# What a notebook may import from the project: the public API only.
PUBLIC = {"labs", "labs.figures", "labs.figures_operator", "labs.figures_topology", "labs.figures_dra", "labs.shell",
          "graders", "graders.render", "graders.render.widget", "quizzes"}
PROJECT = ("cluster", "labs", "graders", "quizzes")


def strip_number(heading: str) -> str:
    return re.sub(r"^\d+\.\s+", "", heading.strip())


@cache
def notebook(name: str) -> Any:
    return nbformat.read(str(COURSE / f"{name}.ipynb"), as_version=4)


@cache
def headings(name: str) -> tuple[str, ...]:
    """Markdown headings of a notebook (outside fenced code), without their '# ' and 'N. ' prefixes."""
    found = []
    for cell in notebook(name).cells:
        if cell.cell_type != "markdown":
            continue
        fenced = False
        for line in cell.source.splitlines():
            if line.startswith("```"):
                fenced = not fenced
            elif not fenced and (m := re.match(r"^#{1,4}\s+(.*)$", line)):
                found.append(strip_number(m.group(1)))
    return tuple(found)


def title(name: str) -> str:
    return re.sub(r"^Module \d+[a-z]?:\s*", "", headings(name)[0])


@cache
def document() -> dict[str, Any]:
    data = yaml.safe_load(OUTCOMES.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def entries() -> list[tuple[str, dict[str, Any]]]:
    return [(seed["seed"], entry) for seed in document()["seeds"] for entry in seed["entries"]]


@cache
def quiz_ids() -> frozenset[str]:
    return frozenset(item.id for b in bank.builtin_banks() for item in b.items)


@cache
def lab_checks() -> frozenset[str]:
    return frozenset(f"{lab_id}/{check.id}" for lab_id in labs.list_labs() for check in labs.get(lab_id).checks)


# --- outcomes.yaml ------------------------------------------------------------------------------------------------


def test_outcomes_file_is_well_formed() -> None:
    doc = document()
    assert doc.get("apiVersion") == "gpulab.dev/v1" and doc.get("kind") == "CourseOutcomes"
    assert set(doc) == {"apiVersion", "kind", "seeds"}
    ids = Counter(entry.get("id") for _, entry in entries())
    assert not [i for i, n in ids.items() if n > 1], "entry ids must be unique"
    for seed, entry in entries():
        where = f"{seed} {entry.get('id')}"
        assert set(entry) <= ENTRY_KEYS, f"{where}: unknown keys {set(entry) - ENTRY_KEYS}"
        assert entry.get("kind") in KINDS, where
        assert isinstance(entry.get("text"), str) and entry["text"].strip(), where


def test_every_seed_file_is_listed() -> None:
    listed = [s["seed"] for s in document()["seeds"]]
    assert len(listed) == len(set(listed))
    if SEEDS.is_dir():
        assert sorted(listed) == sorted(p.name for p in SEEDS.glob("*.txt"))
    assert all(s["entries"] for s in document()["seeds"])


@pytest.mark.parametrize(("seed", "entry"), entries(), ids=[e["id"] for _, e in entries()])
def test_entry_points_at_things_that_exist_and_is_covered(seed: str, entry: dict[str, Any]) -> None:
    """Every heading, quiz item and lab check exists; outcomes have quiz items, tasks lab checks, topics either."""
    nb, sections = entry.get("notebook"), entry.get("sections") or []
    assert nb in NOTEBOOKS, f"unknown notebook {nb!r}"
    assert sections, "names no notebook section"
    missing = [s for s in sections if strip_number(s) not in headings(nb)]
    assert not missing, f"{nb} has no heading {missing}; it has {headings(nb)}"
    quiz, checks, reset = entry.get("quiz") or [], entry.get("labChecks") or [], entry.get("labReset")
    assert not set(quiz) - quiz_ids(), f"unknown quiz items {sorted(set(quiz) - quiz_ids())}"
    assert not set(checks) - lab_checks(), f"unknown lab checks {sorted(set(checks) - lab_checks())}"
    if reset is not None:
        assert reset in labs.list_labs(), f"labReset names unknown lab {reset!r}"
    if entry["kind"] == "outcome":
        assert quiz, "an outcome needs quiz items"
    elif entry["kind"] == "task":
        assert checks or reset, "a hands-on task needs lab checks (or the lab whose reset does it)"
    else:
        assert quiz or checks, "a topic needs quiz items or lab checks"


def _count(seed: str, kind: str) -> int:
    return sum(1 for s, e in entries() if s == seed and e["kind"] == kind)


def test_seed_000_course_outcomes_are_all_listed() -> None:
    text = seed_text("000_5ad06d4e76a1a98b.txt")
    stated = text[: text.index("Section 1:")].strip().splitlines()
    assert len(stated) == 4
    assert _count("000_5ad06d4e76a1a98b.txt", "outcome") == len(stated)


def test_seed_002_outcomes_and_exercise_tasks_are_all_listed() -> None:
    text = seed_text("002_f6553fcc0fb70800.txt")
    start = text.index("After completing this module")
    block = text[start : text.index("Hypothetical scenario", start)]
    stated = re.findall(r"^\s*•", block, re.M)
    tasks = set(re.findall(r"Solution notes for Task (\d+)", text))
    assert (len(stated), len(tasks)) == (5, 6)
    assert _count("002_f6553fcc0fb70800.txt", "outcome") == len(stated)
    assert _count("002_f6553fcc0fb70800.txt", "task") == len(tasks)


def test_seed_004_outcomes_and_exercise_tasks_are_all_listed() -> None:
    text = seed_text("004_4fe0b13908b61583.txt")
    block = text[text.index("Learning Outcomes”") : text.index("Why This Module Matters")]
    stated = re.findall(r"- [A-Z]", block)
    tasks = set(re.findall(r"Task (\d+): [A-Z]", text))
    assert (len(stated), len(tasks)) == (7, 4)
    assert _count("004_4fe0b13908b61583.txt", "outcome") == len(stated)
    assert _count("004_4fe0b13908b61583.txt", "task") == len(tasks)


def test_every_lab_is_part_of_some_coverage() -> None:
    used = {c.split("/")[0] for _, e in entries() for c in e.get("labChecks") or []}
    assert set(labs.list_labs()) <= used | {e.get("labReset") for _, e in entries()}


# --- the notebooks ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_is_valid_and_its_saved_outputs_show_no_error(name: str) -> None:
    """Outputs are committed from a real run (``gpulab course outputs --write``; tests/notebooks checks they still
    match): the notebook must be valid and no saved output may be an error."""
    nb = notebook(name)
    nbformat.validate(nb)
    failed = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
              and any(o.get("output_type") == "error" for o in c.outputs)]
    assert not failed, f"{name}: code cells {failed} saved an error"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_imports_only_the_public_api(name: str) -> None:
    for cell in notebook(name).cells:
        if cell.cell_type != "code":
            continue
        for node in ast.walk(ast.parse(cell.source)):
            modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
                       else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])  # fmt: skip
            for module in modules:
                if module.split(".")[0] in PROJECT:
                    assert module in PUBLIC, f"{name} imports {module}, which is not public API"


@pytest.mark.parametrize(("name", "section"), MODULES.items())
def test_module_has_outcomes_quizzes_and_its_labs(name: str, section: str) -> None:
    code = "\n".join(c.source for c in notebook(name).cells if c.cell_type == "code")
    assert "Learning outcomes" in headings(name)
    assert f'quizzes.show("{section}", phase="pre")' in code
    assert f'quizzes.show("{section}", phase="post")' in code
    started = re.findall(r'labs\.start\("([^"]+)"\)', code)
    assert started and all(labs.get(i).module == section for i in started), started
    assert ".check()" in code and ".widget()" in code
    assert code.index("phase=\"pre\"") < code.index("labs.start(") < code.index("phase=\"post\"")


def test_every_lab_is_started_by_its_module_notebook() -> None:
    courses = {**MODULES, **CAPSTONE}
    code = {n: "\n".join(c.source for c in notebook(n).cells if c.cell_type == "code") for n in courses}
    for lab_id in labs.list_labs():
        owners = [n for n, src in code.items() if f'labs.start("{lab_id}")' in src]
        assert owners == [n for n, s in courses.items() if s == labs.get(lab_id).module], lab_id


def test_module_titles_match_the_section_titles_the_graders_cite() -> None:
    """Graders' findings say "Read: <section title>"; that title must be a module's title."""
    assert tuple(MODULES.values()) == findings.SECTIONS
    for name, section in MODULES.items():
        assert title(name) == messages.SECTION_TITLES[section], name


def _read_references() -> list[tuple[str, str, str, str]]:
    """(lab, check, heading, module title) of every hint's closing `Read: “<heading>” in “<module title>”.`"""
    refs = []
    for lab_id in labs.list_labs():
        for check in labs.get(lab_id).checks:
            for section, module in re.findall(r"Read: “([^”]+)” in “([^”]+)”", " ".join(check.hint.split())):
                refs.append((lab_id, check.id, section, module))
    return refs


def test_lab_hints_send_learners_to_sections_that_exist() -> None:
    """Every check's hint names a heading of a module notebook, and that module by its exact title."""
    refs = _read_references()
    assert len({(lab, check) for lab, check, _, _ in refs}) == len(lab_checks()), "a hint names no section"
    problems = []
    for lab_id, check_id, section, module in refs:
        owners = [n for n in MODULES if title(n) == module]
        if len(owners) != 1:
            problems.append(f"{lab_id}/{check_id}: no module notebook is titled {module!r}")
        elif strip_number(section) not in headings(owners[0]):
            problems.append(f"{lab_id}/{check_id}: {owners[0]} has no heading {section!r}")
    assert not problems, "\n".join(problems)
