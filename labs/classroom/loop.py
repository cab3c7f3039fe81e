"""The instructor's nbgrader loop for a class, run as the instructor's account in its ``~/course`` folder.

``release``: generate_assignment, a check that the release holds the assignment's notebook and nothing else
(no solution files, no evidence bundle, no demo work), release_assignment to the class's exchange.
``grade``: collect the learners' submissions from the exchange, grade them by replaying each learner's evidence
on a cluster the instructor's account owns (``labs.nbgrader_autograde``; never nbgrader's own autograde, which
would trust cells the learner edited), flag similar submissions for the instructor (``similarity``, written to
``similarity-LAB.json``), generate_feedback and release_feedback.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

from cluster import errors
from labs import catalog, course_nbgrader, nbgrader_autograde
from labs.classroom import similarity
from labs.grader_cluster import GraderCluster

log = logging.getLogger(__name__)


def release_problems(folder: Path, lab_id: str) -> list[str]:
    """What must never reach learners: anything but the assignment's notebook, or a cell nbgrader would treat as
    a solution or as hidden tests."""
    problems = []
    expected = course_nbgrader.notebook_name(lab_id)
    for item in sorted(folder.rglob("*")):
        if item.is_file() and item.relative_to(folder).as_posix() != expected:
            problems.append(f"{item.relative_to(folder)}: only {expected} may be released")
    notebook = folder / expected
    if not notebook.is_file():
        return [*problems, f"{expected} is missing"]
    for cell in json.loads(notebook.read_text(encoding="utf-8")).get("cells", []):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        text = "".join(cell.get("source", []))
        if meta.get("solution") or "### BEGIN SOLUTION" in text or "### BEGIN HIDDEN TESTS" in text:
            problems.append(f"{expected}: cell {cell.get('id')} holds a solution or hidden tests")
    return problems


def release(course: Path, lab_id: str, step: Callable[[str], None] = lambda _: None) -> Path:
    catalog.get(lab_id)
    step(f"{lab_id}: generate_assignment")
    course_nbgrader.run_nbgrader(["generate_assignment", lab_id, "--force"], course)
    folder = course / "release" / lab_id
    problems = release_problems(folder, lab_id)
    if problems:
        raise errors.ConfigError(str(folder), problems, hint="remove these from source/ and release again")
    step(f"{lab_id}: release_assignment")
    course_nbgrader.run_nbgrader(["release_assignment", lab_id, "--force"], course)
    return folder


def refused_path(course: Path, lab_id: str) -> Path:
    """Where collect (``formgrade.CheckedCollect``) lists the submissions of ``lab_id`` it refused: folders in the
    exchange named for one learner but owned by another account (JSON, rewritten at each collect)."""
    return course / f"collect-refused-{lab_id}.json"


def producer_notes_path(course: Path, lab_id: str) -> Path:
    """Where collect lists the collected submissions whose evidence bundle says another account wrote it than the
    one that handed it in (``graders.producer.note``; JSON, rewritten at each collect)."""
    return course / f"collect-producers-{lab_id}.json"


def producer_notes(course: Path, lab_id: str) -> list[dict[str, str]]:
    """The last collect's producer notes of ``lab_id`` (none when it wrote no list)."""
    return _listed(producer_notes_path(course, lab_id), ("folder", "learner", "note"))


def refused(course: Path, lab_id: str) -> list[dict[str, str]]:
    """The submissions the last collect of ``lab_id`` refused (none when it wrote no list)."""
    return _listed(refused_path(course, lab_id), ("folder", "claims", "owner"))


def _listed(path: Path, keys: tuple[str, ...]) -> list[dict[str, str]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [{k: str(r.get(k, "")) for k in keys} for r in data if isinstance(r, dict)] if isinstance(data, list) else []


def grade(course: Path, lab_id: str, step: Callable[[str], None] = lambda _: None, *,
          replay_on: Path | None = None) -> list[nbgrader_autograde.Graded]:
    catalog.get(lab_id)
    step(f"{lab_id}: collect")
    course_nbgrader.run_nbgrader(["collect", lab_id, "--update"], course)
    for r in refused(course, lab_id):
        step(f"{lab_id}: refused {r['folder']}: it claims to be {r['claims']}'s submission but belongs to "
             f"{r['owner']}")
    for r in producer_notes(course, lab_id):
        step(f"{lab_id}: {r['learner']}: {r['note']}")
    step(f"{lab_id}: starting the grader's cluster")
    with GraderCluster(kubeconfig=replay_on) as cluster:
        graded = nbgrader_autograde.autograde(course, lab_id, cluster.client, step=step)
    if not graded:
        raise errors.CourseError(f"no submissions of {lab_id} were collected",
                                 hint="learners submit from the Assignments tab; then run this again")
    found = similarity.check(course, lab_id)  # read only: a flag is for the instructor, it changes no score
    step(f"{lab_id}: similarity: {len(found.flags)} flag(s), {similarity.write(course, found).name}")
    step(f"{lab_id}: generate_feedback")
    course_nbgrader.run_nbgrader(["generate_feedback", lab_id, "--force"], course)
    step(f"{lab_id}: release_feedback")
    course_nbgrader.run_nbgrader(["release_feedback", lab_id], course)
    return graded
