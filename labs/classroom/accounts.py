"""System accounts of a class: one per learner and one for the instructor, each with a private home (0700).

Accounts are made with the system's own tools (``groupadd``, ``useradd``, ``chpasswd``), so the hub logs people
in through PAM like any other login. Files put into a home are owned by its account. ``run_as`` runs a command
as an account, with that account's home and groups, and nothing of root's environment but ``PATH`` and what
is passed.
"""

from __future__ import annotations

import grp
import json
import logging
import os
import pwd
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from cluster import errors
from labs.classroom import layout

log = logging.getLogger(__name__)

# Learners get the Assignments tab; the instructor's tools (formgrader, create assignment) are the instructor's.
LEARNER_SERVER_EXTENSIONS = {"nbgrader.server_extensions.formgrader": False}
LEARNER_DISABLED_PLUGINS = ["@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment"]


def require_root(what: str) -> None:
    if os.geteuid() != 0:
        raise errors.CourseError(f"{what} needs root: it creates system accounts and runs servers as them",
                                 hint="run it as root (sudo .venv/bin/gpulab class ...)")


def _run(argv: Sequence[str]) -> None:
    proc = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise errors.CommandFailed(list(argv), proc.returncode, proc.stdout + proc.stderr)


def ensure_group(name: str) -> None:
    try:
        grp.getgrnam(name)
    except KeyError:
        _run(["groupadd", "--system", name])


def exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def home(name: str) -> Path:
    return Path(pwd.getpwnam(name).pw_dir)


def ensure_account(name: str, group: str, password: str | None) -> Path:
    """The account ``name`` in ``group`` with a private home; sets the password when one is given."""
    layout.check_name(name)
    ensure_group(group)
    if not exists(name):
        _run(["useradd", "--create-home", "--shell", "/bin/bash", "--groups", group, name])
    else:
        _run(["usermod", "--append", "--groups", group, name])
    if password is not None:
        proc = subprocess.run(["chpasswd"], input=f"{name}:{password}\n", capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise errors.CommandFailed(["chpasswd"], proc.returncode, proc.stderr)
    path = home(name)
    path.chmod(0o700)  # no learner reads another's files, lab cluster state or answer store
    return path


def owner_name(path: str | Path) -> str:
    """The account that owns ``path`` (not followed if it is a link), by the system's word."""
    uid = os.lstat(path).st_uid
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def give(path: Path, name: str) -> None:
    """Make ``path`` (recursively) owned by ``name`` and its primary group."""
    entry = pwd.getpwnam(name)
    for root, dirs, files in os.walk(path):
        for item in (root, *(os.path.join(root, d) for d in dirs), *(os.path.join(root, f) for f in files)):
            os.lchown(item, entry.pw_uid, entry.pw_gid)


def write_owned(path: Path, text: str, name: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    top = home(name)
    for item in [path, *path.parents]:
        if item == top or top not in item.parents:
            break
        entry = pwd.getpwnam(name)
        os.lchown(item, entry.pw_uid, entry.pw_gid)


def learner_jupyter_config(name: str) -> None:
    """Keep the instructor's tools out of a learner's JupyterLab (they could only ever see the learner's files)."""
    base = home(name) / ".jupyter"
    write_owned(base / "jupyter_server_config.json",
                json.dumps({"ServerApp": {"jpserver_extensions": LEARNER_SERVER_EXTENSIONS}}, indent=1), name)
    write_owned(base / "labconfig" / "page_config.json",
                json.dumps({"disabledExtensions": {p: True for p in LEARNER_DISABLED_PLUGINS}}, indent=1), name)


def run_as(name: str, argv: Sequence[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None,
           timeout: float = 1800, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` as account ``name`` (its uid, primary group and groups), in its home unless ``cwd``."""
    entry = pwd.getpwnam(name)
    groups = [g.gr_gid for g in grp.getgrall() if name in g.gr_mem]
    environ = {"HOME": entry.pw_dir, "USER": name, "LOGNAME": name, "SHELL": entry.pw_shell,
               "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", **(env or {})}
    proc = subprocess.run(list(argv), cwd=cwd or entry.pw_dir, env=environ, user=entry.pw_uid, group=entry.pw_gid,
                          extra_groups=groups, capture_output=True, text=True, timeout=timeout, check=False)
    log.info("as %s: %s\n%s", name, " ".join(argv), proc.stdout + proc.stderr)
    if check and proc.returncode != 0:
        raise errors.CommandFailed([f"(as {name})", *argv], proc.returncode, proc.stdout + proc.stderr)
    return proc


def copy_tree_owned(src: Path, dst: Path, name: str, *, ignore: Sequence[str] = ()) -> None:
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(*ignore) if ignore else None)
    give(dst, name)


def read_as(name: str, path: Path, *, limit: int = 256 * 1024 * 1024) -> bytes | None:
    """The bytes of ``path`` as account ``name`` can read them (None when it cannot): a file in a learner's home is
    read with the learner's rights, so a link to another learner's file gets nothing."""
    entry = pwd.getpwnam(name)
    proc = subprocess.run(["head", "-c", str(limit), "--", str(path)], user=entry.pw_uid, group=entry.pw_gid,
                          extra_groups=[], capture_output=True, timeout=60, check=False, cwd="/",
                          env={"PATH": "/usr/bin:/bin", "LANG": "C"})
    return proc.stdout if proc.returncode == 0 else None
