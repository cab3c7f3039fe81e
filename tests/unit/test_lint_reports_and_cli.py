"""Results are computed once and printed four ways (terminal, JSON, nbgrader, widget); the CLI is stable for
scripts and the JSON is byte-for-byte deterministic."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from graders import findings, lint, messages
from graders.render import json as json_render
from graders.render import nbgrader, terminal, widget
from labs.cli import main as cli_main
from prerequisites import require

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "rules"
BAD_POD = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: a\n    image: cuda\n" \
          "    resources:\n      limits: {nvidia.com/gpu: 0.5}\n"


def _result() -> findings.LintResult:
    return lint.lint_texts({"pod.yaml": BAD_POD})


def test_every_hint_names_a_course_section() -> None:
    for key in messages.CATALOG:
        said = messages.say(key, **_fields(key))
        assert said.rule == key.split("/")[0]
        assert said.hint.endswith(f"({said.section}).") and "Read: “" in said.hint, key


def _fields(key: str) -> dict[str, str]:
    import string

    msg = messages.CATALOG[key]
    names = {f for t in (msg.text, msg.hint) for _, f, _, _ in string.Formatter().parse(t) if f}
    return {n: "x" for n in names}


def test_json_has_the_documented_shape_and_counts() -> None:
    payload = json.loads(json_render.lint(_result()))
    assert {"findings", "errors", "warnings"} <= set(payload)
    assert payload["errors"] == sum(1 for f in payload["findings"] if f["severity"] == "error") >= 1
    for item in payload["findings"]:
        assert {"file", "line", "rule", "severity", "message", "hint"} <= set(item)


def test_json_is_byte_identical_across_runs_and_hash_seeds(tmp_path: Path) -> None:
    """Same input, same bytes: in process, and in fresh interpreters with different hash seeds."""
    first = json_render.lint(lint.lint_paths([FIXTURES]))
    assert first == json_render.lint(lint.lint_paths([FIXTURES]))
    code = "import sys; from graders import lint; from graders.render import json as j; " \
           f"sys.stdout.write(j.lint(lint.lint_paths([{str(FIXTURES)!r}])))"
    outputs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                              check=True)
        outputs.add(proc.stdout)
    assert outputs == {first}


def test_terminal_rendering_shows_place_rule_and_hint() -> None:
    console = Console(record=True, width=200, color_system=None)
    terminal.print_lint(_result(), console)
    text = console.export_text()
    assert "pod.yaml" in text and "9:16" in text and "gpu-integer-quantity" in text and "hint:" in text
    assert "1 file checked" in text


def test_nbgrader_text_is_an_assertion_error_with_feedback() -> None:
    with pytest.raises(AssertionError) as info:
        nbgrader.assert_clean(_result())
    assert "pod.yaml:9 [gpu-integer-quantity]" in str(info.value) and "Hint:" in str(info.value)
    nbgrader.assert_clean(lint.lint_texts({"ok.yaml": "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n"}))


def test_report_renderers() -> None:
    report = findings.Report.from_checks("lab-1", [
        findings.Check("pod-runs", True, 2, "the pod is Running"),
        findings.Check("on-t4", False, 1, "the pod is on a100-0", "select the T4 node"),
    ])
    assert (report.score, report.max_score, report.passed) == (2, 3, False)
    payload = json.loads(json_render.report(report))
    assert payload["checks"][1] == {"id": "on-t4", "passed": False, "points": 1, "message": "the pod is on a100-0",
                                    "hint": "select the T4 node"}
    with pytest.raises(AssertionError, match="on-t4: the pod is on a100-0"):
        nbgrader.assert_passed(report)
    assert "&#10008;" in widget.report_html(report)


def _report() -> findings.Report:
    return findings.Report.from_checks("lab-1", [
        findings.Check("pod-runs", True, 2, "the pod is Running"),
        findings.Check("on-t4", False, 1.5, "the pod is on a100-0", "select the T4 node"),
    ])


def test_reports_and_lint_results_render_themselves_in_a_notebook() -> None:
    """A cell ending in ``lab.check()`` (or a lint result) shows the HTML table and a text form with no import:
    IPython's formatter finds ``_repr_html_`` and ``_repr_pretty_`` on the value itself."""
    from IPython.core.formatters import DisplayFormatter

    data, _ = DisplayFormatter().format(_report())
    assert data["text/html"] == widget.report_html(_report())
    assert "lab-1: 2/3.5" in data["text/plain"] and "✘ on-t4 (1.5 pt)  the pod is on a100-0" in data["text/plain"]
    assert "hint: select the T4 node" in data["text/plain"] and "\x1b[" not in data["text/plain"]
    noted = findings.Report("lab-1", 0, 1, (), notes=("the bundle's <claims> were not scored",))
    noted_data, _ = DisplayFormatter().format(noted)
    assert "note: the bundle&#x27;s &lt;claims&gt; were not scored" in noted_data["text/html"]
    assert "note: the bundle's <claims> were not scored" in noted_data["text/plain"]
    lint_data, _ = DisplayFormatter().format(_result())
    assert lint_data["text/html"] == widget.lint_html(_result())
    assert "gpu-integer" in lint_data["text/plain"] and "1 file checked" in lint_data["text/plain"]


def test_a_report_shown_in_a_kernel_is_one_output_not_a_display_per_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """In a Jupyter kernel rich's Console sends what it prints to IPython's display (one output per line) instead
    of its file, so the text form came out empty and the report showed twice: every line as its own output, then
    the table. The text form is made inside the formatter and nothing else is displayed."""
    import rich.console
    from IPython.core.formatters import DisplayFormatter

    monkeypatch.setattr(rich.console, "_is_jupyter", lambda: True)
    shown: list[object] = []
    monkeypatch.setattr("IPython.display.display", lambda *a, **k: shown.append(a))
    data, _ = DisplayFormatter().format(_report())
    assert "lab-1: 2/3.5" in data["text/plain"] and "hint: select the T4 node" in data["text/plain"]
    assert "gpu-integer" in DisplayFormatter().format(_result())[0]["text/plain"]
    assert shown == []


def test_a_report_renders_in_a_fresh_interpreter_without_the_terminal_renderer_imported() -> None:
    """A notebook showing a report as HTML never imports rich (the terminal renderer is imported on first use);
    the text display still works from a fresh interpreter."""
    code = ("import sys; from graders import findings; "
            "r = findings.Report.from_checks('x', [findings.Check('c', False, 1, 'm', 'h')]); "
            "print(r._repr_html_()); assert 'graders.render.terminal' not in sys.modules; "
            "assert 'rich.console' not in sys.modules\n"
            "class P:\n    def text(self, t): print(t)\n"
            "r._repr_pretty_(P(), False)")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "&#10008;" in out.stdout and "<i>h</i>" in out.stdout
    assert "Lab x: 0/1" in out.stdout and "hint: h" in out.stdout


def test_table_text_is_left_aligned_and_numbers_right_aligned() -> None:
    """JupyterLab right-aligns table cells; sentences need text-align:left on every text cell."""
    html_report = widget.report_html(_report())
    assert html_report.count("<td style='text-align:left") == 3 * 2
    assert "<td style='text-align:right;vertical-align:top'>1.5</td>" in html_report
    html_lint = widget.lint_html(_result())
    cells = html_lint.count("<td")
    assert cells and html_lint.count("<td style='text-align:left") == cells
    assert html_lint.count("<th style='text-align:left") == 4


def test_widget_escapes_learner_text() -> None:
    result = lint.lint_texts({"<b>.yaml": "kind: <script>\n"})
    html = widget.lint_html(result)
    assert "<script>" not in html and "&lt;b&gt;.yaml" in html
    require(importlib.util.find_spec("ipywidgets") is not None, "ipywidgets is missing; pip install -e '.[course]'")
    assert widget.lint_widget(result).value == html


def test_cli_json_exit_zero_even_with_errors(tmp_path: Path) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(BAD_POD)
    runner = CliRunner()
    out = runner.invoke(cli_main.cli, ["lint", "--json", str(pod)])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["errors"] >= 1


def test_cli_human_output_missing_path_and_bad_fleet(tmp_path: Path) -> None:
    runner = CliRunner()
    out = runner.invoke(cli_main.cli, ["lint", str(tmp_path / "missing.yaml")])
    assert out.exit_code == 0 and "no such file or folder" in out.output
    assert cli_main.main(["lint", "--fleet", "nowhere", str(tmp_path)]) == 1
    out = runner.invoke(cli_main.cli, ["lint", "--list-rules"])
    assert out.exit_code == 0 and "gpu-tolerations" in out.output


def test_folders_are_searched_for_yaml_only(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "pod.yml").write_text(BAD_POD)
    (tmp_path / "notes.txt").write_text("not yaml: [")
    (tmp_path / ".hidden.yaml").write_text("not yaml: [")
    result = lint.lint_paths([tmp_path])
    assert result.files == (str(tmp_path / "sub" / "pod.yml"),)
