"""Lab solutions belong to instructors: what holds them, whether this account may read them, and the refusal a
learner gets from ``gpulab lab solve``.

On one host, ``gpulab class init``, ``add-learner`` and ``up`` hand every path that holds a solution or solved work
(``protected``: each lab's ``solution/``, the tests and their solved bundles, the nbgrader demo's mistakes and
solved students, the git history, a build's or an installed copy's ``solution/`` folders) to the group
``gpulab-instructors`` with no access for others (``withhold``); instructors and root still read them. The learner
image is built without them (``course/class/withhold-solutions.sh``, which leaves ``MARKER`` in ``labs/``).

A lab still loads where its ``solution/`` is withheld (``withheld``): learners start, check and submit labs; only
``solve`` needs the solution, and it is refused (``refused``). Class mode is read from the system (the process's
groups, the files' own permissions), never from an environment variable, which a learner sets at will.
This module only ever takes read access away; the permissions, not the refusal, are what keep solutions out of reach.
"""

from __future__ import annotations

import grp
import logging
import os
import pwd
import stat
import sysconfig
from pathlib import Path

from cluster import errors
from labs.classroom import layout

log = logging.getLogger(__name__)

SOLUTION = "solution"
# Left in labs/ by the learner image's build after it deleted every solution/ folder: a missing solution/ there
# is withheld, not a broken lab.
MARKER = "SOLUTIONS-WITHHELD"
PACKAGE = Path(__file__).resolve().parents[1]  # the labs package, wherever it was imported from
# Paths of a source checkout that hold solutions or solved work, besides each lab's solution/: the tests (solved
# evidence bundles, typical wrong submissions laid over the solution), the nbgrader demo's mistakes and its solved
# students, a self-paced learner's lab folders, the git history, and a build's copy of the packages.
CHECKOUT_PATHS = ("tests", ".git", "build", "course/gpulab-labs", "course/nbgrader/demo", "course/nbgrader/submitted",
                  "course/nbgrader/autograded", "course/nbgrader/feedback", "course/nbgrader/gradebook.db")

LEARNER_REFUSAL = ("{what} is refused: in class mode the lab solutions belong to the instructor, and this account "
                   f"is a learner's (group {layout.LEARNERS_GROUP}); your own work is what gets graded")
WITHHELD_REFUSAL = ("{what} is refused: the solutions of lab {lab} are withheld from this account (class mode keeps "
                    f"them for the group {layout.INSTRUCTORS_GROUP})")


def checkout(package: Path = PACKAGE) -> Path | None:
    """The source checkout the package was imported from (an editable install), or None for an installed copy."""
    root = package.parent
    return root if (root / "pyproject.toml").is_file() else None


def _lab_dirs(labs_root: Path) -> list[Path]:
    try:
        entries = sorted(labs_root.iterdir())
    except OSError:
        return []
    return [d for d in entries if not d.is_symlink() and d.is_dir() and (d / "lab.yaml").is_file()]


def protected(package: Path = PACKAGE) -> list[Path]:
    """Every existing path that holds a lab solution or solved work: the imported package's and any other copy of
    it (a non-editable install in the venv, a build folder), and the checkout's ``CHECKOUT_PATHS``."""
    roots = [package]
    installed = Path(sysconfig.get_paths()["purelib"]) / "labs"
    if installed.is_dir() and installed.resolve() != package.resolve():
        roots.append(installed)
    out = [d / SOLUTION for root in roots for d in _lab_dirs(root) if os.path.lexists(d / SOLUTION)]
    top = checkout(package)
    if top is not None:
        out += [top / rel for rel in CHECKOUT_PATHS if os.path.lexists(top / rel)]
        out += [d for d in git_dirs(top) if d not in out]
    return out


def git_dirs(top: Path) -> list[Path]:
    """Where the checkout's git history lives: ``.git`` itself, or for a linked worktree (``git worktree add``,
    whose ``.git`` is a file saying ``gitdir: …``) that worktree's folder and the main repository's git folder it
    names in ``commondir``, which hold the history outside the checkout."""
    dot = top / ".git"
    if dot.is_symlink() or not dot.is_file():
        return [dot] if dot.is_dir() and not dot.is_symlink() else []
    try:
        line = dot.read_text(errors="replace").strip()
    except OSError:
        return []
    if not line.startswith("gitdir:"):
        return []
    own = (top / line.removeprefix("gitdir:").strip()).resolve()
    found = [own] if own.is_dir() else []
    try:
        common = (own / (own / "commondir").read_text(errors="replace").strip()).resolve()
    except OSError:
        return found
    return found + ([common] if common.is_dir() and common not in found else [])


def _restrict(path: Path, gid: int) -> None:
    """Group ``gid``, no access for others; the owner's bits are kept (a developer's checkout stays theirs)."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return  # never follow a link: its target is not ours to change
    os.lchown(path, -1, gid)
    mode = st.st_mode & 0o700
    if stat.S_ISDIR(st.st_mode):
        os.chmod(path, mode | 0o050)
    else:
        os.chmod(path, mode | 0o040 | (0o010 if st.st_mode & 0o100 else 0))


def withhold(package: Path = PACKAGE, group: str = layout.INSTRUCTORS_GROUP) -> list[Path]:
    """Hand every ``protected`` path to ``group`` with no access for others (root only); the paths changed.

    A folder's own mode is the barrier (nothing below it can be opened by others); a lab's ``solution/`` files get
    the same mode too, so that a copy made with hard links stays closed. Run again by ``class up``: a ``git pull``
    since ``class init`` may have brought a new lab's solution in, readable by all."""
    gid = grp.getgrnam(group).gr_gid
    done = protected(package)
    for path in done:
        _restrict(path, gid)
        if path.name == SOLUTION and path.is_dir() and not path.is_symlink():
            for here, dirs, files in os.walk(path):
                for name in (*dirs, *files):
                    _restrict(Path(here) / name, gid)
    log.info("withheld from learners: %s", ", ".join(map(str, done)))
    return done


def withheld(lab_dir: Path) -> bool:
    """Whether this account cannot have the lab's ``solution/``: it may not read it, or the learner image's build
    deleted it (``MARKER``). A ``solution/`` missing without the marker is a broken lab, not a withheld one."""
    folder = lab_dir / SOLUTION
    try:
        with os.scandir(folder):
            pass
    except PermissionError:
        return True
    except FileNotFoundError:
        return (lab_dir.parent / MARKER).is_file()
    except OSError:
        return False
    return not os.access(folder, os.X_OK)


def _learner() -> bool:
    """A member of the class's learners group and not an instructor, by the kernel's and the group file's word."""
    try:
        learners = grp.getgrnam(layout.LEARNERS_GROUP)
    except KeyError:
        return False
    try:
        name = pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        name = ""
    try:
        instructors: grp.struct_group | None = grp.getgrnam(layout.INSTRUCTORS_GROUP)
    except KeyError:
        instructors = None
    mine = {*os.getgroups(), os.getegid()}

    def member(group: grp.struct_group) -> bool:
        return group.gr_gid in mine or name in group.gr_mem

    return member(learners) and not (instructors is not None and member(instructors))


def refused(lab_dir: Path | None = None, what: str = "gpulab lab solve") -> str | None:
    """One line saying why this account may not have a lab's solution (``what`` names the step), or None where
    it may: a learner of a class on this host, or any account the solutions are withheld from."""
    if _learner():
        return LEARNER_REFUSAL.format(what=what)
    if lab_dir is not None and withheld(lab_dir):
        return WITHHELD_REFUSAL.format(what=what, lab=lab_dir.name)
    return None


def require(lab_dir: Path, what: str) -> None:
    """``refused`` as the one error gpulab raises for it."""
    why = refused(lab_dir, what)
    if why is not None:
        raise errors.CourseError(why)
