"""One learner taking one quiz: attempts, the retry policy, feedback, and saving each answer as it is given.

The widget is a thin view over this class, so everything a learner can do is testable without a browser.
A reopened session reads the earlier attempts back from the store and carries on where the learner was.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from quizzes import errors, model, scoring, shuffle, wording
from quizzes.store import Answer, Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Feedback:
    """What a learner sees after submitting: the grade, the explanations, and whether the item is closed."""

    item_id: str
    grade: model.Grade
    attempt: int
    attempts_left: int
    reveal: tuple[str, ...] = ()  # the right answer and why, once no attempt is left

    @property
    def finished(self) -> bool:
        return self.grade.correct or self.attempts_left == 0


class QuizSession:
    def __init__(self, bank: model.Bank, phase: str, learner: str, store: Store, *, salt: str = "") -> None:
        if not learner.strip():
            raise errors.QuizError("a learner id is needed to record answers",
                                   hint="pass learner='your-id' or set GPULAB_LEARNER")  # fmt: skip
        self.quiz = shuffle.build(bank, phase, salt=salt)
        self.learner = learner
        self.store = store
        self._attempts: dict[str, list[Answer]] = {s.item.id: [] for s in self.quiz.slots}
        for answer in store.answers(learner=learner, section=bank.section, phase=phase):
            if answer.item in self._attempts:
                self._attempts[answer.item].append(answer)

    @property
    def bank(self) -> model.Bank:
        return self.quiz.bank

    @property
    def phase(self) -> str:
        return self.quiz.phase

    def attempts(self, item_id: str) -> list[Answer]:
        return list(self._attempts.get(item_id, []))

    def attempts_left(self, item_id: str) -> int:
        return max(0, self.quiz.policy.max_attempts - len(self._attempts.get(item_id, [])))

    def is_finished(self, item_id: str) -> bool:
        done = self._attempts.get(item_id, [])
        return bool(done) and (done[-1].correct or self.attempts_left(item_id) == 0)

    def problem_with(self, item_id: str, response: scoring.Response | None) -> str | None:
        """A learner-facing reason the response cannot be submitted yet, or None when it can."""
        slot = self._slot(item_id)
        if self.is_finished(item_id):
            return wording.CLOSED
        if slot.item.type is model.ItemType.NUMERIC:
            return None if isinstance(response, (int, float)) else wording.NEED_NUMBER
        if not response:
            return wording.NEED_TICKS if slot.item.type is model.ItemType.MULTIPLE else wording.NEED_CHOICE
        return None

    def submit(self, item_id: str, response: scoring.Response) -> Feedback:
        """Grade, store (committed before returning) and explain one attempt."""
        slot = self._slot(item_id)
        reason = self.problem_with(item_id, response)
        if reason:
            raise errors.QuizError(reason)
        grade = scoring.grade(slot.item, response)
        answer = self.store.record(self.learner, self.bank.section, self.phase, item_id, response, grade,
                                   bank_version=self.bank.version, max_attempts=self.quiz.policy.max_attempts)  # fmt: skip
        self._attempts[item_id].append(answer)
        log.info("stored %s/%s/%s attempt %d score %.2f", self.bank.section, self.phase, item_id, answer.attempt,
                 grade.score)  # fmt: skip
        return self.feedback_for(item_id, grade, answer.attempt)

    def last_feedback(self, item_id: str) -> Feedback | None:
        """The feedback of the latest stored attempt (for a reopened quiz)."""
        done = self._attempts.get(item_id, [])
        if not done:
            return None
        last = done[-1]
        grade = scoring.grade(self._slot(item_id).item, last.response)
        return self.feedback_for(item_id, grade, last.attempt)

    def feedback_for(self, item_id: str, grade: model.Grade, attempt: int) -> Feedback:
        left = self.attempts_left(item_id)
        reveal: tuple[str, ...] = ()
        if not grade.correct and left == 0 and self.quiz.policy.reveal_answer:
            reveal = correct_answer(self._slot(item_id).item)
        return Feedback(item_id=item_id, grade=grade, attempt=attempt, attempts_left=left, reveal=reveal)

    def score(self) -> tuple[float, int, int]:
        """(points, answered items, items) under the quiz's counting policy; unanswered items score 0."""
        points = 0.0
        answered = 0
        for slot in self.quiz.slots:
            kept = scoring.counted([a.score for a in self._attempts[slot.item.id]], self.quiz.policy)
            if kept is not None:
                points += kept
                answered += 1
        return points, answered, len(self.quiz.slots)

    def _slot(self, item_id: str) -> shuffle.Slot:
        slot = self.quiz.slot(item_id)
        if slot is None:
            raise errors.QuizError(f"item '{item_id}' is not part of the {self.bank.section} {self.phase} quiz")
        return slot


def correct_answer(item: model.Item) -> tuple[str, ...]:
    """The right answer of an item in words, with its explanation."""
    if item.type is model.ItemType.NUMERIC:
        assert item.answer is not None
        return (wording.numeric_answer(item.answer, item.unit, item.tolerance), item.explanation)
    right = [o for o in item.options if o.correct]
    if item.type is model.ItemType.MANIFEST:
        return (wording.right_answers_head(1, manifest=True), right[0].manifest, right[0].explanation)
    head = wording.right_answers_head(len(right), manifest=False)
    return (head, *[f"{o.text} — {o.explanation}" for o in right])
