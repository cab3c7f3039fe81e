"""Learning-gain reports: the learner view, class statistics, and `gpulab quiz report` over three learner stores."""

from __future__ import annotations

import csv
import sqlite3
from pathlib import Path

import pytest

from labs.cli import main as cli_main
from quizzes import bank, model, report, store, testing

pytestmark = pytest.mark.unit
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "quizzes"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def make_class(tmp_path: Path) -> list[Path]:
    """Three learners, each with their own store, as collected from three nbgrader submissions."""
    banks = list(bank.builtin_banks())
    paths = []
    for name, pre, post in (("ann", 0.3, 0.9), ("bob", 0.5, 0.7), ("cyd", 0.2, 0.95)):
        path = tmp_path / "submitted" / name / "quiz-answers.sqlite3"
        testing.fill_store(path, name, banks, pre_skill=pre, post_skill=post, seed="class-1")
        paths.append(path)
    return paths


def answers_of(paths: list[Path]) -> list[store.Answer]:
    found: list[store.Answer] = []
    for path in paths:
        with store.Store.read_only(path) as opened:
            found += opened.answers()
    return found


def test_phase_score_counts_unanswered_items_as_zero(tmp_path: Path) -> None:
    demo = bank.load_bank(FIXTURES / "valid-minimal.yaml")
    with store.Store.open(tmp_path / "s.sqlite3") as opened:
        opened.record("ann", "demo", "pre", "q1", ["a"], model.Grade(1.0, True, ()))
        opened.record("ann", "demo", "pre", "q2", ["a"], model.Grade(0.5, False, ()))
        answers = opened.answers()
    assert report.phase_score(demo, "pre", answers) == (pytest.approx(1.5 / 8), 2)
    assert report.phase_score(demo, "post", []) == (None, 0)


def test_learner_view_has_pre_post_and_gain_per_section(tmp_path: Path) -> None:
    demo = bank.load_bank(FIXTURES / "valid-minimal.yaml")
    path = tmp_path / "s.sqlite3"
    testing.fill_store(path, "ann", [demo], pre_skill=0.0, post_skill=1.0)
    with store.Store.read_only(path) as opened:
        (result,) = report.learner_view([demo], opened.answers(), "ann")
    assert (result.section, result.pre, result.post, result.gain) == ("demo", 0.0, 1.0, 1.0)
    assert (result.answered_pre, result.items_pre, result.answered_post, result.items_post) == (8, 8, 8, 8)


def test_class_statistics_over_three_learners(tmp_path: Path) -> None:
    result = report.aggregate(list(bank.builtin_banks()), answers_of(make_class(tmp_path)))
    assert result.learners == ("ann", "bob", "cyd")
    sharing = next(s for s in result.sections if s.section == "sharing")
    assert (sharing.learners_pre, sharing.learners_post, sharing.matched) == (3, 3, 3)
    assert sharing.mean_pre is not None and sharing.mean_post is not None and sharing.mean_post > sharing.mean_pre
    expected_gain = (sharing.mean_post - sharing.mean_pre) / (1 - sharing.mean_pre)
    assert sharing.class_gain == pytest.approx(expected_gain)
    item = next(i for i in result.items if i.item == "share-mig-math-a")
    assert item.responses == 3 and item.difficulty is not None
    assert sum(n for _, n in item.choices) == 3
    wrong = [k for k, n in item.choices if k != "correct" and n]
    if wrong:
        assert item.top_distractor in wrong and item.top_distractor in {"7", "11", "56"}


def test_distractor_counts_for_choice_items(tmp_path: Path) -> None:
    demo = bank.load_bank(FIXTURES / "valid-minimal.yaml")
    with store.Store.open(tmp_path / "s.sqlite3") as opened:
        for learner, pick in (("a", "b"), ("b", "b"), ("c", "c"), ("d", "a")):
            correct = pick == "a"
            opened.record(learner, "demo", "pre", "q1", [pick], model.Grade(float(correct), correct, ()))
        answers = opened.answers()
    stats = next(i for i in report.aggregate([demo], answers).items if i.item == "q1" and i.phase == "pre")
    assert stats.choices == (("a", 1), ("b", 2), ("c", 1))
    assert (stats.responses, stats.difficulty, stats.top_distractor) == (4, 0.25, "b")


def test_cli_report_prints_tables_and_writes_csv_and_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = make_class(tmp_path)
    csv_path, png_path = tmp_path / "out" / "report.csv", tmp_path / "out" / "report.png"
    code = cli_main.main(["quiz", "report", *map(str, paths), "--csv", str(csv_path), "--plot", str(png_path)])
    out = capsys.readouterr().out
    assert code == 0
    assert "3 learner(s): ann, bob, cyd" in out
    for section in ("gpu-fundamentals", "gpu-operator", "scheduling", "sharing", "mig", "dra", "operations"):
        assert section in out
    assert "class gain" in out and "distractors chosen" in out and "r_pb" in out
    rows = list(csv.DictReader(csv_path.open()))
    sections = [r for r in rows if r["level"] == "section"]
    items = [r for r in rows if r["level"] == "item"]
    assert len(sections) == 7 and all(r["learners"] == "3" for r in sections)
    assert len(items) == sum(len(b.items_for(p)) for b in bank.builtin_banks() for p in model.PHASES)
    assert all(0.0 <= float(r["difficulty"]) <= 1.0 for r in items)
    assert png_path.read_bytes()[:8] == PNG_MAGIC and png_path.stat().st_size > 10_000


def test_cli_report_accepts_a_folder_and_skips_a_broken_store(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    make_class(tmp_path)
    broken = tmp_path / "submitted" / "dan" / "quiz-answers.sqlite3"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"garbage")
    code = cli_main.main(["quiz", "report", str(tmp_path / "submitted")])
    captured = capsys.readouterr()
    assert code == 1
    assert "3 learner(s): ann, bob, cyd" in captured.out
    assert "dan/quiz-answers.sqlite3" in captured.err and "Traceback" not in captured.err


def test_cli_report_with_no_readable_store_is_one_clear_error(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    sqlite3.connect(tmp_path / "other.sqlite3").execute("CREATE TABLE x (y)").connection.commit()
    code = cli_main.main(["quiz", "report", str(tmp_path / "other.sqlite3")])
    err = capsys.readouterr().err
    assert code == 1 and "not a gpulab quiz store" in err and "Traceback" not in err


def test_cli_validate_and_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.main(["quiz", "validate"]) == 0
    out = capsys.readouterr().out
    assert "coverage.yaml (59 seed questions)" in out
    assert cli_main.main(["quiz", "validate", str(FIXTURES / "invalid-missing-correct.yaml"),
                          str(FIXTURES / "invalid-duplicate-id.yaml")]) == 1  # fmt: skip
    err = capsys.readouterr().err
    assert "invalid-missing-correct.yaml: spec.items[0] (item q1, line 19): no correct answer" in err
    assert "invalid-duplicate-id.yaml: spec.items: duplicate item id 'q8'" in err
    assert cli_main.main(["quiz", "list"]) == 0
    assert "sharing" in capsys.readouterr().out


def test_cli_report_learner_view(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = make_class(tmp_path)
    assert cli_main.main(["quiz", "report", *map(str, paths), "--learner", "bob"]) == 0
    out = capsys.readouterr().out
    post = len(bank.get_bank("sharing").items_for("post"))
    assert "normalised gain" in out and "sharing" in out and f"({post}/{post})" in out
    assert cli_main.main(["quiz", "report", *map(str, paths), "--learner", "zed"]) == 1
    assert "no answers from learner 'zed'" in capsys.readouterr().err
