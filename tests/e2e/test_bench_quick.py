"""`gpulab bench --quick --json` runs every section and prints a well-formed document with numbers.

This is the CI run of the benchmark: it checks that everything was measured (a section that fails is a bug),
not that targets are met; the figures and their verdicts are printed for the log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from labs.bench.figures import SCHEMA

# Figures a quick run must measure (a number, not null); the names say "(quick)" where the size shrinks.
MUST_MEASURE = (
    "start, cached binaries, to all starter-fleet nodes Ready",
    "label change to visible resources, starter fleet",
    "device-plugin config change reconciled across the starter fleet (quick)",
    "one live check latency",
    "lab reset after a solved lab, back to the start",
    "offline grading throughput, 40 submissions (quick)",
    "up, 50-node fleet, to all nodes Ready (quick)",
    "peak RSS of the control plane, starter fleet",
    "peak RSS of our agents, starter fleet",
    "peak RSS of the control plane, 50 nodes (quick)",
    "peak RSS of our agents, 50 nodes (quick)",
    "idle lab cluster RSS per learner, starter fleet",
    "idle lab cluster CPU per learner, starter fleet",
    "per-learner memory guarantee in course/class/z2jh-values.yaml",
)


def test_quick_bench_json_is_well_formed_and_measured(tmp_path: Path) -> None:
    env = dict(os.environ, TMPDIR=str(tmp_path))
    proc = subprocess.run([str(Path(sys.executable).parent / "gpulab"), "bench", "--quick", "--json"],
                          capture_output=True, text=True, timeout=900, env=env)
    assert "Traceback" not in proc.stderr, proc.stderr
    doc = json.loads(proc.stdout)
    for f in doc["figures"]:  # the log of a CI run shows where the project stands
        print(f"{f['name']}: {f['value']} {f['unit']} (target {f['target']}, met {f['met']}) {f['note']}")
    assert proc.returncode == 0 and doc["errors"] == [], doc["errors"]
    assert doc["schema"] == SCHEMA and doc["quick"] is True and doc["seconds"] > 0
    assert set(doc["machine"]) >= {"cpus", "python", "load_average_1m"}

    by_name = {f["name"]: f for f in doc["figures"]}
    assert len(by_name) == len(doc["figures"]), "figure names must be unique"
    for name in MUST_MEASURE:
        value = by_name[name]["value"]
        assert isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0, (name, value)
    for f in doc["figures"]:
        assert set(f) == {"name", "value", "unit", "target", "higher_is_better", "note", "met"}, f
        if f["value"] is None:
            assert f["note"] and f["met"] is None, f
        elif f["target"] is not None:
            ok = f["value"] >= f["target"] if f["higher_is_better"] else f["value"] <= f["target"]
            assert f["met"] is ok, f
    assert by_name["whole course's notebooks executed"]["value"] is None  # full runs only
    summary = doc["summary"]
    assert summary["measured"] + summary["not_measured"] == len(doc["figures"])
    assert doc["references"] and all(r["measured_here"] is False for r in doc["references"])
    assert not list(tmp_path.glob("gpulab-bench-*")), "the benchmark left its state dir behind"
