"""Capacity figures: what one idle lab cluster costs its host, and so how many learners a host or a pod can hold.

A lab cluster is measured once it is up and idle (every node Ready, nothing applied): each process's resident
set (RSS, ``/proc/<pid>/status`` VmRSS) at the end of a window, and its CPU over that window from the
``utime + stime`` of ``/proc/<pid>/stat`` (fields 14 and 15, clock ticks), in millicores (1000 = one core busy).
From those come learners per core and per GiB of this host, and the per-learner requests and limits that
``course/class/z2jh-values.yaml`` uses (a lab cluster plus the learner's Jupyter server and kernel).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil
import yaml

from cluster import fleet as fleet_mod
from cluster.backends.local import AGENTS, CONTROL_PLANE_PROCESSES
from labs.bench import cluster_bench
from labs.bench.figures import Figure

RSS_FIGURE = "idle lab cluster RSS per learner, starter fleet"
CPU_FIGURE = "idle lab cluster CPU per learner, starter fleet"
IDLE_RSS_TARGET_MIB = 450.0
IDLE_CPU_TARGET_MILLICORES = 25.0
VALUES_FILE = Path(__file__).resolve().parents[2] / "course" / "class" / "z2jh-values.yaml"
# KubeSpawner's byte specifications (jupyterhub/traitlets.py, ByteSpecification): K, M, G and T are powers of 1024.
_BYTE_SUFFIXES = {"K": 1, "M": 1024, "G": 1024 ** 2, "T": 1024 ** 3}  # in KiB
# An allowance for what a learner's Jupyter server and one kernel add to the lab cluster, in MiB. Not measured by
# the bench; measured once by hand on the 2-core development machine (2026-11-26, this project's venv): `jupyter
# lab` idle 130 MiB RSS, a fresh python3 kernel 52 MiB, and ~60 MiB more once a notebook's first cells have
# imported quizzes, labs.figures and labs.shell: ~245 MiB, so 300 leaves a little room.
JUPYTER_RSS_MIB = 300.0


@dataclass(frozen=True)
class ProcessIdle:
    """One process of an idle cluster: its RSS at the end of the window and its mean CPU over it."""

    name: str
    rss_mib: float
    millicores: float
    private_mib: float = 0.0  # RssAnon: the part that is not code or data mapped from files (shared between learners)


@dataclass(frozen=True)
class IdleCluster:
    """The processes of one idle lab cluster, measured over ``window`` seconds."""

    processes: tuple[ProcessIdle, ...]
    window: float

    @property
    def rss_mib(self) -> float:
        return sum(p.rss_mib for p in self.processes)

    @property
    def millicores(self) -> float:
        return sum(p.millicores for p in self.processes)

    @property
    def private_mib(self) -> float:
        return sum(p.private_mib for p in self.processes)


def _cpu_ticks(pid: int) -> int | None:
    """utime + stime of a process, in clock ticks (fields 14 and 15 of /proc/<pid>/stat)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            line = f.read()
        fields = line[line.rindex(b")") + 2:].split()  # field 3 onwards; the command name may hold spaces
        return int(fields[11]) + int(fields[12])
    except (OSError, ValueError, IndexError):
        return None


def _memory_mib(pid: int) -> tuple[float, float] | None:
    """(VmRSS, RssAnon) of a process in MiB, from /proc/<pid>/status."""
    try:
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                      if ":" in line)
        return int(fields["VmRSS"].split()[0]) / 1024, int(fields["RssAnon"].split()[0]) / 1024
    except (OSError, KeyError, ValueError, IndexError):
        return None


def measure_idle(pids: dict[str, int], window: float = 60.0,
                 sleep: Callable[[float], None] = time.sleep) -> IdleCluster:
    """CPU of each named process over ``window`` seconds and its RSS at the end; a process that exits during the
    window is left out."""
    tick = os.sysconf("SC_CLK_TCK")
    before = {name: _cpu_ticks(pid) for name, pid in pids.items()}
    t0 = time.monotonic()
    sleep(window)
    elapsed = time.monotonic() - t0
    out = []
    for name, pid in pids.items():
        start, end, memory = before[name], _cpu_ticks(pid), _memory_mib(pid)
        if start is None or end is None or memory is None:
            continue
        out.append(ProcessIdle(name, round(memory[0], 1), round((end - start) / tick / elapsed * 1000, 1),
                               round(memory[1], 1)))
    return IdleCluster(tuple(out), elapsed)


@dataclass(frozen=True)
class Spread:
    low: float
    median: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        return cls(min(values), statistics.median(values), max(values))

    def text(self, unit: str) -> str:
        return f"{self.low:g}/{self.median:g}/{self.high:g} {unit}"


def per_component(runs: Sequence[IdleCluster]) -> dict[str, tuple[Spread, Spread]]:
    """(RSS, millicores) min/median/max of each process over the runs, in the order the first run lists them."""
    names = [p.name for p in runs[0].processes]
    out = {}
    for name in names:
        mine = [p for r in runs for p in r.processes if p.name == name]
        out[name] = (Spread.of([p.rss_mib for p in mine]), Spread.of([p.millicores for p in mine]))
    return out


@dataclass(frozen=True)
class Requests:
    """Per-learner pod resources derived from an idle cluster's figures (the z2jh values file uses these)."""

    memory_guarantee_mib: int
    memory_limit_mib: int
    cpu_guarantee: float
    cpu_limit: float


def requests_for(rss_mib: float, millicores: float) -> Requests:
    """The guarantee is the idle cluster plus the Jupyter server and a kernel, rounded up to 64 MiB; the limit
    doubles it (a lab's workload, a second kernel, a grading run). CPU: the guarantee is the idle figure plus the
    server's own 50 millicores, rounded up to 50 m and at least 100 m; bursts (start-up, a lab run) may take two
    cores."""
    guarantee = int(-(-(rss_mib + JUPYTER_RSS_MIB) // 64) * 64)
    cpu = max(100, int(-(-(millicores + 50) // 50) * 50))
    return Requests(guarantee, 2 * guarantee, cpu / 1000, 2.0)


def values_requests(path: Path = VALUES_FILE) -> Requests | None:
    """The per-learner requests and limits that the Zero to JupyterHub values file sets (singleuser.memory and
    singleuser.cpu), or None when the file is not there or does not set them."""
    try:
        single = (yaml.safe_load(path.read_text()) or {}).get("singleuser") or {}
        mem, cpu = single["memory"], single["cpu"]
        return Requests(_mib(mem["guarantee"]), _mib(mem["limit"]), float(cpu["guarantee"]), float(cpu["limit"]))
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError, AttributeError):
        return None


def _mib(spec: object) -> int:
    text = str(spec).strip()
    if text[-1:] in _BYTE_SUFFIXES:
        return int(float(text[:-1]) * _BYTE_SUFFIXES[text[-1]] / 1024)
    return int(float(text) / (1024 * 1024))


def host_memory_gib() -> float:
    return float(psutil.virtual_memory().total) / (1024 ** 3)


def figures(runs: Sequence[IdleCluster], cores: int | None = None, memory_gib: float | None = None,
            values_file: Path = VALUES_FILE) -> list[Figure]:
    """The capacity figures of several idle measurements of the same fleet: median totals beside their targets,
    the per-component breakdown in the notes, learners per core and per GiB, and the per-learner requests."""
    cores = cores or os.cpu_count() or 1
    memory_gib = memory_gib or host_memory_gib()
    rss = Spread.of([r.rss_mib for r in runs])
    private = Spread.of([r.private_mib for r in runs])
    cpu = Spread.of([r.millicores for r in runs])
    parts = per_component(runs)
    window = statistics.median([r.window for r in runs])
    how = f"min/median/max of {len(runs)} idle clusters, {window:.0f} s window each"
    rss_parts = ", ".join(f"{n} {s.median:g}" for n, (s, _) in parts.items())
    cpu_parts = ", ".join(f"{n} {c.median:g}" for n, (_, c) in parts.items())
    req = requests_for(rss.median, cpu.median)
    used = values_requests(values_file)
    where = f"course/class/{values_file.name}"
    return [
        Figure(RSS_FIGURE, round(rss.median, 1), "MiB", IDLE_RSS_TARGET_MIB,
               note=f"{how}: {rss.text('MiB')}; per process (median MiB): {rss_parts}; of which private (RssAnon, "
                    f"not shared with other learners' clusters through the page cache): {private.text('MiB')}; "
                    "the rest is code mapped from the binaries (RssFile), larger when the page cache holds more of "
                    "them (docs/local-backend.md)"),
        Figure(CPU_FIGURE, round(cpu.median, 1), "millicores",
               IDLE_CPU_TARGET_MILLICORES,
               note=f"{how}: {cpu.text('m')}; per process (median m): {cpu_parts}"),
        Figure("idle learners per core of this host", round(1000 / max(cpu.median, 0.1), 1), "learners",
               note=f"{cores} cores here: {cores * 1000 / max(cpu.median, 0.1):.0f} idle lab clusters by CPU alone"),
        Figure("idle learners per GiB of this host", round(1024 / (rss.median + JUPYTER_RSS_MIB), 2), "learners",
               note=f"lab cluster RSS plus ~{JUPYTER_RSS_MIB:.0f} MiB for the Jupyter server and a kernel; "
                    f"{memory_gib:.1f} GiB here: {memory_gib * 1024 / (rss.median + JUPYTER_RSS_MIB):.0f} learners "
                    f"(counting only the clusters' private memory, {private.median:g} MiB each: "
                    f"{memory_gib * 1024 / (private.median + JUPYTER_RSS_MIB):.0f})"),
        Figure(f"per-learner memory guarantee in {where}", None if used is None else used.memory_guarantee_mib, "MiB",
               note=_requests_note(used, req, "memory") if used else f"{values_file} not found or sets no "
                                                                       "singleuser.memory"),
        Figure(f"per-learner CPU guarantee in {where}", None if used is None else used.cpu_guarantee, "cores",
               note=_requests_note(used, req, "cpu") if used else f"{values_file} not found or sets no "
                                                                    "singleuser.cpu"),
    ]


def _requests_note(used: Requests, derived: Requests, what: str) -> str:
    rule = "labs/bench/capacity.py, requests_for"
    if what == "memory":
        return (f"limit {used.memory_limit_mib} MiB; from this run's idle RSS plus {JUPYTER_RSS_MIB:.0f} MiB for "
                f"Jupyter: {derived.memory_guarantee_mib} MiB guarantee, {derived.memory_limit_mib} MiB limit ({rule})")
    return (f"limit {used.cpu_limit:g} cores; from this run's idle CPU: {derived.cpu_guarantee:g} cores guarantee, "
            f"{derived.cpu_limit:g} limit ({rule})")


def section(root: Path, repeat: int, settle: float, window: float) -> list[Figure]:
    """Bring the starter fleet up ``repeat`` times (one cluster at a time, each torn down afterwards), let each
    settle, and measure it idle over ``window`` seconds."""
    fl = fleet_mod.load("starter")
    runs = []
    for i in range(repeat):
        with cluster_bench.running(root, fl, f"bench-idle-{i}") as bc:
            pids = {name: pid for name in (*CONTROL_PLANE_PROCESSES, *AGENTS) if (pid := bc.backend.sup.pid(name))}
            time.sleep(settle)
            runs.append(measure_idle(pids, window))
    return figures(runs)
