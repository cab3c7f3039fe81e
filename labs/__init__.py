"""gpulab labs: graded hands-on labs on the lab cluster, their runtime, and the ``gpulab`` command line.

The public API (stable; notebooks and nbgrader use only this):

- ``list_labs() -> list[str]``: the lab ids, in course order.
- ``get(lab_id) -> LabSpec``: a lab's spec (title, module, tasks with instructions and checks, files).
- ``start(lab_id, *, workdir=None, kubeconfig=None, fresh=False) -> Lab``: set the lab up on the cluster and
  copy its starter files into ``workdir`` (default ``./gpulab-labs/<id>``).
- ``attach(lab_id, *, kubeconfig=None) -> Lab``: the lab started earlier, without setting it up again.
- ``Lab``: ``check(*, wait=5.0) -> Report``, ``solve()``, ``reset()``, ``submit(path=None) -> Path``,
  ``stop()``, ``apply(*files)``, ``file(name) -> Path``, ``progress(report)``, ``snapshot()``, ``widget()``, ``tasks``.
- ``grade(lab_id, submission, *, bundle=None, live=False, kubeconfig=None) -> Report``: grade a folder of
  files and/or an evidence bundle offline (or against the live cluster).
- ``grade_batch(lab_id, folder, csv_path=None) -> BatchResult``: one submission per subfolder, into a CSV.

Reports are ``graders.Report`` (score, max_score, checks with id, passed, points, message, hint); render them
with ``graders.render``.
"""

from graders import Report
from labs.catalog import get, ids as list_labs
from labs.grading import BatchResult, GradingError, grade, grade_batch
from labs.runtime import Lab, attach, start
from labs.spec import LabSpec, Task

__all__ = ["BatchResult", "GradingError", "Lab", "LabSpec", "Report", "Task", "attach", "get", "grade",
           "grade_batch", "list_labs", "start"]
