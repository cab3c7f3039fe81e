"""nbgrader autograding for the labs, with the grade computed by the grader and never by the learner's notebook.

``nbgrader autograde`` would run the learner's notebook with the grading code inside the same kernel, in the
course folder, as the instructor: an edited cell could read the instructor's files, replace the grading
function, write the gradebook or leave a process behind that reaches the grader's cluster. Here no learner code
runs at all:

1. the grader's process grades the handed-in ``evidence.json`` by replay on the grader's cluster
   (``labs.grade(..., replay=client)``), in a child held to a time and memory budget
   (``grading.within_budget``), task by task;
2. the grader writes the points into the gradebook (``nbgrader.api.Gradebook``) and the autograded notebook:
   the released notebook's locked cells (as nbgrader's OverwriteCells would), the learner's source without
   outputs in the cells the learner may edit (as nbgrader's ClearOutput leaves them: an output is the learner's
   HTML, which formgrader would show in the instructor's browser), and the grader's report in each graded cell.

``nbgrader generate_feedback`` then works as usual. nbgrader and nbformat are imported here only.
"""

from __future__ import annotations

import copy
import json
import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster.kube.client import Client
from graders import Report
from graders.render import nbgrader as feedback
from labs import catalog, grading
from labs.spec import LabSpec

log = logging.getLogger(__name__)

EVIDENCE = "evidence.json"


@dataclass(frozen=True)
class Graded:
    student: str
    report: Report | None
    tasks: dict[str, float]  # grade_id (task-<id>) -> points
    error: str


def task_reports(spec: LabSpec, report: Report) -> dict[str, Report]:
    got = {c.id: c for c in report.checks}
    return {f"task-{t.id}": Report.from_checks(spec.id, [got[c.id] for c in t.checks if c.id in got])
            for t in spec.tasks}


def grade_submission(spec: LabSpec, folder: Path, replay: Callable[[], Client],
                     budget: grading.Budget = grading.Budget()) -> tuple[Report | None, str]:
    """The replayed grade of one handed-in folder's ``evidence.json``, or None and why not. ``replay`` makes a
    client of a running grader's cluster; it is called in the budget's child (a client does not survive a fork)."""
    bundle = folder / EVIDENCE
    if not bundle.is_file() or bundle.is_symlink():
        return None, f"{EVIDENCE} was not handed in"

    def replayed() -> Report:
        with replay() as client:
            return grading.grade(spec.id, bundle, replay=client)

    row = grading.within_budget(folder.parent.name, replayed, budget)
    return row.report, row.error


def autograde(root: Path, lab_id: str, replay: Callable[[], Client], *, budget: grading.Budget = grading.Budget(),
              step: Callable[[str], None] = lambda _: None, students: tuple[str, ...] = ()) -> list[Graded]:
    """Grade every ``submitted/<student>/<lab_id>/`` (or those of ``students``) of the nbgrader course at ``root``
    into its gradebook."""
    from nbgrader.api import Gradebook

    spec = catalog.get(lab_id)
    nb_name = f"{lab_id}.ipynb"
    release = _read(root / "release" / lab_id / nb_name)
    out = []
    for folder in sorted((root / "submitted").glob(f"*/{lab_id}")):
        student = folder.parent.name
        if students and student not in students:
            continue
        step(f"{lab_id}: {student}: replaying the evidence on the grader's cluster")
        report, error = grade_submission(spec, folder, replay, budget)
        reports = task_reports(spec, report) if report else {}
        points = {gid: float(r.score) for gid, r in reports.items()}
        stamp = folder / "timestamp.txt"
        with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
            gb.update_or_create_student(student)
            kwargs: dict[str, Any] = {}
            if stamp.is_file():
                kwargs["timestamp"] = stamp.read_text(encoding="utf-8").strip()
            gb.update_or_create_submission(lab_id, student, **kwargs)
            for task in spec.tasks:
                grade = gb.find_grade(f"task-{task.id}", lab_id, lab_id, student)
                grade.auto_score = points.get(f"task-{task.id}", 0.0)
                grade.needs_manual_grade = False
            gb.db.commit()
        nb = autograded_notebook(release, _submitted(folder / nb_name), reports, error)
        target = root / "autograded" / student / lab_id
        target.mkdir(parents=True, exist_ok=True)
        _write(nb, target / nb_name)
        # As nbgrader's autograde does: the timestamp, and the exchange's submission secret, which
        # release_feedback needs to address the learner's feedback.
        for kept in (stamp, folder / "submission_secret.txt"):
            if kept.is_file():
                shutil.copy2(kept, target / kept.name)
        out.append(Graded(student, report, points, error))
    return out


def autograded_notebook(release: Any, submitted: dict[str, Any] | None, reports: dict[str, Report],
                        error: str) -> Any:
    """The released notebook with the learner's source (no outputs) in editable cells and the grader's report
    in graded ones. Nothing of the learner's notebook runs or is shown as output."""
    import nbformat

    nbf: Any = nbformat  # untyped library
    nb = copy.deepcopy(release)
    learner = {c.get("id"): c for c in (submitted or {}).get("cells", []) if isinstance(c, dict)}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        grade_id = meta.get("grade_id")
        theirs = learner.get(cell.get("id"))
        if cell.cell_type != "code":
            continue
        cell.outputs = []
        if grade_id in reports or (meta.get("grade") and grade_id and grade_id.startswith("task-")):
            report = reports.get(grade_id)
            text = feedback.report_text(report) if report else f"Not graded: {error or 'no evidence'}"
            cell.outputs = [nbf.v4.new_output("stream", name="stdout", text=text + "\n")]
        elif theirs is not None and not meta.get("locked"):
            source = theirs.get("source", "")
            cell.source = "".join(source) if isinstance(source, list) else str(source)
    return nb


MAX_NOTEBOOK_BYTES = 16 * 1024 * 1024


def _submitted(path: Path) -> dict[str, Any] | None:
    """The handed-in notebook as data (read, never run), or None when it is missing, a link, too large or not a
    notebook: the feedback then shows the released cells."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_NOTEBOOK_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _read(path: Path) -> Any:
    import nbformat

    nbf: Any = nbformat
    return nbf.read(str(path), as_version=4)


def _write(nb: Any, path: Path) -> None:
    import nbformat

    nbf: Any = nbformat
    nbf.write(nb, str(path))
