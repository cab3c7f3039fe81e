"""Withholding lab solutions (labs.classroom.solutions), the parts that need no second account: which paths are
handed to the instructors' group and how, and who is refused `solve` (a learner by the system's group records,
never by an environment variable; an account that cannot have the solution; nobody in self-paced mode). That a
learner's account really cannot read them is tests/e2e/test_class_solutions.py."""

from __future__ import annotations

import grp
import os
import stat
from pathlib import Path

import pytest

from labs import catalog
from labs.classroom import layout, solutions

LAB_DIR = catalog.get("01-device-plugins").directory


def _checkout(root: Path) -> Path:
    """A small source checkout: one lab with a solution, and the other paths that hold solved work."""
    lab = root / "labs" / "01-x"
    (lab / "solution").mkdir(parents=True)
    (lab / "starter").mkdir()
    (lab / "lab.yaml").write_text("kind: Lab\n")
    (lab / "solution" / "pod.yaml").write_text("answer: 7\n")
    (lab / "solution" / "run.sh").write_text("#!/bin/sh\n")
    (lab / "solution" / "run.sh").chmod(0o755)
    (lab / "starter" / "pod.yaml").write_text("answer: 0\n")
    (root / "pyproject.toml").write_text("")
    (root / "tests" / "fixtures").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "course" / "nbgrader" / "demo").mkdir(parents=True)
    (root / "elsewhere.yaml").write_text("not a solution\n")
    (lab / "solution" / "link.yaml").symlink_to(root / "elsewhere.yaml")
    return root / "labs"


def test_withhold_hands_each_solution_path_to_the_group_with_no_access_for_others(tmp_path: Path) -> None:
    package = _checkout(tmp_path)
    group = grp.getgrgid(os.getegid()).gr_name
    done = solutions.withhold(package, group)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in done) == [
        ".git", "course/nbgrader/demo", "labs/01-x/solution", "tests"]
    modes = {p.relative_to(tmp_path).as_posix(): stat.S_IMODE(p.lstat().st_mode)
             for p in [*done, *(package / "01-x" / "solution").iterdir()]}
    assert modes["labs/01-x/solution"] == modes["tests"] == modes[".git"] == 0o750
    assert modes["labs/01-x/solution/pod.yaml"] == 0o640 and modes["labs/01-x/solution/run.sh"] == 0o750
    assert stat.S_IMODE((tmp_path / "elsewhere.yaml").stat().st_mode) & 0o004  # a link's target is left alone
    assert stat.S_IMODE((package / "01-x" / "starter").stat().st_mode) & 0o005 == 0o005  # the rest stays open
    assert (package / "01-x" / "solution").stat().st_gid == os.getegid()


def test_the_shipped_labs_solutions_are_among_the_protected_paths() -> None:
    protected = set(solutions.protected())
    assert {catalog.get(i).directory / "solution" for i in catalog.ids()} <= protected
    top = solutions.checkout()
    assert top is not None and {top / "tests", top / "course/nbgrader/demo"} <= protected


def test_self_paced_mode_keeps_solve() -> None:
    """No class, or an account of neither group: the solution is readable and solve is not refused."""
    assert not solutions.withheld(LAB_DIR)
    assert solutions.refused(LAB_DIR) is None


def _groups(monkeypatch: pytest.MonkeyPatch, mine: set[int], members: dict[str, list[str]]) -> None:
    gids = {layout.LEARNERS_GROUP: 50001, layout.INSTRUCTORS_GROUP: 50002}

    def getgrnam(name: str) -> grp.struct_group:
        if name not in gids:
            raise KeyError(name)
        return grp.struct_group((name, "x", gids[name], members.get(name, [])))

    monkeypatch.setattr(grp, "getgrnam", getgrnam)
    monkeypatch.setattr(os, "getgroups", lambda: sorted(mine))


def test_a_learner_is_refused_by_the_groups_of_the_process(monkeypatch: pytest.MonkeyPatch) -> None:
    _groups(monkeypatch, {50001}, {})
    why = solutions.refused(LAB_DIR)
    assert why is not None and why.startswith("gpulab lab solve is refused: in class mode the lab solutions belong")
    assert "\n" not in why


def test_a_learner_added_while_logged_in_is_refused_by_the_group_file(monkeypatch: pytest.MonkeyPatch) -> None:
    import pwd

    me = pwd.getpwuid(os.geteuid()).pw_name
    _groups(monkeypatch, set(), {layout.LEARNERS_GROUP: [me]})
    assert solutions.refused() is not None


def test_an_instructor_who_is_also_in_the_learners_group_keeps_solve(monkeypatch: pytest.MonkeyPatch) -> None:
    _groups(monkeypatch, {50001, 50002}, {})
    assert solutions.refused(LAB_DIR) is None


def test_the_environment_does_not_decide(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GPULAB_CLASS_DIR", "JUPYTERHUB_USER", "JUPYTERHUB_API_TOKEN", "GPULAB_CLUSTER_ON_DEMAND"):
        monkeypatch.setenv(name, "1")
    assert solutions.refused(LAB_DIR) is None
    _groups(monkeypatch, {50001}, {})
    for name in ("GPULAB_CLASS_DIR", "JUPYTERHUB_USER", "JUPYTERHUB_API_TOKEN", "GPULAB_CLUSTER_ON_DEMAND"):
        monkeypatch.delenv(name)
    assert solutions.refused(LAB_DIR) is not None


def test_the_python_api_refuses_a_learner_before_anything_runs(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from cluster import errors
    from labs import runtime

    _groups(monkeypatch, {50001}, {})
    with pytest.raises(errors.CourseError, match=r"^lab\.solve\(\) is refused: in class mode"):
        runtime.Lab(catalog.get("01-device-plugins"), tmp_path).solve()
    assert not list(tmp_path.iterdir())  # nothing was written


def test_a_linked_worktrees_history_outside_the_checkout_is_protected(tmp_path: Path) -> None:
    """A checkout made with ``git worktree add`` has a ``.git`` file; the history it points at (the worktree's git
    folder and the main repository's) is outside the checkout and must be withheld as well."""
    import subprocess

    main, linked = tmp_path / "main", tmp_path / "linked"
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@localhost", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@localhost", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    _checkout(main)
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "x"], ["worktree", "add", "-q", str(linked)]):
        subprocess.run(["git", "-C", str(main), *argv], check=True, env=env, capture_output=True)
    assert solutions.git_dirs(main) == [main / ".git"]
    found = solutions.git_dirs(linked)
    assert (linked / ".git").is_file() and (main / ".git").resolve() in found
    assert any(d.parent.name == "worktrees" for d in found)
    assert set(found) <= set(solutions.protected(linked / "labs"))
    (linked / ".git").write_text("not a gitdir line\n")
    assert solutions.git_dirs(linked) == []
