"""A notebook view: HTML tables of findings or checks (and ipywidgets wrappers, imported lazily).

Text cells are left-aligned with inline styles: JupyterLab's stylesheet right-aligns every table cell, which
makes sentences (messages and hints) hard to read; numbers keep the right alignment.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from graders.severity import Severity

if TYPE_CHECKING:
    from graders import findings

_COLOUR = {Severity.ERROR: "#b00020", Severity.WARNING: "#b26a00", Severity.INFO: "#00639b"}
_TEXT = "text-align:left;vertical-align:top"
_NUMBER = "text-align:right;vertical-align:top"


def _cell(content: str, style: str = _TEXT, tag: str = "td") -> str:
    return f"<{tag} style='{style}'>{content}</{tag}>"


def _head(*names: str) -> str:
    return "<tr>" + "".join(_cell(html.escape(n), _TEXT, "th") for n in names) + "</tr>"


def lint_html(result: findings.LintResult) -> str:
    if not result.findings:
        return "<p style='color:#1b5e20'><b>No problems found.</b></p>"
    rows = []
    for f in result.findings:
        rows.append(
            "<tr>"
            + _cell(f"{html.escape(f.file)}:{f.line}")
            + _cell(f"<b>{f.severity.value}</b>", f"{_TEXT};color:{_COLOUR[f.severity]}")
            + _cell(f"<code>{html.escape(f.rule)}</code>")
            + _cell(f"{html.escape(f.message)}<br><i>{html.escape(f.hint)}</i>")
            + "</tr>"
        )
    head = _head("where", "severity", "rule", "what and what to do")
    return f"<table>{head}{''.join(rows)}</table>"


def report_html(report: findings.Report) -> str:
    rows = []
    for c in report.checks:
        mark = "&#10004;" if c.passed else "&#10008;"
        hint = "" if c.passed or not c.hint else f"<br><i>{html.escape(c.hint)}</i>"
        rows.append("<tr>" + _cell(mark) + _cell(f"<code>{html.escape(c.id)}</code>") + _cell(f"{c.points:g}", _NUMBER)
                    + _cell(f"{html.escape(c.message)}{hint}") + "</tr>")
    title = f"<p><b>{html.escape(report.lab)}: {report.score:g}/{report.max_score:g}</b></p>"
    head = "<tr>" + _cell("", _TEXT, "th") + _cell("check", _TEXT, "th") + _cell("points", _NUMBER, "th") \
        + _cell("result and hint", _TEXT, "th") + "</tr>"
    notes = "".join(f"<p style='text-align:left'><i>note: {html.escape(n)}</i></p>" for n in report.notes)
    return f"{title}<table>{head}{''.join(rows)}</table>{notes}"


def lint_widget(result: findings.LintResult) -> Any:
    import ipywidgets  # the course extra; imported here so the package works without it

    return ipywidgets.HTML(value=lint_html(result))
