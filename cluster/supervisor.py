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


_PROGRAMS = frozenset({"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"})


def _is_cluster_program(cmdline: Sequence[str]) -> bool:
    if Path(cmdline[0]).name in _PROGRAMS:
        return True
    return len(cmdline) >= 3 and cmdline[1] == "-m" and cmdline[2].startswith("cluster.sim.")


def _tracked_names(pid_dir: Path) -> list[str]:
    try:
        return [p.stem for p in pid_dir.glob("*.pid")]
    except OSError:
        return []


def _kill_group(pid: int, sig: signal.Signals) -> bool:
    """Signal a process's group (each of ours leads its own session); False if it is already gone."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return False
    return True


def _wait_gone(pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.05)


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

    def _recorded(self, name: str) -> tuple[int, str] | None:
        """The pid and program the pid file names, if it can be read."""
        try:
            pid_text, _, program = self._pidfile(name).read_text().partition("\n")
            return int(pid_text), program
        except (OSError, ValueError):
            return None

    def pid(self, name: str) -> int | None:
        """The recorded pid if that process is alive and still runs the program we started."""
        if (recorded := self._recorded(name)) is None:
            return None
        pid, program = recorded
        try:
            proc = psutil.Process(pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                return None
            cmd = proc.cmdline()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None
        return pid if cmd and program.strip() in " ".join(cmd) else None

    def how_it_ended(self, name: str) -> str:
        """How a process this supervisor started and that has exited ended ("exit code 1", "killed by SIGKILL"), as
        far as we can still tell: only a child of this very process can be asked; otherwise "".
        Collects (reaps) the exited child."""
        if (recorded := self._recorded(name)) is None:
            return ""
        pid = recorded[0]
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except OSError:  # not our child, or already collected
            return ""
        if done != pid:
            return ""
        if os.WIFSIGNALED(status):
            return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
        return f"exit code {os.WEXITSTATUS(status)}" if os.WIFEXITED(status) else ""

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
        try:
            self._pidfile(spec.name).write_text(f"{proc.pid}\n{program}\n")
        except OSError:
            # An untracked process would outlive `down`: stop it and let the caller report the disk problem.
            _kill_group(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        log.info("started %s (pid %d)", spec.name, proc.pid)
        return proc.pid

    def stop(self, name: str, timeout: float = 10.0) -> bool:
        """SIGTERM, then SIGKILL after ``timeout``; returns whether something was running."""
        pid = self.pid(name)
        self._pidfile(name).unlink(missing_ok=True)
        if pid is None:
            return False
        if not _kill_group(pid, signal.SIGTERM):
            return False
        _wait_gone(pid, timeout)
        _kill_group(pid, signal.SIGKILL)
        return True

    def stop_all(self, names: Sequence[str]) -> list[str]:
        stopped = [n for n in names if self.stop(n)]
        for proc in self.strays():
            log.warning("stopping %s (pid %d): it ran from this cluster's state dir without a pid file",
                        proc.name(), proc.pid)
            if _kill_group(proc.pid, signal.SIGTERM):
                _wait_gone(proc.pid, 5.0)
                _kill_group(proc.pid, signal.SIGKILL)
        return stopped

    def strays(self) -> list[psutil.Process]:
        """Cluster programs running from this state dir that no pid file names (a safety net for ``down``).

        Only our own programs count (the control-plane binaries and ``cluster.sim`` agents): a learner's shell
        whose working directory happens to be the state dir is never touched."""
        tracked = {pid for name in _tracked_names(self.pid_dir) if (pid := self.pid(name))}
        try:
            here = self.state_dir.resolve()
        except OSError:
            return []
        out = []
        for proc in psutil.process_iter(["pid", "cmdline"]):
            try:
                cmd = proc.info["cmdline"] or []
                if proc.pid in tracked or not cmd or not _is_cluster_program(cmd):
                    continue
                if Path(proc.cwd()) == here:
                    out.append(proc)
            except (psutil.Error, OSError):
                continue
        return out

    def log_tail(self, name: str, lines: int = 20) -> str:
        try:
            text = (self.log_dir / f"{name}.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])
