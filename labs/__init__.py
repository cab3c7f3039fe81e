"""gpulab labs: graded hands-on labs on the lab cluster, their runtime, and the ``gpulab`` command line.

The public API (stable; notebooks and nbgrader use only this):

- ``list_labs() -> list[str]``: the lab ids, in course order.
- ``get(lab_id) -> LabSpec``: a lab's spec (title, module, tasks with instructions and checks, files).
- ``start(lab_id, *, workdir=None, kubeconfig=None, fresh=False) -> Lab``: set the lab up on the cluster and
  copy its starter files into ``workdir`` (default ``./gpulab-labs/<id>``); a lab in progress on the cluster is
  resumed instead (``Lab.resumed``), ``fresh=True`` starts over.
- ``attach(lab_id, *, kubeconfig=None) -> Lab``: the lab started earlier, without setting it up again.
- ``Lab``: ``check(*, wait=5.0) -> Report``, ``solve()``, ``reset()``, ``submit(path=None) -> Path``,
  ``stop()``, ``apply(*files)``, ``file(name) -> Path``, ``progress(report)``, ``snapshot()``, ``widget()``, ``tasks``,
  ``resumed``.
- ``grade(lab_id, submission, *, bundle=None, live=False, kubeconfig=None, replay=None) -> Report``: grade a
  folder of files and/or an evidence bundle; the cluster checks only by replaying the learner's work on the
  grader's cluster (``replay=GraderCluster(...).client()``) or against the live lab cluster.
- ``grade_batch(lab_id, folder, csv_path=None, *, replay=None, time_limit_s, memory_limit_mb) -> BatchResult``:
  one submission per subfolder, each in a limited child process, into a CSV written row by row.
- ``GraderCluster(fleet="starter", *, kubeconfig=None)``: the grader's own cluster (a context manager).

- Public modules for notebook cells: ``labs.shell`` (``kubectl``, ``apply``, ``create``, ``gpulab``,
  ``use_cluster``, ``dcgm_samples``) and the figures ``labs.figures``, ``labs.figures_dra``,
  ``labs.figures_operator``, ``labs.figures_topology``. Every other module of ``labs`` is internal.

Reports are ``graders.Report`` (score, max_score, checks with id, passed, points, message, hint); a notebook
shows one as a cell's value (``lab.check()``), and ``graders.render`` prints them elsewhere.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graders import Report
    from labs.catalog import get, ids as list_labs
    from labs.grading import BatchResult, GradingError, grade, grade_batch
    from labs.grader_cluster import GraderCluster
    from labs.runtime import Lab, attach, start
    from labs.spec import LabSpec, Task

# Imported on first use, so that `gpulab up` (labs.cli) does not load the graders and the lab runtime.
_LAZY = {
    "Report": ("graders", "Report"), "get": ("labs.catalog", "get"), "list_labs": ("labs.catalog", "ids"),
    "BatchResult": ("labs.grading", "BatchResult"), "GradingError": ("labs.grading", "GradingError"),
    "grade": ("labs.grading", "grade"), "grade_batch": ("labs.grading", "grade_batch"),
    "Lab": ("labs.runtime", "Lab"), "attach": ("labs.runtime", "attach"), "start": ("labs.runtime", "start"),
    "GraderCluster": ("labs.grader_cluster", "GraderCluster"), "LabSpec": ("labs.spec", "LabSpec"), "Task": ("labs.spec", "Task"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'labs' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = ["BatchResult", "GraderCluster", "GradingError", "Lab", "LabSpec", "Report", "Task", "attach", "figures",
           "figures_dra", "figures_operator", "figures_topology", "get", "grade", "grade_batch", "list_labs", "shell",
           "start"]
