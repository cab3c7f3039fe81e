"""Control-plane figures: start to all nodes Ready (cached binaries), a large fleet, memory, teardown.

Every cluster here lives in a private state dir under ``root`` so a learner's own cluster is never touched,
and is torn down (``down --purge``) when the block ends, even on failure.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from cluster import fleet as fleet_mod, settings
from cluster.backends.local import AGENTS, CONTROL_PLANE_PROCESSES, LocalBackend
from labs.bench.figures import Figure

log = logging.getLogger(__name__)


class PhaseClock:
    """A ``Progress`` that remembers when each bring-up step started, to explain where start-up time goes."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.marks: list[tuple[str, float]] = []

    def start(self, task: str, total: float | None = None) -> None:
        self.marks.append((task, time.monotonic()))

    def advance(self, amount: float = 1.0, *, detail: str | None = None) -> None:
        if detail:
            self.marks.append((detail, time.monotonic()))

    def finish(self, message: str | None = None) -> None:
        pass

    def breakdown(self, end: float) -> str:
        """How long it took to reach each step from the one before, in order."""
        names = {"starting the control plane": "preparation (fleet, PKI, kubeconfigs)",
                 "etcd": "etcd healthy", "kube-apiserver": "API server ready",
                 "controllers and agents": "controllers started",
                 "kube-controller-manager": "controller manager started"}
        points = [("", self.t0), *self.marks, ("all nodes Ready", end)]
        parts = []
        for (_, before), (label, t) in zip(points, points[1:]):
            shown = names.get(label, "" if label.startswith("waiting for") else label)
            if shown and t - before >= 0.05:
                parts.append(f"{shown} +{t - before:.1f} s")
        return ", ".join(parts)


@dataclass
class BenchCluster:
    """A cluster brought up for measuring: the backend, its fleet and how long ``up`` took."""

    backend: LocalBackend
    fleet: fleet_mod.Fleet
    up_seconds: float
    phases: str = ""
    teardown_seconds: float | None = field(default=None)

    def agent_names(self) -> tuple[str, ...]:
        return AGENTS


def _status_kib(pid: int, key: str) -> int:
    """One ``/proc/<pid>/status`` field in KiB (VmHWM is the peak resident set since the process started)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def memory_mib(be: LocalBackend, names: tuple[str, ...]) -> tuple[float, float]:
    """(current RSS, sum of each process's peak RSS) of the named components, in MiB."""
    rss = peak = 0
    for name in names:
        pid = be.sup.pid(name)
        if pid:
            try:
                rss += psutil.Process(pid).memory_info().rss // 1024
            except psutil.Error:
                continue
            peak += _status_kib(pid, "VmHWM")
    return rss / 1024, peak / 1024


def cpu_seconds(be: LocalBackend, names: tuple[str, ...]) -> float:
    total = 0.0
    for name in names:
        pid = be.sup.pid(name)
        if pid:
            try:
                times = psutil.Process(pid).cpu_times()
            except psutil.Error:
                continue
            total += times.user + times.system
    return total


@contextmanager
def running(root: Path, fl: fleet_mod.Fleet, name: str) -> Iterator[BenchCluster]:
    """Bring up ``fl`` in ``root/name`` (timed from nothing to every node Ready) and always tear it down."""
    be = LocalBackend(name, root)
    if be.exists():
        be.down(purge=True)
    clock = PhaseClock()
    be.up(fl, clock)
    end = time.monotonic()
    bc = BenchCluster(be, fl, end - clock.t0, clock.breakdown(end))
    try:
        yield bc
    finally:
        t1 = time.monotonic()
        be.down(purge=True)
        bc.teardown_seconds = time.monotonic() - t1


def memory_figures(bc: BenchCluster, label: str) -> list[Figure]:
    """Peak RSS of the control plane and of our agents (sum of per-process peaks), plus the agents' CPU time."""
    _, cp_peak = memory_mib(bc.backend, CONTROL_PLANE_PROCESSES)
    _, agent_peak = memory_mib(bc.backend, bc.agent_names())
    note = "sum of each process's peak resident set (VmHWM) since it started"
    return [
        Figure(f"peak RSS of the control plane, {label}", round(cp_peak, 1), "MiB", note=note),
        Figure(f"peak RSS of our agents, {label}", round(agent_peak, 1), "MiB", note=note),
        Figure(f"agents' CPU time so far, {label}", round(cpu_seconds(bc.backend, bc.agent_names()), 1), "s"),
    ]


def start_seconds(root: Path, fl: fleet_mod.Fleet, name: str) -> float:
    """One more cold start of ``fl`` (fresh state dir, cached binaries and seed), torn down at once."""
    with running(root, fl, name) as bc:
        return bc.up_seconds


def first_start_seconds(root: Path, fl: fleet_mod.Fleet) -> float:
    """A cold start as on a machine that has the binaries but no etcd seed yet (a private, empty seed dir)."""
    try:
        with settings.overridden(seed_dir=root / "first-start-seeds"):
            return start_seconds(root, fl, "bench-first-start")
    finally:
        shutil.rmtree(root / "first-start-seeds", ignore_errors=True)


def cli_start_seconds(root: Path, fleet_name: str) -> float:
    """Wall clock of ``gpulab up --fleet NAME`` run as a learner runs it (a new Python process, CLI start-up
    included), in a private state dir; the cluster is removed afterwards."""
    env = dataclasses.replace(settings.current(), state_dir=root / "cli-start").environ()
    cmd = [sys.executable, "-m", "labs.cli.main"]
    try:
        started = time.monotonic()
        subprocess.run([*cmd, "up", "--fleet", fleet_name], env=env, check=True, capture_output=True)
        return time.monotonic() - started
    finally:
        subprocess.run([*cmd, "down", "--purge"], env=env, check=False, capture_output=True)


def start_figure(bc: BenchCluster, others: list[float] | None = None) -> Figure:
    """The start figure: the median of this start and ``others`` (earlier starts of the same fleet)."""
    samples = sorted([bc.up_seconds, *(others or [])])
    spread = "" if len(samples) == 1 else \
        f"median of {len(samples)} starts ({', '.join(f'{s:.2f}' for s in samples)} s); "
    return Figure("start, cached binaries, to all starter-fleet nodes Ready", round(statistics.median(samples), 2),
                  "s", 5.0, note=f"{spread}{bc.fleet.node_count} nodes, fresh state dir, binaries and etcd seed "
                                 f"from the user cache; last start: {bc.phases}")


def teardown_figure(bc: BenchCluster, label: str) -> Figure:
    value = None if bc.teardown_seconds is None else round(bc.teardown_seconds, 2)
    return Figure(f"teardown (down --purge), {label}", value, "s")
