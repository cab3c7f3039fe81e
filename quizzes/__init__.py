"""gpulab quizzes: question banks, the ipywidgets quiz, answer storage and learning-gain reports.

This package stands alone: it imports nothing from ``cluster``, ``graders`` or ``labs``.

In a notebook::

    import quizzes
    quizzes.show("sharing", phase="pre", learner="me")        # answer, submit, get feedback
    quizzes.results(learner="me")                            # pre, post and normalised gain per section

With nbgrader, let the quiz write next to the notebook so the store is collected with the submission::

    quizzes.show("sharing", phase="post", store_path="quiz-answers.sqlite3")

and grade it in an autograder test cell (the learner is the only one in a per-submission store, or the one its
folder is named after; every response is graded again from the bank)::

    quizzes.grade_from_store("sharing", phase="post", store_path="quiz-answers.sqlite3", minimum=0.7)

Bank authors check that a bank measures knowledge rather than test-wiseness (``gpulab quiz validate`` runs it)::

    from quizzes import bank, bankcheck
    checked = bankcheck.check(bank.load_bank("my-bank.yaml"))
    print(bankcheck.text(checked)); assert checked.passed, checked.failures
    checked.pairs.pairs     # each outcome's pre item against its post item (quizzes.pairing)
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cluster import settings
from quizzes import (analysis, bankcheck, collect, errors, model, pairing, render, report, saved_view, scoring, shuffle,
                     store)
from quizzes.bank import builtin_banks, get_bank, load_bank, load_banks, sections
from quizzes.session import QuizSession

if TYPE_CHECKING:
    from quizzes.widget import QuizWidget

__all__ = [
    "StoredGrade", "analysis", "bankcheck", "builtin_banks", "collect", "errors", "get_bank", "grade_from_store",
    "learner_id", "load_bank", "load_banks", "model", "pairing", "quiz_widget", "report", "results", "saved_view",
    "scoring", "sections", "show", "shuffle", "store",
]  # fmt: skip

LEARNER_ENV = "GPULAB_LEARNER"


def learner_id(learner: str | None = None) -> str:
    """The learner id: the argument, else ``$GPULAB_LEARNER``, else ``$JUPYTERHUB_USER``, else the login name."""
    for candidate in (learner, settings.current().learner, os.environ.get("JUPYTERHUB_USER")):
        if candidate and candidate.strip():
            return candidate.strip()
    return getpass.getuser()


def quiz_widget(section: str, phase: str = "pre", learner: str | None = None, *, store_path: str | Path | None = None,
                seed: str = "", bank_file: str | Path | None = None) -> QuizWidget:  # fmt: skip
    """Build (without displaying) the quiz widget of one section and phase."""
    from quizzes.widget import QuizWidget

    chosen = load_bank(bank_file) if bank_file else get_bank(section)
    session = QuizSession(chosen, phase, learner_id(learner), store.Store.open(store_path), salt=seed)
    return QuizWidget(session)


def show(section: str, phase: str = "pre", learner: str | None = None, *, store_path: str | Path | None = None,
         seed: str = "", bank_file: str | Path | None = None) -> None:  # fmt: skip
    """Display the quiz of one section (``pre`` or ``post``) for one learner; answers go to the store."""
    from IPython.display import display

    quiz = quiz_widget(section, phase, learner, store_path=store_path, seed=seed, bank_file=bank_file)
    display(quiz)  # type: ignore[no-untyped-call]  # its bundle: the view and a saved fallback (quizzes.saved_view)


def results(learner: str | None = None, *, store_path: str | Path | None = None) -> None:
    """Display one learner's pre score, post score and normalised gain for every section."""
    from IPython.display import HTML, display

    who = learner_id(learner)
    with store.Store.open(store_path) as opened:
        answers = opened.answers(learner=who)
    table = render.learner_html(report.learner_view(list(builtin_banks()), answers, who))
    display(HTML(table))  # type: ignore[no-untyped-call]


def _stored_learner(opened: store.Store, learner: str | None) -> str:
    """The learner to grade: as given, else the store's owner (``collect.owner_of``: the learner its folder is
    named after, else its only learner), else ``learner_id()`` for an empty store.

    A store holding several learners with none named by its folder is refused rather than guessed at.
    """
    if learner or settings.current().learner:
        return learner_id(learner)
    found = opened.learners()
    if not found:
        return learner_id()
    owner, _ = collect.owner_of(opened.path, found)
    if owner is None:
        raise AssertionError(f"{opened.path} holds answers of {len(found)} learners ({', '.join(found[:5])}) and "
                             "its folder names none of them; pass learner='...' to say whose answers to grade")  # fmt: skip
    return owner


@dataclass(frozen=True)
class StoredGrade:
    """A learner's stored score for one quiz, as an nbgrader test cell needs it."""

    section: str
    phase: str
    learner: str
    score: float  # fraction of the quiz's points, unanswered items count 0
    answered: int
    total: int
    problems: tuple[str, ...] = ()  # stored rows left out: malformed, or a response that does not fit its item

    def points(self, max_points: float) -> float:
        return round(self.score * max_points, 4)


def grade_from_store(section: str, phase: str = "post", learner: str | None = None, *,
                     store_path: str | Path | None = None, minimum: float | None = None) -> StoredGrade:  # fmt: skip
    """Read a learner's stored answers, grade each response again from the bank, and score the quiz; with
    ``minimum``, assert the score reaches it. The ``score`` column of the store is not trusted.

    The AssertionError message says what was found, so an autograder shows the learner why the cell failed.
    """
    chosen = get_bank(section)
    path = store.resolve(store_path)
    if not path.is_file():
        raise AssertionError(f"no quiz answers found: {path} does not exist; run the {section} {phase}-quiz first")
    try:
        with store.Store.read_only(path) as opened:
            who = _stored_learner(opened, learner)
            answers, malformed = opened.scan(learner=who, section=section, phase=phase)
    except errors.StoreError as exc:
        raise AssertionError(f"the quiz answers cannot be read: {exc.message}") from exc
    answers, misfits = report.rescore([chosen], answers)  # the stored score is the learner's kernel's word only
    score, answered = report.phase_score(chosen, phase, answers)
    result = StoredGrade(section, phase, who, score or 0.0, answered, len(chosen.items_for(phase)),
                         tuple(malformed + misfits))  # fmt: skip
    if minimum is not None and result.score + 1e-9 < minimum:
        raise AssertionError(f"{who} scored {100 * result.score:.0f}% on the {section} {phase}-quiz "
                             f"({answered} of {result.total} answered); {100 * minimum:.0f}% is needed")  # fmt: skip
    return result

