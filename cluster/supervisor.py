"""Start, find and stop the lab cluster's background processes.

Each process runs in its own session (it outlives the command or notebook kernel that started it), logs to
``<state>/logs/<name>.log`` and records its pid in ``<state>/pids/<name>.pid``. A pid is only trusted while
``/proc/<pid>/cmdline`` still names the same program, so a recycled pid is never mistaken for ours.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from cluster import errors

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProcessSpec:
    name: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ProcessState:
    name: str
    pid: int | None
    running: bool


def free_port(preferred: int | None = None) -> int:
    """A free TCP port on 127.0.0.1; ``preferred`` if it is still free (ports are kept across restarts)."""
    if preferred and port_free(preferred):
        return preferred
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class Supervisor:
    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.pid_dir = state_dir / "pids"
        self.log_dir = state_dir / "logs"

    def _pidfile(self, name: str) -> Path:
        return self.pid_dir / f"{name}.pid"

    def pid(self, name: str) -> int | None:
        """The recorded pid if that process is alive and still runs the program we started."""
        try:
            pid_text, _, program = self._pidfile(name).read_text().partition("\n")
            pid = int(pid_text)
        except (OSError, ValueError):
            return None
        try:
            proc = psutil.Process(pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                return None
            cmd = proc.cmdline()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None
        return pid if cmd and program.strip() in " ".join(cmd) else None

    def state(self, name: str) -> ProcessState:
        pid = self.pid(name)
        return ProcessState(name, pid, pid is not None)

    def start(self, spec: ProcessSpec) -> int:
        """Start a process detached from us; return its pid. An already running one is left alone."""
        running = self.pid(spec.name)
        if running:
            return running
        self.pid_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.update(dict(spec.env))
        logf = (self.log_dir / f"{spec.name}.log").open("ab")
        try:
            proc = subprocess.Popen(
                list(spec.argv), stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env, start_new_session=True, close_fds=True, cwd=self.state_dir,
            )
        except OSError as exc:
            raise errors.ClusterError(f"cannot start {spec.name} ({spec.argv[0]}): {exc}") from exc
        finally:
            logf.close()
        program = " ".join(spec.argv[:2]) if Path(spec.argv[0]).name.startswith("python") else spec.argv[0]
        self._pidfile(spec.name).write_text(f"{proc.pid}\n{program}\n")
        log.info("started %s (pid %d)", spec.name, proc.pid)
        return proc.pid

    def stop(self, name: str, timeout: float = 10.0) -> bool:
        """SIGTERM, then SIGKILL after ``timeout``; returns whether something was running."""
        pid = self.pid(name)
        self._pidfile(name).unlink(missing_ok=True)
        if pid is None:
            return False
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            return False
        except PermissionError:
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
            time.sleep(0.05)
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return True

    def stop_all(self, names: Sequence[str]) -> list[str]:
        return [n for n in names if self.stop(n)]

    def log_tail(self, name: str, lines: int = 20) -> str:
        try:
            text = (self.log_dir / f"{name}.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])
