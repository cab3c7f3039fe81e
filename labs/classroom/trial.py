"""A temporary class on this host: a class folder, accounts made for it (removed after) and its hub served on a
free loopback port. ``gpulab bench`` measures login to lab-ready with it; the class-mode tests drive it.
Needs root, like the rest of class mode."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


from cluster import errors
from cluster.kube import http
from labs.classroom import accounts, layout, runtime

GPULAB = Path(sys.executable).parent / "gpulab"


def free_port_block() -> int:
    """A port p with p to p+3 free (the proxy, the hub, the proxy's API, the class report)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port > 65000:
            continue
        try:
            for extra in (1, 2, 3):
                with socket.socket() as t:
                    t.bind(("127.0.0.1", port + extra))
            return port
        except OSError:
            continue
    raise errors.CourseError("no block of three free loopback ports for the hub")


@dataclass
class TrialClass:
    folder: Path
    url: str
    instructor: str
    learners: tuple[str, ...]
    password: str
    log: Path

    def gpulab(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(GPULAB), *args, "--dir", str(self.folder)], capture_output=True, text=True,
                              timeout=timeout, check=False)

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def processes_of(self, name: str) -> list[str]:
        """The live processes of account ``name`` (zombies, already dead and waiting to be reaped, left out)."""
        out = subprocess.run(["ps", "-o", "stat=,args=", "-u", name], capture_output=True, text=True,
                             check=False).stdout
        return [line.split(None, 1)[1] for line in out.splitlines()
                if line.strip() and not line.lstrip().startswith("Z") and len(line.split(None, 1)) == 2]

    def cluster_processes_of(self, name: str) -> list[str]:
        return [p for p in self.processes_of(name) if "etcd" in p or "kube-" in p or "cluster.sim" in p]


def _remove_account(name: str, folder: Path) -> None:
    if not accounts.exists(name):
        return
    accounts.run_as(name, [str(runtime.bin_dir(folder) / "gpulab"), "down"], check=False, timeout=120,
                    env={"GPULAB_CACHE_DIR": str(folder / "cache")})
    pids = subprocess.run(["ps", "-o", "pid=", "-u", name], capture_output=True, text=True, check=False).stdout
    for pid in pids.split():  # the last processes of an account made for this class
        try:
            os.kill(int(pid), signal.SIGKILL)
        except OSError:
            pass
    time.sleep(0.5)
    subprocess.run(["userdel", "--remove", name], capture_output=True, check=False)


def _wait_for_hub(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if http.get_status(f"{url}/hub/login") == 200:
                return
        except http.HttpError:
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.3)
    raise errors.CourseError("the class's hub did not answer within 60 s:\n" + log.read_text(errors="replace")[-3000:])


def _reachable_tmp() -> str:
    """The temp folder if every account can pass through it (``$TMPDIR`` may be a private one), else /tmp."""
    here = Path(tempfile.gettempdir()).resolve()
    if all(os.stat(p).st_mode & 0o001 for p in (here, *here.parents)):
        return str(here)
    return "/tmp"


@contextmanager
def temporary_class(root: Path, prefix: str, learners: int, *, cull_after: int = 3600,
                    cull_every: int = 300, cluster_start: str = layout.DEFAULT_CLUSTER_START) -> Iterator[TrialClass]:
    """A class with an instructor and ``learners`` learners, served until the block ends (the hub's log in
    ``root``); the accounts and the class folder are removed after."""
    accounts.require_root("a temporary class")
    # Not under ``root``, which may be private (pytest's and mkdtemp's folders are 0700): every account of the
    # class must reach the class folder (runtime, binaries, exchange).
    base = Path(tempfile.mkdtemp(prefix=f"gpulab-class-{prefix}-", dir=_reachable_tmp()))
    base.chmod(0o755)
    folder = base / "class"
    password = secrets.token_urlsafe(12)
    instructor = f"{prefix}-teach"
    names = tuple(f"{prefix}-l{i}" for i in range(1, learners + 1))
    port = free_port_block()
    env = {**os.environ, "GPULAB_CLASS_PASSWORD": password}
    root.mkdir(parents=True, exist_ok=True)
    log = root / "hub.log"
    proc: subprocess.Popen[bytes] | None = None
    try:
        for argv in (["init", "--instructor", instructor, "--port", str(port), "--cull-after", str(cull_after),
                      "--cull-every", str(cull_every), "--cluster-start", cluster_start],
                     ["add-learner", *names]):
            done = subprocess.run([str(GPULAB), "class", *argv, "--dir", str(folder)], env=env, capture_output=True,
                                  text=True, timeout=600, check=False)
            if done.returncode != 0:
                raise errors.CommandFailed(["gpulab", "class", *argv], done.returncode, done.stdout + done.stderr)
        with open(log, "wb") as out:
            proc = subprocess.Popen([str(GPULAB), "class", "up", "--dir", str(folder)], stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        _wait_for_hub(url, proc, log)
        yield TrialClass(folder, url, instructor, names, password, log)
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # the hub stops every server, and so every learner's cluster
            try:
                proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for name in (*names, instructor):
            _remove_account(name, folder)
        shutil.rmtree(base, ignore_errors=True)
