"""Value types for grading results: findings from static rules, checks and reports from lab grading.

Everything here is plain, frozen data with a stable order, so that renderers (terminal, widget, nbgrader,
JSON) can print the same result in different ways and the JSON is byte-for-byte reproducible. This module
must not format anything for people; wording lives in ``graders.messages`` and printing in ``graders.render``.
The display hooks (``_repr_html_``, ``_repr_pretty_``) only hand a result to those renderers, so that a notebook
cell ending in ``lab.check()`` shows the report without importing anything.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from graders.render import widget
from graders.severity import Severity

__all__ = ["SECTIONS", "Check", "Finding", "LintResult", "Report", "Severity"]


# The course sections a hint may send a learner to (ids of the course's top-level chapters).
SECTIONS: tuple[str, ...] = ("gpu-fundamentals", "gpu-operator", "scheduling", "sharing", "mig", "dra", "operations")


@dataclass(frozen=True)
class Finding:
    """One problem a static rule found, tied to a place in a file."""

    rule: str
    severity: Severity
    message: str
    hint: str
    file: str
    line: int  # 1-based; 0 when the problem is about the whole file
    column: int  # 1-based; 0 when unknown
    section: str

    def __post_init__(self) -> None:
        if self.section not in SECTIONS:
            raise ValueError(f"unknown course section {self.section!r} for rule {self.rule}")

    @property
    def sort_key(self) -> tuple[str, int, int, int, str, str]:
        return (self.file, self.line, self.column, self.severity.rank, self.rule, self.message)


def sort_findings(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """Findings in a stable order (file, line, column, severity, rule, message), duplicates dropped."""
    return tuple(sorted(set(findings), key=lambda f: f.sort_key))


@dataclass(frozen=True)
class LintResult:
    """What ``gpulab lint`` found in a set of files."""

    files: tuple[str, ...]
    findings: tuple[Finding, ...]
    elapsed_s: float = field(default=0.0, compare=False)

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity is severity)

    @property
    def errors(self) -> int:
        return self.count(Severity.ERROR)

    @property
    def warnings(self) -> int:
        return self.count(Severity.WARNING)

    def by_rule(self, rule: str) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.rule == rule)

    def _repr_html_(self) -> str:
        return widget.lint_html(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        # Here, not at the top: the terminal renderer brings rich, 17-45 ms of a 280 ms ``import graders``
        # (python -X importtime, 2026-12-02), which a notebook showing HTML never needs.
        from graders.render import terminal

        printer.text(terminal.lint_text(self))


@dataclass(frozen=True)
class Check:
    """One graded check of a lab: passed or not, the points it is worth, and what to do next."""

    id: str
    passed: bool
    points: float
    message: str
    hint: str = ""


@dataclass(frozen=True)
class Report:
    """The grade of one lab submission."""

    lab: str
    score: float
    max_score: float
    checks: tuple[Check, ...]
    # What grading wants the learner to know beside the checks (replay refusals, the bundle's unscored claims).
    notes: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @classmethod
    def from_checks(cls, lab: str, checks: Iterable[Check]) -> Report:
        """Score = points of the passed checks; max = points of all checks."""
        done = tuple(checks)
        score = sum(c.points for c in done if c.passed)
        return cls(lab=lab, score=score, max_score=sum(c.points for c in done), checks=done)

    def _repr_html_(self) -> str:
        return widget.report_html(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        from graders.render import terminal  # here: rich's import time (see LintResult._repr_pretty_)

        printer.text(terminal.report_text(self))
