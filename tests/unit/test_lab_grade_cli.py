"""``gpulab grade`` for instructors' scripts and ``gpulab lab list|show``: exact JSON, exit codes, batch CSV.

Exit code 0 whenever grading ran (whatever the learner scored); 1 with one message and no traceback when
grading itself could not run. Batch grading keeps going past broken submissions (and past one that runs over
its time or memory limit) and writes each CSV row as soon as it is done. These run ``--static`` (no cluster);
replay grading on the grader's cluster is tested in tests/e2e/test_replay_grading.py.
"""

from __future__ import annotations

import csv
import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

import labs
from labs import grading
from labs.cli import main

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
BUNDLES = ROOT / "tests" / "fixtures" / "labs" / "bundles"
LAB = "03-scheduling"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_grade_json_has_exactly_the_documented_keys(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "grade", LAB, "--submission", str(BUNDLES / f"{LAB}.solved.json"), "--json", "--static")
    data = json.loads(out)
    assert code == 0 and set(data) == {"lab", "passed", "score", "max_score", "checks"}
    assert all(set(c) == {"id", "passed", "points", "message", "hint"} for c in data["checks"])
    static = sum(c.points for c in labs.get(LAB).checks if not c.cluster)
    assert data["passed"] is True and data["score"] == data["max_score"] == static < 18


def test_a_failing_learner_is_still_exit_code_zero(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "grade", LAB, "--submission", str(ROOT / "labs" / LAB / "starter"), "--json", "--static")
    data = json.loads(out)
    assert code == 0 and data["passed"] is False and data["score"] < data["max_score"]
    assert all(c["hint"] for c in data["checks"] if not c["passed"])


def test_static_grading_never_scores_a_bundles_cluster_state(capsys: pytest.CaptureFixture[str]) -> None:
    """The unsolved bundle's recorded cluster would fail five cluster checks: static grading reads none of it."""
    code, out, _ = run(capsys, "grade", LAB, "--submission", str(ROOT / "labs" / LAB / "solution"),
                       "--bundle", str(BUNDLES / f"{LAB}.unsolved.json"), "--json", "--static")
    data = json.loads(out)
    cluster = {c.id for c in labs.get(LAB).checks if c.cluster}
    assert code == 0 and data["passed"] is True and not cluster & {c["id"] for c in data["checks"]}
    code, out, err = run(capsys, "grade", LAB, "--submission", ".", "--static", "--live")
    assert code == 2 and "choose one of" in out + err


@pytest.mark.parametrize("args", [
    ["grade", LAB, "--submission", "/nonexistent/folder", "--json", "--static"],
    ["grade", "99-nope", "--submission", "."],
    ["grade", LAB],
    ["grade", LAB, "--submission", ".", "--batch", "."],
])
def test_broken_grading_is_one_message_and_exit_one_or_two(capsys: pytest.CaptureFixture[str], args: list[str]) -> None:
    code, out, err = run(capsys, *args)
    assert code in (1, 2) and "Traceback" not in out + err and (out + err).strip()


def test_a_damaged_bundle_is_a_clear_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "evidence.json"
    bad.write_text('{"kind": "gpulab.dev/EvidenceBundle", "bundleVersion": 99}')
    code, out, err = run(capsys, "grade", LAB, "--submission", str(bad), "--json", "--static")
    assert code == 1 and "Traceback" not in err and "newer" in err.lower()


def test_batch_keeps_going_past_broken_submissions(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Four submissions: full marks (folder + bundle), starter files, a bundle alone, and a damaged bundle."""
    batch = tmp_path / "batch"
    good = batch / "alice"
    shutil.copytree(ROOT / "labs" / LAB / "solution", good)
    shutil.copyfile(BUNDLES / f"{LAB}.solved.json", good / "evidence.json")
    shutil.copytree(ROOT / "labs" / LAB / "starter", batch / "bob")
    shutil.copyfile(BUNDLES / f"{LAB}.unsolved.json", batch / "carol.json")
    (batch / "dave").mkdir()
    (batch / "dave" / "evidence.json").write_text("not json at all")
    code, out, _ = run(capsys, "grade", LAB, "--batch", str(batch), "--static")
    assert code == 0
    assert "4 submissions" in out and "1 full marks" in out and "1 could not be graded" in out and "dave" in out
    rows = list(csv.DictReader((batch / f"grades-{LAB}.csv").open()))
    by = {r["submission"]: r for r in rows}
    assert set(by) == {"alice", "bob", "carol.json", "dave"}
    assert by["alice"]["passed"] == "true" and by["alice"]["urgent-runs"] == ""  # static: cluster checks not graded
    assert by["bob"]["passed"] == "false" and by["bob"]["urgent-runs"] == ""
    assert by["carol.json"]["urgent-runs"] == ""
    assert by["dave"]["score"] == "" and by["dave"]["error"]


def test_batch_json_summary(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    batch = tmp_path / "b"
    batch.mkdir()
    shutil.copyfile(BUNDLES / f"{LAB}.solved.json", batch / "one.json")
    code, out, _ = run(capsys, "grade", LAB, "--batch", str(batch), "--json", "--csv", str(tmp_path / "g.csv"),
                       "--static")
    data = json.loads(out)
    assert code == 0 and data["graded"] == 1 and data["broken"] == 0 and (tmp_path / "g.csv").is_file()


def _three(tmp_path: Path) -> Path:
    batch = tmp_path / "batch"
    for name in ("a-first", "b-slow", "c-last"):
        shutil.copytree(ROOT / "labs" / LAB / "solution", batch / name)
    return batch


def test_batch_goes_on_past_a_submission_over_its_time_limit(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A submission that grades for too long is stopped at its limit, recorded, and the batch goes on."""
    real = grading.grade

    def slow(lab_id: str, submission: Path, **kw: Any) -> Any:
        if submission.name == "b-slow":
            time.sleep(60)
        return real(lab_id, submission, **kw)

    monkeypatch.setattr(grading, "grade", slow)
    started = time.monotonic()
    code, out, _ = run(capsys, "grade", LAB, "--batch", str(_three(tmp_path)), "--static", "--time-limit", "3")
    assert code == 0 and time.monotonic() - started < 30
    by = {r["submission"]: r for r in csv.DictReader((tmp_path / "batch" / f"grades-{LAB}.csv").open())}
    assert by["a-first"]["passed"] == by["c-last"]["passed"] == "true"
    assert by["b-slow"]["score"] == "" and "longer than the limit of 3 s" in by["b-slow"]["error"]


def test_batch_goes_on_past_a_submission_over_its_memory_limit(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    real = grading.grade

    def greedy(lab_id: str, submission: Path, **kw: Any) -> Any:
        if submission.name == "b-slow":
            hog = bytearray(4 * 1024 * 1024 * 1024)
            assert hog
        return real(lab_id, submission, **kw)

    monkeypatch.setattr(grading, "grade", greedy)
    code, out, _ = run(capsys, "grade", LAB, "--batch", str(_three(tmp_path)), "--static", "--memory-limit", "1024")
    assert code == 0
    by = {r["submission"]: r for r in csv.DictReader((tmp_path / "batch" / f"grades-{LAB}.csv").open())}
    assert by["a-first"]["passed"] == by["c-last"]["passed"] == "true"
    assert "more memory than the per-submission limit" in by["b-slow"]["error"]


def test_batch_rows_reach_the_csv_as_each_submission_finishes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The grader dies while grading the third submission: the CSV already holds the first two rows."""
    real = grading.within_budget
    calls: list[str] = []

    def dies_on_third(name: str, *args: Any) -> Any:
        calls.append(name)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(name, *args)

    monkeypatch.setattr(grading, "within_budget", dies_on_third)
    with pytest.raises(KeyboardInterrupt):
        grading.grade_batch(LAB, _three(tmp_path))
    rows = list(csv.DictReader((tmp_path / "batch" / f"grades-{LAB}.csv").open()))
    assert [r["submission"] for r in rows] == ["a-first", "b-slow"] and rows[0]["passed"] == "true"


def test_lab_list_and_show(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "lab", "list", "--json")
    listed = json.loads(out)
    assert code == 0 and [l["id"] for l in listed][:2] == ["01-device-plugins", "02-gpu-operator"]
    code, out, _ = run(capsys, "lab", "show", "04a-time-slicing")
    assert code == 0 and "Three inference workers on one GPU" in out


def test_lab_commands_on_a_lab_never_started_say_how_to_start_it(capsys: pytest.CaptureFixture[str],
                                                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPULAB_STATE_DIR", str(tmp_path))
    code, _, err = run(capsys, "lab", "check", "05-dra")
    assert code == 1 and "has not been started" in err and "gpulab lab start 05-dra" in err


def test_a_submission_named_like_a_formula_is_text_in_the_grades_csv(capsys: pytest.CaptureFixture[str],
                                                                    tmp_path: Path) -> None:
    """A learner chooses the submission's name: one that a spreadsheet would run (=HYPERLINK(...), +, -, @) is
    written with a leading apostrophe, in its own cell and wherever the error message quotes it."""
    batch = tmp_path / "batch"
    name = '=HYPERLINK("example.invalid","x")'
    shutil.copytree(ROOT / "labs" / LAB / "starter", batch / name)
    (batch / "@sum").mkdir()
    (batch / "@sum" / "evidence.json").write_text("not json at all")
    code, _, _ = run(capsys, "grade", LAB, "--batch", str(batch), "--static")
    assert code == 0
    rows = list(csv.reader((batch / f"grades-{LAB}.csv").open()))
    cells = [cell for row in rows[1:] for cell in row]
    assert "'" + name in cells and "'@sum" in cells
    assert not any(cell[:1] in ("=", "+", "-", "@") and cell != "-" for cell in cells), cells


def test_a_broken_submission_fails_before_the_graders_cluster_starts(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`gpulab grade LAB --submission BAD` reads and checks the submission first: a damaged bundle is one message
    in under a second, and no grader's cluster is started for it."""
    from labs.grader_cluster import GraderCluster

    def no_cluster(self: GraderCluster) -> GraderCluster:
        raise AssertionError("the grader's cluster was started for a broken submission")

    monkeypatch.setattr(GraderCluster, "__enter__", no_cluster)
    bad = tmp_path / "evidence.json"
    bad.write_text('{"kind": "gpulab.dev/EvidenceBundle", "bundleVersion": 2, "cut')
    started = time.monotonic()
    code, _, err = run(capsys, "grade", LAB, "--submission", str(bad))
    assert code != 0 and "evidence.json" in err and time.monotonic() - started < 1.0, err
