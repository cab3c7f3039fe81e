"""Lab figures on a running benchmark cluster, and offline batch grading of recorded evidence bundles.

On the cluster (``lab_figures``): start lab ``LAB`` through the public runtime, time ``lab.check()``, solve it,
record an evidence bundle, time ``lab.reset()`` back to the start (the target is for this reset: a solved lab
touched the operator, a node and a namespace), and record the unsolved bundle too.

Offline (``grading_throughput``): a class of submissions of ``LAB`` carrying the two recorded bundles, graded
by ``labs.grade_batch`` (``labs.bench.grading_bench``). No cluster is involved: this is the nbgrader path.

The lab runtime keeps a record of started labs under the state root; the benchmark points that root at its
own temporary dir so a learner's records are never touched.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cluster import settings
from labs import runtime
from labs.bench import grading_bench
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
    """Point the state root (lab records) and the labs dir at ``root`` for the duration, through the settings
    object (nothing in ``os.environ`` changes)."""
    with settings.overridden(state_dir=root / "state", labs_dir=root / "labs"):
        yield


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


def grading_throughput(recorded: Recorded, count: int, root: Path, tag: str = "") -> Figure:
    folder = root / "class"
    folder.mkdir(parents=True)
    wrongs = grading_bench.wrong_submissions(LAB)
    grading_bench.write_class(LAB, folder, count, recorded.solved, recorded.unsolved, wrongs)
    t = grading_bench.batch_rate(LAB, folder)
    return Figure(f"offline grading throughput, {count} submissions{tag}", round(t.per_second, 1), "submissions/s",
                  20.0, higher_is_better=True,
                  note=f"labs.grade_batch on lab {LAB} without a grader's cluster (the checks on files; cluster "
                       f"checks are graded by replay, see the replay figure): solution, starter and {len(wrongs)} "
                       f"typical wrong submissions in rotation, 1 in 50 with a damaged bundle, each in a limited "
                       f"child process; {t.full_marks} full marks, {t.broken} broken")
