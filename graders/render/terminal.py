"""Terminal output with rich: findings grouped by file, each with its line, rule, message and hint."""

from __future__ import annotations

import io
from itertools import groupby
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from graders.severity import Severity

if TYPE_CHECKING:
    from graders import findings

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def print_lint(result: findings.LintResult, console: Console, *, show_info: bool = True) -> None:
    shown = [f for f in result.findings if show_info or f.severity is not Severity.INFO]
    for file, group in groupby(shown, key=lambda f: f.file):
        console.print(Text(file, style="bold underline"))
        for f in group:
            where = f"{f.line}:{f.column}" if f.line else "-"
            console.print(
                f"  [dim]{where:>7}[/dim] [{_STYLE[f.severity]}]{f.severity.value:<7}[/] "
                f"[magenta]{escape(f.rule)}[/magenta]  {escape(f.message)}",
                soft_wrap=True,
            )
            console.print(f"          [dim]hint:[/dim] {escape(f.hint)}", soft_wrap=True, style="green")
    console.print(summary(result), style="bold red" if result.errors else "bold green")


def summary(result: findings.LintResult) -> str:
    infos = result.count(Severity.INFO)
    files = len(result.files)
    return (f"{files} file{'s' if files != 1 else ''} checked: {result.errors} error(s), "
            f"{result.warnings} warning(s), {infos} note(s)")


def print_report(report: findings.Report, console: Console) -> None:
    console.print(Text(f"Lab {report.lab}: {report.score:g}/{report.max_score:g}", style="bold"))
    for check in report.checks:
        mark = "[green]✔[/green]" if check.passed else "[red]✘[/red]"
        console.print(f"  {mark} {escape(check.id)} ({check.points:g} pt)  {escape(check.message)}", soft_wrap=True)
        if not check.passed and check.hint:
            console.print(f"      [dim]hint:[/dim] {escape(check.hint)}", style="green", soft_wrap=True)
    for note in report.notes:
        console.print(f"  [dim]note:[/dim] {escape(note)}", soft_wrap=True)


def _plain_console(buffer: io.StringIO) -> Console:
    # force_jupyter=False: inside a kernel rich would hand each printed line to IPython's display instead of the
    # buffer, so a cell ending in `lab.check()` showed the report twice (a line per output, then the table).
    return Console(file=buffer, width=110, color_system=None, highlight=False, force_terminal=False,
                   force_jupyter=False)


def report_text(report: findings.Report) -> str:
    """``print_report`` as plain text (the text/plain form a notebook shows for a report)."""
    buffer = io.StringIO()
    print_report(report, _plain_console(buffer))
    return buffer.getvalue().rstrip("\n")


def lint_text(result: findings.LintResult) -> str:
    """``print_lint`` as plain text."""
    buffer = io.StringIO()
    print_lint(result, _plain_console(buffer))
    return buffer.getvalue().rstrip("\n")
