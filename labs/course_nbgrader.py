"""nbgrader for the labs: source assignments built from the lab specs, and a round trip that proves them.

Each lab becomes an nbgrader assignment ``<lab id>`` with one notebook. The learner does the lab on a cluster,
runs the notebook's collect cell (``lab.submit`` writes ``evidence.json``: the files and the actions taken)
and hands both in. The notebook holds no grading code and the release no solutions: grading is
``labs.nbgrader_autograde``, which never runs the learner's notebook: it computes each task's points by
replaying the evidence on the grader's cluster.

``round_trip`` runs generate_assignment, two simulated students (one hands in the lab's solution files with
the actions of its solve steps, one the same with a typical mistake in one file), the replay autograde and
generate_feedback, in a copy of the course directory, and reads the scores back from the gradebook. nbgrader
and nbformat are imported here and in ``labs.nbgrader_autograde`` only.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cluster import errors
from graders import bundle as bundle_mod
from labs import catalog, nbgrader_autograde, replay
from labs.classroom import solutions
from labs.grader_cluster import GraderCluster
from labs.spec import LabSpec

log = logging.getLogger(__name__)

EVIDENCE = "evidence.json"
SOLVED, WRONG = "solution-student", "wrong-student"
DEMO_DIR = "demo"  # mistakes.yaml (the simulated students' solved work comes from the labs' own solutions)
_NB_SCHEMA = 3


def default_course_dir() -> Path:
    """``course/nbgrader`` of the source checkout this package runs from."""
    return Path(__file__).resolve().parents[1] / "course" / "nbgrader"


def notebook_name(lab_id: str) -> str:
    return f"{lab_id}.ipynb"


# --- source notebooks -----------------------------------------------------------------------------------------


def _meta(grade_id: str, *, points: float | None = None, locked: bool = True) -> dict[str, Any]:
    meta: dict[str, Any] = {"grade_id": grade_id, "locked": locked, "schema_version": _NB_SCHEMA,
                            "solution": False, "task": False, "grade": points is not None}  # fmt: skip
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


_SETUP = '''import logging
from pathlib import Path

import labs

logging.getLogger().addHandler(logging.NullHandler())
LAB = "{lab}"
EVIDENCE = Path("{evidence}")'''

_COLLECT = '''if EVIDENCE.is_file():
    print(f"{EVIDENCE} is here. To record it again, delete it and run this cell on your lab cluster.")
else:
    written = labs.attach(LAB).submit(EVIDENCE)
    print(f"Evidence written to {written}. Hand it in together with this notebook.")'''

_GRADED = """# Graded by gpulab after you hand in: your files and the actions in {evidence} are replayed on the
# grader's own cluster, and this cell shows the result of this task."""


def source_notebook(spec: LabSpec) -> Any:
    """The source (instructor) version of one lab's assignment notebook."""
    import nbformat

    nbf: Any = nbformat  # untyped library
    v4 = nbf.v4
    nb = v4.new_notebook()
    nb.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
                   "language_info": {"name": "python"}}  # fmt: skip
    rows = "\n".join(f"| {i} | {t.title} | {sum(c.points for c in t.checks):g} |" for i, t in enumerate(spec.tasks, 1))
    intro = (f"# Lab {spec.id}: {spec.title}\n\n{spec.summary}\n\n"
             f"**How to hand in.** Do the lab on your lab cluster (`gpulab lab start {spec.id}`, or its section in "
             "the course notebook), then run the cell under *Collect your evidence*: it writes `evidence.json` "
             "next to this notebook with your files and what you did on the cluster (node labels, ClusterPolicy "
             "changes). Submit both. Grading replays your work on the grader's own cluster: the outcome is "
             "what the real scheduler and GPU stack make of it there.\n\n"
             f"| task | what | points |\n|---|---|---|\n{rows}\n")  # fmt: skip
    cells = [
        v4.new_markdown_cell(intro, id="intro", metadata=_meta("intro")),
        v4.new_code_cell(_SETUP.format(lab=spec.id, evidence=EVIDENCE), id="setup", metadata=_meta("setup")),
        v4.new_markdown_cell("## Collect your evidence\n\nRun this once you have finished the lab, on the machine "
                             "where your lab cluster runs.", id="collect-md"),  # fmt: skip
        v4.new_code_cell(_COLLECT, id="collect"),
    ]
    for i, task in enumerate(spec.tasks, 1):
        points = sum(c.points for c in task.checks)
        cells.append(v4.new_markdown_cell(f"### Task {i}: {task.title} ({points:g} points)", id=f"{task.id}-md"))
        source = _GRADED.format(evidence=EVIDENCE)
        cells.append(v4.new_code_cell(source, id=f"task-{task.id}", metadata=_meta(f"task-{task.id}", points=points)))
    nb.cells = cells
    nbf.validate(nb)
    return nb


def write_sources(course_dir: Path, lab_ids: Sequence[str] | None = None) -> list[Path]:
    """(Re)write ``source/<lab>/<lab>.ipynb`` for each lab; returns the paths written."""
    import nbformat

    nbf: Any = nbformat  # untyped library
    written = []
    for lab_id in lab_ids or catalog.ids():
        path = course_dir / "source" / lab_id / notebook_name(lab_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        nbf.write(source_notebook(catalog.get(lab_id)), str(path))
        written.append(path)
    return written


# --- simulated students ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mistake:
    """A typical mistake, made in one file of an otherwise solved lab."""

    file: str
    old: str
    new: str
    about: str


def mistakes(course_dir: Path) -> dict[str, Mistake]:
    path = course_dir / DEMO_DIR / "mistakes.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    try:
        return {lab: Mistake(str(m["file"]), str(m["old"]), str(m["new"]), str(m["about"]))
                for lab, m in data["mistakes"].items()}  # fmt: skip
    except (KeyError, TypeError, AttributeError) as exc:
        raise errors.ConfigError(str(path), [f"each entry of 'mistakes' needs file, old, new and about ({exc})"]) from exc


def evidence_for(course_dir: Path, lab_id: str, student: str) -> dict[str, Any]:
    """What a simulated student hands in: the lab's solution files and the actions of its solve steps (a
    bundle with no recorded cluster state: grading replays, it never reads one), or that with the lab's
    typical mistake in one file."""
    spec = catalog.get(lab_id)
    solutions.require(spec.directory, "the simulated students' solved work")
    files = {n: (spec.directory / "solution" / n).read_text(encoding="utf-8") for n in spec.files}
    if student == WRONG:
        mistake = mistakes(course_dir)[lab_id]
        text = files[mistake.file]
        if mistake.old not in text:
            raise errors.ConfigError(str(spec.directory / "solution" / mistake.file),
                                     [f"does not contain {mistake.old!r} (see {DEMO_DIR}/mistakes.yaml)"])
        files[mistake.file] = text.replace(mistake.old, mistake.new, 1)
    cluster: dict[str, Any] = {k: [] for k in bundle_mod.LIST_KEYS}
    cluster["clusterPolicy"] = None
    return {"kind": bundle_mod.KIND, "bundleVersion": bundle_mod.BUNDLE_VERSION, "lab": lab_id,
            "scope": {"namespaces": list(spec.scope.namespaces)}, "manifests": files,
            "actions": replay.solve_actions(spec), "cluster": cluster}


# --- the round trip -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CellGrade:
    grade_id: str
    score: float
    max_score: float


@dataclass(frozen=True)
class StudentResult:
    assignment: str
    student: str
    score: float
    max_score: float
    cells: tuple[CellGrade, ...]
    feedback: Path


def run_nbgrader(args: list[str], cwd: Path) -> None:
    """``nbgrader ARGS`` in ``cwd`` with this interpreter; a failure raises ``CommandFailed`` with its log."""
    cmd = [sys.executable, "-m", "nbgrader", *args]
    # nbgrader runs alembic (its gradebook migrations) as a command: it must be found next to this interpreter.
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900, env={**os.environ, "PATH": path})
    log.info("%s\n%s", " ".join(args), proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise errors.CommandFailed(["nbgrader", *args], proc.returncode, proc.stdout + proc.stderr,
                                   hint=f"run it by hand in {cwd} to see the whole log")  # fmt: skip


def _submit(root: Path, lab_id: str, student: str, course_dir: Path) -> None:
    folder = root / "submitted" / student / lab_id
    shutil.copytree(root / "release" / lab_id, folder)
    (folder / EVIDENCE).write_text(json.dumps(evidence_for(course_dir, lab_id, student), indent=1), encoding="utf-8")
    (folder / "timestamp.txt").write_text("2026-01-15 12:00:00.000000 UTC\n", encoding="utf-8")


def _results(root: Path, lab_id: str) -> list[StudentResult]:
    from nbgrader.api import Gradebook

    out = []
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for student in (SOLVED, WRONG):
            sub = gb.find_submission(lab_id, student)
            nb = gb.find_submission_notebook(lab_id, lab_id, student)
            cells = tuple(CellGrade(g.name, float(g.score), float(g.max_score)) for g in nb.grades)
            feedback = root / "feedback" / student / lab_id / f"{lab_id}.html"
            out.append(StudentResult(lab_id, student, float(sub.score), float(sub.max_score), cells, feedback))
    return out


def round_trip(course_dir: Path, workdir: Path, lab_ids: Sequence[str],
               step: Callable[[str], None] = lambda _: None, *, replay_on: Path | None = None) -> list[StudentResult]:  # fmt: skip
    """generate_assignment -> two simulated students -> replay autograde -> generate_feedback, in ``workdir``.

    One grader's cluster serves every lab (``replay_on``: a kubeconfig of a running one instead)."""
    with GraderCluster(kubeconfig=replay_on) as cluster:
        return _round_trip(course_dir, workdir, lab_ids, step, cluster)


def _round_trip(course_dir: Path, workdir: Path, lab_ids: Sequence[str], step: Callable[[str], None],
                cluster: GraderCluster) -> list[StudentResult]:
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    shutil.copy2(course_dir / "nbgrader_config.py", workdir / "nbgrader_config.py")
    results = []
    for lab_id in lab_ids:
        catalog.get(lab_id)  # an unknown lab is a clear error before nbgrader runs
        shutil.copytree(course_dir / "source" / lab_id, workdir / "source" / lab_id)
        step(f"{lab_id}: generate_assignment")
        run_nbgrader(["generate_assignment", lab_id, "--force"], workdir)
        for student in (SOLVED, WRONG):
            _submit(workdir, lab_id, student, course_dir)
        step(f"{lab_id}: autograde (replay on the grader's cluster)")
        nbgrader_autograde.autograde(workdir, lab_id, cluster.client, step=step)
        step(f"{lab_id}: generate_feedback")
        run_nbgrader(["generate_feedback", lab_id, "--force"], workdir)
        results.extend(_results(workdir, lab_id))
    return results
