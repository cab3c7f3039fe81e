"""The whole course executed headless, in order, as a learner would run it: one figure per notebook and the total.

The notebooks bring the lab cluster up themselves (``gpulab("up")`` in the first one); here that cluster, the
lab working folders and the quiz answers all live in a private temporary root, and the cluster is removed at
the end. Needs the ``course`` extra (nbclient, nbformat, ipykernel).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from cluster import errors
from labs import nboutputs
from labs.bench.figures import Figure

log = logging.getLogger(__name__)

COURSE = Path(__file__).resolve().parents[2] / "course"
TOTAL = "whole course's notebooks executed"
CELL_TIMEOUT = 600


def notebooks() -> list[Path]:
    return nboutputs.notebooks(COURSE)


def run(root: Path, out: list[Figure]) -> None:
    """Execute every course notebook in order (``labs.nboutputs.course_run``); figures go to ``out`` as they come.

    Raises ``CourseError`` on the first failing cell (the notebooks before it keep their figures)."""
    try:
        from nbclient.exceptions import CellExecutionError
    except ImportError as exc:
        raise errors.CourseError(f"executing notebooks needs the course extra ({exc.name} is missing)",
                                 hint="pip install -e '.[course]'") from exc
    found = notebooks()
    if not found:
        raise errors.CourseError(f"no notebooks under {COURSE}")
    with nboutputs.course_run(root, learner="bench") as (work, env):
        started = time.monotonic()
        for source in found:
            try:
                nb, took = nboutputs.execute(source, work, env, timeout=CELL_TIMEOUT)
            except CellExecutionError as exc:
                raise errors.CourseError(f"notebook {source.name} failed: {str(exc).strip()[-600:]}") from exc
            out.append(Figure(f"notebook {source.name} executed", round(took, 1), "s",
                              note=f"{sum(c.cell_type == 'code' for c in nb.cells)} code cells"))
        out.append(Figure(TOTAL, round(time.monotonic() - started, 1), "s",
                             note=f"{len(found)} notebooks in order, headless, the first one brings the "
                                  "starter fleet up"))
