"""The answer store: WAL, one committed transaction per answer, earlier answers survive a killed writer."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from quizzes import errors, model, store

pytestmark = pytest.mark.unit
RIGHT = model.Grade(score=1.0, correct=True, feedback=("ok",))
WRONG = model.Grade(score=0.0, correct=False, feedback=("no",))


def test_store_is_in_wal_mode_with_full_sync(tmp_path: Path) -> None:
    with store.Store.open(tmp_path / "a.sqlite3") as opened:
        assert opened._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert opened._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_answers_are_keyed_by_learner_section_phase_item_attempt_and_time(tmp_path: Path) -> None:
    with store.Store.open(tmp_path / "a.sqlite3") as opened:
        first = opened.record("ann", "sharing", "pre", "share-mig-math-a", 7.0, WRONG, bank_version=3)
        second = opened.record("ann", "sharing", "pre", "share-mig-math-a", 28.0, RIGHT, bank_version=3)
        opened.record("bob", "sharing", "pre", "share-mig-math-a", ["x"], WRONG)
        rows = opened.answers(learner="ann")
    assert [(a.item, a.attempt, a.response, a.score) for a in rows] == [
        ("share-mig-math-a", 1, 7.0, 0.0), ("share-mig-math-a", 2, 28.0, 1.0)]  # fmt: skip
    assert (first.attempt, second.attempt, second.bank_version) == (1, 2, 3)
    assert rows[0].answered_at.endswith("+00:00") and rows[0].answered_at <= rows[1].answered_at


def test_attempts_past_the_limit_are_refused(tmp_path: Path) -> None:
    with store.Store.open(tmp_path / "a.sqlite3") as opened:
        opened.record("ann", "dra", "post", "dra-cel-a", ["a"], WRONG, max_attempts=2)
        opened.record("ann", "dra", "post", "dra-cel-a", ["b"], WRONG, max_attempts=2)
        with pytest.raises(errors.QuizError, match="no attempts left"):
            opened.record("ann", "dra", "post", "dra-cel-a", ["c"], RIGHT, max_attempts=2)
        assert len(opened.answers()) == 2


def test_path_comes_from_the_argument_then_the_env_var_then_the_user_data_dir(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(store.ENV_VAR, str(tmp_path / "env.sqlite3"))
    assert store.resolve(None) == tmp_path / "env.sqlite3"
    assert store.resolve(tmp_path / "arg.sqlite3") == tmp_path / "arg.sqlite3"
    monkeypatch.delenv(store.ENV_VAR)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert store.default_path() == tmp_path / "xdg" / "gpulab" / store.FILE_NAME


def test_read_only_open_refuses_files_that_are_not_stores(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sqlite3"
    junk.write_text("not a database")
    with pytest.raises(errors.StoreError, match="junk.sqlite3"):
        store.Store.read_only(junk)
    other = tmp_path / "other.sqlite3"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(errors.StoreError, match="not a gpulab quiz store"):
        store.Store.read_only(other)
    with pytest.raises(errors.StoreError, match="no such quiz store"):
        store.Store.read_only(tmp_path / "missing.sqlite3")


def test_a_store_from_a_newer_gpulab_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite3"
    with store.Store.open(path) as opened:
        opened._conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(errors.StoreError, match="newer gpulab"):
        store.Store.read_only(path)


def test_unwritable_location_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(errors.StoreError, match="cannot open the quiz store"):
        store.Store.open(blocker / "sub" / "a.sqlite3")


WRITER = textwrap.dedent("""
    import sys, time
    from quizzes import model, store
    grade = model.Grade(score=1.0, correct=True, feedback=())
    s = store.Store.open(sys.argv[1])
    n = 0
    while True:
        n += 1
        s.record("killed", "sharing", "pre", f"item-{n}", [str(n)], grade)
        print(n, flush=True)   # only after the commit returned
        time.sleep(0.02)
""")


def test_answers_committed_before_a_kill_9_survive(tmp_path: Path) -> None:
    """A writer process is killed with SIGKILL mid-way; everything it reported as saved is still there."""
    path = tmp_path / "killed.sqlite3"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    reported = 0
    deadline = time.monotonic() + 60
    try:
        assert proc.stdout is not None
        while reported < 25 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            reported = int(line)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert reported >= 25, "the writer did not get going"
    with store.Store.read_only(path) as opened:
        saved = opened.answers(learner="killed")
        assert opened._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    items = {a.item for a in saved}
    assert {f"item-{n}" for n in range(1, reported + 1)} <= items
    assert len(saved) >= reported


def test_two_writers_share_one_store_without_losing_answers(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    with store.Store.open(path) as one, store.Store.open(path) as two:
        for n in range(20):
            (one if n % 2 else two).record("ann", "dra", "pre", "dra-cel-a", ["a"], WRONG)
    with store.Store.read_only(path) as reader:
        assert [a.attempt for a in reader.answers()] == list(range(1, 21))
