"""Grading responses and combining scores: partial credit, numeric tolerance, attempt policy, normalised gain.

Pure functions over ``quizzes.model`` values; no storage, no widgets.

Responses are plain data so they can be stored as JSON: a list of option ids for choice items (one id for
single and manifest items) and a number for numeric items.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from quizzes import errors, model, wording

Response = list[str] | float


def grade(item: model.Item, response: Response) -> model.Grade:
    """Score one response to one item, with the explanations to show for it."""
    if item.type is model.ItemType.NUMERIC:
        if isinstance(response, list):
            raise errors.QuizError(f"item '{item.id}' expects a number, got a list of options")
        return _grade_numeric(item, float(response))
    if not isinstance(response, list):
        raise errors.QuizError(f"item '{item.id}' expects a list of option ids, got {response!r}")
    unknown = [r for r in response if item.option(r) is None]
    if unknown:
        raise errors.QuizError(f"item '{item.id}' has no option(s) {', '.join(unknown)}")
    chosen = list(dict.fromkeys(response))
    if item.type is model.ItemType.MULTIPLE:
        return _grade_multiple(item, chosen)
    if len(chosen) != 1:
        raise errors.QuizError(f"item '{item.id}' takes exactly one option, got {len(chosen)}")
    option = item.option(chosen[0])
    assert option is not None
    score = 1.0 if option.correct else 0.0
    return model.Grade(score=score, correct=option.correct, feedback=(option.explanation,))


def partial_credit(n_correct: int, n_wrong: int, hits: int, false_picks: int) -> float:
    """Multiple choice: share of correct options found minus share of wrong options picked, floored at 0.

    Ticking everything therefore scores 0, ticking nothing scores 0, and each wrong tick costs as much as the
    options it could have been confused with, so guessing does not pay on average.
    """
    if n_correct <= 0 or n_wrong < 0:
        raise ValueError("a multiple-choice item needs at least one correct option")
    penalty = false_picks / n_wrong if n_wrong else 0.0
    return max(0.0, hits / n_correct - penalty)


def _grade_multiple(item: model.Item, chosen: Sequence[str]) -> model.Grade:
    correct = item.correct_ids
    hits = sum(1 for c in chosen if c in correct)
    false_picks = len(chosen) - hits
    score = partial_credit(len(correct), len(item.options) - len(correct), hits, false_picks)
    feedback = tuple(o.explanation for o in item.options if o.id in chosen)
    missed = [o for o in item.options if o.correct and o.id not in chosen]
    if missed:
        feedback += (wording.missed(len(missed)),)
    return model.Grade(score=score, correct=set(chosen) == correct, feedback=feedback)


def within(value: float, answer: float, tolerance: float) -> bool:
    """True when ``value`` is ``answer`` give or take ``tolerance`` (absolute), with float noise ignored."""
    if math.isnan(value) or math.isinf(value):
        return False
    return abs(value - answer) <= tolerance + 1e-9 * max(1.0, abs(answer))


def _grade_numeric(item: model.Item, value: float) -> model.Grade:
    assert item.answer is not None
    if within(value, item.answer, item.tolerance):
        return model.Grade(score=1.0, correct=True, feedback=(item.explanation,))
    known = [d for d in item.distractors if within(value, d.value, 0.0)]
    feedback = tuple(d.explanation for d in known) or (wording.not_the_value(value),)
    return model.Grade(score=0.0, correct=False, feedback=feedback)


def counted(scores: Sequence[float], policy: model.Policy) -> float | None:
    """The score an item keeps under the quiz's retry policy, given the scores of its attempts in order."""
    allowed = list(scores[: policy.max_attempts])
    if not allowed:
        return None
    if policy.counts is model.Counts.FIRST:
        return allowed[0]
    if policy.counts is model.Counts.LAST:
        return allowed[-1]
    return max(allowed)


def normalized_gain(pre: float | None, post: float | None) -> float | None:
    """Hake's normalised gain (post - pre) / (1 - pre) for scores in [0, 1].

    Undefined (None) when either score is missing or when the pre score is already perfect (nothing left to
    gain). A drop gives a negative gain; it is not clamped, so regressions stay visible.
    """
    if pre is None or post is None:
        return None
    for name, value in (("pre", pre), ("post", post)):
        if not 0.0 <= value <= 1.0 or math.isnan(value):
            raise ValueError(f"{name} score must be a fraction in [0, 1], got {value}")
    if pre >= 1.0:
        return None
    return (post - pre) / (1.0 - pre)
