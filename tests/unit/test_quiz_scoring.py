"""Scoring: single choice, partial credit for multiple choice, numeric tolerance, attempt policy, normalised gain."""

from __future__ import annotations

import math

import pytest

from quizzes import errors, model, scoring

pytestmark = pytest.mark.unit


def make_item(kind: str = "multiple", correct: tuple[str, ...] = ("a", "b"), ids: str = "abcd",
              answer: float | None = None, tolerance: float = 0.0) -> model.Item:
    options = tuple(model.Option(id=i, text=i.upper(), correct=i in correct, explanation=f"about {i}") for i in ids)
    if kind == "numeric":
        return model.Item(id="n", section="s", outcome="o", type=model.ItemType.NUMERIC, prompt="?", answer=answer,
                          tolerance=tolerance, explanation="because",
                          distractors=(model.Distractor(11, "added instead of multiplied"),))
    return model.Item(id="c", section="s", outcome="o", type=model.ItemType(kind), prompt="?", options=options)


def test_single_choice_scores_one_or_zero_and_explains_the_chosen_option() -> None:
    item = make_item("single", correct=("c",))
    right = scoring.grade(item, ["c"])
    wrong = scoring.grade(item, ["a"])
    assert (right.score, right.correct, right.feedback) == (1.0, True, ("about c",))
    assert (wrong.score, wrong.correct, wrong.feedback) == (0.0, False, ("about a",))


@pytest.mark.parametrize(
    ("chosen", "expected"),
    [
        (["a", "b"], 1.0),  # exactly the two correct options
        (["a"], 0.5),  # half of the correct options, no wrong one
        (["a", "c"], 0.0),  # 1/2 found minus 1/2 of the wrong options
        (["a", "b", "c"], 0.5),  # all correct, one of two wrong ones
        (["a", "b", "c", "d"], 0.0),  # ticking everything earns nothing
        (["c", "d"], 0.0),  # floored at zero, never negative
    ],
)
def test_multiple_choice_gives_partial_credit(chosen: list[str], expected: float) -> None:
    grade = scoring.grade(make_item(), chosen)
    assert grade.score == pytest.approx(expected)
    assert grade.correct is (expected == 1.0)


def test_multiple_choice_feedback_names_missed_options() -> None:
    grade = scoring.grade(make_item(), ["a"])
    assert grade.feedback == ("about a", "You left out 1 correct option(s).")


def test_partial_credit_formula_with_three_of_five() -> None:
    assert scoring.partial_credit(n_correct=3, n_wrong=2, hits=2, false_picks=1) == pytest.approx(2 / 3 - 1 / 2)
    with pytest.raises(ValueError):
        scoring.partial_credit(n_correct=0, n_wrong=2, hits=0, false_picks=0)


@pytest.mark.parametrize(
    ("value", "tolerance", "right"),
    [(28, 0, True), (28.0000000001, 0, True), (27, 0, False), (27, 1, True), (29, 1, True), (29.01, 1, False),
     (float("nan"), 100, False), (float("inf"), 1e9, False)],
)
def test_numeric_answers_are_right_within_the_tolerance(value: float, tolerance: float, right: bool) -> None:
    grade = scoring.grade(make_item("numeric", answer=28, tolerance=tolerance), value)
    assert grade.correct is right
    assert grade.score == (1.0 if right else 0.0)


def test_numeric_distractor_gets_its_own_explanation() -> None:
    item = make_item("numeric", answer=28)
    assert scoring.grade(item, 11).feedback == ("added instead of multiplied",)
    assert scoring.grade(item, 12).feedback == ("12 is not right.",)
    assert scoring.grade(item, 28).feedback == ("because",)


def test_malformed_responses_raise_quiz_errors() -> None:
    with pytest.raises(errors.QuizError, match="no option"):
        scoring.grade(make_item(), ["z"])
    with pytest.raises(errors.QuizError, match="exactly one"):
        scoring.grade(make_item("single", correct=("a",)), ["a", "b"])
    with pytest.raises(errors.QuizError, match="expects a number"):
        scoring.grade(make_item("numeric", answer=1), ["a"])


@pytest.mark.parametrize(
    ("counts", "max_attempts", "expected"),
    [("first", 3, 0.0), ("last", 3, 0.5), ("best", 3, 1.0), ("best", 1, 0.0), ("best", 2, 1.0)],
)
def test_retry_policy_decides_which_attempt_counts(counts: str, max_attempts: int, expected: float) -> None:
    policy = model.Policy(max_attempts=max_attempts, counts=model.Counts(counts))
    assert scoring.counted([0.0, 1.0, 0.5], policy) == expected
    assert scoring.counted([], policy) is None


@pytest.mark.parametrize(
    ("pre", "post", "gain"),
    [(0.5, 0.75, 0.5), (0.0, 1.0, 1.0), (0.2, 0.2, 0.0), (0.6, 0.4, -0.5), (1.0, 1.0, None), (1.0, 0.5, None),
     (None, 0.5, None), (0.5, None, None)],
)
def test_normalised_gain_and_its_edge_cases(pre: float | None, post: float | None, gain: float | None) -> None:
    result = scoring.normalized_gain(pre, post)
    if gain is None:
        assert result is None
    else:
        assert result == pytest.approx(gain)


def test_normalised_gain_rejects_scores_outside_zero_to_one() -> None:
    for bad in (1.5, -0.1, math.nan):
        with pytest.raises(ValueError):
            scoring.normalized_gain(bad, 0.5)
