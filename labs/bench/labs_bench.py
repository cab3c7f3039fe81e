"""Lab figures on a running benchmark cluster, and offline batch grading of recorded evidence bundles.

On the cluster (``lab_figures``): start lab ``LAB`` through the public runtime, time ``lab.check()``, solve it,
record an evidence bundle, time ``lab.reset()`` back to the start (the target is for this reset: a solved lab
touched the operator, a node and a namespace), and record the unsolved bundle too.

Offline (``grading_throughput``): ``labs.grade_batch`` over generated submission folders, each a copy of the
solution or starter files with some answers changed, carrying one of the two recorded bundles. No cluster is
involved: this is the nbgrader path.

The lab runtime keeps a record of started labs under the state root; the benchmark points that root at its
own temporary dir so a learner's records are never touched.
"""

from __future__ import annotations

import os
import random
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ruamel.yaml import YAML

from labs import catalog, grading, runtime
from labs.bench.figures import Figure

LAB = "04a-time-slicing"
RESET = "lab reset after a solved lab, back to the start"
LAB_CHECK = f"lab check (every check of lab {LAB}, live)"


@dataclass(frozen=True)
class Recorded:
    """The evidence bundles recorded on the cluster, for offline grading later."""

    solved: Path
    unsolved: Path


@contextmanager
def private_state(root: Path) -> Iterator[None]:
    """Point the state root (lab records) and the labs dir at ``root`` for the duration."""
    saved = {k: os.environ.get(k) for k in ("GPULAB_STATE_DIR", "GPULAB_LABS_DIR")}
    os.environ["GPULAB_STATE_DIR"] = str(root / "state")
    os.environ["GPULAB_LABS_DIR"] = str(root / "labs")
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def planned() -> list[Figure]:
    return [Figure(RESET, None, "s", 2.0), Figure(LAB_CHECK, None, "s")]


def lab_figures(kubeconfig: Path, root: Path, out: list[Figure]) -> Recorded:
    """Start, check, solve, submit, reset and submit again; figures go to ``out``; returns the two bundles."""
    with private_state(root):
        t0 = time.monotonic()
        lab = runtime.start(LAB, workdir=root / "labs" / LAB, kubeconfig=kubeconfig, fresh=True)
        out.append(Figure(f"lab start ({LAB})", round(time.monotonic() - t0, 2), "s"))
        t0 = time.monotonic()
        report = lab.check(wait=0)
        out.append(Figure(LAB_CHECK, round(time.monotonic() - t0, 3), "s",
                          note=f"{len(report.checks)} checks on the untouched lab, no waiting"))
        lab.solve()
        solved = lab.submit(root / "bundles" / "solved.json")
        t0 = time.monotonic()
        lab.reset()
        took = time.monotonic() - t0
        out.append(Figure(RESET, round(took, 2), "s", 2.0,
                          note="undoes the solution: plugin ConfigMap deleted, node label and ClusterPolicy config "
                               "restored, the namespace's pods gone, starter files back"))
        unsolved = lab.submit(root / "bundles" / "unsolved.json")
    return Recorded(solved, unsolved)


def _vary(answers: str, rng: random.Random) -> str:
    """Change one answer of the worksheet in roughly half the submissions (a wrong number or resource)."""
    yaml = YAML()
    data = yaml.load(answers)
    if rng.random() < 0.5 and isinstance(data, dict):
        section = rng.choice([k for k in data if isinstance(data[k], dict)] or [None])
        if section is not None and data[section]:
            key = rng.choice(list(data[section]))
            data[section][key] = rng.choice([0, 1, 2, 5, "nvidia.com/gpus", ""])
    import io

    buf = io.StringIO()
    yaml.dump(data, buf)
    return buf.getvalue()


def write_submissions(folder: Path, count: int, recorded: Recorded, seed: int = 8) -> None:
    """``count`` submission folders: solution or starter files, some answers changed, with one of the bundles."""
    spec = catalog.get(LAB)
    rng = random.Random(seed)
    for i in range(count):
        sub = folder / f"learner-{i:03d}"
        sub.mkdir(parents=True)
        solved = rng.random() < 0.6
        origin = "solution" if solved else "starter"
        for name in spec.files:
            text = (spec.directory / origin / name).read_text()
            (sub / name).write_text(_vary(text, rng) if name.endswith("answers.yaml") else text)
        shutil.copyfile(recorded.solved if solved else recorded.unsolved, sub / grading.BUNDLE_FILE)


def grading_throughput(recorded: Recorded, count: int, root: Path, tag: str = "") -> Figure:
    folder = root / "submissions"
    write_submissions(folder, count, recorded)
    result = grading.grade_batch(LAB, folder, root / "grades.csv")
    if result.broken:
        first = next(r for r in result.rows if r.report is None)
        note = f"{result.broken} submission(s) could not be graded, e.g. {first.submission}: {first.error}"
    else:
        note = f"labs.grade_batch over evidence bundles of lab {LAB}, one submission at a time, CSV written"
    return Figure(f"offline grading throughput, {count} submissions{tag}", round(result.rate, 1), "submissions/s", 20.0,
                  higher_is_better=True, note=note)
