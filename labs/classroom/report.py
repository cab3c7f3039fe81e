"""``gpulab class report``: per learner and per lab scores from the instructor's gradebook, and the quiz learning
gains and item statistics over every learner's answer store.

Answer stores are learner input. Each is read with its learner's own rights (``accounts.read_as``: a store that
is a link into another home reads as nothing) into a folder named after the learner, and then goes through the
quiz report's own collection rules (``quizzes.collect``: every response graded again from the bank, rows for
another learner refused, unreadable or slow stores reported and left out). Nothing here prints.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import quizzes
from quizzes import analysis, collect, report as quiz_report, store

from labs import catalog
from labs.classroom import accounts, layout

STORE_IN_HOME = Path(".local/share/gpulab") / store.FILE_NAME


@dataclass(frozen=True)
class LabScore:
    lab: str
    score: float | None  # None: not submitted (or not graded yet)
    max_score: float


@dataclass(frozen=True)
class LearnerRow:
    learner: str
    labs: tuple[LabScore, ...]

    @property
    def total(self) -> float:
        return sum(s.score or 0.0 for s in self.labs)


@dataclass(frozen=True)
class ClassReport:
    learners: tuple[str, ...]
    labs: tuple[str, ...]  # the assignments in the gradebook
    rows: tuple[LearnerRow, ...]
    quiz: quiz_report.ClassReport
    items: analysis.Analysis
    quiz_problems: tuple[str, ...]
    stores_found: int


def gradebook_rows(gradebook: Path, learners: Sequence[str]) -> tuple[tuple[str, ...], tuple[LearnerRow, ...]]:
    from nbgrader.api import Gradebook, MissingEntry

    if not gradebook.is_file():
        return (), tuple(LearnerRow(name, ()) for name in learners)
    # nbgrader runs alembic (its gradebook migrations) as a command, found next to this interpreter.
    here = str(Path(sys.executable).parent)
    if here not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([here, os.environ.get("PATH", "")])
    rows = []
    with Gradebook(f"sqlite:///{gradebook}") as gb:
        assignments = sorted(a.name for a in gb.assignments)
        maxima = {a.name: float(a.max_score) for a in gb.assignments}
        for name in learners:
            scores = []
            for lab in assignments:
                try:
                    sub = gb.find_submission(lab, name)
                    scores.append(LabScore(lab, float(sub.score), float(sub.max_score)))
                except MissingEntry:
                    scores.append(LabScore(lab, None, maxima[lab]))
            rows.append(LearnerRow(name, tuple(scores)))
    return tuple(assignments), tuple(rows)


def copy_stores(learners: Sequence[str], into: Path) -> list[Path]:
    """Each learner's answer store (and its write-ahead log), read as the learner, into ``into/<learner>/``."""
    out = []
    for name in learners:
        if not accounts.exists(name):
            continue
        source = accounts.home(name) / STORE_IN_HOME
        data = accounts.read_as(name, source)
        if data is None:
            continue
        folder = into / name
        folder.mkdir(parents=True)
        (folder / store.FILE_NAME).write_bytes(data)
        for suffix in ("-wal", "-shm"):
            extra = accounts.read_as(name, source.with_name(source.name + suffix))
            if extra is not None:
                (folder / (store.FILE_NAME + suffix)).write_bytes(extra)
        out.append(folder / store.FILE_NAME)
    return out


def build(cd: layout.ClassDir) -> ClassReport:
    accounts.require_root("gpulab class report")
    settings = cd.settings()
    learners = settings.learners
    labs, rows = gradebook_rows(accounts.home(settings.instructor) / "course" / "gradebook.db", learners)
    for lab in labs:
        catalog.get(lab)  # an assignment that is not one of our labs is a clear error
    banks = list(quizzes.builtin_banks())
    with tempfile.TemporaryDirectory(prefix="gpulab-class-report-") as tmp:
        paths = copy_stores(learners, Path(tmp))
        collected = collect.collect(paths, banks, owners={p: p.parent.name for p in paths})  # into/<learner>/
    answers = list(collected.answers)
    return ClassReport(tuple(learners), labs, rows, quiz_report.aggregate(banks, answers),
                       analysis.analyse(banks, answers), tuple(collected.problems), len(paths))
