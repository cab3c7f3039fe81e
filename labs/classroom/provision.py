"""``gpulab class init`` and ``gpulab class add-learner``: the class folder, its accounts and their homes.

The instructor's home gets ``course/``: the nbgrader course folder (config and the labs' source assignments,
never the demo's solved work); a learner's home gets ``course/`` with the course notebooks, trusted in the learner's
own Jupyter signature store while unchanged (``trust_course``). Learners' and the
instructor's servers read the control-plane binaries from the class's read-only copy. Both steps withhold the lab
solutions from everyone outside the group ``gpulab-instructors`` (``solutions.withhold``).
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from cluster import binaries, errors
from labs import course_nbgrader
from labs.classroom import accounts, hubconfig, layout, runtime, solutions

log = logging.getLogger(__name__)

COURSE_NOTEBOOKS = Path(__file__).resolve().parents[2] / "course"
INSTRUCTOR_NBGRADER = '''"""The instructor's nbgrader course folder (written by gpulab class init)."""
c = get_config()  # noqa: F821
c.CourseDirectory.root = {root!r}
'''


def _share_tree(src: Path, dst: Path) -> None:
    """A root-owned, world-readable copy of ``src`` (hard links where the file system allows)."""
    for here, _dirs, files in os.walk(src):
        out = dst / Path(here).relative_to(src)
        out.mkdir(parents=True, exist_ok=True)
        out.chmod(0o755)
        for name in files:
            target = out / name
            if target.exists():
                continue
            try:
                os.link(Path(here) / name, target)
            except OSError:
                shutil.copy2(Path(here) / name, target)
            mode = (Path(here) / name).stat().st_mode
            target.chmod(0o755 if mode & 0o100 else 0o644)


def share_binaries(cd: layout.ClassDir) -> None:
    found = binaries.cached()
    if found is None:
        raise errors.BinariesUnavailable("the control-plane binaries are not in this account's cache",
                                         hint="gpulab binaries ensure (then gpulab class init again)")
    src_bins = binaries.bin_dir()
    _share_tree(src_bins, cd.cache / "bin" / src_bins.name)
    if binaries.seeds_dir().is_dir():
        _share_tree(binaries.seeds_dir(), cd.cache / "seeds")


def init(cd: layout.ClassDir, instructor: str, password: str | None, *, port: int, cull_after: int,
         cull_every: int, cluster_start: str = layout.DEFAULT_CLUSTER_START) -> layout.ClassSettings:
    accounts.require_root("gpulab class init")
    cd.root.mkdir(parents=True, exist_ok=True)
    cd.root.chmod(0o755)
    cd.hub_state.mkdir(exist_ok=True)
    cd.hub_state.chmod(0o700)
    cd.jupyter_config.mkdir(exist_ok=True)
    cd.jupyter_config.chmod(0o755)
    cd.exchange.mkdir(exist_ok=True)
    cd.exchange.chmod(0o1777)  # nbgrader's exchange root: everyone writes, nobody removes another's files
    old = cd.settings() if cd.exists() else None
    settings = layout.ClassSettings(instructor=layout.check_name(instructor), port=port, cull_after=cull_after,
                                    cull_every=cull_every, learners=old.learners if old else (),
                                    cluster_start=cluster_start)
    cd.save(settings)
    (cd.jupyter_config / "nbgrader_config.py").write_text(hubconfig.nbgrader_config(cd, settings.course_id))
    share_binaries(cd)
    cd.hub_config.write_text(hubconfig.render(cd, runtime.ensure(cd.root)), encoding="utf-8")
    cd.hub_config.chmod(0o644)
    accounts.ensure_group(layout.LEARNERS_GROUP)
    instructor_home = accounts.ensure_account(instructor, layout.INSTRUCTORS_GROUP, password)
    claim_course_folder(cd.exchange / settings.course_id, instructor)
    course = instructor_home / "course"
    if not (course / "gradebook.db").exists():  # never overwrite a running course's gradebook and submissions
        accounts.copy_tree_owned(course_nbgrader.default_course_dir(), course, instructor,
                                 ignore=(course_nbgrader.DEMO_DIR, "gradebook.db", "release", "submitted",
                                         "autograded", "feedback", ".ipynb_checkpoints"))
    accounts.write_owned(instructor_home / ".jupyter" / "nbgrader_config.py",
                         INSTRUCTOR_NBGRADER.format(root=str(course)), instructor)
    solutions.withhold()  # learners' servers import this checkout: its solutions become the instructors' alone
    return settings


def claim_course_folder(folder: Path, instructor: str) -> None:
    """The course's folder in the exchange, the instructor's from the start. nbgrader's release makes it only at
    the first release; until then any learner could make it in the root everyone may write (1777) and put a
    notebook of theirs in its ``outbound`` for every learner who fetches, to run as them. nbgrader's release
    refuses a course folder it does not own, so a folder someone else made is named here, not taken over."""
    if not folder.is_symlink() and not folder.exists():
        folder.mkdir(mode=0o755)
        accounts.give(folder, instructor)
        folder.chmod(0o755)
        return
    what = ("a link" if folder.is_symlink() else "not a folder" if not folder.is_dir()
            else f"owned by {accounts.owner_name(folder)}")
    if what != f"owned by {instructor}":
        raise errors.ConfigError("exchange", [
            f"{folder} is {what}, not the instructor {instructor}'s folder: someone may have made it to hand "
            "learners notebooks of their own; look inside, remove it and run class init again"])


def trust_course(cd: layout.ClassDir, name: str, course: Path) -> None:
    """Trust the learner's copies that are still the course's own, in the learner's own signature store, as the
    learner (``labs.nbtrust``): their JupyterLab draws the saved widgets. A copy the learner changed stays
    untrusted, and no instructor's store is ever written."""
    accounts.run_as(name, [str(runtime.bin_dir(cd.root) / "gpulab"), "course", "trust", str(course)])


def add_learner(cd: layout.ClassDir, name: str, password: str | None) -> layout.ClassSettings:
    accounts.require_root("gpulab class add-learner")
    settings = cd.settings()
    if name == settings.instructor:
        raise errors.ConfigError("learner", [f"{name} is the class's instructor"])
    solutions.withhold()  # before the account exists: a learner never sees a solution readable
    home = accounts.ensure_account(name, layout.LEARNERS_GROUP, password)
    course = home / "course"
    if not course.exists():
        course.mkdir()
        for notebook in sorted(COURSE_NOTEBOOKS.glob("*.ipynb")):
            shutil.copy2(notebook, course / notebook.name)
        accounts.give(course, name)
    trust_course(cd, name, course)
    accounts.learner_jupyter_config(name)
    settings = settings.with_learner(name)
    cd.save(settings)
    return settings
