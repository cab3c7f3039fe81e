"""Quiz stores are learner input: scores are graded again, owners are checked, broken and hostile stores are
reported without stopping the class report, and CSV cells never become formulas (issue 15, item 8).

Each test is an attempt that worked before: a forged score, a store speaking for another learner, a malformed
row that aborted the report, a recursive VIEW that hung it, a store with a schema of its own, a formula cell.
"""

from __future__ import annotations

import csv
import json
import os
import random
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import quizzes
from labs.cli import main as cli_main
from quizzes import bank, errors, model, render, report, store, testing

pytestmark = pytest.mark.unit
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "quizzes"
FORGED = model.Grade(score=1.0, correct=True, feedback=())
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def demo() -> model.Bank:
    return bank.load_bank(FIXTURES / "valid-minimal.yaml")


def forge_wrong_answers_as_right(path: Path, learner: str, chosen: model.Bank, phase: str) -> None:
    """Every item of a phase answered wrongly, each row claiming full marks (what a learner's kernel can write)."""
    rng = random.Random(0)
    with store.Store.open(path) as opened:
        for item in chosen.items_for(phase):
            response = testing.answer(item, False, rng)
            opened.record(learner, chosen.section, phase, item.id, response, FORGED)


def test_grade_from_store_grades_the_response_not_the_stored_score(tmp_path: Path) -> None:
    path = tmp_path / "quiz-answers.sqlite3"
    sharing = bank.get_bank("sharing")
    forge_wrong_answers_as_right(path, "mal", sharing, "post")
    result = quizzes.grade_from_store("sharing", "post", "mal", store_path=path)
    assert result.answered == len(sharing.items_for("post"))
    assert result.score < 0.5  # wrong answers (a few multi-select picks keep partial credit)
    with pytest.raises(AssertionError, match="mal scored"):
        quizzes.grade_from_store("sharing", "post", "mal", store_path=path, minimum=0.7)


def test_class_report_grades_the_response_not_the_stored_score(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    with store.Store.open(path) as opened:
        opened.record("mal", "demo", "pre", "q1", ["b"], FORGED)  # b is wrong
        opened.record("mal", "demo", "pre", "q3", 11.0, FORGED)  # 28 is right
        answers = opened.answers()
    result = report.aggregate([demo()], answers)
    q1 = next(i for i in result.items if i.item == "q1" and i.phase == "pre")
    q3 = next(i for i in result.items if i.item == "q3" and i.phase == "pre")
    assert (q1.difficulty, q3.difficulty) == (0.0, 0.0)
    assert report.phase_score(demo(), "pre", answers) == (0.0, 2)


def store_of(path: Path, learner: str, chosen: model.Bank, *, right: bool) -> None:
    rng = random.Random(1)
    with store.Store.open(path) as opened:
        for phase in model.PHASES:
            for item in chosen.items_for(phase):
                response = testing.answer(item, right, rng)
                opened.record(learner, chosen.section, phase, item.id, response, quizzes.scoring.grade(item, response))


def test_a_store_cannot_speak_for_another_learner(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """aaron's store (read first) carries all-wrong rows for zoe; zoe's own store in her folder must win."""
    submitted = tmp_path / "submitted"
    store_of(submitted / "zoe" / "quiz-answers.sqlite3", "zoe", demo(), right=True)
    attacker = submitted / "aaron" / "quiz-answers.sqlite3"
    store_of(attacker, "aaron", demo(), right=True)
    store_of(attacker, "zoe", demo(), right=False)
    code = cli_main.main(["quiz", "report", str(submitted), "--bank", str(FIXTURES / "valid-minimal.yaml"),
                          "--learner", "zoe"])  # fmt: skip
    captured = capsys.readouterr()
    assert captured.out.count("100% (8/8)") == 2, captured.out  # pre and post: zoe's own right answers
    assert code == 1 and "answer(s) for other learner(s) zoe refused: this store belongs to aaron" in captured.err


def test_one_learner_in_two_stores_is_never_merged(tmp_path: Path) -> None:
    """Two stores outside any learner folder both hold ann: neither is used, and the conflict is reported."""
    store_of(tmp_path / "one.sqlite3", "ann", demo(), right=True)
    store_of(tmp_path / "two.sqlite3", "ann", demo(), right=False)
    from quizzes import collect

    found = collect.collect([tmp_path / "one.sqlite3", tmp_path / "two.sqlite3"], [demo()])
    assert found.answers == ()
    assert len(found.problems) == 2 and all("ann is in 2 stores; used none of them" in p for p in found.problems)


def add_rows(path: Path, *rows: tuple[object, ...]) -> None:
    conn = sqlite3.connect(path)
    conn.executemany("INSERT INTO answers (learner, section, phase, item, attempt, answered_at, response, score, "
                     "correct, bank_version) VALUES (?, ?, ?, ?, ?, 'now', ?, ?, 1, 1)", rows)  # fmt: skip
    conn.commit()
    conn.close()


def test_malformed_rows_are_reported_per_store_and_the_report_goes_on(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    good, odd = tmp_path / "c" / "ann" / "quiz-answers.sqlite3", tmp_path / "c" / "bob" / "quiz-answers.sqlite3"
    store_of(good, "ann", demo(), right=True)
    store_of(odd, "bob", demo(), right=True)
    add_rows(odd, ("bob", "demo", "pre", "q99", 1, '{"a": 1}', 1.0),  # a mapping: neither options nor a number
             ("bob", "demo", "pre", "q99", 2, "not json", 1.0),
             ("bob", "demo", "post", "q1", 9, '["zz"]', 1.0))  # fmt: skip  # an option q1 does not have
    code = cli_main.main(["quiz", "report", str(tmp_path / "c"), "--bank", str(FIXTURES / "valid-minimal.yaml")])
    captured = capsys.readouterr()
    assert code == 1 and "Traceback" not in captured.err
    assert "2 learner(s): ann, bob" in captured.out
    assert "row 17: the response '{\"a\": 1}' is neither a list of option ids nor a number" in captured.err
    assert "row 18: the response is not JSON" in captured.err
    assert "learner bob, item q1 attempt 9: the response ['zz'] does not fit the item" in captured.err
    assert str(odd) in captured.err and str(good) not in captured.err


def recursive_view_store(path: Path) -> None:
    with store.Store.open(path) as opened:
        opened.record("ann", "demo", "pre", "q1", ["a"], FORGED)
    conn = sqlite3.connect(path)
    conn.executescript("""
        DROP TABLE answers;
        CREATE VIEW answers AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r)
        SELECT n AS id, 'ann' AS learner, 'demo' AS section, 'pre' AS phase, 'q1' AS item, n AS attempt,
               'now' AS answered_at, '["a"]' AS response, 1.0 AS score, 1 AS correct, 1 AS bank_version FROM r;
    """)
    conn.close()


def test_a_recursive_view_does_not_hang_the_report(tmp_path: Path) -> None:
    hostile = tmp_path / "c" / "mal" / "quiz-answers.sqlite3"
    hostile.parent.mkdir(parents=True)
    recursive_view_store(hostile)
    store_of(tmp_path / "c" / "ann" / "quiz-answers.sqlite3", "ann", demo(), right=True)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", "import sys; from labs.cli import main; sys.exit(main.main(sys.argv[1:]))",
                           "quiz", "report", str(tmp_path / "c"), "--bank", str(FIXTURES / "valid-minimal.yaml")],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert time.monotonic() - started < 60
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "1 learner(s): ann" in proc.stdout
    assert "not a gpulab quiz store (it also holds view answers" in proc.stderr or "no answers table" in proc.stderr


@pytest.mark.parametrize("ddl", [
    "CREATE TRIGGER t AFTER INSERT ON meta BEGIN SELECT 1; END",
    "CREATE TABLE extra (x)",
    "ALTER TABLE answers ADD COLUMN note TEXT",
    "CREATE VIEW v AS SELECT 1",
], ids=["trigger", "table", "column", "view"])  # fmt: skip
def test_a_store_that_is_not_our_schema_is_refused(tmp_path: Path, ddl: str) -> None:
    path = tmp_path / "s.sqlite3"
    with store.Store.open(path) as opened:
        opened.record("ann", "demo", "pre", "q1", ["a"], FORGED)
    conn = sqlite3.connect(path)
    conn.execute(ddl)
    conn.commit()
    conn.close()
    with pytest.raises(errors.StoreError, match="not a gpulab quiz store"):
        store.Store.read_only(path)


def test_reading_a_store_has_a_time_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.sqlite3"
    with store.Store.open(path) as opened:
        opened.record("ann", "demo", "pre", "q1", ["a"], FORGED)
    add_rows(path, *(("ann", "demo", "pre", f"i{n}", 1, '["a"]', 1.0) for n in range(20_000)))
    with store.Store.read_only(path) as opened:
        assert len(opened.answers()) == 20_001
    with pytest.raises(errors.StoreError, match="took longer than 1e-06 s"):
        with store.Store.read_only(path, time_limit=1e-6) as opened:
            opened.answers()


def test_a_store_far_larger_than_any_quiz_store_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "huge.sqlite3"
    with store.Store.open(path) as opened:
        opened.record("ann", "demo", "pre", "q1", ["a"], FORGED)
    os.truncate(path, store.MAX_STORE_BYTES + 1)  # sparse: no disk used
    with pytest.raises(errors.StoreError, match="far more than a quiz store holds"):
        store.Store.read_only(path)


def test_a_store_with_several_learners_and_no_owner_is_not_graded_as_someone(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(quizzes.LEARNER_ENV, raising=False)
    monkeypatch.setenv("JUPYTERHUB_USER", "ann")
    path = tmp_path / "shared.sqlite3"
    sharing = bank.get_bank("sharing")
    forge_wrong_answers_as_right(path, "ann", sharing, "post")
    forge_wrong_answers_as_right(path, "bob", sharing, "post")
    with pytest.raises(AssertionError, match="holds answers of 2 learners"):
        quizzes.grade_from_store("sharing", "post", store_path=path)
    owned = tmp_path / "bob" / "quiz-answers.sqlite3"
    owned.parent.mkdir()
    owned.write_bytes(path.read_bytes())
    assert quizzes.grade_from_store("sharing", "post", store_path=owned).learner == "bob"


def test_csv_cells_never_start_a_formula(tmp_path: Path) -> None:
    """A bank (--bank) and learner ids may both carry formulas; numbers such as -0.25 stay numbers."""
    text = (FIXTURES / "valid-minimal.yaml").read_text().replace("id: q1\n", "id: '=HYPERLINK(\"http://x\")'\n")
    hostile_bank = tmp_path / "bank.yaml"
    hostile_bank.write_text(text)
    chosen = bank.load_bank(hostile_bank)
    path = tmp_path / "s.sqlite3"
    for learner in ("@SUM(A1)", "+cmd|' /C calc'!A0", "\tx", "-2+3"):
        store_of(path, learner, chosen, right=False)
    with store.Store.read_only(path) as opened:
        result = report.aggregate([chosen], opened.answers())
    out = tmp_path / "r.csv"
    render.write_csv(result, out)
    cells = [c for row in csv.reader(out.open(newline="")) for c in row]
    formulas = [c for c in cells if c.startswith(FORMULA_START) and not render._is_number(c)]
    assert formulas == []
    assert "'=HYPERLINK(\"http://x\")" in cells
    assert render.csv_cell("-0.25") == "-0.25" and render.csv_cell("-1+1") == "'-1+1"


def test_a_learners_own_stores_in_their_folder_are_combined(tmp_path: Path) -> None:
    """nbgrader: submitted/<student>/<assignment>/quiz-answers.sqlite3, one store per assignment notebook."""
    from quizzes import collect

    chosen = demo()
    first, second = tmp_path / "ann" / "a1" / "quiz-answers.sqlite3", tmp_path / "ann" / "a2" / "quiz-answers.sqlite3"
    with store.Store.open(first) as opened:
        opened.record("ann", "demo", "pre", "q1", ["b"], FORGED)  # wrong, answered first
    with store.Store.open(second) as opened:
        opened.record("ann", "demo", "pre", "q1", ["a"], FORGED)  # right, the same attempt again later
        opened.record("ann", "demo", "post", "q1", ["a"], FORGED)
    found = collect.collect([second, first], [chosen])
    assert sorted((a.phase, a.response, a.score) for a in found.answers) == [("post", ["a"], 1.0), ("pre", ["b"], 0.0)]
    assert found.problems == [f"{second}: q1 attempt 1 of ann is also in another of their stores; the earlier "
                              "answer is kept"]  # fmt: skip


def test_names_with_control_characters_are_malformed_rows(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    with store.Store.open(path) as opened:
        opened.record("ann", "demo", "pre", "q1", ["a"], FORGED)
    add_rows(path, ("\x1b]0;owned\x07", "demo", "pre", "q1", 1, '["a"]', 1.0), ("x" * 500, "demo", "pre", "q1", 1,
             '["a"]', 1.0))  # fmt: skip
    with store.Store.read_only(path) as opened:
        found, problems = opened.scan()
    assert [a.learner for a in found] == ["ann"]
    assert len(problems) == 2 and all("not a printable name of at most 200 characters" in p for p in problems)


def test_a_store_in_a_learners_home_counts_only_for_that_learner(tmp_path: Path) -> None:
    """The class report names each store's owner by the home it was read from, so a store in mallory's home
    holding only all-right rows for ann (who answered nothing) counts for no one: it never becomes ann's."""
    from quizzes import collect

    forged = tmp_path / "mallory" / "quiz-answers.sqlite3"
    store_of(forged, "ann", demo(), right=True)
    assert {a.learner for a in collect.collect([forged], [demo()]).answers} == {"ann"}  # the rows alone would say
    found = collect.collect([forged], [demo()], owners={forged: "mallory"})
    assert found.answers == ()
    assert any("for other learner(s) ann refused: this store belongs to mallory" in p for p in found.problems)


def test_a_huge_response_is_not_echoed_by_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A 5 MB response (a list of 300,000 option ids a learner's kernel wrote) or a 5 MB phase is reported by its
    start, not echoed whole into the terminal, the log and the CSV (a store over 64 MiB is not read at all)."""
    odd = tmp_path / "c" / "bob" / "quiz-answers.sqlite3"
    store_of(odd, "bob", demo(), right=True)
    huge = json.dumps(["zz" * 8] * 300_000)
    assert len(huge) >= 5_000_000
    add_rows(odd, ("bob", "demo", "post", "q1", 9, huge, 1.0), ("bob", "x" * 5_000_000, "pre", "q1", 10, '["a"]', 1.0))
    code = cli_main.main(["quiz", "report", str(tmp_path / "c"), "--bank", str(FIXTURES / "valid-minimal.yaml")])
    captured = capsys.readouterr()
    assert code == 1 and "Traceback" not in captured.err
    assert "learner bob, item q1 attempt 9: the response ['zzzzzzzzzzzzzzzz'" in captured.err
    assert len(captured.err) < 5_000 and len(captured.out) < 100_000, (len(captured.err), len(captured.out))
