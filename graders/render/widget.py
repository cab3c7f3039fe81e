"""A notebook view: one ipywidgets HTML widget listing findings or checks. ipywidgets is imported lazily."""

from __future__ import annotations

import html
from typing import Any

from graders import findings

_COLOUR = {findings.Severity.ERROR: "#b00020", findings.Severity.WARNING: "#b26a00", findings.Severity.INFO: "#00639b"}


def lint_html(result: findings.LintResult) -> str:
    if not result.findings:
        return "<p style='color:#1b5e20'><b>No problems found.</b></p>"
    rows = []
    for f in result.findings:
        rows.append(
            "<tr>"
            f"<td>{html.escape(f.file)}:{f.line}</td>"
            f"<td style='color:{_COLOUR[f.severity]}'><b>{f.severity.value}</b></td>"
            f"<td><code>{html.escape(f.rule)}</code></td>"
            f"<td>{html.escape(f.message)}<br><i>{html.escape(f.hint)}</i></td>"
            "</tr>"
        )
    head = "<tr><th>where</th><th>severity</th><th>rule</th><th>what and what to do</th></tr>"
    return f"<table>{head}{''.join(rows)}</table>"


def report_html(report: findings.Report) -> str:
    rows = []
    for c in report.checks:
        mark = "&#10004;" if c.passed else "&#10008;"
        hint = "" if c.passed or not c.hint else f"<br><i>{html.escape(c.hint)}</i>"
        rows.append(f"<tr><td>{mark}</td><td><code>{html.escape(c.id)}</code></td><td>{c.points:g}</td>"
                    f"<td>{html.escape(c.message)}{hint}</td></tr>")
    title = f"<p><b>{html.escape(report.lab)}: {report.score:g}/{report.max_score:g}</b></p>"
    return f"{title}<table>{''.join(rows)}</table>"


def lint_widget(result: findings.LintResult) -> Any:
    import ipywidgets  # the course extra; imported here so the package works without it

    return ipywidgets.HTML(value=lint_html(result))
