"""A small testing kit: simulated learners that fill an answer store through the real session code.

Used by the project's tests and handy for instructors who want to try ``gpulab quiz report`` before a class
has answered anything. Answers are random but reproducible from the seed.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from quizzes import model, scoring
from quizzes.session import QuizSession
from quizzes.store import Store


def answer(item: model.Item, right: bool, rng: random.Random) -> scoring.Response:
    """A response to ``item`` that is right or wrong as asked (wrong picks a distractor when there is one)."""
    if item.type is model.ItemType.NUMERIC:
        assert item.answer is not None
        if right:
            return item.answer
        if item.distractors:
            return rng.choice(item.distractors).value
        return item.answer + item.tolerance + 1.0
    correct = [o.id for o in item.options if o.correct]
    wrong = [o.id for o in item.options if not o.correct]
    if right:
        return correct if item.type is model.ItemType.MULTIPLE else correct[:1]
    if item.type is model.ItemType.MULTIPLE and len(correct) > 1 and rng.random() < 0.5:
        return correct[:1]  # partly right: one correct option left out
    return [rng.choice(wrong)]


def take_quiz(session: QuizSession, skill: float, rng: random.Random, *, retry: bool = True) -> None:
    """Answer every item of a session; each attempt is right with probability ``skill``."""
    for slot in session.quiz.slots:
        while not session.is_finished(slot.item.id):
            session.submit(slot.item.id, answer(slot.item, rng.random() < skill, rng))
            if not retry:
                break


def fill_store(path: Path | str, learner: str, banks: Sequence[model.Bank], *, pre_skill: float = 0.4,
               post_skill: float = 0.8, seed: str = "") -> None:  # fmt: skip
    """Have one simulated learner take the pre and post quiz of every bank, writing to the store at ``path``."""
    rng = random.Random(f"{seed}/{learner}")
    with Store.open(path) as store:
        for bank in banks:
            take_quiz(QuizSession(bank, "pre", learner, store), pre_skill, rng)
            take_quiz(QuizSession(bank, "post", learner, store), post_skill, rng)
