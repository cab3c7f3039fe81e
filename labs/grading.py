"""Grading: a lab's checks run on evidence and gathered into a ``graders.Report``.

The pipeline is the same for a learner clicking Check, ``gpulab grade`` and nbgrader: collect the evidence
(files from a folder or a bundle), get a cluster view, run every check, score. The cluster view is the live
lab cluster (``lab.check``, ``--live``) or the grader's own cluster after ``labs.replay`` redid what the
learner did (``replay=``): never the cluster section of a bundle, which anyone can write; that is shown as
the learner's claim in the report's notes. Without a cluster (static-only grading) the cluster checks are
left out of the report and of the maximum score. A learner's mistake is a failed check; a check that crashes
is our bug and raises ``GradingError``. Batch grading runs each submission in a child process with a time and
memory limit, writes its CSV row as soon as it is done, and goes on past a broken one.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import gc
import logging
import multiprocessing
import os
import resource
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster import backends, errors, poll
from cluster.kube.client import Client
from graders import Bundle, Check, LiveView, Report, load_bundle
from labs import catalog, evidence, replay as replay_mod
from labs.spec import CheckSpec, LabSpec
from quizzes.render import csv_cell

BUNDLE_FILE = "evidence.json"  # what lab.submit() writes into the lab folder

log = logging.getLogger(__name__)


class GradingError(errors.CourseError):
    """Grading itself broke (not the learner's work)."""


def run_checks(spec: LabSpec, ev: evidence.Evidence, *, strict: bool = True) -> Report:
    """Every check the evidence can answer, in lab order. ``strict``: a crashing check raises."""
    return Report.from_checks(spec.id, [evaluate(spec.id, c, ev, strict=strict) for c in spec.checks
                                        if not (c.cluster and ev.view is None)])


def evaluate(lab_id: str, c: CheckSpec, ev: evidence.Evidence, *, strict: bool = True) -> Check:
    """One check on the evidence: the one evaluate path (``run_checks``, and ``Lab.check`` reading a failing
    check again). ``strict``: a crashing check raises ``GradingError``; else it is a failed check saying so."""
    try:
        outcome = c.rule.evaluate(ev)
    except Exception as exc:  # a crash in a check is our bug, never the learner's
        log.exception("check %s of lab %s crashed", c.id, lab_id)
        if strict:
            raise GradingError(f"check {c.id} of lab {lab_id} crashed: {type(exc).__name__}: {exc}",
                               hint="this is a bug in gpulab; please report it with the submission") from exc
        return Check(c.id, False, c.points, f"gpulab could not run this check ({type(exc).__name__}); "
                                            "this is a bug in gpulab, not your mistake", "")
    return Check(c.id, outcome.passed, c.points, outcome.message, "" if outcome.passed else c.hint)


@dataclass(frozen=True)
class Submission:
    files: dict[str, bytes]
    bundle: Bundle | None


def read_submission(spec: LabSpec, path: Path, bundle_path: Path | None = None) -> Submission:
    """A folder of files (with ``evidence.json`` inside, or ``bundle_path``), or a bundle file on its own.

    The files in the folder win over the copies inside the bundle: they are what the learner handed in.
    A bundle that cannot be read raises ``graders.BundleError`` (a ``ConfigError``) saying why."""
    if path.is_file():
        whole = _matching(spec, load_bundle(path), path)
        files = {n: t.encode("utf-8") for n, t in whole.manifests.items() if n in spec.files}
        return Submission(files, whole)
    if not path.is_dir():
        raise errors.ConfigError(str(path), ["no such submission folder or bundle file"])
    files = evidence.read_files(path, spec.files)
    inside = path / BUNDLE_FILE
    chosen = bundle_path or (inside if inside.is_file() else None)
    if chosen is None:
        return Submission(files, None)
    return Submission(files, _matching(spec, load_bundle(chosen), chosen))


def _matching(spec: LabSpec, found: Bundle, path: Path) -> Bundle:
    if found.lab != spec.id:
        raise errors.ConfigError(str(path), [f"is evidence for lab {found.lab!r}, not {spec.id}"],
                                 hint=f"grade it with `gpulab grade {found.lab} ...`")
    return found


def grade(lab_id: str, submission: Path, *, bundle: Path | None = None, live: bool = False,
          kubeconfig: Path | None = None, compile_cel: bool = True, replay: Client | None = None) -> Report:
    """Grade one submission.

    ``replay``: a client of the grader's own cluster (``labs.grader_cluster``); the lab is reset there, the
    learner's manifests and the bundle's actions are replayed, and the cluster checks read the outcome.
    ``live`` reads the lab cluster (``kubeconfig`` or the current one) instead. With neither, only the checks
    on files are graded: a bundle's recorded cluster state is the learner's claim and is never scored."""
    spec = catalog.get(lab_id)
    sub = read_submission(spec, submission, bundle)
    fleet = evidence.fleet_facts(spec.fleet)
    if live:
        with Client.from_kubeconfig(kubeconfig or backends.current().kubeconfig()) as client:
            return run_checks(spec, evidence.Evidence(sub.files, spec.linted, fleet, LiveView(client),
                                                      compile_cel=compile_cel))
    if replay is None:
        report = run_checks(spec, evidence.Evidence(sub.files, spec.linted, fleet, None, compile_cel=compile_cel))
        if sub.bundle is not None and any(c.cluster for c in spec.checks):
            return _with_notes(report, [NOT_REPLAYED])
        return report
    the_plan = replay_mod.plan(spec, sub.files, sub.bundle.actions if sub.bundle else ())
    done = replay_mod.run(replay, spec, the_plan)
    ev = evidence.Evidence(sub.files, spec.linted, fleet, LiveView(replay), compile_cel=compile_cel)
    report = _settled(spec, ev, replay, SETTLE_S)
    return _with_notes(report, [*done.notes, *claims(spec, sub, report)])


SETTLE_S = 10.0  # how long cluster checks that fail right after a replay are read again (as lab.check waits)
# ...unless the cluster and the failing checks have stayed the same this long with no change under way
# (replay.still_changing): reading again cannot change the grade. A wrong submission used to wait out all 10 s
# (8.4 s per submission); the same quiet time as a replayed wait (replay.QUIET_S).
SETTLE_QUIET_S = replay_mod.QUIET_S


def _settled(spec: LabSpec, ev: evidence.Evidence, client: Client, wait: float) -> Report:
    """The checks, with failing cluster checks read again for up to ``wait`` s: the replay's last act may still
    be taking effect outside the lab's namespaces (an operand's pods going after its DaemonSet was deleted).
    They stop being read again once neither the cluster (``replay.outcome_fingerprint``: the lab's pods and
    events, the nodes, the operator's pods) nor the failing checks' messages have changed for ``SETTLE_QUIET_S``,
    with no change under way (``replay.still_changing``: a MIG manager at work, the operator's namespace or pods
    being deleted)."""
    cluster = {c.id for c in spec.checks if c.cluster}

    def failing(report: Report) -> list[tuple[str, str]]:
        return [(c.id, c.message) for c in report.checks if not c.passed and c.id in cluster]

    def again(_: Report) -> Report:
        ev.view = LiveView(client)
        return run_checks(spec, ev)

    return poll.until(run_checks(spec, ev), again, lambda r: not failing(r), wait=wait, interval=0.5,
                      changed=lambda r: f"{failing(r)}{replay_mod.outcome_fingerprint(client, spec)}",
                      quiet=SETTLE_QUIET_S, busy=lambda: replay_mod.still_changing(client))


NOT_REPLAYED = ("the cluster checks were not graded: they are graded by replaying your work on the grader's "
                "cluster (`gpulab grade`), never from the cluster state written in your evidence bundle")


def claims(spec: LabSpec, sub: Submission, report: Report) -> list[str]:
    """Where the bundle's recorded cluster state says otherwise than the replay: shown, never scored."""
    if sub.bundle is None:
        return []
    ev = evidence.Evidence(sub.files, spec.linted, evidence.fleet_facts(spec.fleet), sub.bundle.view(), compile_cel=False)
    got = {c.id: c for c in report.checks}
    out = []
    for c in spec.checks:
        if not c.cluster or c.id not in got:
            continue
        try:
            claimed = c.rule.evaluate(ev).passed
        except Exception:  # a hostile claim must not break grading; it is only ever shown
            log.debug("claim of %s unreadable", c.id, exc_info=True)
            continue
        if claimed != got[c.id].passed:
            out.append(f"{c.id}: your evidence bundle records it as {'passed' if claimed else 'failed'}, but the "
                       f"replay of your work {'passed' if got[c.id].passed else 'failed'} (the replay is graded)")
    return out


def _with_notes(report: Report, notes: list[str]) -> Report:
    return Report(report.lab, report.score, report.max_score, report.checks, tuple(report.notes) + tuple(notes))


@dataclass(frozen=True)
class BatchRow:
    submission: str
    report: Report | None
    error: str


@dataclass(frozen=True)
class BatchResult:
    lab: str
    rows: tuple[BatchRow, ...]
    elapsed_s: float
    csv_path: Path

    @property
    def broken(self) -> int:
        return sum(1 for r in self.rows if r.report is None)

    @property
    def rate(self) -> float:
        return len(self.rows) / self.elapsed_s if self.elapsed_s > 0 else 0.0


DEFAULT_TIME_LIMIT_S = 120.0
DEFAULT_MEMORY_LIMIT_MB = 1024


def grade_batch(lab_id: str, folder: Path, csv_path: Path | None = None, *, compile_cel: bool = True,
                replay: Callable[[], Client] | None = None, time_limit_s: float = DEFAULT_TIME_LIMIT_S,
                memory_limit_mb: int = DEFAULT_MEMORY_LIMIT_MB) -> BatchResult:
    """Grade every subfolder (or ``*.json`` bundle) of ``folder``; a broken one is recorded, never fatal.

    ``replay`` makes a client of the grader's cluster (each submission gets its own, in its own process).
    Each submission is graded in a child process limited to ``time_limit_s`` seconds and ``memory_limit_mb``
    of address space; its CSV row is written and flushed as soon as it is done, so a crash of the batch keeps
    the rows of the submissions finished before it."""
    spec = catalog.get(lab_id)
    if not folder.is_dir():
        raise errors.ConfigError(str(folder), ["is not a folder of submissions"])
    started = time.perf_counter()
    entries = sorted(p for p in folder.iterdir()
                     if not p.name.startswith(".") and (p.is_dir() or p.suffix == ".json"))
    out = csv_path or folder / f"grades-{spec.id}.csv"
    rows = []
    _warm(spec, compile_cel)
    with csv_writer(out, spec) as write_row:
        for entry in entries:
            row = within_budget(entry.name, functools.partial(_grade_one, spec, entry, compile_cel, replay),
                                Budget(time_limit_s, memory_limit_mb))
            write_row(row)
            rows.append(row)
    return BatchResult(spec.id, tuple(rows), time.perf_counter() - started, out)


def _warm(spec: LabSpec, compile_cel: bool) -> None:
    """Grade the lab's own starter files once in this process, so that every forked child starts with the
    imports, the fleet and the rules' caches in place (a child's warm-up would otherwise be redone each time),
    and freeze the heap so the children's garbage collector does not copy its pages."""
    starter = {n: spec.starter(n).read_bytes() for n in spec.files}
    run_checks(spec, evidence.Evidence(starter, spec.linted, evidence.fleet_facts(spec.fleet), None, compile_cel=compile_cel),
               strict=False)
    gc.freeze()


def _grade_one(spec: LabSpec, entry: Path, compile_cel: bool, replay: Callable[[], Client] | None) -> Report:
    if replay is None:
        return grade(spec.id, entry, compile_cel=compile_cel)
    with replay() as client:
        return grade(spec.id, entry, compile_cel=compile_cel, replay=client)


@dataclass(frozen=True)
class Budget:
    """What grading one submission may take: wall-clock seconds and MiB of address space."""

    time_s: float = DEFAULT_TIME_LIMIT_S
    memory_mb: int = DEFAULT_MEMORY_LIMIT_MB


def within_budget(name: str, work: Callable[[], Report], budget: Budget = Budget()) -> BatchRow:
    """``work()`` in a forked child held to ``budget`` (every grading path goes through here: ``gpulab grade``,
    ``--batch``, ``gpulab class grade`` and formgrader's Autograde): a learner's file that makes a parser or a
    check slow or greedy costs that submission its grade, never the grader's process or the next submission.
    The parent has everything imported, so a fork costs milliseconds. A learner's mistake is in the report; the
    row's ``error`` says why there is none (the learner's broken file, a limit, our own failure)."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, name, work, budget.memory_mb), daemon=True)
    proc.start()
    child.close()
    try:
        if parent.poll(budget.time_s):
            try:
                row: BatchRow = parent.recv()
                return row
            except EOFError:
                pass
        else:
            return BatchRow(name, None, f"grading took longer than the limit of {budget.time_s:g} s; not graded")
        proc.join(5)
        why = f"exit code {proc.exitcode}" if proc.exitcode is not None and proc.exitcode >= 0 else \
            f"signal {-(proc.exitcode or 0)}"
        return BatchRow(name, None, f"grading it ended without a result ({why}; memory limit "
                                    f"{budget.memory_mb} MiB); not graded")
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join(5)
        parent.close()


def _child(conn: Any, name: str, work: Callable[[], Report], memory_limit_mb: int) -> None:
    limit = memory_limit_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        conn.send(_row(name, work))
    except MemoryError:
        conn.send(BatchRow(name, None, "grading it needed more memory than the per-submission limit"))
    finally:
        conn.close()


def _row(name: str, work: Callable[[], Report]) -> BatchRow:
    try:
        return BatchRow(name, work(), "")
    except errors.CourseError as exc:
        return BatchRow(name, None, exc.message.splitlines()[0] if not isinstance(
            exc, errors.ConfigError) else "; ".join(exc.problems))
    except MemoryError:
        return BatchRow(name, None, "grading it needed more memory than the per-submission limit")
    except Exception as exc:  # keep going: one broken submission must not stop the batch
        log.exception("grading %s crashed", name)
        return BatchRow(name, None, f"{type(exc).__name__}: {exc}")


@contextlib.contextmanager
def csv_writer(path: Path, spec: LabSpec) -> Iterator[Callable[[BatchRow], None]]:
    """A CSV of grades written row by row: each row reaches the file as soon as it is graded."""
    check_ids = [c.id for c in spec.checks]
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["submission", "score", "max_score", "passed", *check_ids, "error"])
        fh.flush()

        def write_row(row: BatchRow) -> None:
            writer.writerow(csv_row(row, check_ids))
            fh.flush()
            os.fsync(fh.fileno())

        yield write_row


def csv_row(row: BatchRow, check_ids: list[str]) -> list[str]:
    """One grades row; every cell as text a spreadsheet will not run (a submission's name is the learner's to choose,
    and an error message may quote it): the quiz CSV's own rule, ``quizzes.render.csv_cell``."""
    if row.report is None:
        cells = [row.submission, "", "", "", *([""] * len(check_ids)), row.error]
    else:
        got = {c.id: ("1" if c.passed else "0") for c in row.report.checks}
        cells = [row.submission, f"{row.report.score:g}", f"{row.report.max_score:g}",
                 str(row.report.passed).lower(), *(got.get(i, "") for i in check_ids), ""]
    return [csv_cell(c) for c in cells]


def write_csv(path: Path, spec: LabSpec, rows: list[BatchRow]) -> None:
    with csv_writer(path, spec) as write_row:
        for row in rows:
            write_row(row)
