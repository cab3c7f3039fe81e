"""The nbgrader round trip with replay grading: generate_assignment, a solved and a mistaken submission, the
replay autograde, generate_feedback; the release carries no solutions; a learner's cell can neither write the
gradebook nor change the grade.

One local cluster (started here, so run this under /work/bin/cluster-slot) is the grader's cluster for the demo
and for the expected points. The solved submission earns full marks by replay, the one with a typical mistake
partial marks, and nbgrader's per-task points equal what ``labs.grade`` replays for the same evidence.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import labs
from cluster import fleet as fleet_mod
from cluster.backends.local import LocalBackend
from cluster.kube.client import Client
from cluster.progress import LogProgress
from graders import Report
from labs import course_nbgrader as cn, nbgrader_autograde
from prerequisites import require

pytestmark = [pytest.mark.notebooks, pytest.mark.timeout(1500)]

COURSE = cn.default_course_dir()
ASSIGNMENTS = ["01-device-plugins", "05-dra"]


@pytest.fixture(scope="module")
def grader_kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    require(importlib.util.find_spec("nbgrader") is not None,
                          "nbgrader is not installed: make python-deps (the course extra)")
    root = tmp_path_factory.mktemp("grader-state")
    backend = LocalBackend("grader", root)
    backend.up(fleet_mod.load("starter"), LogProgress())
    try:
        yield backend.kubeconfig()
    finally:
        backend.down(purge=True)


def expected_task_points(kubeconfig: Path, lab_id: str, student: str, tmp: Path) -> dict[str, float]:
    """Per task, the points a replay of this simulated student's evidence gives."""
    bundle = tmp / f"{lab_id}-{student}.json"
    bundle.write_text(json.dumps(cn.evidence_for(COURSE, lab_id, student)))
    with Client.from_kubeconfig(kubeconfig) as client:
        report = labs.grade(lab_id, bundle, replay=client)
    out = {}
    for task in labs.get(lab_id).tasks:
        ids = {c.id for c in task.checks}
        out[f"task-{task.id}"] = Report.from_checks(lab_id, [c for c in report.checks if c.id in ids]).score
    return out


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, grader_kubeconfig: Path) -> tuple[Path, subprocess.CompletedProcess[str]]:
    workdir = tmp_path_factory.mktemp("nbgrader") / "course"
    cmd = [sys.executable, "-m", "labs.cli.main", "course", "nbgrader-demo", "--workdir", str(workdir),
           "--replay-on", str(grader_kubeconfig)]
    for lab_id in ASSIGNMENTS:
        cmd += ["--assignment", lab_id]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1300, env={**os.environ, "COLUMNS": "200"})
    return workdir, proc


def test_the_demo_command_shows_full_and_partial_marks(demo: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    workdir, proc = demo
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "solved labs got full marks; each submission with one mistake got partial marks" in proc.stdout
    for lab_id in ASSIGNMENTS:
        assert lab_id in proc.stdout


def test_nbgrader_scores_each_task_as_the_replay_does(demo: tuple[Path, subprocess.CompletedProcess[str]],
                                                      grader_kubeconfig: Path, tmp_path: Path) -> None:
    workdir, proc = demo
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{workdir / 'gradebook.db'}") as gb:
        for lab_id in ASSIGNMENTS:
            spec = labs.get(lab_id)
            for student in (cn.SOLVED, cn.WRONG):
                nb = gb.find_submission_notebook(lab_id, lab_id, student)
                got = {g.name: float(g.score) for g in nb.grades}
                assert got == expected_task_points(grader_kubeconfig, lab_id, student, tmp_path), (lab_id, student)
                total = gb.find_submission(lab_id, student)
                assert total.max_score == spec.max_score
                if student == cn.SOLVED:
                    assert total.score == spec.max_score
                else:
                    assert 0 < total.score < spec.max_score


def test_the_release_carries_no_grading_code_solutions_or_solved_bundles(
        demo: tuple[Path, subprocess.CompletedProcess[str]]) -> None:  # fmt: skip
    workdir, proc = demo
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not list((COURSE / cn.DEMO_DIR).glob("*.json")), "solved bundles must not ship with the course"
    for lab_id in ASSIGNMENTS:
        spec = labs.get(lab_id)
        released = sorted(p.relative_to(workdir / "release" / lab_id) for p in (workdir / "release" / lab_id).rglob("*")
                          if p.is_file())
        assert released == [Path(cn.notebook_name(lab_id))], released
        text = (workdir / "release" / lab_id / cn.notebook_name(lab_id)).read_text()
        for marker in ("BEGIN HIDDEN TESTS", "labs.grade", "task_points", "EvidenceBundle", "solution/"):
            assert marker not in text, (lab_id, marker)
        for name in spec.files:
            solved = (spec.directory / "solution" / name).read_text()
            if solved != spec.starter(name).read_text():
                assert solved.strip() not in text, (lab_id, name)


def test_feedback_explains_the_mistake(demo: tuple[Path, subprocess.CompletedProcess[str]]) -> None:
    workdir, proc = demo
    assert proc.returncode == 0, proc.stdout + proc.stderr
    mistakes = cn.mistakes(COURSE)
    for lab_id in ASSIGNMENTS:
        wrong = (workdir / "feedback" / cn.WRONG / lab_id / f"{lab_id}.html").read_text()
        right = (workdir / "feedback" / cn.SOLVED / lab_id / f"{lab_id}.html").read_text()
        assert "Hint:" in wrong and "Hint:" not in right
        assert mistakes[lab_id].file in wrong


def test_a_learner_cell_can_neither_write_the_gradebook_nor_change_the_grade(
        demo: tuple[Path, subprocess.CompletedProcess[str]], grader_kubeconfig: Path) -> None:  # fmt: skip
    """The unlocked collect cell replaces labs.grade and writes into gradebook.db: it never runs (grading runs no
    learner code; the cell is shown as text without outputs), and the grade is the replay of the handed-in
    evidence."""
    import nbformat
    from nbgrader.api import Gradebook

    workdir, proc = demo
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lab_id, student = "05-dra", "hostile-student"
    gradebook = workdir / "gradebook.db"
    before = gradebook.read_bytes()
    folder = workdir / "submitted" / student / lab_id
    folder.mkdir(parents=True)
    nb = nbformat.read(str(workdir / "release" / lab_id / cn.notebook_name(lab_id)), as_version=4)
    collect = next(c for c in nb.cells if c.get("id") == "collect")
    collect.source = (f"import labs\nlabs.grade = lambda *a, **k: None\n"
                      f"with open({str(gradebook)!r}, 'ab') as fh:\n    fh.write(b'HOSTILE-MARKER')\n")
    nbformat.write(nb, str(folder / cn.notebook_name(lab_id)))
    spec = labs.get(lab_id)
    untouched = cn.evidence_for(COURSE, lab_id, cn.SOLVED)
    untouched.update(manifests={n: spec.starter(n).read_text() for n in spec.files}, actions=[])
    (folder / "evidence.json").write_text(json.dumps(untouched))

    graded = nbgrader_autograde.autograde(workdir, lab_id, lambda: Client.from_kubeconfig(grader_kubeconfig),
                                          students=(student,))
    assert [g.student for g in graded] == [student]
    assert b"HOSTILE-MARKER" not in gradebook.read_bytes() + before
    autograded = nbformat.read(str(workdir / "autograded" / student / lab_id / cn.notebook_name(lab_id)),
                               as_version=4)
    collect = next(c for c in autograded.cells if c.get("id") == "collect")
    assert collect.outputs == [] and "HOSTILE-MARKER" in collect.source
    with Gradebook(f"sqlite:///{gradebook}") as gb:
        total = gb.find_submission(lab_id, student).score
    assert total == graded[0].report.score < spec.max_score  # type: ignore[union-attr]
