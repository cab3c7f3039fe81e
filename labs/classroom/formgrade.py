"""nbgrader's formgrader, made safe for the labs: the instructor's buttons do what ``gpulab class`` does.

The class's ``nbgrader_config.py`` (``hubconfig.NBGRADER_CONFIG``, written by ``gpulab class init``) plugs in:

- ``ReplayGrade`` as the whole of Autograde's grading step (``Autograde.autograde_preprocessors``). nbgrader's
  own steps would execute the learner's notebook in a kernel of the instructor's server (``Execute``) and then
  give each graded cell its full points unless its output holds an error (``SaveAutoGrades``,
  ``nbgrader.utils.determine_grade``); the labs' graded cells are locked comments, so every learner would get
  full marks. ``ReplayGrade`` never executes the notebook: it replays the learner's handed-in ``evidence.json``
  on a cluster the instructor's account starts for the purpose (``labs.grader_cluster``), writes each task's
  points into the gradebook and the grader's report into the task's cell. nbgrader's sanitising steps still run
  first (outputs cleared, locked cells restored from the release).
- ``CheckedCollect`` as the exchange's collect (``ExchangeFactory.collect``): a submission counts only when the
  system says its folder belongs to the learner its name claims. nbgrader's own collect only warns ("cheating
  attempt?") and then collects it, and the newest folder wins, so a folder ``bob+lab+...`` that ann made in the
  world-writable inbound replaced bob's real submission. A forged folder is never collected (bob's own newest
  submission is, as if the forgery were not there) and is listed in ``loop.refused_path(course, lab)``.
- ``CheckedSubmit`` as the exchange's submit (``ExchangeFactory.submit``): the submission folder is the learner's
  alone (0755, not nbgrader's 0777), and collect refuses a folder holding anything of another account's.
- ``CheckedRelease`` as the exchange's release (``ExchangeFactory.release_assignment``): Release, from
  formgrader or ``nbgrader release_assignment``, refuses a release folder that holds anything but the lab's
  notebook or a cell with a solution or hidden tests (``loop.release_problems``, as ``gpulab class release``),
  and gives the inbound folder the sticky bit, so that no learner can rename or remove another's submission. The
  exchange's root keeps (or, where the instructor owns it, gets) the sticky bit too: nbgrader's release makes the
  root 0777, every exchange command of a learner's refuses a root they cannot write, and without the bit any
  learner could rename the course's folder away and put a folder of their own in its place, which every learner
  would then fetch from.
"""

from __future__ import annotations

import json
import os
import pwd
import stat
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from nbgrader.exchange.abc import ExchangeError
from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.exchange.default.release_assignment import ExchangeReleaseAssignment
from nbgrader.exchange.default.submit import ExchangeSubmit
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Enum

from cluster.kube.client import Client
from graders import bundle
from labs import catalog, nbgrader_autograde
from labs.classroom import accounts, kubeuids, loop
from labs.grader_cluster import GraderCluster


def not_a_lab(assignment: str) -> list[str]:
    """Class mode grades the course's labs by replay and never runs a learner's notebook, so an assignment that
    is not one of them cannot be graded here; one line saying so, or nothing for a lab."""
    if assignment in catalog.ids():
        return []
    return [f"{assignment!r} is not one of the course's labs ({', '.join(catalog.ids())}): class mode grades a lab "
            "by replaying the learner's evidence and never runs a learner's notebook, so it releases and grades "
            "only the labs (gpulab lab list); grade other notebooks outside the class's nbgrader configuration"]


class ReplayGrade(NbGraderPreprocessor):  # type: ignore[misc]  # nbgrader is untyped
    """Autograde's grading step: points from replaying the learner's evidence, never from running the notebook."""

    def preprocess(self, nb: Any, resources: Any) -> tuple[Any, Any]:
        from nbgrader.api import Gradebook
        from nbgrader.coursedir import CourseDirectory

        info = resources["nbgrader"]
        lab_id, student, notebook = info["assignment"], info["student"], info["notebook"]
        refused = not_a_lab(lab_id)
        if refused:  # released before class mode's config was in place: say why there are no points
            self.log.error("%s", refused[0])
            raise ExchangeError(refused[0])
        spec = catalog.get(lab_id)
        coursedir = CourseDirectory(config=self.config)
        folder = Path(coursedir.format_path(coursedir.submitted_directory, student, lab_id))
        self.log.info("replaying %s's evidence for %s on the grader's cluster", student, lab_id)
        with ExitStack() as started:
            # The grader's cluster starts (here, in nbgrader's process) only when there is evidence to replay; the
            # replay itself runs in a child held to grading's time and memory budget.
            evidence = folder / nbgrader_autograde.EVIDENCE
            cluster = started.enter_context(GraderCluster(spec.fleet)) if evidence.is_file() else None
            report, error = nbgrader_autograde.grade_submission(
                spec, folder, cluster.client if cluster else _no_cluster)
        reports = nbgrader_autograde.task_reports(spec, report) if report else {}
        with Gradebook(info["db_url"]) as gb:
            for task in spec.tasks:
                grade = gb.find_grade(f"task-{task.id}", notebook, lab_id, student)
                grade.auto_score = float(reports[f"task-{task.id}"].score) if f"task-{task.id}" in reports else 0.0
                grade.needs_manual_grade = grade.manual_score is not None
            gb.db.commit()
        if error:
            self.log.warning("%s: %s gets no points: %s", lab_id, student, error)
        return nbgrader_autograde.autograded_notebook(nb, None, reports, error), resources


def _no_cluster() -> Client:
    raise AssertionError("no evidence was handed in, so nothing is replayed")


class CheckedRelease(ExchangeReleaseAssignment):  # type: ignore[misc]  # nbgrader is untyped
    """The exchange's release, refusing a release folder that would hand learners more than the notebook."""

    def ensure_root(self) -> None:
        super().ensure_root()  # nbgrader's: the root made or changed to 0777 (its check ignores the sticky bit)
        root = os.stat(self.root)
        if root.st_mode & stat.S_ISVTX or not root.st_mode & stat.S_IWOTH:
            return
        if root.st_uid != os.geteuid():
            message = (f"the exchange's root {self.root} is writable by every learner but has no sticky bit, so any "
                       "learner could move the course's folder away and release their own in its place; its owner "
                       f"(uid {root.st_uid}) can fix that with: chmod +t {self.root}")
            self.log.error(message)
            raise ExchangeError(message)
        os.chmod(self.root, stat.S_IMODE(root.st_mode) | stat.S_ISVTX)

    def copy_files(self) -> None:
        lab_id = self.coursedir.assignment_id
        problems = not_a_lab(lab_id) or loop.release_problems(Path(self.src_path), lab_id)
        if problems:
            message = f"{lab_id} was not released: " + "; ".join(problems)
            self.log.error(message)  # nbgrader's apps print an ExchangeError's class, not its text
            raise ExchangeError(message)
        super().copy_files()
        # The inbound folder is writable by every learner (nbgrader's 2733), so without the sticky bit anyone who
        # learnt the name of another learner's submission could rename it out of collect's way. With it, only a
        # folder's owner (and the instructor, who owns the inbound folder) can rename or remove it.
        inbound = os.stat(self.inbound_path)
        os.chmod(self.inbound_path, stat.S_IMODE(inbound.st_mode) | stat.S_ISVTX)


def _entries(folder: str) -> Iterator[str]:
    """Every path below the submission ``folder`` (links not followed)."""
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in (*dirnames, *filenames):
            yield os.path.join(dirpath, name)


def _foreign_entries(folder: str, uid: int) -> bool:
    """Whether anything in the submission ``folder`` belongs to another uid than ``uid``, or is a link."""
    return any(os.path.islink(path) or os.lstat(path).st_uid != uid for path in _entries(folder))


class CheckedCollect(ExchangeCollect):  # type: ignore[misc]  # nbgrader is untyped
    """The exchange's collect, taking a submission only from the learner whose folder it is."""

    learner_uids = Enum(("accounts", "by-name"), default_value="accounts", config=True, help=(
        "How a learner's uid is known. 'accounts': each learner is a system account of that name (a class on one "
        "host). 'by-name': each learner's pod runs as labs.classroom.kubeuids.learner_uid of their hub name (a "
        "class on Kubernetes, course/class/z2jh-values.yaml)."))

    src_records: list[dict[str, Any]]  # set by nbgrader's init_src: the newest record of each name

    def learner_uid(self, name: str) -> int | None:
        """The uid that learner ``name``'s files have, or None where no learner has that name."""
        if self.learner_uids == "by-name":
            return kubeuids.learner_uid(name)
        try:
            return pwd.getpwnam(name).pw_uid
        except KeyError:
            return None

    def _path_to_record(self, path: str) -> dict[str, Any]:
        record: dict[str, Any] = super()._path_to_record(path)
        owner = accounts.owner_name(path)
        uid = self.learner_uid(record["username"])
        if os.path.islink(path) or uid is None or os.lstat(path).st_uid != uid or _foreign_entries(path, uid):
            # A group of its own (no learner has this name), so it can never be the named learner's newest.
            record["claimed"], record["owner"] = record["username"], owner
            record["username"] = f"\0refused {record['filename']}"
        return record

    def copy_files(self) -> None:
        refused = [r for r in self.src_records if "claimed" in r]
        self.src_records = [r for r in self.src_records if "claimed" not in r]
        for r in refused:
            self.log.error("%s claims to be %s's submission but belongs to %s: not collected",
                           r["filename"], r["claimed"], r["owner"])
        out = loop.refused_path(Path(self.coursedir.root), self.coursedir.assignment_id)
        out.write_text(json.dumps([{"folder": r["filename"], "claims": r["claimed"], "owner": r["owner"]}
                                   for r in refused], indent=1), encoding="utf-8")
        # Who wrote each collected evidence bundle, by the bundle's own record, beside who handed it in: a bundle
        # copied from another learner still names them (shown to the instructor, never graded).
        notes = []
        for r in self.src_records:
            said = bundle.owner_note(os.path.join(self.inbound_path, r["filename"], nbgrader_autograde.EVIDENCE))
            if said:
                self.log.warning("%s: %s", r["filename"], said)
                notes.append({"folder": r["filename"], "learner": r["username"], "note": said})
        loop.producer_notes_path(Path(self.coursedir.root), self.coursedir.assignment_id).write_text(
            json.dumps(notes, indent=1), encoding="utf-8")
        super().copy_files()


class CheckedSubmit(ExchangeSubmit):  # type: ignore[misc]  # nbgrader is untyped
    """The exchange's submit, leaving the submission folder writable by its learner alone. nbgrader makes it 0777
    (so that an instructor may delete it later), which let anyone who learnt its name put files into another
    learner's submission or remove theirs; 0755 keeps it readable for collect. Nothing in it stays writable by
    group or others either (a notebook the learner made 0666 would otherwise be open to every learner who can
    find it)."""

    def copy_files(self) -> None:
        super().copy_files()
        folder = os.path.join(self.inbound_path, self.assignment_filename)
        os.chmod(folder, 0o755)
        for path in _entries(folder):
            if not os.path.islink(path):
                os.chmod(path, stat.S_IMODE(os.lstat(path).st_mode) & ~0o022)
