"""The lab widget for notebooks: tasks with instructions, the learner's files (a link and an editor), Apply,
Check and Submit buttons, the checks with their hints, and progress across tasks.

It only arranges what ``Lab`` computes and ``graders.render.widget`` formats; it decides nothing about
grading. ipywidgets comes with the course extra and is imported here only.
"""

from __future__ import annotations

import html
import logging
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ipywidgets as w

from cluster import errors
from graders import Report
from graders.render import widget as report_render
from quizzes import saved_view

if TYPE_CHECKING:
    from labs.runtime import Lab

log = logging.getLogger(__name__)


def instructions_html(text: str) -> str:
    """Our instructions' light markup (paragraphs, numbered lines, `code`) as HTML."""
    out = []
    for block in re.split(r"\n\s*\n", text.strip()):
        lines = [_inline(line.strip()) for line in block.splitlines() if line.strip()]
        out.append("<p>" + "<br>".join(lines) + "</p>")
    return "".join(out)


def _inline(line: str) -> str:
    parts = line.split("`")
    return "".join(f"<code>{html.escape(p)}</code>" if i % 2 else html.escape(p) for i, p in enumerate(parts))


def file_link(path: Path) -> str:
    """A link a notebook can open (relative to the notebook's folder when the file is below it)."""
    try:
        shown = os.path.relpath(path, Path.cwd())
    except ValueError:
        shown = str(path)
    if shown.startswith(".."):
        return f"<code>{html.escape(str(path))}</code>"
    return f'<a href="{html.escape(shown)}" target="_blank"><code>{html.escape(shown)}</code></a>'


class LabWidget:
    """``display(lab.widget())`` or ``LabWidget(lab).view`` in a notebook."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self.report: Report | None = None
        self.editors: dict[str, w.Textarea] = {}
        self._synced: dict[str, str] = {}  # the text each editor and its file last agreed on
        self.result = w.HTML(value="<i>Press Check when you are ready.</i>")
        self.status = w.HTML(value="")
        self.progress = w.FloatProgress(value=0.0, min=0.0, max=max(lab.spec.max_score, 1.0), description="Score")
        self.buttons = {
            "apply": w.Button(description="Apply my files", icon="upload", tooltip="kubectl apply the lab's manifests"),
            "check": w.Button(description="Check", button_style="primary", icon="check"),
            "submit": w.Button(description="Submit", icon="paper-plane", tooltip="write the evidence bundle"),
        }
        self.buttons["apply"].on_click(lambda _b: self.apply())
        self.buttons["check"].on_click(lambda _b: self.check())
        self.buttons["submit"].on_click(lambda _b: self.submit())
        self.tasks = w.Accordion(children=[self._task_box(t.id) for t in lab.tasks])
        for i, task in enumerate(lab.tasks):
            self.tasks.set_title(i, f"{i + 1}. {task.title}")
        header = w.HTML(value=f"<h3>Lab {html.escape(lab.id)}: {html.escape(lab.spec.title)}</h3>"
                              f"<p>{html.escape(lab.spec.summary)}</p>")
        self.view = w.VBox([header, self.progress, self.tasks, w.HBox(list(self.buttons.values())),
                            self.status, self.result])

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """The view (so a bare `lab.widget()` at the end of a cell shows it), and for a notebook opened before this
        cell runs a line saying what the lab is and how to start it (``quizzes.saved_view``)."""
        return saved_view.bundle(self.view, saved_fallback(self.lab))

    def _task_box(self, task_id: str) -> w.VBox:
        task = next(t for t in self.lab.tasks if t.id == task_id)
        parts: list[w.Widget] = [w.HTML(value=instructions_html(task.instructions))]
        for name in task.files:
            parts.append(w.HTML(value=f"File: {file_link(self.lab.workdir / name)}"))
            parts.append(self._editor(name))
        return w.VBox(parts)

    def _editor(self, name: str) -> w.VBox:
        if name not in self.editors:
            path = self.lab.workdir / name
            self._synced[name] = path.read_text() if path.is_file() else ""
            self.editors[name] = w.Textarea(value=self._synced[name], layout=w.Layout(width="100%", height="16em"))
        save = w.Button(description=f"Save {name}", icon="save")
        save.on_click(lambda _b: self.save(name))
        return w.VBox([self.editors[name], save])

    def save(self, name: str) -> None:
        """Write the editor's text to the learner's file."""
        self.lab.file(name).write_text(self.editors[name].value)
        self._synced[name] = self.editors[name].value
        self.status.value = f"Saved {html.escape(name)}."

    def _save_all(self) -> None:
        """Editors changed here are written to their files; files changed elsewhere (another editor, kubectl
        edit of a copy, `lab.reset()`) are loaded into editors that were not touched. Neither side is lost."""
        for name, editor in self.editors.items():
            path = self.lab.file(name)
            on_disk = path.read_text() if path.is_file() else ""
            if editor.value != self._synced[name]:
                path.write_text(editor.value)
                self._synced[name] = editor.value
            elif on_disk != self._synced[name]:
                editor.value = on_disk
                self._synced[name] = on_disk

    def apply(self) -> None:
        self._save_all()
        try:
            results = self.lab.apply()
        except errors.CourseError as exc:
            self.status.value = f"<span style='color:#b00020'>{html.escape(str(exc))}</span>"
            return
        rows = "".join(f"<li>{'&#10004;' if r.ok else '&#10008;'} {html.escape(r.ref)}: {html.escape(r.message)}</li>"
                       for r in results)
        self.status.value = f"<ul>{rows}</ul>"

    def check(self, wait: float = 5.0) -> Report | None:
        self._save_all()
        self.status.value = "Checking..."
        try:
            self.report = self.lab.check(wait=wait)
        except errors.CourseError as exc:
            self.status.value = f"<span style='color:#b00020'>{html.escape(str(exc))}</span>"
            return None
        self.show(self.report)
        return self.report

    def show(self, report: Report) -> None:
        """Findings with hints, the score, and each task's progress in its title."""
        self.result.value = report_render.report_html(report)
        self.progress.value = report.score
        self.progress.description = f"{report.score:g}/{report.max_score:g}"
        for i, (task, (got, possible)) in enumerate(zip(self.lab.tasks, self.lab.progress(report).values())):
            mark = "\u2714 " if possible and got == possible else ""
            self.tasks.set_title(i, f"{mark}{i + 1}. {task.title} ({got:g}/{possible:g})")
        self.status.value = "All checks pass." if report.passed else "Some checks fail: read the hints below."

    def submit(self) -> None:
        self._save_all()
        try:
            path = self.lab.submit()
        except errors.CourseError as exc:
            self.status.value = f"<span style='color:#b00020'>{html.escape(str(exc))}</span>"
            return
        self.status.value = f"Evidence written to {file_link(path)}."


def saved_fallback(lab: Lab) -> saved_view.Fallback:
    """What a saved lab widget says before its cell runs (plain text)."""
    tasks = len(lab.tasks)
    return saved_view.Fallback(
        f"Lab {lab.id}: {lab.spec.title} ({tasks} task{'s' if tasks != 1 else ''}, {lab.spec.max_score:g} points)",
        "Run this cell to set the lab up on your cluster: its tasks, your files and the Check button appear here.")
