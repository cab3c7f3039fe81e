"""Benchmark: offline batch grading throughput (the nbgrader path), 200 submissions per lab (a script).

Submissions are built from what a class hands in: the solution with the solved evidence bundle, the
untouched starter with the untouched bundle, each typical wrong submission (``tests/fixtures/labs``) laid
over the solution with the solved bundle, and one in fifty with a damaged bundle (graded as broken, never
fatal). ``labs.grade_batch`` grades each lab's folder; no cluster is involved. Target: >= 20 per second on
2 cores, for every lab. The building and timing code is ``labs.bench.grading_bench`` (``gpulab bench`` uses it
with bundles it records on its own cluster).

    .venv/bin/python tests/bench/bench_grading.py [--count 200] [--lab 05-dra ...] [--no-cel]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import labs
from labs.bench import grading_bench

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "labs"
TARGET = 20.0


def run(lab_id: str, count: int, compile_cel: bool) -> float:
    with tempfile.TemporaryDirectory(prefix="gpulab-bench-grading-") as tmp:
        folder = Path(tmp) / "class"
        folder.mkdir()
        bundles = FIXTURES / "bundles"
        wrongs = sorted(p for p in (FIXTURES / lab_id).glob("wrong-*") if p.is_dir())
        grading_bench.write_class(lab_id, folder, count, bundles / f"{lab_id}.solved.json",
                                  bundles / f"{lab_id}.unsolved.json", wrongs)
        t = grading_bench.batch_rate(lab_id, folder, compile_cel=compile_cel)
    print(f"{lab_id:28s} {t.submissions:4d} submissions in {t.seconds:6.2f} s = {t.per_second:6.1f}/s "
          f"({t.full_marks} full marks, {t.broken} broken) {'ok' if t.per_second >= TARGET else 'BELOW TARGET'}")
    return t.per_second


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
