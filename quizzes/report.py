"""Learning-gain results computed from stored answers: one learner's view and a class over many stores.

Results are frozen values; printing them (table, CSV, chart) is ``quizzes.render`` and ``quizzes.plot``.
A phase score is the mean item score over every item of that phase's quiz (an unanswered item scores 0),
under the quiz's retry policy; it is None when the learner answered nothing in that phase.

Stores are written by the learner's own kernel, so the ``score`` they hold is never read here: every response
is graded again from the bank (``score_of``). A response that does not fit its item counts as not answered.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import mean

from quizzes import errors, model, scoring, store
from quizzes.store import Answer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SectionResult:
    """One learner in one section."""

    section: str
    title: str
    pre: float | None
    post: float | None
    gain: float | None
    answered_pre: int
    answered_post: int
    items_pre: int
    items_post: int


@dataclass(frozen=True)
class SectionStats:
    """A class in one section. ``class_gain`` is Hake's gain of the mean scores of learners with both."""

    section: str
    title: str
    learners_pre: int
    learners_post: int
    mean_pre: float | None
    mean_post: float | None
    class_gain: float | None
    mean_learner_gain: float | None
    matched: int  # learners with both a pre and a post score


@dataclass(frozen=True)
class ItemStats:
    """First attempts at one item in one phase: difficulty as the share of the points earned, and choices."""

    section: str
    phase: str
    item: str
    outcome: str
    type: str
    responses: int
    difficulty: float | None  # mean first-attempt score: 1.0 = everyone right (classical p-value)
    choices: tuple[tuple[str, int], ...]  # option id (or wrong numeric value) -> learners who chose it
    top_distractor: str  # the most chosen wrong option, "" if none


@dataclass(frozen=True)
class ClassReport:
    learners: tuple[str, ...]
    sections: tuple[SectionStats, ...]
    items: tuple[ItemStats, ...]
    unknown_items: int  # stored answers to items no bank has (a bank changed since)


def score_of(item: model.Item, answer: Answer) -> float | None:
    """The answer's score graded again from the bank; None when the response does not fit the item."""
    try:
        return scoring.grade(item, answer.response).score
    except (errors.QuizError, TypeError, ValueError, OverflowError):
        return None


def rescore(banks: Sequence[model.Bank], answers: Iterable[Answer]) -> tuple[list[Answer], list[str]]:
    """Answers with score and correctness graded again from the banks, and one message per response that does
    not fit its item (left out). Answers to items no bank defines pass through unchanged (``aggregate`` counts them).
    """
    items = {(b.section, i.id): i for b in banks for i in b.items}
    kept: list[Answer] = []
    problems: list[str] = []
    for answer in answers:
        item = items.get((answer.section, answer.item))
        if item is None:
            kept.append(answer)
            continue
        try:
            graded = scoring.grade(item, answer.response)
        except (errors.QuizError, TypeError, ValueError, OverflowError) as exc:
            problems.append(f"learner {answer.learner}, item {answer.item} attempt {answer.attempt}: the response "
                            f"{store.shown(answer.response)} does not fit the item ({str(exc)[:200]}); "
                            "left out")  # fmt: skip
            continue
        if graded.score != answer.score:
            log.info("%s %s attempt %d: stored score %s, graded again %s", answer.learner, answer.item,
                     answer.attempt, answer.score, graded.score)  # fmt: skip
        kept.append(dataclasses.replace(answer, score=graded.score, correct=graded.correct))
    return kept, problems


def first_attempts(answers: Iterable[Answer]) -> list[Answer]:
    """Each learner's first attempt at each item (the earliest row when a store repeats an attempt number)."""
    seen: set[tuple[str, str, str, str]] = set()
    result = []
    for answer in sorted(answers, key=lambda a: a.attempt):
        key = (answer.learner, answer.section, answer.phase, answer.item)
        if answer.attempt == 1 and key not in seen:
            seen.add(key)
            result.append(answer)
    return result


def phase_score(bank: model.Bank, phase: str, answers: Iterable[Answer]) -> tuple[float | None, int]:
    """(score in [0, 1] or None, answered items) for one learner's answers in one section and phase."""
    by_item: dict[str, list[float]] = defaultdict(list)
    seen: set[tuple[str, int]] = set()
    for answer in sorted(answers, key=lambda a: a.attempt):
        item = bank.item(answer.item)
        score = score_of(item, answer) if item is not None else None
        if score is None or (answer.item, answer.attempt) in seen:
            continue
        seen.add((answer.item, answer.attempt))
        by_item[answer.item].append(score)
    items = bank.items_for(phase)
    policy = bank.policy(phase)
    kept = [scoring.counted(by_item.get(i.id, []), policy) for i in items]
    answered = sum(1 for k in kept if k is not None)
    if not answered or not items:
        return None, answered
    return sum(k for k in kept if k is not None) / len(items), answered


def learner_view(banks: Sequence[model.Bank], answers: Iterable[Answer], learner: str) -> list[SectionResult]:
    """Pre score, post score and normalised gain of one learner, section by section."""
    mine = [a for a in answers if a.learner == learner]
    results = []
    for bank in banks:
        scores: dict[str, tuple[float | None, int]] = {}
        for phase in model.PHASES:
            scores[phase] = phase_score(bank, phase, [a for a in mine if a.section == bank.section and a.phase == phase])
        (pre, n_pre), (post, n_post) = scores["pre"], scores["post"]
        results.append(SectionResult(bank.section, bank.title, pre, post, scoring.normalized_gain(pre, post),
                                     n_pre, n_post, len(bank.items_for("pre")), len(bank.items_for("post"))))  # fmt: skip
    return results


def aggregate(banks: Sequence[model.Bank], answers: Sequence[Answer]) -> ClassReport:
    """Per-section and per-item statistics over every learner found in ``answers``."""
    learners = tuple(sorted({a.learner for a in answers}))
    known = {(b.section, i.id) for b in banks for i in b.items}
    unknown = sum(1 for a in answers if (a.section, a.item) not in known)
    if unknown:
        log.warning("%d stored answers belong to items no bank defines; they are left out", unknown)
    views = {learner: learner_view(banks, answers, learner) for learner in learners}
    sections = tuple(_section_stats(bank, [next(r for r in views[lr] if r.section == bank.section)
                                           for lr in learners]) for bank in banks)  # fmt: skip
    items = tuple(_item_stats(bank, phase, item, answers) for bank in banks for phase in model.PHASES
                  for item in bank.items_for(phase))  # fmt: skip
    return ClassReport(learners=learners, sections=sections, items=items, unknown_items=unknown)


def _section_stats(bank: model.Bank, results: Sequence[SectionResult]) -> SectionStats:
    pres = [r.pre for r in results if r.pre is not None]
    posts = [r.post for r in results if r.post is not None]
    both = [r for r in results if r.pre is not None and r.post is not None]
    gains = [r.gain for r in both if r.gain is not None]
    class_gain = None
    if both:
        class_gain = scoring.normalized_gain(mean(r.pre for r in both if r.pre is not None),
                                             mean(r.post for r in both if r.post is not None))  # fmt: skip
    return SectionStats(
        section=bank.section,
        title=bank.title,
        learners_pre=len(pres),
        learners_post=len(posts),
        mean_pre=mean(pres) if pres else None,
        mean_post=mean(posts) if posts else None,
        class_gain=class_gain,
        mean_learner_gain=mean(gains) if gains else None,
        matched=len(both),
    )


def _item_stats(bank: model.Bank, phase: str, item: model.Item, answers: Sequence[Answer]) -> ItemStats:
    first = [a for a in first_attempts(a for a in answers if a.section == bank.section and a.phase == phase
                                       and a.item == item.id) if score_of(item, a) is not None]  # fmt: skip
    choices: Counter[str] = Counter()
    wrong: Counter[str] = Counter()
    for answer in first:
        for choice in _choice_keys(item, answer):
            choices[choice] += 1
            if not _is_right_choice(item, choice):
                wrong[choice] += 1
    order = [o.id for o in item.options] if item.type.has_options else []
    ordered = [(k, choices.get(k, 0)) for k in order] + sorted((k, v) for k, v in choices.items() if k not in order)
    return ItemStats(
        section=bank.section,
        phase=phase,
        item=item.id,
        outcome=item.outcome,
        type=item.type.value,
        responses=len(first),
        difficulty=mean(score_of(item, a) or 0.0 for a in first) if first else None,
        choices=tuple(ordered),
        top_distractor=wrong.most_common(1)[0][0] if wrong else "",
    )


def _choice_keys(item: model.Item, answer: Answer) -> list[str]:
    if isinstance(answer.response, list):
        return list(answer.response)
    if item.answer is not None and scoring.within(answer.response, item.answer, item.tolerance):
        return ["correct"]
    return [f"{answer.response:g}"]


def _is_right_choice(item: model.Item, choice: str) -> bool:
    if item.type is model.ItemType.NUMERIC:
        return choice == "correct"
    option = item.option(choice)
    return option is not None and option.correct
