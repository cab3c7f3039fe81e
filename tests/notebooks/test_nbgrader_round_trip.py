"""The nbgrader round trip: generate_assignment, a solved and a mistaken submission, autograde, generate_feedback.

nbgrader runs the assignment notebooks with no cluster and a 30 s cell timeout; the graded cells grade the
evidence bundles offline. The solved lab earns full marks, the submission with one typical mistake earns
partial marks, and nbgrader's per-task points equal what ``labs.grade`` says about the same evidence.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import labs
from graders import Report
from labs import course_nbgrader as cn

pytestmark = [pytest.mark.notebooks, pytest.mark.timeout(1200)]

COURSE = cn.default_course_dir()
ASSIGNMENTS = ["01-device-plugins", "05-dra"]


def expected_task_points(course_dir: Path, lab_id: str, student: str, tmp: Path) -> dict[str, float]:
    """Per task, the points ``labs.grade`` gives the evidence this simulated student hands in."""
    bundle = tmp / f"{lab_id}-{student}.json"
    bundle.write_text(json.dumps(cn.evidence_for(course_dir, lab_id, student)))
    report = labs.grade(lab_id, bundle)
    out = {}
    for task in labs.get(lab_id).tasks:
        ids = {c.id for c in task.checks}
        out[f"task-{task.id}"] = Report.from_checks(lab_id, [c for c in report.checks if c.id in ids]).score
    return out


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    pytest.importorskip("nbgrader")
    workdir = tmp_path_factory.mktemp("nbgrader") / "course"
    cmd = [sys.executable, "-m", "labs.cli.main", "course", "nbgrader-demo", "--workdir", str(workdir)]
    for lab_id in ASSIGNMENTS:
        cmd += ["--assignment", lab_id]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1100, env={**os.environ, "COLUMNS": "200"})
    return workdir, proc


def test_the_demo_command_shows_full_and_partial_marks(demo: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    workdir, proc = demo
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "solved labs got full marks; each submission with one mistake got partial marks" in proc.stdout
    for lab_id in ASSIGNMENTS:
        assert lab_id in proc.stdout


def test_nbgrader_scores_each_task_as_the_lab_grader_does(demo: tuple[Path, subprocess.CompletedProcess[str]],
                                                           tmp_path: Path) -> None:  # fmt: skip
    workdir, proc = demo
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{workdir / 'gradebook.db'}") as gb:
        for lab_id in ASSIGNMENTS:
            spec = labs.get(lab_id)
            for student in (cn.SOLVED, cn.WRONG):
                nb = gb.find_submission_notebook(lab_id, lab_id, student)
                got = {g.name: float(g.score) for g in nb.grades}
                assert got == expected_task_points(COURSE, lab_id, student, tmp_path), (lab_id, student)
                total = gb.find_submission(lab_id, student)
                assert total.max_score == spec.max_score
                if student == cn.SOLVED:
                    assert total.score == spec.max_score
                else:
                    assert 0 < total.score < spec.max_score


def test_released_notebooks_hide_the_tests_and_feedback_explains_the_mistake(
        demo: tuple[Path, subprocess.CompletedProcess[str]]) -> None:  # fmt: skip
    workdir, proc = demo
    assert proc.returncode == 0, proc.stdout + proc.stderr
    mistakes = cn.mistakes(COURSE)
    for lab_id in ASSIGNMENTS:
        released = (workdir / "release" / lab_id / cn.notebook_name(lab_id)).read_text()
        assert "BEGIN HIDDEN TESTS" not in released and "task_points('" not in released
        source = (COURSE / "source" / lab_id / cn.notebook_name(lab_id)).read_text()
        assert "BEGIN HIDDEN TESTS" in source
        wrong = (workdir / "feedback" / cn.WRONG / lab_id / f"{lab_id}.html").read_text()
        right = (workdir / "feedback" / cn.SOLVED / lab_id / f"{lab_id}.html").read_text()
        assert "Hint:" in wrong and "Hint:" not in right
        assert mistakes[lab_id].file in wrong
