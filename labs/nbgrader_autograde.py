"""nbgrader autograding for the labs, with the grade computed by the grader and never by the learner's notebook.

``nbgrader autograde`` would run the learner's notebook with the grading code inside the same kernel, in the
course folder, next to a writable ``gradebook.db``: an edited cell could replace the grading function or write
the gradebook. Here the steps are apart:

1. the learner's notebook runs in ``labs.sandbox`` (another process, time and memory limits, no write access
   outside its temporary copy), only so that the feedback shows its outputs;
2. the grader's process grades the handed-in ``evidence.json`` by replay on the grader's cluster
   (``labs.grade(..., replay=client)``), task by task;
3. the grader writes the points into the gradebook (``nbgrader.api.Gradebook``) and the autograded notebook:
   the released notebook's locked cells (as nbgrader's OverwriteCells would), the learner's outputs for the
   cells the learner may edit, and the grader's report in each graded cell.

``nbgrader generate_feedback`` then works as usual. nbgrader and nbformat are imported here only.
"""

from __future__ import annotations

import copy
import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster.kube.client import Client
from graders import Report
from graders.render import nbgrader as feedback
from labs import catalog, grading, sandbox
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


def grade_submission(spec: LabSpec, folder: Path, replay: Callable[[], Client]) -> tuple[Report | None, str]:
    """The replayed grade of one handed-in folder's ``evidence.json``, or None and why not."""
    bundle = folder / EVIDENCE
    if not bundle.is_file():
        return None, f"{EVIDENCE} was not handed in"
    try:
        with replay() as client:
            return grading.grade(spec.id, bundle, replay=client), ""
    except grading.GradingError:
        raise
    except Exception as exc:  # the learner's file is broken: zero, with the reason in the feedback
        message = getattr(exc, "problems", None) or [str(exc)]
        return None, "; ".join(str(m) for m in message)


def autograde(root: Path, lab_id: str, replay: Callable[[], Client], *, limits: sandbox.Limits = sandbox.Limits(),
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
        step(f"{lab_id}: {student}: running the notebook in the sandbox")
        run = sandbox.run_notebook(folder, nb_name, limits) if (folder / nb_name).is_file() else None
        step(f"{lab_id}: {student}: replaying the evidence on the grader's cluster")
        report, error = grade_submission(spec, folder, replay)
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
        nb = autograded_notebook(release, run.notebook if run else None, reports, error)
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


def autograded_notebook(release: Any, executed: dict[str, Any] | None, reports: dict[str, Report],
                        error: str) -> Any:
    """The released notebook with the learner's outputs in editable cells and the grader's in graded ones."""
    import nbformat

    nbf: Any = nbformat  # untyped library
    nb = copy.deepcopy(release)
    learner = {c.get("id"): c for c in (executed or {}).get("cells", [])}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        grade_id = meta.get("grade_id")
        theirs = learner.get(cell.get("id"))
        if cell.cell_type != "code":
            continue
        if grade_id in reports or (meta.get("grade") and grade_id and grade_id.startswith("task-")):
            report = reports.get(grade_id)
            text = feedback.report_text(report) if report else f"Not graded: {error or 'no evidence'}"
            cell.outputs = [nbf.v4.new_output("stream", name="stdout", text=text + "\n")]
        elif theirs is not None:
            if not meta.get("locked"):
                cell.source = theirs.get("source", "")
            cell.outputs = [nbf.from_dict(o) for o in theirs.get("outputs", [])]
    return nb


def _read(path: Path) -> Any:
    import nbformat

    nbf: Any = nbformat
    return nbf.read(str(path), as_version=4)


def _write(nb: Any, path: Path) -> None:
    import nbformat

    nbf: Any = nbformat
    nbf.write(nb, str(path))
