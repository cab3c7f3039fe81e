"""Grading: a lab's checks run on evidence and gathered into a ``graders.Report``.

The pipeline is the same for a learner clicking Check, ``gpulab grade`` and nbgrader: collect the evidence
(files from a folder or a bundle; a live, recorded or no cluster view), run every check, score. Without a
cluster view (static-only grading) the cluster checks are left out of the report and of the maximum score,
because nothing offline can say whether they passed. A learner's mistake is a failed check; a check that
crashes is our bug and raises ``GradingError`` (batch grading records it and goes on).
"""

from __future__ import annotations

import csv
import functools
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from cluster import errors, fleet as fleet_mod
from cluster.kube.client import Client
from graders import Bundle, Check, FleetFacts, LiveView, Report, load_bundle
from labs import catalog, evidence
from labs.spec import LabSpec

BUNDLE_FILE = "evidence.json"  # what lab.submit() writes into the lab folder

log = logging.getLogger(__name__)


class GradingError(errors.CourseError):
    """Grading itself broke (not the learner's work)."""


@functools.lru_cache(maxsize=8)
def fleet_facts(name: str) -> FleetFacts:
    return FleetFacts.from_fleet(fleet_mod.load(name))


def run_checks(spec: LabSpec, ev: evidence.Evidence, *, strict: bool = True) -> Report:
    """Every check the evidence can answer, in lab order. ``strict``: a crashing check raises."""
    results: list[Check] = []
    for c in spec.checks:
        if c.cluster and ev.view is None:
            continue
        try:
            outcome = c.rule.evaluate(ev)
        except Exception as exc:  # a crash in a check is our bug, never the learner's
            log.exception("check %s of lab %s crashed", c.id, spec.id)
            if strict:
                raise GradingError(f"check {c.id} of lab {spec.id} crashed: {type(exc).__name__}: {exc}",
                                   hint="this is a bug in gpulab; please report it with the submission") from exc
            results.append(Check(c.id, False, c.points, f"gpulab could not run this check ({type(exc).__name__}); "
                                                        "this is a bug in gpulab, not your mistake", ""))
            continue
        results.append(Check(c.id, outcome.passed, c.points, outcome.message, "" if outcome.passed else c.hint))
    return Report.from_checks(spec.id, results)


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
          kubeconfig: Path | None = None, compile_cel: bool = True) -> Report:
    """Grade one submission. ``live`` reads the cluster (``kubeconfig`` or the current one) for cluster checks."""
    spec = catalog.get(lab_id)
    sub = read_submission(spec, submission, bundle)
    fleet = fleet_facts(spec.fleet)
    if live:
        from cluster import backends

        with Client.from_kubeconfig(kubeconfig or backends.current().kubeconfig()) as client:
            return run_checks(spec, evidence.Evidence(sub.files, spec.linted, fleet, LiveView(client),
                                                      compile_cel=compile_cel))
    cluster = sub.bundle.view() if sub.bundle else None
    return run_checks(spec, evidence.Evidence(sub.files, spec.linted, fleet, cluster, compile_cel=compile_cel))


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


def grade_batch(lab_id: str, folder: Path, csv_path: Path | None = None, *, compile_cel: bool = True) -> BatchResult:
    """Grade every subfolder (or ``*.json`` bundle) of ``folder``; a broken one is recorded, never fatal."""
    spec = catalog.get(lab_id)
    if not folder.is_dir():
        raise errors.ConfigError(str(folder), ["is not a folder of submissions"])
    started = time.perf_counter()
    entries = sorted(p for p in folder.iterdir()
                     if not p.name.startswith(".") and (p.is_dir() or p.suffix == ".json"))
    rows = []
    for entry in entries:
        try:
            rows.append(BatchRow(entry.name, grade(spec.id, entry, compile_cel=compile_cel), ""))
        except errors.CourseError as exc:
            rows.append(BatchRow(entry.name, None, exc.message.splitlines()[0] if not isinstance(
                exc, errors.ConfigError) else "; ".join(exc.problems)))
        except Exception as exc:  # keep going: one broken submission must not stop the batch
            log.exception("grading %s crashed", entry)
            rows.append(BatchRow(entry.name, None, f"{type(exc).__name__}: {exc}"))
    out = csv_path or folder / f"grades-{spec.id}.csv"
    write_csv(out, spec, rows)
    return BatchResult(spec.id, tuple(rows), time.perf_counter() - started, out)


def write_csv(path: Path, spec: LabSpec, rows: list[BatchRow]) -> None:
    check_ids = [c.id for c in spec.checks]
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["submission", "score", "max_score", "passed", *check_ids, "error"])
        for row in rows:
            if row.report is None:
                writer.writerow([row.submission, "", "", "", *([""] * len(check_ids)), row.error])
                continue
            got = {c.id: ("1" if c.passed else "0") for c in row.report.checks}
            writer.writerow([row.submission, f"{row.report.score:g}", f"{row.report.max_score:g}",
                             str(row.report.passed).lower(), *(got.get(i, "") for i in check_ids), ""])
