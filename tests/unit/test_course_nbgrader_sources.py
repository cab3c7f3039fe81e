"""The nbgrader course folder matches the labs: one source assignment per lab, built from its current spec."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import labs
from cluster import errors
from labs import course_nbgrader as cn

pytestmark = pytest.mark.unit

COURSE = cn.default_course_dir()


def test_every_lab_has_a_source_assignment_in_sync_with_its_spec(tmp_path: Path) -> None:
    """Regenerating the sources gives the committed files byte for byte (else: gpulab course nbgrader-sources)."""
    committed = sorted(p.name for p in (COURSE / "source").iterdir() if p.is_dir())
    assert committed == sorted(labs.list_labs())
    (tmp_path / "nbgrader_config.py").write_text("")
    for fresh in cn.write_sources(tmp_path):
        lab_id = fresh.parent.name
        old = COURSE / "source" / lab_id / cn.notebook_name(lab_id)
        assert json.loads(old.read_text()) == json.loads(fresh.read_text()), (
            f"{old} is out of date with lab {lab_id}; run: gpulab course nbgrader-sources")


def test_graded_cells_carry_each_tasks_points_and_no_grading_code() -> None:
    """Each task's cell carries its points; its grading happens in the grader's process by replay, so the cell
    holds no code a learner could edit to change the grade (no hidden tests, no task_points helper)."""
    for lab_id in labs.list_labs():
        nb = json.loads((COURSE / "source" / lab_id / cn.notebook_name(lab_id)).read_text())
        graded = {c["metadata"]["nbgrader"]["grade_id"]: c for c in nb["cells"]
                  if c["metadata"].get("nbgrader", {}).get("grade")}
        spec = labs.get(lab_id)
        assert set(graded) == {f"task-{t.id}" for t in spec.tasks}
        for task in spec.tasks:
            cell = graded[f"task-{task.id}"]
            assert cell["metadata"]["nbgrader"]["points"] == sum(c.points for c in task.checks)
            source = "".join(cell["source"])
            assert "HIDDEN TESTS" not in source and "task_points" not in source
            assert all(line.startswith("#") for line in source.splitlines() if line.strip()), source


def test_every_lab_has_demo_evidence_and_a_mistake_that_applies() -> None:
    found = cn.mistakes(COURSE)
    assert set(found) == set(labs.list_labs())
    for lab_id in labs.list_labs():
        solved = cn.evidence_for(COURSE, lab_id, cn.SOLVED)
        wrong = cn.evidence_for(COURSE, lab_id, cn.WRONG)
        assert solved["lab"] == lab_id and solved["manifests"] != wrong["manifests"]


def test_the_demo_refuses_a_course_folder_without_config(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from labs.cli.main import cli

    result = CliRunner().invoke(cli, ["course", "nbgrader-demo", "--course-dir", str(tmp_path)])
    assert result.exit_code != 0
    assert isinstance(result.exception, errors.ConfigError)
    assert "no nbgrader_config.py" in str(result.exception)
