"""The benchmark's values and rendering: targets met or missed in the right direction, unmeasured figures say
why, the JSON document's shape, the table, kind's figures marked as not measured here, and bad options."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from cluster import errors
from labs.bench import reference, suite
from labs.bench.figures import SCHEMA, Figure, Report, not_measured
from labs.cli.cmd_bench import print_report


def _report() -> Report:
    return Report(
        quick=True,
        figures=(Figure("start", 7.5, "s", 5.0), Figure("throughput", 25.0, "submissions/s", 20.0, True),
                 Figure("memory", 512.0, "MiB"), not_measured("notebooks", "s", "not run with --quick")),
        references=reference.KIND, machine={"cpus": 2, "python": "3.11", "load_average_1m": 0.5}, seconds=42.0,
        errors=("scale: failed: something broke",))


def test_targets_are_met_in_the_direction_of_the_figure() -> None:
    assert Figure("t", 4.9, "s", 5.0).met is True
    assert Figure("t", 5.1, "s", 5.0).met is False
    assert Figure("rate", 19.9, "/s", 20.0, higher_is_better=True).met is False
    assert Figure("rate", 20.0, "/s", 20.0, higher_is_better=True).met is True
    assert Figure("no target", 1.0, "s").met is None
    assert not_measured("x", "s", "why", target=1.0).met is None


def test_json_document_has_every_figure_with_its_verdict_and_a_summary() -> None:
    doc = json.loads(_report().dumps())
    assert doc["schema"] == SCHEMA and doc["quick"] is True
    by_name = {f["name"]: f for f in doc["figures"]}
    assert by_name["start"]["met"] is False and by_name["throughput"]["met"] is True
    assert by_name["notebooks"]["value"] is None and by_name["notebooks"]["note"] == "not run with --quick"
    assert doc["summary"] == {"measured": 3, "not_measured": 1, "targets_met": 1, "targets_missed": 1}
    assert doc["errors"] == ["scale: failed: something broke"]
    assert doc["references"] and all(r["measured_here"] is False for r in doc["references"])


def test_kind_references_cite_a_source_and_invent_no_figure() -> None:
    for ref in reference.KIND:
        assert ref.source.startswith("https://"), ref
        assert ref.note, ref
    assert any(r.value is None and "none published" in r.note for r in reference.KIND)


def test_table_shows_values_targets_verdicts_and_the_reference_marking() -> None:
    console = Console(record=True, width=240)
    print_report(_report(), console)
    text = console.export_text()
    assert "MISSED" in text and "met" in text and "not measured" in text
    assert "<= 5 s" in text and ">= 20 submissions/s" in text
    assert "NOT MEASURED HERE" in text and "kind" in text
    assert "targets missed: start" in text and "error: scale" in text


def test_unknown_section_is_a_config_error() -> None:
    with pytest.raises(errors.ConfigError, match="'gpus': unknown"):
        suite.run(True, sections=["gpus"])


def test_bench_cli_rejects_an_unknown_section_without_a_traceback() -> None:
    proc = subprocess.run([str(Path(sys.executable).parent / "gpulab"), "bench", "--section", "gpus"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "'gpus' is not one of" in proc.stderr


def test_grading_alone_measures_lint_and_explains_the_missing_bundles() -> None:
    """Without the starter section there are no recorded bundles: the figure says so instead of guessing."""
    report = suite.run(True, sections=["grading"])
    by_name = {f.name: f for f in report.figures}
    offline = by_name["offline grading throughput, 40 submissions (quick)"]
    assert offline.value is None and "evidence bundles" in offline.note
    lint = by_name["static lint throughput, 40 generated submissions (quick)"]
    assert lint.value is not None and lint.value > 0
    assert report.errors == ()
