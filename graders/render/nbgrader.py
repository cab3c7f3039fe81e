"""nbgrader test cells: a failed check becomes an AssertionError whose text is the feedback.

nbgrader shows the exception text of a failing autograder cell to the learner, so the text lists each
problem with its place and hint, and nothing else (no colour codes, no timings).
"""

from __future__ import annotations

from graders import findings


def lint_text(result: findings.LintResult, *, include_warnings: bool = True) -> str:
    wanted = [f for f in result.findings
              if f.severity is findings.Severity.ERROR or (include_warnings and f.severity is findings.Severity.WARNING)]
    if not wanted:
        return "No problems found."
    lines = [f"{len(wanted)} problem(s) found:"]
    for f in wanted:
        lines.append(f"- {f.file}:{f.line} [{f.rule}] {f.message}")
        lines.append(f"  Hint: {f.hint}")
    return "\n".join(lines)


def report_text(report: findings.Report) -> str:
    failed = [c for c in report.checks if not c.passed]
    lines = [f"{report.lab}: {report.score:g}/{report.max_score:g} points."]
    for check in failed:
        lines.append(f"- {check.id}: {check.message}")
        if check.hint:
            lines.append(f"  Hint: {check.hint}")
    lines.extend(f"Note: {note}" for note in report.notes)
    return "\n".join(lines)


def assert_clean(result: findings.LintResult, *, include_warnings: bool = False) -> None:
    """Raise AssertionError with feedback when the manifests have errors (and warnings, if asked)."""
    bad = result.errors + (result.warnings if include_warnings else 0)
    if bad:
        raise AssertionError(lint_text(result, include_warnings=include_warnings))


def assert_passed(report: findings.Report) -> None:
    if not report.passed:
        raise AssertionError(report_text(report))
