"""nbgrader configuration for the gpulab labs (run nbgrader commands from this folder).

Grading runs without a lab cluster: every graded cell grades the learner's evidence bundle offline, so a short
cell timeout is enough. `gpulab course nbgrader-demo` runs the whole round trip in a copy of this folder.
"""

import os

c = get_config()  # noqa: F821 (provided by nbgrader)

c.CourseDirectory.course_id = "gpulab"
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", ".gpulab-backup"]

c.GenerateAssignment.create_assignment = True
c.Autograde.create_student = True

# No cluster is needed to grade: evidence bundles are read offline. A slow cell means something is wrong.
c.Execute.timeout = 30
c.Execute.interrupt_on_timeout = True

c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
