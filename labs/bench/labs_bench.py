"""Lab figures on a running benchmark cluster: a lab reset, one live check, and the course's notebooks.

These use the public lab runtime (``labs.start``, ``lab.check``, ``lab.reset``) and the notebooks under
``course/``. Where that part of the project is not installed yet, the figure is reported as not measured with
the reason, never guessed.
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from types import ModuleType

from cluster.backends.local import LocalBackend
from labs.bench.figures import Figure, not_measured

log = logging.getLogger(__name__)

RESET = "lab reset"
LIVE_CHECK = "one live check (lab.check) latency"
NOTEBOOKS = "whole course's notebooks executed"


def planned() -> list[Figure]:
    return [Figure(RESET, None, "s", 2.0), Figure(LIVE_CHECK, None, "s")]


def _runtime() -> ModuleType | None:
    try:
        module = importlib.import_module("labs.runtime")
    except ImportError:
        return None
    return module if hasattr(module, "start") else None


def lab_figures(backend: LocalBackend, root: Path) -> list[Figure]:
    if _runtime() is None:
        reason = "the lab runtime (labs.start / lab.check / lab.reset) is not in this build yet"
        return [not_measured(RESET, "s", reason, 2.0), not_measured(LIVE_CHECK, "s", reason)]
    raise NotImplementedError("lab runtime figures")  # replaced when the runtime lands


def notebook_figures(root: Path) -> list[Figure]:
    course = Path(__file__).resolve().parents[2] / "course"
    notebooks = sorted(course.rglob("*.ipynb")) if course.is_dir() else []
    if not notebooks:
        return [not_measured(NOTEBOOKS, "s", f"no notebooks under {course} yet")]
    raise NotImplementedError("notebook figures")  # replaced when the course lands
