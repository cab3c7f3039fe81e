"""Benchmark: static lint throughput on 200 generated submissions (a script, not a test).

The corpus and the measurement live in ``labs.bench.grading_bench`` (``gpulab bench`` uses the same code);
this script prints the details.

    .venv/bin/python tests/bench/bench_lint.py [--count 200] [--no-cel]
"""

from __future__ import annotations

import argparse
import os
import sys

from labs.bench import grading_bench


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--no-cel", action="store_true", help="skip the CEL compiler")
    args = parser.parse_args()
    t = grading_bench.lint_throughput(args.count, compile_cel=False if args.no_cel else None)
    print(f"machine: {os.cpu_count()} CPU(s), Python {sys.version.split()[0]}, "
          f"CEL compiler: {'celcheck (one process per submission)' if t.compile_cel else 'off'}")
    print(f"{t.count} submissions (4 files, 8 documents each) linted one at a time in {t.seconds:.2f}s: "
          f"{t.per_second:.1f} submissions/s")
    print(f"per submission: median {t.median_ms:.1f} ms, p95 {t.p95_ms:.1f} ms, max {max(t.per_item) * 1000:.1f} ms; "
          f"{t.findings} findings in total")
    return 0


if __name__ == "__main__":
    sys.exit(main())
