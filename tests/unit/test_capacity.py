"""The capacity figures of `gpulab bench` (labs/bench/capacity.py): idle CPU and memory read from /proc, the
per-learner requests derived from them, and the values file's requests read as KubeSpawner reads them."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from labs.bench import capacity


def test_measure_idle_reads_cpu_and_memory_of_real_processes() -> None:
    """Our own process burns 0.5 s of CPU time inside a 1 s window, and measure_idle reads what it really used
    (counted here from the process's own CPU clock: under load the window stretches, so the share is not fixed)."""
    used: list[float] = []

    def busy(seconds: float) -> None:
        t0, c0 = time.monotonic(), time.process_time()
        while time.process_time() - c0 < seconds / 2:
            pass
        time.sleep(max(0.0, seconds - (time.monotonic() - t0)))
        used[:] = [time.process_time() - c0, time.monotonic() - t0]

    idle = capacity.measure_idle({"me": os.getpid(), "gone": 2 ** 22 + 1}, 1.0, sleep=busy)
    assert [p.name for p in idle.processes] == ["me"]  # a pid that does not exist is left out
    me = idle.processes[0]
    cpu, wall = used
    assert cpu >= 0.5 and wall >= 1.0
    # /proc counts in clock ticks (10 ms): two readings, each up to a tick off
    assert abs(me.millicores - cpu / wall * 1000) <= 0.03 / wall * 1000, (me, used)
    assert 5 < me.private_mib <= me.rss_mib < 4096, me
    assert idle.rss_mib == me.rss_mib and idle.millicores == me.millicores


def _run(*parts: tuple[str, float, float]) -> capacity.IdleCluster:
    return capacity.IdleCluster(tuple(capacity.ProcessIdle(n, rss, cpu, rss / 2) for n, rss, cpu in parts), 60.0)


def test_figures_give_the_median_run_beside_the_targets_with_each_process(tmp_path: Path) -> None:
    runs = [_run(("etcd", 40, 5), ("kube-apiserver", 200, 10)), _run(("etcd", 44, 7), ("kube-apiserver", 210, 12)),
            _run(("etcd", 42, 6), ("kube-apiserver", 260, 20))]
    values = tmp_path / "values.yaml"
    values.write_text("singleuser:\n  memory: {guarantee: 768M, limit: 1.5G}\n  cpu: {guarantee: 0.1, limit: 2}\n")
    by_name = {f.name: f for f in capacity.figures(runs, cores=2, memory_gib=16, values_file=values)}
    rss, cpu = by_name[capacity.RSS_FIGURE], by_name[capacity.CPU_FIGURE]
    assert (rss.value, rss.target, rss.met) == (254, 450.0, True)
    assert (cpu.value, cpu.target, cpu.met) == (19, 25.0, True)
    assert "240/254/302 MiB" in rss.note and "kube-apiserver 210" in rss.note and "etcd 42" in rss.note
    assert "15/19/26 m" in cpu.note and "kube-apiserver 12" in cpu.note
    assert by_name["idle learners per core of this host"].value == pytest.approx(1000 / 19, abs=0.1)
    assert by_name["idle learners per GiB of this host"].value == pytest.approx(1024 / (254 + 300), abs=0.01)
    memory = by_name["per-learner memory guarantee in course/class/values.yaml"]
    assert memory.value == 768 and "limit 1536 MiB" in memory.note and "576 MiB guarantee" in memory.note
    assert by_name["per-learner CPU guarantee in course/class/values.yaml"].value == 0.1


def test_requests_round_up_and_keep_a_floor() -> None:
    assert capacity.requests_for(400.0, 20.0) == capacity.Requests(704, 1408, 0.1, 2.0)
    assert capacity.requests_for(452.0, 130.0) == capacity.Requests(768, 1536, 0.2, 2.0)


def test_values_file_of_the_repository_is_read_and_a_missing_one_is_none(tmp_path: Path) -> None:
    used = capacity.values_requests()
    assert used is not None and used.memory_guarantee_mib > 0 and used.cpu_guarantee > 0
    assert capacity.values_requests(tmp_path / "missing.yaml") is None
    (tmp_path / "bare.yaml").write_text("singleuser: {}\n")
    assert capacity.values_requests(tmp_path / "bare.yaml") is None
