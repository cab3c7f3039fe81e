"""Solutions belong to instructors: after `gpulab class init` and `add-learner` (real accounts, no hub), a learner's
account cannot read a lab's solution, a solved evidence bundle, the nbgrader demo's mistakes or the git history of
the checkout its server imports gpulab from, and `gpulab lab solve` refuses it in one line; the same lab still
loads for it. The positive controls: the instructor's account (group gpulab-instructors) reads the same files,
and `gpulab lab solve`'s refusal is the learner's alone.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prerequisites import require
from class_hub import prerequisites

from labs import catalog
from labs.classroom import accounts, runtime, solutions, trial

pytestmark = [pytest.mark.timeout(300)]

LAB = "01-device-plugins"
GPULAB = trial.GPULAB
LAB_DIR = catalog.get(LAB).directory
CHECKOUT = LAB_DIR.parents[1] if (LAB_DIR.parents[1] / "pyproject.toml").is_file() else None
SECRETS = {
    "a lab's solution": LAB_DIR / "solution" / "big-train.yaml",
    "a solved evidence bundle": (CHECKOUT or Path("/")) / "tests/fixtures/labs/bundles/01-device-plugins.solved.json",
    "the nbgrader demo's mistakes": (CHECKOUT or Path("/")) / "course/nbgrader/demo/mistakes.yaml",
    "the git history": (solutions.git_dirs(CHECKOUT)[-1] if CHECKOUT else Path("/.git")) / "HEAD",
}


@dataclass(frozen=True)
class Class:
    folder: Path
    instructor: str
    learner: str
    init_output: str

    def run_as(self, name: str, *argv: str) -> subprocess.CompletedProcess[str]:
        return accounts.run_as(name, list(argv), check=False, timeout=120,
                               env={"GPULAB_CACHE_DIR": str(self.folder / "cache")})

    def gpulab_as(self, name: str, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run_as(name, str(runtime.bin_dir(self.folder) / "gpulab"), *args)


@pytest.fixture(scope="module")
def klass() -> Iterator[Class]:
    prerequisites(browser=False)
    require(CHECKOUT is not None, "gpulab is not imported from a source checkout")
    base = Path(tempfile.mkdtemp(prefix="gpulab-class-gplsol-", dir="/tmp"))
    base.chmod(0o755)
    folder, instructor, learner = base / "class", "gplsol-teach", "gplsol-l1"
    try:
        outputs = []
        for argv in (["init", "--instructor", instructor], ["add-learner", learner]):
            done = subprocess.run([str(GPULAB), "class", *argv, "--dir", str(folder)], capture_output=True, text=True,
                                  timeout=300, check=False)
            assert done.returncode == 0, done.stdout + done.stderr
            outputs.append(done.stdout)
        yield Class(folder, instructor, learner, outputs[0])
    finally:
        for name in (learner, instructor):
            if accounts.exists(name):
                subprocess.run(["userdel", "--remove", name], capture_output=True, check=False)
        shutil.rmtree(base, ignore_errors=True)


def test_a_learner_cannot_read_solutions_and_the_instructor_can(klass: Class) -> None:
    for what, path in SECRETS.items():
        assert path.is_file(), f"{what}: {path} is missing from the checkout"
        mine = klass.run_as(klass.learner, "cat", str(path))
        assert mine.returncode != 0 and "Permission denied" in mine.stderr, f"the learner read {what} ({path})"
        theirs = klass.run_as(klass.instructor, "cat", str(path))
        assert theirs.returncode == 0, f"the instructor cannot read {what}: {theirs.stderr}"
        assert theirs.stdout == path.read_text()
    listed = klass.run_as(klass.learner, "ls", str(LAB_DIR / "solution"))
    assert listed.returncode != 0 and "Permission denied" in listed.stderr
    assert "lab solutions withheld from learners" in klass.init_output  # class init says so


def test_lab_solve_is_refused_for_the_learner_in_one_line_and_the_lab_still_loads(klass: Class) -> None:
    solve = klass.gpulab_as(klass.learner, "lab", "solve", LAB)
    assert solve.returncode == 1, solve.stdout + solve.stderr
    assert solve.stderr.startswith("error: gpulab lab solve is refused: in class mode the lab solutions belong to "
                                   "the instructor"), solve.stderr
    assert solve.stderr.count("\n") == 1 and "Traceback" not in solve.stderr
    shown = klass.gpulab_as(klass.learner, "lab", "show", LAB)  # the lab loads without its solution
    assert shown.returncode == 0 and "Lab 01-device-plugins" in shown.stdout, shown.stderr
    api = klass.run_as(klass.learner, str(runtime.bin_dir(klass.folder) / "python"), "-c",
                       "from labs.classroom import solutions; import labs; "
                       f"print(solutions.refused(labs.get({LAB!r}).directory))")
    assert api.returncode == 0 and "is a learner's" in api.stdout, api.stderr
    control = klass.run_as(klass.instructor, str(runtime.bin_dir(klass.folder) / "python"), "-c",
                           "from labs.classroom import solutions; import labs; "
                           f"print(solutions.refused(labs.get({LAB!r}).directory))")
    assert control.stdout.strip() == "None", control.stdout + control.stderr
