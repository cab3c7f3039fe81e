"""A quiz writer killed in the middle of saving loses nothing that was already saved, and the store stays usable.

The writer is a separate process answering the built-in banks through the real ``QuizSession`` (the kit in
``quizzes.testing``) and printing a line only after each ``submit`` returned, i.e. after the answer's commit.
One test stops the writer exactly inside a save (a SQLite trace hook pauses it at the COMMIT of an answer whose
INSERT already ran) and kills it there; the other kills writers at random moments of continuous saving.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from quizzes import model, store

WRITER = r"""
import random, sys, time
from quizzes import bank as bank_mod, testing
from quizzes.session import QuizSession
from quizzes.store import Store

path, learner_prefix, hold_at = sys.argv[1], sys.argv[2], int(sys.argv[3])
opened = Store.open(path)
commits = 0

def trace(sql):
    global commits
    if sql.strip().upper().startswith("COMMIT"):
        commits += 1
        if commits == hold_at:
            print("IN-SAVE", flush=True)   # the INSERT ran; the COMMIT has not
            time.sleep(60)

opened._conn.set_trace_callback(trace)
rng = random.Random(learner_prefix)
n = 0
while True:
    n += 1
    learner = f"{learner_prefix}-{n}"
    for bank in bank_mod.builtin_banks():
        for phase in ("pre", "post"):
            session = QuizSession(bank, phase, learner, opened)
            submit = session.submit
            def reporting(item_id, response, _submit=submit, _s=session):
                feedback = _submit(item_id, response)
                print(f"SAVED {_s.learner} {_s.bank.section} {_s.phase} {item_id} {feedback.attempt}", flush=True)
                return feedback
            session.submit = reporting
            testing.take_quiz(session, 0.5, rng)
"""

Key = tuple[str, str, str, str, int]


def _start(path: Path, learner: str, hold_at: int = 0) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", WRITER, str(path), learner, str(hold_at)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _read_until(proc: subprocess.Popen[str], stop: str | None, saves: int, deadline: float) -> list[Key]:
    """Collect the writer's SAVED lines until ``stop`` is printed or ``saves`` answers were reported."""
    assert proc.stdout is not None
    saved: list[Key] = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"the writer died on its own: {proc.stderr.read() if proc.stderr else ''}")
        if stop and line.strip() == stop:
            return saved
        _, learner, section, phase, item, attempt = line.split()
        saved.append((learner, section, phase, item, int(attempt)))
        if not stop and len(saved) >= saves:
            return saved
    raise AssertionError("the writer did not get going in time")


def _kill(proc: subprocess.Popen[str]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def _printed_before_death(proc: subprocess.Popen[str]) -> list[Key]:
    """The SAVED lines still in the pipe after the kill (a line cut off mid-print does not count)."""
    assert proc.stdout is not None
    out: list[Key] = []
    for line in proc.stdout.read().splitlines(keepends=True):
        parts = line.split()
        if line.endswith("\n") and len(parts) == 6 and parts[0] == "SAVED":
            out.append((parts[1], parts[2], parts[3], parts[4], int(parts[5])))
    return out


def _stored(path: Path) -> set[Key]:
    with store.Store.read_only(path) as opened:
        assert opened._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        return {(a.learner, a.section, a.phase, a.item, a.attempt) for a in opened.answers()}


def test_writer_killed_inside_a_save_keeps_every_earlier_answer(tmp_path: Path) -> None:
    path = tmp_path / "answers.sqlite3"
    expected: set[Key] = set()
    for round_ in range(3):
        hold_at = 5 + 7 * round_
        proc = _start(path, f"held{round_}", hold_at)
        try:
            saved = _read_until(proc, "IN-SAVE", 0, time.monotonic() + 90)
        finally:
            _kill(proc)
        assert len(saved) == hold_at - 1, "the pause did not come at the expected save"
        expected |= set(saved)
        # Everything reported as saved is there; the answer whose commit was cut off is not, half or whole.
        assert _stored(path) == expected
    with store.Store.open(path) as reopened:  # the store takes new answers after the crashes
        grade = model.Grade(score=1.0, correct=True, feedback=())
        reopened.record("after", "sharing", "pre", "item-x", ["a"], grade)
    assert ("after", "sharing", "pre", "item-x", 1) in _stored(path)
    report = subprocess.run([str(Path(sys.executable).parent / "gpulab"), "quiz", "report", str(path)],
                            capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr
    assert "Traceback" not in report.stderr


def test_writers_killed_at_random_moments_lose_nothing_saved(tmp_path: Path) -> None:
    path = tmp_path / "answers.sqlite3"
    rng = random.Random(8)
    expected: set[Key] = set()
    for round_ in range(6):
        proc = _start(path, f"random{round_}")
        try:
            saved = _read_until(proc, None, rng.randint(3, 25), time.monotonic() + 90)
            time.sleep(rng.uniform(0, 0.05))  # land anywhere: between saves, in an INSERT, in a COMMIT
        finally:
            _kill(proc)
        saved += _printed_before_death(proc)
        expected |= set(saved)
        stored = _stored(path)
        missing = expected - stored
        assert not missing, f"answers reported as saved are gone: {sorted(missing)[:3]}"
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()
