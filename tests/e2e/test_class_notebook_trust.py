"""A learner of a one-host class opens the course notebooks trusted: `gpulab class add-learner` signs the learner's
copies into the learner's own Jupyter signature store, as the learner, so their JupyterLab draws the saved widgets.
The instructor's store holds no signature of them, and a copy the learner changed is not trusted again."""

from __future__ import annotations

import pwd

import pytest
from test_class_solutions import Class, klass  # noqa: F401  (the class with real accounts, reused)

from labs import nboutputs
from labs.classroom import accounts, runtime

pytestmark = [pytest.mark.timeout(300)]

CHECK = ("import sys; from pathlib import Path; from labs import nbtrust; "
         "print(' '.join(str(nbtrust.is_trusted(p)) for p in sorted(Path(sys.argv[1]).glob('*.ipynb'))))")


def trusted_as(klass: Class, name: str, folder: str) -> list[str]:
    """``is_trusted`` of every notebook in ``folder``, as account ``name`` (its own Jupyter data folder)."""
    done = klass.run_as(name, str(runtime.bin_dir(klass.folder) / "python"), "-c", CHECK, folder)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.split()


def test_the_learner_opens_the_course_trusted_and_the_instructor_does_not(klass: Class) -> None:  # noqa: F811
    copies = accounts.home(klass.learner) / "course"
    assert trusted_as(klass, klass.learner, str(copies)) == ["True"] * 9
    store = accounts.home(klass.learner) / ".local" / "share" / "jupyter" / "nbsignatures.db"
    assert store.stat().st_uid == pwd.getpwnam(klass.learner).pw_uid  # written as the learner, not by root
    assert trusted_as(klass, klass.instructor, str(nboutputs.COURSE)) == ["False"] * 9


def test_a_copy_the_learner_changed_is_left_untrusted(klass: Class) -> None:  # noqa: F811
    copies = accounts.home(klass.learner) / "course"
    changed = sorted(copies.glob("*.ipynb"))[1]
    edit = klass.run_as(klass.learner, "sed", "-i", "s/Pending/Pendng/", str(changed))
    assert edit.returncode == 0, edit.stderr
    again = klass.gpulab_as(klass.learner, "course", "trust", str(copies))
    assert again.returncode == 0 and f"left untrusted (not the course's own): {changed}" in again.stdout, again.stderr
    assert trusted_as(klass, klass.learner, str(copies))[1] == "False"
