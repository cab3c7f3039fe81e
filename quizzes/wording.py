"""Every sentence a learner reads in the quiz, kept together so it can be reviewed as prose.

Functions take the values they mention; nothing here decides anything.
"""

from __future__ import annotations

CLOSED = "This question is closed: no attempt is left."
NEED_NUMBER = "Type a number first."
NEED_CHOICE = "Choose an option first."
NEED_TICKS = "Tick at least one option first."
TICK_ALL = "Tick every option that applies."
RIGHT = "Correct."
WRONG = "Not right."
SUBMIT = "Submit answer"
RETRY = "Try again"
DONE = "Answered"
RESULTS_CAPTION = "Your quiz results"


def partly(score: float) -> str:
    return f"Partly right ({100 * score:.0f}% of the points)."


def missed(count: int) -> str:
    return f"You left out {count} correct option(s)."


def not_the_value(value: float) -> str:
    return f"{value:g} is not right."


def attempts_left(count: int) -> str:
    return f"You may try again ({count} attempt{'s' if count != 1 else ''} left)."


def numeric_answer(answer: float, unit: str, tolerance: float) -> str:
    plus = f" (give or take {tolerance:g})" if tolerance else ""
    return f"The answer is {answer:g}{f' {unit}' if unit else ''}{plus}."


def right_answers_head(count: int, manifest: bool) -> str:
    if manifest:
        return "The right manifest is:"
    return "The right answer is:" if count == 1 else "The right answers are:"


def tries(max_attempts: int, counts: str) -> str:
    if max_attempts == 1:
        return "one attempt per question"
    return f"up to {max_attempts} attempts per question ({counts} attempt counts)"


def header(title: str, phase: str, learner: str, questions: int, policy: str) -> tuple[str, str]:
    """The quiz heading and the line under it (plain text; the widget escapes it)."""
    return (f"{title}: {phase}-quiz",
            f"Learner {learner} · {questions} questions · {policy}. Each answer is saved as soon as you submit it.")


def saved_view(title: str, phase: str, questions: int) -> tuple[str, str]:
    """What a saved quiz says before its cell runs: what it is, and how to start it (plain text)."""
    return (f"Quiz: {title}, {phase}-quiz ({questions} questions)",
            "Run this cell to take it. Each answer is saved as soon as you submit it.")


def progress(answered: int, total: int, points: float) -> str:
    return f"{answered} of {total} answered, score {points:g} / {total}."
