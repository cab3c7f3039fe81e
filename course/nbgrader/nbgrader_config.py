"""nbgrader configuration for the gpulab labs (run nbgrader commands from this folder).

Autograde with `labs.nbgrader_autograde` (as `gpulab course nbgrader-demo` does), not `nbgrader autograde`: the
grade is computed by replaying the learner's evidence on the grader's own cluster, in the grader's process, and
the learner's notebook runs confined (labs.sandbox). generate_assignment and generate_feedback are nbgrader's.
"""

import os

c = get_config()  # noqa: F821 (provided by nbgrader)

c.CourseDirectory.course_id = "gpulab"
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", ".gpulab-backup"]

c.GenerateAssignment.create_assignment = True
c.Autograde.create_student = True

# Only used if someone runs `nbgrader autograde` by hand: the notebooks hold no grading code.
c.Execute.timeout = 30
c.Execute.interrupt_on_timeout = True

c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
