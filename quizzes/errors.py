"""The quizzes package's own failures, kept apart from ``cluster.errors`` because quizzes stands alone.

A learner's wrong answer is a result, never an exception. These classes are for things that stop the quiz
itself from working: a broken bank, an unreadable store, a call with arguments that make no sense. The CLI
(``labs/cli/cmd_quiz.py``) maps them into the course-wide hierarchy at its boundary.
"""

from __future__ import annotations

from collections.abc import Sequence


class QuizError(Exception):
    """Root of every error the quizzes package raises on purpose."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if hint is None else f"{message}\n  next: {hint}")


class BankError(QuizError):
    """A quiz bank (or the coverage list) is invalid; ``problems`` holds every problem as ``path: message``."""

    def __init__(self, source: str, problems: Sequence[str], *, hint: str | None = None) -> None:
        self.source = source
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{source} is invalid ({len(self.problems)} problem(s)):\n{lines}", hint=hint)


class UnknownSection(QuizError):
    """A section or phase name that no bank defines."""


class StoreError(QuizError):
    """The answer store cannot be opened, read or written."""
