"""Control-plane figures: start to all nodes Ready (starter fleet, cached binaries), a 1,000-node fleet, teardown.

Each run uses a private state dir so a learner's own cluster is never touched.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import psutil

from cluster import fleet as fleet_mod
from cluster.backends.local import AGENTS, CONTROL_PLANE, LocalBackend
from cluster.progress import LogProgress
from labs.bench.figures import Figure


def _rss_and_cpu(be: LocalBackend, names: tuple[str, ...]) -> tuple[float, float]:
    rss = cpu = 0.0
    for name in names:
        pid = be.sup.pid(name)
        if pid:
            proc = psutil.Process(pid)
            rss += proc.memory_info().rss
            times = proc.cpu_times()
            cpu += times.user + times.system
    return rss / 2**20, cpu


def start_starter(root: Path) -> list[Figure]:
    """Cold start of the starter fleet (fresh state, binaries cached), then teardown."""
    be = LocalBackend("bench-start", root)
    t0 = time.monotonic()
    be.up(fleet_mod.load("starter"), LogProgress())
    start = time.monotonic() - t0
    cp_rss, _ = _rss_and_cpu(be, CONTROL_PLANE)
    agent_rss, _ = _rss_and_cpu(be, AGENTS + tuple(s.name for s in be.extra_agents))
    t1 = time.monotonic()
    be.down(purge=True)
    teardown = time.monotonic() - t1
    return [
        Figure("start, cached binaries, to all starter nodes Ready", round(start, 2), "s", 5.0),
        Figure("teardown (down --purge), starter fleet", round(teardown, 2), "s"),
        Figure("control-plane RSS, starter fleet", round(cp_rss, 1), "MiB"),
        Figure("agents' RSS, starter fleet", round(agent_rss, 1), "MiB"),
    ]


def thousand_nodes(root: Path, nodes: int = 1000) -> list[Figure]:
    be = LocalBackend("bench-scale", root)
    t0 = time.monotonic()
    be.up(fleet_mod.scaled(nodes), LogProgress())
    ready = time.monotonic() - t0
    time.sleep(10)  # one heartbeat period at steady state
    agent_rss, agent_cpu = _rss_and_cpu(be, AGENTS + tuple(s.name for s in be.extra_agents))
    cp_rss, _ = _rss_and_cpu(be, CONTROL_PLANE)
    t1 = time.monotonic()
    be.down(purge=True)
    teardown = time.monotonic() - t1
    return [
        Figure(f"up, {nodes}-node fleet, to all nodes Ready", round(ready, 1), "s", 60.0),
        Figure(f"agents' CPU time, {nodes} nodes (start + 10 s steady)", round(agent_cpu, 1), "s"),
        Figure(f"agents' RSS, {nodes} nodes", round(agent_rss, 1), "MiB"),
        Figure(f"control-plane RSS, {nodes} nodes", round(cp_rss, 1), "MiB"),
        Figure(f"teardown, {nodes}-node fleet", round(teardown, 2), "s"),
    ]


def run(quick: bool = False) -> list[Figure]:
    root = Path(tempfile.mkdtemp(prefix="gpulab-bench-"))
    try:
        figures = start_starter(root)
        figures += thousand_nodes(root, 200 if quick else 1000)
        return figures
    finally:
        shutil.rmtree(root, ignore_errors=True)
