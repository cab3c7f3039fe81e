"""nbgrader settings baked into the learner image (/etc/jupyter/nbgrader_config.py): the course id and the
exchange on the shared volume that course/class/z2jh-values.yaml mounts. Learners fetch and submit from the
Assignments tab; the instructor's server uses course/nbgrader/nbgrader_config.py for the course folder."""

c = get_config()  # noqa: F821 (provided by nbgrader)

c.CourseDirectory.course_id = "gpulab"
c.Exchange.root = "/srv/nbgrader/exchange"
# Grading and the exchange as everywhere in the course (labs/classroom/nbsafe.py): autograde replays evidence and
# never runs a notebook; collect and submit check who a submission belongs to.
from labs.classroom import nbsafe  # noqa: E402

nbsafe.configure(c)
