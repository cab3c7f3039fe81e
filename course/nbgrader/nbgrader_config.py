"""nbgrader configuration for the gpulab labs (run nbgrader commands from this folder).

Autograde with `labs.nbgrader_autograde` (as `gpulab course nbgrader-demo` does) or `nbgrader autograde` (which
this config points at the same replay, below): the grade is computed by replaying the learner's evidence on the
grader's own cluster, and the learner's notebook is never run. generate_assignment and generate_feedback are
nbgrader's.
"""

import os

c = get_config()  # noqa: F821 (provided by nbgrader)

c.CourseDirectory.course_id = "gpulab"
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", ".gpulab-backup"]

c.GenerateAssignment.create_assignment = True
c.Autograde.create_student = True

# `nbgrader autograde` run by hand grades as `gpulab course nbgrader-demo` does: by replaying the learner's evidence
# on a cluster of the grader's, never by executing the notebook (whose locked, comment-only task cells plain
# nbgrader would give full marks); and the exchange checks who a submission belongs to. One source for every
# grading config of the course: labs/classroom/nbsafe.py.
from labs.classroom import nbsafe  # noqa: E402

nbsafe.configure(c)

c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
