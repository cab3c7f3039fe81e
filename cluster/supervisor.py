"""Start, find and stop the lab cluster's background processes.

Each process runs in its own session (it outlives the command or notebook kernel that started it), logs to
``<state>/logs/<name>.log`` and records its identity in ``<state>/pids/<name>.pid``: the pid, the process's start
time (``/proc/<pid>/stat`` field 22, clock ticks since boot) and its whole command line. A pid is trusted only while
all three still match, so a recycled pid, even one running the same program, is never taken for ours: ``status``
does not report it running and ``down`` never signals it.
"""

from __future__ import annotations

import json
import logging
import os
import re
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


@dataclass(frozen=True)
class Identity:
    """What a pid file records: the pid, the process's start time (None in pid files of older gpulab) and argv."""

    pid: int
    start: str | None
    argv: tuple[str, ...]


def start_time(pid: int) -> str | None:
    """A process's start time, exact and stable while it lives: on Linux field 22 of ``/proc/<pid>/stat`` (clock
    ticks after boot; psutil's ``create_time`` adds the boot time, which the kernel recomputes and which can move by
    a second); elsewhere psutil's ``create_time``. None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat_line = f.read()
        # The command name (field 2) is in parentheses and may itself hold spaces or ')': split after the last ')'.
        return "ticks:" + stat_line[stat_line.rindex(b")") + 2:].split()[19].decode()
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return None
    except (OSError, ValueError, IndexError):
        return None
    try:
        return f"epoch:{psutil.Process(pid).create_time():.2f}"
    except psutil.Error:
        return None


_PROGRAMS = frozenset({"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"})
# The one-process control plane, by its built name (``kube-control-plane-<revision>``, cluster.gobuild).
_COMBINED = re.compile(r"kube-control-plane(-[0-9]+)?")


def _is_cluster_program(cmdline: Sequence[str]) -> bool:
    if Path(cmdline[0]).name in _PROGRAMS or _COMBINED.fullmatch(Path(cmdline[0]).name):
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


def _wait_exec_done(proc: subprocess.Popen[bytes], timeout: float = 1.0) -> None:
    """Popen returns when the child closes its close-on-exec pipe, a moment before the kernel has set up the new
    program's arguments: until then /proc/<pid>/cmdline reads empty, and the process would not match its record."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not _exited(proc.pid):  # (not proc.poll(): how_it_ended reaps it)
        try:
            with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
                if f.read(1):
                    return
        except FileNotFoundError:
            if not Path("/proc/self/cmdline").exists():
                return  # no procfs: psutil reads the command line another way
        except OSError:
            return
        time.sleep(0.001)


def _exited(pid: int) -> bool:
    """No process has this pid, or only an exited one that its parent has not collected yet (a zombie)."""
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False


def _wait_gone(pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.05)


def free_port(preferred: int | None = None, host: str = "127.0.0.1") -> int:
    """A free TCP port on ``host`` (a loopback address); ``preferred`` if it is still free (ports are kept across
    restarts)."""
    if preferred and port_free(preferred, host):
        return preferred
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
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

    def _recorded(self, name: str) -> Identity | None:
        """The identity the pid file records, if it can be read."""
        try:
            text = self._pidfile(name).read_text()
        except OSError:
            return None
        try:
            data = json.loads(text)
            if isinstance(data, dict):
                argv = data["argv"]
                if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
                    return None
                return Identity(int(data["pid"]), str(data["start"]), tuple(argv))
        except (ValueError, KeyError, TypeError):
            pass
        try:  # the older format, "<pid>\n<program>\n", written before start times were recorded
            pid_text, _, program = text.partition("\n")
            return Identity(int(pid_text), None, (program.strip(),))
        except ValueError:
            return None

    def pid(self, name: str) -> int | None:
        """The recorded pid if that process is alive and is still the very process we started."""
        recorded = self._recorded(name)
        return recorded.pid if recorded is not None and self._alive(recorded) else None

    def _alive(self, recorded: Identity) -> bool:
        """Whether the process ``recorded`` names is alive and still the very process we started."""
        try:
            proc = psutil.Process(recorded.pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                return False
            cmd = tuple(proc.cmdline())
            if recorded.start is None:  # older pid file: the program and our state dir as working directory
                ok = bool(cmd) and recorded.argv[0] in " ".join(cmd) and Path(proc.cwd()) == self.state_dir.resolve()
            else:
                ok = cmd == recorded.argv and start_time(recorded.pid) == recorded.start
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            return False
        return ok

    def how_it_ended(self, name: str) -> str:
        """How a process this supervisor started and that has exited ended ("exit code 1", "killed by SIGKILL"), as
        far as we can still tell: only a child of this very process can be asked; otherwise "".
        Collects (reaps) the exited child."""
        if (recorded := self._recorded(name)) is None:
            return ""
        pid = recorded.pid
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
        _wait_exec_done(proc)
        try:
            # Our unreaped child keeps its /proc entry even when it has already exited.
            record = {"pid": proc.pid, "start": start_time(proc.pid) or "unknown", "argv": list(spec.argv)}
            tmp = self._pidfile(spec.name).with_suffix(".tmp")
            tmp.write_text(json.dumps(record) + "\n")
            tmp.replace(self._pidfile(spec.name))
        except OSError:
            # An untracked process would outlive `down`: stop it and let the caller report the disk problem.
            _kill_group(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        log.info("started %s (pid %d)", spec.name, proc.pid)
        return proc.pid

    def stop(self, name: str, timeout: float = 10.0) -> bool:
        """SIGTERM, then SIGKILL after ``timeout``; returns whether something was running.

        Only the very process we started (pid, start time and command line) and its process group are signalled."""
        recorded = self._recorded(name)
        self._pidfile(name).unlink(missing_ok=True)
        if recorded is None or not self._alive(recorded):
            return False
        pid = recorded.pid
        if not _kill_group(pid, signal.SIGTERM):
            return False
        _wait_gone(pid, timeout)
        # What is left of its group (children), or the process itself if it ignored SIGTERM. While a process group
        # has members the kernel gives no new process its id, so a group without our process is our leftovers; a
        # live process of that pid that is not ours means the pid was reused: leave it alone.
        if self._alive(recorded) or _exited(pid):
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
