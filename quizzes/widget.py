"""The quiz as ipywidgets: answer, submit, immediate feedback with the explanation, retries per the policy.

Only core ipywidgets controls are used (RadioButtons, Checkbox, FloatText, Button, HTML), so the quiz works in
JupyterLab, Notebook and Voila, is reachable with the keyboard (Tab, arrow keys, Enter/Space) and hands every
answer to Python, which saves it before the feedback appears. All quiz logic is in ``quizzes.session``.
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Callable
from typing import Any

import ipywidgets as w

from quizzes import errors, model, render, report, saved_view, scoring, wording
from quizzes.session import Feedback, QuizSession
from quizzes.shuffle import Slot

log = logging.getLogger(__name__)

_CSS = """<style>
.gpulab-quiz .widget-radio-box label, .gpulab-quiz .widget-checkbox label { white-space: normal; height: auto; }
.gpulab-quiz .widget-radio-box label { align-items: flex-start; margin: 2px 0; }
.gpulab-quiz pre { background: #f6f8fa; padding: 6px; margin: 4px 0; overflow-x: auto; font-size: 12px; }
.gpulab-quiz .gq-right { color: #1a7f37; } .gpulab-quiz .gq-wrong { color: #b42318; }
.gpulab-quiz .gq-item { border-top: 1px solid #ddd; padding-top: 6px; }
</style>"""


def markup(text: str) -> str:
    """Escape text for HTML, keeping fenced ``` blocks as <pre> and `inline code` as <code>."""
    parts = re.split(r"```(?:yaml|text)?\n?(.*?)```", text, flags=re.S)
    out = []
    for index, part in enumerate(parts):
        if index % 2:
            out.append(f"<pre>{html.escape(part.rstrip())}</pre>")
        else:
            escaped = html.escape(part).replace("\n\n", "<br><br>")
            out.append(re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped))
    return "".join(out)


def _plain(text: str) -> str:
    return text.replace("`", "")


class ItemView:
    """The controls of one question: prompt, answer control, submit button and feedback area."""

    def __init__(self, number: int, slot: Slot, session: QuizSession, on_change: Callable[[], None]) -> None:
        self.slot = slot
        self.session = session
        self._on_change = on_change
        item = slot.item
        self.prompt = w.HTML(f"<div class='gq-item'><b>Question {number}.</b> {markup(item.prompt)}</div>")
        self.control = self._make_control(number)
        self.submit = w.Button(description=wording.SUBMIT, button_style="primary",
                               tooltip=f"Submit your answer to question {number}")  # fmt: skip
        self.submit.on_click(self._clicked)
        self.feedback = w.HTML("")
        parts: list[w.Widget] = [self.prompt]
        if item.type is model.ItemType.MANIFEST:
            parts.append(w.HTML("".join(f"<div><b>Manifest {_letter(i)}</b><pre>{html.escape(o.manifest)}</pre></div>"
                                        for i, o in enumerate(slot.options))))  # fmt: skip
        parts += [self.control, self.submit, self.feedback]
        self.box = w.VBox(parts, layout=w.Layout(margin="0 0 12px 0"))
        self.box.add_class("gq-question")  # stable hooks for styling and for the browser test
        self.box.add_class(f"gq-type-{item.type.value}")
        self.box.add_class(f"gq-item-{item.id}")
        self._restore()

    def _make_control(self, number: int) -> w.Widget:
        item = self.slot.item
        wide = w.Layout(width="100%")
        if item.type is model.ItemType.NUMERIC:
            unit = f" ({item.unit})" if item.unit else ""
            return w.FloatText(value=0.0, description=f"Answer{unit}", style={"description_width": "initial"})
        if item.type is model.ItemType.MULTIPLE:
            self.checks = [w.Checkbox(value=False, description=_plain(o.text), indent=False, layout=wide)
                           for o in self.slot.options]  # fmt: skip
            return w.VBox([w.HTML(f"<i>{wording.TICK_ALL}</i>"), *self.checks])
        if item.type is model.ItemType.MANIFEST:
            labels = [(f"Manifest {_letter(i)}", o.id) for i, o in enumerate(self.slot.options)]
        else:
            labels = [(_plain(o.text), o.id) for o in self.slot.options]
        return w.RadioButtons(options=labels, index=None, description=f"Q{number}", layout=wide,
                              style={"description_width": "initial"})  # fmt: skip

    def response(self) -> scoring.Response | None:
        item = self.slot.item
        if item.type is model.ItemType.NUMERIC:
            assert isinstance(self.control, w.FloatText)
            return float(self.control.value)
        if item.type is model.ItemType.MULTIPLE:
            return [o.id for o, box in zip(self.slot.options, self.checks) if box.value]
        assert isinstance(self.control, w.RadioButtons)
        return [str(self.control.value)] if self.control.value is not None else []

    def set_response(self, response: scoring.Response) -> None:
        """Put a stored response back into the controls."""
        if isinstance(response, float):
            self.control.value = response
        elif self.slot.item.type is model.ItemType.MULTIPLE:
            for option, box in zip(self.slot.options, self.checks):
                box.value = option.id in response
        elif response:
            self.control.value = response[0]

    def _clicked(self, _: w.Button) -> None:
        response = self.response()
        reason = self.session.problem_with(self.slot.item.id, response)
        if reason:
            self.feedback.value = f"<div role='status'>{html.escape(reason)}</div>"
            return
        assert response is not None
        try:
            result = self.session.submit(self.slot.item.id, response)
        except errors.QuizError as exc:  # our failure (e.g. the store): say so, never a traceback
            log.warning("could not submit %s: %s", self.slot.item.id, exc)
            self.feedback.value = f"<div role='alert' class='gq-wrong'>{html.escape(str(exc))}</div>"
            return
        self.show(result)
        self._on_change()

    def show(self, result: Feedback) -> None:
        grade = result.grade
        if grade.correct:
            head = f"<b class='gq-right'>{wording.RIGHT}</b>"
        elif grade.score > 0:
            head = f"<b class='gq-wrong'>{wording.partly(grade.score)}</b>"
        else:
            head = f"<b class='gq-wrong'>{wording.WRONG}</b>"
        lines = [markup(f) for f in grade.feedback if f]
        if not result.finished:
            lines.append(f"<i>{wording.attempts_left(result.attempts_left)}</i>")
            self.submit.description = wording.RETRY
        for index, text in enumerate(result.reveal):
            block = f"<pre>{html.escape(text)}</pre>" if "\n" in text.strip() else markup(text)
            lines.append(f"<b>{block}</b>" if index == 0 else block)
        body = "".join(f"<div>{line}</div>" for line in lines)
        self.feedback.value = f"<div role='status'>{head} <small>(attempt {result.attempt})</small>{body}</div>"
        if result.finished:
            self._lock()

    def _lock(self) -> None:
        self.submit.disabled = True
        self.submit.description = wording.DONE
        for control in getattr(self, "checks", [self.control]):
            control.disabled = True

    def _restore(self) -> None:
        previous = self.session.attempts(self.slot.item.id)
        if not previous:
            return
        self.set_response(previous[-1].response)
        last = self.session.last_feedback(self.slot.item.id)
        if last is not None:
            self.show(last)


class QuizWidget:
    """The whole quiz of one section and phase for one learner."""

    def __init__(self, session: QuizSession) -> None:
        self.session = session
        bank = session.bank
        policy = session.quiz.policy
        tries = wording.tries(policy.max_attempts, policy.counts.value)
        title, rest = wording.header(bank.title, session.phase, session.learner, len(session.quiz.slots), tries)
        self.header = w.HTML(f"{_CSS}<h3>{html.escape(title)}</h3><p>{html.escape(rest)}</p>")
        self.items = [ItemView(n, slot, session, self._refresh) for n, slot in enumerate(session.quiz.slots, 1)]
        self.summary = w.HTML("")
        self.widget = w.VBox([self.header, *(v.box for v in self.items), self.summary])
        self.widget.add_class("gpulab-quiz")
        self._refresh()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """The quiz's view, and for a notebook opened before this cell runs a line saying what it is."""
        what, start = wording.saved_view(self.session.bank.title, self.session.phase, len(self.session.quiz.slots))
        return saved_view.bundle(self.widget, saved_view.Fallback(what, start))

    def view(self, item_id: str) -> ItemView:
        return next(v for v in self.items if v.slot.item.id == item_id)

    def _refresh(self) -> None:
        points, answered, total = self.session.score()
        text = f"<p role='status'><b>Progress:</b> {wording.progress(answered, total, points)}</p>"
        if all(self.session.is_finished(v.slot.item.id) for v in self.items):
            answers = self.session.store.answers(learner=self.session.learner, section=self.session.bank.section)
            results = report.learner_view([self.session.bank], answers, self.session.learner)
            text += render.learner_html(results)
        self.summary.value = text


def _letter(index: int) -> str:
    return chr(ord("A") + index)
