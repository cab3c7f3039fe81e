"""The answer store: one SQLite file per learner (or per machine), written one committed answer at a time.

Every submitted answer is its own ``BEGIN IMMEDIATE ... COMMIT`` transaction in WAL mode with
``synchronous=FULL``, so a kernel killed at any moment loses nothing that was already submitted, and several
kernels can write the same file. Rows are keyed by learner, section, phase, item and attempt, with the time.

The path comes from the ``path`` argument, else ``$GPULAB_QUIZ_DB``, else the user data dir (platformdirs).

Collected stores come from learners and are untrusted input. ``Store.read_only`` refuses files over
``MAX_STORE_BYTES``, opens the rest through a read-only URI with ``trusted_schema`` off, refuses any file whose
schema is not ours (views, triggers, unknown tables or columns: a recursive VIEW named ``answers`` would
otherwise hang the reader), and aborts any statement that runs past a time limit (an SQLite progress handler). ``Store.scan`` returns malformed rows as problems next to the
good rows instead of failing the whole store. Stored scores are kept for the learner's own widget only; reports
and grades re-score every response from the bank (``quizzes.report``).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path


from cluster import settings
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


READ_TIME_LIMIT_S = 10.0  # one collected store: opening, checking and reading it, all statements together
MAX_STORE_BYTES = 64 * 1024 * 1024  # a learner's answers to every bank, retries included, take about 60 KB
_COLUMNS = {
    "meta": ("key", "value"),
    "answers": ("id", "learner", "section", "phase", "item", "attempt", "answered_at", "response", "score",
                "correct", "bank_version"),
}  # fmt: skip
_OBJECTS = {("table", "meta"), ("table", "answers"), ("index", "answers_by_quiz"), ("table", "sqlite_sequence")}


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
    given = settings.current().quiz_db
    if given:
        return given
    return settings.data_root() / FILE_NAME


def resolve(path: Path | str | None) -> Path:
    return Path(path).expanduser() if path else default_path()


class Store:
    """A quiz answer store. Use ``Store.open(path)`` to write, ``Store.read_only(path)`` to report."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path
        self._limit: float | None = None  # seconds, for messages; set on untrusted (read-only) stores

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
    def read_only(cls, path: Path | str, *, time_limit: float = READ_TIME_LIMIT_S) -> Store:
        """Open an existing store without changing it (for reports and grades over collected stores).

        The store is untrusted: read-only URI, no trusted schema, our schema only, and every statement on this
        connection together may run ``time_limit`` seconds at most before it is aborted with ``StoreError``.
        """
        target = Path(path)
        if not target.is_file():
            raise errors.StoreError(f"{target}: no such quiz store")
        size = sum(p.stat().st_size for p in (target, target.with_name(target.name + "-wal")) if p.is_file())
        if size > MAX_STORE_BYTES:
            raise errors.StoreError(f"{target}: {size / 2**20:.0f} MiB is far more than a quiz store holds (at most "
                                    f"{MAX_STORE_BYTES // 2**20} MiB are read); not read")  # fmt: skip
        try:
            conn = sqlite3.connect(f"{target.resolve().as_uri()}?mode=ro", uri=True, timeout=5.0)
        except sqlite3.Error as exc:
            raise errors.StoreError(f"{target}: not a readable quiz store ({exc})") from exc
        deadline = time.monotonic() + time_limit
        conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 1000)
        store = cls(conn, target)
        store._limit = time_limit
        try:
            conn.execute("PRAGMA trusted_schema = OFF")
            conn.execute("PRAGMA query_only = ON")
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error as exc:
            conn.close()
            raise store._error("not a readable quiz store", exc) from exc
        try:
            store._check_schema()
            store._check_version()
        except errors.StoreError:
            conn.close()
            raise
        return store

    def _error(self, what: str, exc: sqlite3.Error) -> errors.StoreError:
        if self._limit is not None and isinstance(exc, sqlite3.OperationalError) and "interrupt" in str(exc):
            return errors.StoreError(f"{self.path}: reading it took longer than {self._limit:g} s, so it was "
                                     "stopped (a gpulab quiz store is read in well under a second)")  # fmt: skip
        return errors.StoreError(f"{self.path}: {what} ({exc})")

    def _check_schema(self) -> None:
        """Refuse a file whose tables, columns, views or triggers are not the ones ``_DDL`` creates."""
        try:
            objects = self._conn.execute("SELECT type, name FROM sqlite_master").fetchall()
        except sqlite3.Error as exc:
            raise self._error("not a readable quiz store", exc) from exc
        found = {(str(kind), str(name)) for kind, name in objects}
        missing = [name for name in _COLUMNS if ("table", name) not in found]
        if missing:
            raise errors.StoreError(f"{self.path}: not a gpulab quiz store (no {' or '.join(missing)} table)")
        strange = sorted(f"{kind} {name}" for kind, name in found - _OBJECTS
                         if not (kind == "index" and name.startswith("sqlite_autoindex_")))  # fmt: skip
        if strange:
            raise errors.StoreError(f"{self.path}: not a gpulab quiz store (it also holds {', '.join(strange)}; "
                                    "a quiz store has only the meta and answers tables)")  # fmt: skip
        for table, expected in _COLUMNS.items():
            try:
                columns = tuple(str(r[1]) for r in self._conn.execute(f"PRAGMA table_info({table})"))
            except sqlite3.Error as exc:
                raise self._error("not a readable quiz store", exc) from exc
            if columns != expected:
                raise errors.StoreError(f"{self.path}: not a gpulab quiz store (table {table} has columns "
                                        f"{', '.join(columns)}; expected {', '.join(expected)})")  # fmt: skip

    def _check_version(self) -> None:
        try:
            row = self._conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            self._conn.execute("SELECT count(*) FROM answers").fetchone()
        except sqlite3.DatabaseError as exc:
            raise self._error("not a gpulab quiz store", exc) from exc
        try:
            version = int(str(row[0])) if row else 0
        except ValueError:
            raise errors.StoreError(f"{self.path}: not a gpulab quiz store (schema version {shown(row[0])})") from None
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
        """Stored attempts, filtered, ordered by learner, section, phase, item and attempt (malformed rows left out)."""
        found, problems = self.scan(learner, section, phase)
        for problem in problems:
            log.warning("%s", problem)
        return found

    def scan(self, learner: str | None = None, section: str | None = None,
             phase: str | None = None) -> tuple[list[Answer], list[str]]:  # fmt: skip
        """Like ``answers``, plus one ``path: row N: ...`` message per malformed row (left out of the answers)."""
        clauses, args = [], []
        for column, value in (("learner", learner), ("section", section), ("phase", phase)):
            if value is not None:
                clauses.append(f"{column} = ?")
                args.append(value)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        sql = ("SELECT id, learner, section, phase, item, attempt, answered_at, response, score, correct, "
               f"bank_version FROM answers {where} ORDER BY learner, section, phase, item, attempt, id")  # fmt: skip
        try:
            rows = self._conn.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise self._error("could not read it", exc) from exc
        found: list[Answer] = []
        problems: list[str] = []
        for row in rows:
            try:
                found.append(_answer(row[1:]))
            except ValueError as exc:
                problems.append(f"{self.path}: row {row[0]}: {exc}; the row is left out")
        return found, problems

    def learners(self) -> list[str]:
        try:
            return [str(r[0]) for r in self._conn.execute("SELECT DISTINCT learner FROM answers ORDER BY learner")]
        except sqlite3.Error as exc:
            raise self._error("could not read it", exc) from exc


MAX_NAME = 200  # characters in a learner, section or item id


def shown(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters: a stored value may be megabytes, and messages reach terminals,
    logs and CSV files (only the start of a long text or list is ever formatted)."""
    if isinstance(value, (str, bytes)) and len(value) > limit:
        value = value[:limit]
    elif isinstance(value, (list, tuple)) and len(value) > limit:
        value = type(value)(value[:limit])
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _text(value: object, what: str) -> str:
    """A learner, section or item id: printable text of reasonable length (it reaches terminals and CSV files)."""
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_NAME or not value.isprintable():
        raise ValueError(f"{what} is {shown(value)}, not a printable name of at most {MAX_NAME} characters")
    return value


def _whole(value: object, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{what} is {shown(value)}, not a whole number >= {minimum}")
    return value


def _response(raw: object) -> list[str] | float:
    try:
        decoded = json.loads(str(raw))
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"the response is not JSON ({exc})") from None
    if isinstance(decoded, list) and all(isinstance(x, str) for x in decoded):
        return list(decoded)
    if isinstance(decoded, (int, float)) and not isinstance(decoded, bool):
        return float(decoded)
    raise ValueError(f"the response {shown(str(raw))} is neither a list of option ids nor a number")


def _answer(row: tuple[object, ...]) -> Answer:
    """One row as an ``Answer``; ``ValueError`` says what is wrong with a row the app cannot have written."""
    learner, section, phase, item, attempt, at, response, score, correct, version = row
    if phase not in model.PHASES:
        raise ValueError(f"phase is {shown(phase)}, not pre or post")
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0.0 <= score <= 1.0:
        raise ValueError(f"the stored score is {shown(score)}, not a number in [0, 1]")
    return Answer(_text(learner, "the learner"), _text(section, "the section"), str(phase), _text(item, "the item"),
                  _whole(attempt, "the attempt", 1), str(at), _response(response), float(score), bool(correct),
                  _whole(version, "the bank version", 0))  # fmt: skip


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")
