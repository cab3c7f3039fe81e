"""A quiz or lab widget saved in a notebook reads well where the widget is not drawn (an untrusted notebook, a
viewer without widgets): its text and HTML forms say what it is and how to start it, never the widget's repr; the
view reference is still the widget's own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from IPython.core.formatters import DisplayFormatter
from test_lab_widget import offline_lab

import quizzes
from labs import nboutputs, widget
from quizzes import saved_view

pytestmark = pytest.mark.unit

REPR = re.compile(r"VBox\(|HTML\(value=|children=")


def shown(obj: object) -> dict[str, object]:
    """The bundle IPython makes of ``obj`` at the end of a cell (or in ``display``)."""
    data, _ = DisplayFormatter().format(obj)
    return dict(data)


def test_a_quiz_says_what_it_is_and_how_to_take_it(tmp_path: Path) -> None:
    quiz = quizzes.quiz_widget("scheduling", "pre", "ann", store_path=tmp_path / "s.sqlite3")
    data = shown(quiz)
    assert data[saved_view.WIDGET_VIEW]["model_id"] == quiz.widget.model_id  # type: ignore[index]
    questions = len(quiz.session.quiz.slots)
    text = str(data["text/plain"])
    assert text.splitlines() == [f"Quiz: Scheduling and resource requests, pre-quiz ({questions} questions)",
                                 "Run this cell to take it. Each answer is saved as soon as you submit it."]
    assert "<b>Quiz: Scheduling and resource requests, pre-quiz" in str(data["text/html"])
    for form in (text, str(data["text/html"])):
        assert not REPR.search(form) and "<style" not in form and "ann" not in form  # nothing of one learner's


def test_a_lab_says_what_it_is_and_how_to_start_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lab = offline_lab(tmp_path, monkeypatch)
    view = widget.LabWidget(lab)
    data = shown(view)
    assert data[saved_view.WIDGET_VIEW]["model_id"] == view.view.model_id  # type: ignore[index]
    first, second = str(data["text/plain"]).splitlines()
    assert first == f"Lab 03-scheduling: {lab.spec.title} (4 tasks, 18 points)"
    assert second.startswith("Run this cell to set the lab up")
    assert not REPR.search(str(data["text/html"])) and "&lt;" not in str(data["text/html"])


def test_html_fallback_is_escaped_and_uses_only_tags_a_sanitiser_keeps() -> None:
    html = saved_view.Fallback("Lab x: <b>bold</b> & co", "Run it.").html()
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; co" in html
    assert set(re.findall(r"</?(\w+)", html)) <= {"p", "b", "i", "br"}


def test_a_bare_widget_shows_its_repr_and_the_writer_can_tell() -> None:
    """The check ``gpulab course outputs --write`` makes: ipywidgets' own bundle is a repr, ours is not."""
    import ipywidgets

    bare = {"output_type": "display_data", "data": shown(ipywidgets.VBox([ipywidgets.HTML(value="<style>")]))}
    assert nboutputs.widget_repr_shown(bare)
    assert nboutputs.widget_repr_shown({"output_type": "display_data", "data": {
        saved_view.WIDGET_VIEW: {"model_id": "x"}, "text/plain": "Output()"}})
    ours = saved_view.bundle(ipywidgets.VBox([]), saved_view.Fallback("Lab 01: a title (1 task, 2 points)", "Run."))
    assert not nboutputs.widget_repr_shown({"output_type": "display_data", "data": ours})
    assert not nboutputs.widget_repr_shown({"output_type": "stream", "text": "VBox(children=())"})
