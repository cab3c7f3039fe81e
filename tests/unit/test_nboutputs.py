"""Saved notebook outputs are compared with a fresh run's on substance: what a second run cannot repeat (ages,
UIDs, times, ports, pod-name suffixes, durations, widget ids) is masked; a changed count or phase is drift."""

from __future__ import annotations

from typing import Any

import pytest

from labs import nboutputs

pytestmark = pytest.mark.unit


def nb(*outputs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"cells": [{"cell_type": "markdown", "source": "# title"}] +
                     [{"cell_type": "code", "source": f"print({i})", "outputs": o} for i, o in enumerate(outputs)]}


def stream(text: str) -> dict[str, Any]:
    return {"output_type": "stream", "name": "stdout", "text": text}


GET_PODS = """NAME                      READY   STATUS    RESTARTS   AGE
inference-7d9f8c6b5-x2kqz  1/1     Running   0          {age}
nvidia-device-plugin-{sfx}  1/1     Running   0          {age}
uid {uid} at {time} on 127.0.0.1:{port} in {dur}
"""


def test_what_a_rerun_cannot_repeat_is_masked() -> None:
    one = GET_PODS.format(age="12s", sfx="bzt4q", uid="0d1c3a52-5f0e-4b7e-9f2a-1c2d3e4f5a6b",
                          time="2026-11-26T18:00:01Z", port=40123, dur="3.2 s")
    two = GET_PODS.format(age="3m4s", sfx="k9w2x", uid="9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d",
                          time="2026-11-27T09:13:59Z", port=35001, dur="11 s")
    assert nboutputs.drift("n", nb([stream(one)]), nb([stream(two)])) == []
    assert "<uid>" in nboutputs.mask(one) and "<loopback>" in nboutputs.mask(one) and "<dur>" in nboutputs.mask(one)


def test_substance_that_changed_is_drift() -> None:
    running = GET_PODS.format(age="12s", sfx="bzt4q", uid="x", time="", port=1, dur="1 s")
    pending = running.replace("Running   0          12s\nnvidia", "Pending   0          12s\nnvidia")
    found = nboutputs.drift("04.ipynb", nb([stream("capacity 4\n")], [stream(running)]),
                            nb([stream("capacity 2\n")], [stream(pending)]))
    assert [d.cell for d in found] == [1, 2] and "capacity 4" in found[0].saved and "capacity 2" in found[0].now
    assert "04.ipynb cell 1" in str(found[0])


def test_stream_chunks_compare_joined_and_images_by_kind() -> None:
    png_a = {"output_type": "display_data", "data": {"image/png": "AAAA", "text/plain": "<Figure 1>"}}
    png_b = {"output_type": "display_data", "data": {"image/png": "BBBB", "text/plain": "<Figure 1>"}}
    widget = {"output_type": "display_data", "data": {
        "application/vnd.jupyter.widget-view+json": {"model_id": "a" * 32}, "text/plain": "Quiz: x (6 questions)"}}
    widget2 = {"output_type": "display_data", "data": {
        "application/vnd.jupyter.widget-view+json": {"model_id": "b" * 32}, "text/plain": "Quiz: x (6 questions)"}}
    saved = nb([stream("a\n"), stream("b\n"), png_a, widget])
    fresh = nb([stream("a\nb\n"), png_b, widget2])
    assert nboutputs.drift("n", saved, fresh) == []
    assert nboutputs.drift("n", saved, nb([stream("a\nb\n"), widget2]))  # the figure is gone: drift
    # What a learner reads before running the cell is substance: a quiz that now has 7 questions is drift.
    widget2["data"]["text/plain"] = "Quiz: x (7 questions)"
    assert nboutputs.drift("n", saved, fresh)


def test_changed_code_and_a_cell_that_now_prints_are_reported() -> None:
    saved, fresh = nb([stream("x")]), nb([stream("x")])
    fresh["cells"][1]["source"] = "print('other')"
    assert nboutputs.drift("n", saved, fresh)[0].cell == -1
    assert [d.cell for d in nboutputs.drift("n", nb([stream("x")], []), nb([stream("x")], [stream("y")]))] == [2]


def test_saved_outputs_make_a_valid_notebook(tmp_path: Any) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# t"), nbformat.v4.new_code_cell("print(1)")]
    path = tmp_path / "n.ipynb"
    nbformat.write(nb, str(path))
    ran = nbformat.read(str(path), as_version=4)
    ran.cells[1].outputs = [nbformat.v4.new_output("stream", text="1\n"),
                            nbformat.v4.new_output("display_data", data={"text/html": "<b>x</b>"})]
    ran.cells[1].execution_count = 1
    nboutputs.write(path, ran)
    saved = nbformat.read(str(path), as_version=4)
    nbformat.validate(saved)
    assert [o["output_type"] for o in saved.cells[1].outputs] == ["stream", "display_data"]
    assert nboutputs.drift("n", json_of(path), json_of(path)) == []


def json_of(path: Any) -> dict[str, Any]:
    import json

    return dict(json.loads(path.read_text()))


def test_a_volatile_cell_is_compared_by_the_kinds_of_its_outputs() -> None:
    saved, fresh = nb([stream("driver 1/1 Running\n")]), nb([stream("driver 0/1 CrashLoopBackOff\n")])
    assert nboutputs.drift("n", saved, fresh)  # untagged: drift
    saved["cells"][1]["metadata"] = {"tags": [nboutputs.VOLATILE_TAG]}
    assert nboutputs.drift("n", saved, fresh) == []
    assert nboutputs.drift("n", saved, nb([]))  # but a cell that stopped printing is still drift


def test_the_writer_stores_a_widget_only_with_a_fallback_for_people(tmp_path: Any) -> None:
    """``gpulab course outputs --write`` refuses to save a widget whose text form is its repr (what an untrusted
    notebook shows in its place), and saves the fallback the widget gives."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("quizzes.show('x')")]
    path = tmp_path / "n.ipynb"
    nbformat.write(nb, str(path))
    view = {"application/vnd.jupyter.widget-view+json": {"version_major": 2, "version_minor": 0, "model_id": "a" * 32}}
    ran = nbformat.read(str(path), as_version=4)
    ran.cells[0].outputs = [nbformat.v4.new_output("display_data", data={
        **view, "text/plain": "VBox(children=(HTML(value='<style>\\n.gpulab-quiz …"})]
    with pytest.raises(ValueError, match="n.ipynb cell 0: a widget's saved text is its repr"):
        nboutputs.write(path, ran)
    assert nbformat.read(str(path), as_version=4).cells[0].outputs == []  # nothing was written
    fallback = {"text/plain": "Quiz: x, pre-quiz (6 questions)\nRun this cell to take it.",
                "text/html": "<p><b>Quiz: x, pre-quiz (6 questions)</b></p>"}
    ran.cells[0].outputs = [nbformat.v4.new_output("display_data", data={**view, **fallback})]
    nboutputs.write(path, ran)
    saved = nbformat.read(str(path), as_version=4).cells[0].outputs[0]["data"]
    assert saved["text/plain"] == fallback["text/plain"] and saved["text/html"] == fallback["text/html"]
