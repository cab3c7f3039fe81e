"""Print the control-plane benchmark figures (not a test: run it as a script).

The figures come from ``labs.bench`` (``gpulab bench --section starter --section scale`` prints the same and more).
    .venv/bin/python tests/bench/bench_cluster.py [--quick]
"""

from __future__ import annotations

import sys

from labs.bench import suite

if __name__ == "__main__":
    report = suite.run(quick="--quick" in sys.argv, sections=("starter", "scale"))
    for f in report.figures:
        met = {True: "met", False: "MISSED", None: ""}[f.met]
        print(f"{f.name:70s} {f.value_text():>14} target {f.target_text():12s} {met}  {f.note}")
    for e in report.errors:
        print(f"error: {e}")
    sys.exit(1 if report.errors else 0)
