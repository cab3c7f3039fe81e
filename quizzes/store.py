"""The answer store: one SQLite file per learner (or per machine), written one committed answer at a time.

Every submitted answer is its own ``BEGIN IMMEDIATE ... COMMIT`` transaction in WAL mode with
``synchronous=FULL``, so a kernel killed at any moment loses nothing that was already submitted, and several
kernels can write the same file. Rows are keyed by learner, section, phase, item and attempt, with the time.

The path comes from the ``path`` argument, else ``$GPULAB_QUIZ_DB``, else the user data dir (platformdirs).
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import platformdirs

from quizzes import errors, model

log = logging.getLogger(__name__)

ENV_VAR = "GPULAB_QUIZ_DB"
FILE_NAME = "quiz-answers.sqlite3"
SCHEMA_VERSION = 1

_DDL = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS answers (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    learner TEXT NOT NULL,
    section TEXT NOT NULL,
    phase TEXT NOT NULL CHECK (phase IN ('pre', 'post')),
    item TEXT NOT NULL,
    attempt INTEGER NOT NULL CHECK (attempt >= 1),
    answered_at TEXT NOT NULL,
    response TEXT NOT NULL,
    score REAL NOT NULL CHECK (score >= 0 AND score <= 1),
    correct INTEGER NOT NULL,
    bank_version INTEGER NOT NULL,
    UNIQUE (learner, section, phase, item, attempt)
);
CREATE INDEX IF NOT EXISTS answers_by_quiz ON answers (learner, section, phase, item);
"""


@dataclass(frozen=True)
class Answer:
    """One stored attempt at one item."""

    learner: str
    section: str
    phase: str
    item: str
    attempt: int
    answered_at: str  # ISO 8601, UTC
    response: list[str] | float
    score: float
    correct: bool
    bank_version: int


def default_path() -> Path:
    """``$GPULAB_QUIZ_DB`` if set, else ``quiz-answers.sqlite3`` in the user data dir."""
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir("gpulab", appauthor=False)) / FILE_NAME


def resolve(path: Path | str | None) -> Path:
    return Path(path).expanduser() if path else default_path()


class Store:
    """A quiz answer store. Use ``Store.open(path)`` to write, ``Store.read_only(path)`` to report."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path

    @classmethod
    def open(cls, path: Path | str | None = None) -> Store:
        """Open (creating if needed) a store for writing answers."""
        target = resolve(path)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(target, timeout=30.0, isolation_level=None)
            conn.execute("PRAGMA busy_timeout = 30000")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            conn.execute("PRAGMA synchronous = FULL")
            conn.executescript(_DDL)
            conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        except (OSError, sqlite3.Error) as exc:
            raise errors.StoreError(f"cannot open the quiz store {target}: {exc}",
                                    hint=f"check the path, or set {ENV_VAR} to a writable file") from exc  # fmt: skip
        if str(mode).lower() != "wal":
            log.warning("quiz store %s is in %s mode, not WAL (a network filesystem?)", target, mode)
        store = cls(conn, target)
        store._check_version()
        return store

    @classmethod
    def read_only(cls, path: Path | str) -> Store:
        """Open an existing store without changing it (for reports over collected stores)."""
        target = Path(path)
        if not target.is_file():
            raise errors.StoreError(f"{target}: no such quiz store")
        try:
            conn = sqlite3.connect(f"{target.resolve().as_uri()}?mode=ro", uri=True, timeout=30.0)
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error as exc:
            raise errors.StoreError(f"{target}: not a readable quiz store ({exc})") from exc
        store = cls(conn, target)
        store._check_version()
        return store

    def _check_version(self) -> None:
        try:
            row = self._conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            self._conn.execute("SELECT count(*) FROM answers").fetchone()
        except sqlite3.DatabaseError as exc:
            raise errors.StoreError(f"{self.path}: not a gpulab quiz store ({exc})") from exc
        version = int(row[0]) if row else 0
        if version > SCHEMA_VERSION:
            raise errors.StoreError(f"{self.path}: written by a newer gpulab (store schema {version}, this "
                                    f"gpulab reads {SCHEMA_VERSION})", hint="upgrade gpulab")  # fmt: skip

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @contextmanager
    def _immediate(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taken up front so the attempt count cannot race another writer."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def record(self, learner: str, section: str, phase: str, item: str, response: list[str] | float,
               grade: model.Grade, *, bank_version: int = 1, max_attempts: int | None = None) -> Answer:  # fmt: skip
        """Append one attempt and commit it before returning; refuses an attempt past ``max_attempts``."""
        try:
            with self._immediate() as conn:
                (done,) = conn.execute(
                    "SELECT COALESCE(MAX(attempt), 0) FROM answers WHERE learner=? AND section=? AND phase=? AND item=?",
                    (learner, section, phase, item),
                ).fetchone()
                if max_attempts is not None and done >= max_attempts:
                    raise errors.QuizError(f"no attempts left for item '{item}' ({done} of {max_attempts} used)")
                answer = Answer(learner, section, phase, item, int(done) + 1, _now(), response, grade.score,
                                grade.correct, bank_version)  # fmt: skip
                conn.execute(
                    "INSERT INTO answers (learner, section, phase, item, attempt, answered_at, response, score,"
                    " correct, bank_version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (learner, section, phase, item, answer.attempt, answer.answered_at, json.dumps(response),
                     grade.score, int(grade.correct), bank_version),
                )  # fmt: skip
        except sqlite3.Error as exc:
            raise errors.StoreError(f"could not save the answer to {self.path}: {exc}") from exc
        return answer

    def answers(self, learner: str | None = None, section: str | None = None, phase: str | None = None) -> list[Answer]:
        """Stored attempts, filtered, ordered by learner, section, phase, item and attempt."""
        clauses, args = [], []
        for column, value in (("learner", learner), ("section", section), ("phase", phase)):
            if value is not None:
                clauses.append(f"{column} = ?")
                args.append(value)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        sql = ("SELECT learner, section, phase, item, attempt, answered_at, response, score, correct, bank_version "
               f"FROM answers {where} ORDER BY learner, section, phase, item, attempt")  # fmt: skip
        try:
            rows = self._conn.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise errors.StoreError(f"could not read {self.path}: {exc}") from exc
        return [_answer(row, self.path) for row in rows]

    def learners(self) -> list[str]:
        return [r[0] for r in self._conn.execute("SELECT DISTINCT learner FROM answers ORDER BY learner")]


def _answer(row: tuple[object, ...], path: Path) -> Answer:
    learner, section, phase, item, attempt, at, response, score, correct, version = row
    try:
        decoded = json.loads(str(response))
    except json.JSONDecodeError as exc:
        raise errors.StoreError(f"{path}: a stored response is not JSON ({exc})") from exc
    value: list[str] | float = [str(x) for x in decoded] if isinstance(decoded, list) else float(decoded)
    return Answer(str(learner), str(section), str(phase), str(item), int(str(attempt)), str(at), value,
                  float(str(score)), bool(correct), int(str(version)))  # fmt: skip


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
