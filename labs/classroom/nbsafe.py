"""The grading settings every nbgrader configuration of the course loads, from this one place: the class's
(``hubconfig.NBGRADER_CONFIG``), the course folder's (``course/nbgrader/nbgrader_config.py``) and the learner
image's (``course/class/nbgrader_config.py``). With them, ``nbgrader autograde`` from any of those folders never
executes a learner's notebook and gives an untouched submission no points (``formgrade.ReplayGrade``), and the
exchange checks what it releases, who a submission belongs to and who may write it (``formgrade``'s docstring
says why each is needed). Without them, plain ``nbgrader autograde`` ran the notebook as the grader and gave the
labs' locked, comment-only task cells full marks.
"""

from __future__ import annotations

from typing import Any

AUTOGRADE_PREPROCESSORS = (
    "labs.classroom.formgrade.ReplayGrade",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
)
EXCHANGE = {
    "release_assignment": "labs.classroom.formgrade.CheckedRelease",
    "collect": "labs.classroom.formgrade.CheckedCollect",
    "submit": "labs.classroom.formgrade.CheckedSubmit",
}


def configure(c: Any) -> None:
    """Put the safe grading settings into an nbgrader config object (``c = get_config()``)."""
    c.Autograde.autograde_preprocessors = list(AUTOGRADE_PREPROCESSORS)
    for name, cls in EXCHANGE.items():
        setattr(c.ExchangeFactory, name, cls)
