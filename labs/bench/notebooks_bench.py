"""The whole course executed headless, in order, as a learner would run it: one figure per notebook and the total.

The notebooks bring the lab cluster up themselves (``gpulab("up")`` in the first one); here that cluster, the
lab working folders and the quiz answers all live in a private temporary root, and the cluster is removed at
the end. Needs the ``course`` extra (nbclient, nbformat, ipykernel).
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import time
from pathlib import Path

from cluster import errors, settings
from cluster.backends.local import LocalBackend
from labs.bench.figures import Figure

log = logging.getLogger(__name__)

COURSE = Path(__file__).resolve().parents[2] / "course"
TOTAL = "whole course's notebooks executed"
CELL_TIMEOUT = 600


def _settings(root: Path) -> settings.Settings:
    """State root, labs dir and quiz store of the run; the kernels are given them as their environment."""
    return dataclasses.replace(settings.current(), state_dir=root / "state", labs_dir=root / "labs",
                               quiz_db=root / "quiz-answers.sqlite3", learner="bench")


def notebooks() -> list[Path]:
    return sorted(COURSE.glob("*.ipynb")) if COURSE.is_dir() else []


def run(root: Path, out: list[Figure]) -> None:
    """Execute every course notebook in order in a copy of ``course/``; figures go to ``out`` as they come.

    Raises ``CourseError`` on the first failing cell (the notebooks before it keep their figures)."""
    try:
        import nbformat
        from nbclient import NotebookClient
        from nbclient.exceptions import CellExecutionError
    except ImportError as exc:
        raise errors.CourseError(f"executing notebooks needs the course extra ({exc.name} is missing)",
                                 hint="pip install -e '.[course]'") from exc
    found = notebooks()
    if not found:
        raise errors.CourseError(f"no notebooks under {COURSE}")
    work = root / "course"
    shutil.copytree(COURSE, work, ignore=shutil.ignore_patterns("gpulab-labs", ".ipynb_checkpoints"))
    run_settings = _settings(root)
    env = run_settings.environ()
    try:
        started = time.monotonic()
        for source in found:
            nb = nbformat.read(work / source.name, as_version=4)  # type: ignore[no-untyped-call]
            client = NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                                    resources={"metadata": {"path": str(work)}})
            t0 = time.monotonic()
            try:
                client.execute(env=env)
            except CellExecutionError as exc:
                raise errors.CourseError(f"notebook {source.name} failed: {str(exc).strip()[-600:]}") from exc
            out.append(Figure(f"notebook {source.name} executed", round(time.monotonic() - t0, 1), "s",
                              note=f"{sum(c.cell_type == 'code' for c in nb.cells)} code cells"))
        out.append(Figure(TOTAL, round(time.monotonic() - started, 1), "s",
                             note=f"{len(found)} notebooks in order, headless, the first one brings the "
                                  "starter fleet up"))
    finally:
        LocalBackend("gpulab", run_settings.state_dir or root / "state").down(purge=True)
