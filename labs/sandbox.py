"""Run a learner's notebook where it cannot touch grading: another process, limits, and no write access.

Autograding executes the learner's notebook only to show its outputs in the feedback; the grade is computed
by the grader's process (``labs.nbgrader_autograde``). The notebook runs in a child process (and its kernel in
a grandchild) that:

* works in a private temporary copy of the submission, with ``HOME``, ``TMPDIR`` and Jupyter's folders there;
* has ``RLIMIT_AS`` (memory), ``RLIMIT_CPU`` and ``RLIMIT_FSIZE`` set, and a wall-clock timeout;
* is confined by Landlock (Linux >= 5.13, unprivileged, inherited by every child and never undone): it may
  read files but write only beneath its own folder and ``/dev``. The gradebook, the course folder and the
  grader's state are read-only to it whatever their permissions say.

Without Landlock the run is refused (``SandboxUnavailable``) rather than run unconfined. This module must not
import nbclient at the top: only the child needs it.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster import errors

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_PR_SET_NO_NEW_PRIVS = 38
_RULE_PATH_BENEATH = 1
_CREATE_RULESET_VERSION = 1
# Write-like filesystem rights (Landlock ABI 1..3); reading and executing stay unhandled, i.e. allowed.
_WRITE_RIGHTS = {1: sum(1 << b for b in (1, 4, 5, 6, 7, 8, 9, 10, 11, 12)), 2: 1 << 13, 3: 1 << 14}


class SandboxUnavailable(errors.CourseError):
    """The kernel cannot confine the notebook (no Landlock); autograding refuses to run it unconfined."""


@dataclass(frozen=True)
class Limits:
    wall_s: float = 300.0
    cpu_s: int = 240
    memory_mb: int = 2048
    file_mb: int = 64
    cell_timeout_s: int = 60


@dataclass(frozen=True)
class Run:
    notebook: dict[str, Any] | None  # the executed notebook, or None when the run produced none
    returncode: int
    log: str
    timed_out: bool


def landlock_abi() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    abi = libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return int(abi) if abi > 0 else 0


def confine(writable: list[Path]) -> None:
    """Landlock this process: writes only beneath ``writable``. Raises OSError when the kernel refuses."""
    abi = landlock_abi()
    if abi < 1:
        raise OSError("Landlock is not available")
    rights = sum(v for k, v in _WRITE_RIGHTS.items() if k <= abi)
    libc = ctypes.CDLL(None, use_errno=True)
    attr = ctypes.c_uint64(rights)
    fd = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(8), ctypes.c_uint32(0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    try:
        for path in writable:
            dir_fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = PathBeneath(rights, dir_fd)
                if libc.syscall(_SYS_ADD_RULE, fd, _RULE_PATH_BENEATH, ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
            finally:
                os.close(dir_fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(_SYS_RESTRICT_SELF, fd, ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(fd)


def _preexec(limits: Limits, writable: list[Path]) -> Callable[[], None]:
    def setup() -> None:
        os.setsid()
        mem = limits.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s))
        size = limits.file_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
        confine(writable)
    return setup


def run_notebook(submission: Path, notebook_name: str, limits: Limits = Limits()) -> Run:
    """Execute ``submission/notebook_name`` in a confined child, in a temporary copy; the executed notebook."""
    if landlock_abi() < 1:
        raise SandboxUnavailable("this kernel has no Landlock, so a learner's notebook could write to the "
                                 "gradebook; autograding will not run it unconfined",
                                 hint="grade on Linux 5.13 or newer with Landlock enabled (lsm=landlock)")
    work = Path(tempfile.mkdtemp(prefix="gpulab-sandbox-"))
    try:
        copy = work / "submission"
        shutil.copytree(submission, copy, symlinks=False, ignore=shutil.ignore_patterns(".*"))
        out = work / "executed.ipynb"
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(work), "TMPDIR": str(work),
               "JUPYTER_RUNTIME_DIR": str(work / "runtime"), "JUPYTER_DATA_DIR": str(work / "data"),
               "IPYTHONDIR": str(work / "ipython"), "MPLCONFIGDIR": str(work / "mpl"), "PYTHONDONTWRITEBYTECODE": "1",
               "GPULAB_STATE_DIR": str(work / "state"), "LANG": "C.UTF-8"}
        cmd = [sys.executable, "-m", "labs.sandbox", str(copy / notebook_name), str(out), str(limits.cell_timeout_s)]
        try:
            proc = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=limits.wall_s,
                                  preexec_fn=_preexec(limits, [work, Path("/dev")]))  # noqa: PLW1509 (no threads here)
        except subprocess.TimeoutExpired as exc:
            return Run(None, -9, _text(exc.stdout) + _text(exc.stderr), True)
        executed = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else None
        return Run(executed, proc.returncode, (proc.stdout + proc.stderr)[-4000:], False)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _text(data: str | bytes | None) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else data


def _execute(path: Path, out: Path, cell_timeout: int) -> int:
    """In the confined child: run every cell (errors are outputs, as nbgrader shows them) and save."""
    import nbformat
    from nbclient import NotebookClient

    nbf: Any = nbformat
    nb = nbf.read(str(path), as_version=4)
    client = NotebookClient(nb, timeout=cell_timeout, allow_errors=True, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    try:
        client.execute()
    finally:
        nbf.write(nb, str(out))
    return 0


if __name__ == "__main__":
    sys.exit(_execute(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])))
