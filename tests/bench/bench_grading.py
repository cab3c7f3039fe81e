"""Benchmark: offline batch grading throughput (the nbgrader path), 200 submissions per lab (a script).

Submissions are built from what a class hands in: the solution with the solved evidence bundle, the
untouched starter with the untouched bundle, each typical wrong submission (``tests/fixtures/labs``) laid
over the solution with the solved bundle, and one in fifty with a damaged bundle (graded as broken, never
fatal). ``labs.grade_batch`` grades each lab's folder; no cluster is involved. Target: >= 20 per second on
2 cores, for every lab.

    .venv/bin/python tests/bench/bench_grading.py [--count 200] [--lab 05-dra ...] [--no-cel]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import labs
from labs import grading

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "labs"
TARGET = 20.0


def build(lab_id: str, folder: Path, count: int) -> None:
    """``count`` submission folders for one lab, in a fixed rotation of kinds."""
    spec = labs.get(lab_id)
    bundles = FIXTURES / "bundles"
    wrongs = sorted(p for p in (FIXTURES / lab_id).glob("wrong-*") if p.is_dir())
    kinds = ["solution", "starter", *[w.name for w in wrongs]]
    for i in range(count):
        sub = folder / f"learner-{i:04d}"
        kind = kinds[i % len(kinds)]
        shutil.copytree(spec.directory / ("starter" if kind == "starter" else "solution"), sub)
        if kind.startswith("wrong-"):
            for f in (FIXTURES / lab_id / kind).iterdir():
                if f.name != "expected.yaml":
                    shutil.copyfile(f, sub / f.name)
        bundle = bundles / f"{lab_id}.{'unsolved' if kind == 'starter' else 'solved'}.json"
        if i % 50 == 49:
            (sub / grading.BUNDLE_FILE).write_text('{"kind": "gpulab.dev/EvidenceBundle", "bundleVersion": 1, "cut')
        else:
            shutil.copyfile(bundle, sub / grading.BUNDLE_FILE)


def run(lab_id: str, count: int, compile_cel: bool) -> float:
    with tempfile.TemporaryDirectory(prefix="gpulab-bench-grading-") as tmp:
        folder = Path(tmp) / "class"
        folder.mkdir()
        build(lab_id, folder, count)
        grading.grade_batch(lab_id, folder, Path(tmp) / "warm.csv", compile_cel=compile_cel)  # imports, caches
        started = time.perf_counter()
        result = grading.grade_batch(lab_id, folder, Path(tmp) / "grades.csv", compile_cel=compile_cel)
        elapsed = time.perf_counter() - started
    full = sum(1 for r in result.rows if r.report is not None and r.report.passed)
    rate = len(result.rows) / elapsed
    print(f"{lab_id:28s} {len(result.rows):4d} submissions in {elapsed:6.2f} s = {rate:6.1f}/s "
          f"({full} full marks, {result.broken} broken) {'ok' if rate >= TARGET else 'BELOW TARGET'}")
    return rate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--lab", action="append", default=None, help="lab id (repeatable); default every lab")
    parser.add_argument("--no-cel", action="store_true", help="skip the CEL compiler (DRA selectors)")
    args = parser.parse_args(argv)
    print(f"offline batch grading, {args.count} submissions per lab, {os.cpu_count()} CPU(s), "
          f"target >= {TARGET:g}/s")
    rates = [run(lab_id, args.count, not args.no_cel) for lab_id in args.lab or labs.list_labs()]
    slowest = min(rates)
    print(f"slowest lab: {slowest:.1f}/s ({'meets' if slowest >= TARGET else 'misses'} the target)")
    return 0 if slowest >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
