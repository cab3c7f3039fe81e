"""nbgrader settings baked into the learner image (/etc/jupyter/nbgrader_config.py): the course id and the
exchange on the shared volume that course/class/z2jh-values.yaml mounts. Learners fetch and submit from the
Assignments tab; the instructor's server uses course/nbgrader/nbgrader_config.py for the course folder."""

import os
import pwd

c = get_config()  # noqa: F821 (provided by nbgrader)

c.CourseDirectory.course_id = "gpulab"
c.Exchange.root = "/srv/nbgrader/exchange"
# Grading and the exchange as everywhere in the course (labs/classroom/nbsafe.py): autograde replays evidence and
# never runs a notebook; collect and submit check who a submission belongs to.
from labs.classroom import nbsafe  # noqa: E402

nbsafe.configure(c)
# Each learner's pod runs as a uid of their own (course/class/z2jh-values.yaml, hub.extraConfig;
# labs/classroom/kubeuids.py), so collect knows a learner's folder by that uid.
c.CheckedCollect.learner_uids = "by-name"
# That uid has no account in the image, so nbgrader cannot take the learner's name from the password database
# (nbgrader.utils.get_username): it is the hub's name for them, which JupyterHub gives the server. A learner who
# changes it hands in a folder that collect refuses (the folder is theirs, the name another's). Instructors and
# the grader run as the image's own account and keep nbgrader's way.
try:
    pwd.getpwuid(os.getuid())
except KeyError:
    if os.environ.get("JUPYTERHUB_USER"):
        c.CourseDirectory.student_id = os.environ["JUPYTERHUB_USER"]
