"""Print the control-plane benchmark figures (not a test: run it as a script)."""

from __future__ import annotations

import sys

from labs.bench import cluster_bench

if __name__ == "__main__":
    for f in cluster_bench.run(quick="--quick" in sys.argv):
        met = {True: "met", False: "MISSED", None: ""}[f.met]
        print(f"{f.name:60s} {f.value!s:>8} {f.unit:4s} target {f.target_text():12s} {met}")
