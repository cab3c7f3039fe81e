"""nbgrader settings baked into the learner image (/etc/jupyter/nbgrader_config.py): the course id and the
exchange on the shared volume that course/class/z2jh-values.yaml mounts. Learners fetch and submit from the
Assignments tab; the instructor's server uses course/nbgrader/nbgrader_config.py for the course folder."""

c = get_config()  # noqa: F821 (provided by nbgrader)

c.CourseDirectory.course_id = "gpulab"
c.Exchange.root = "/srv/nbgrader/exchange"
