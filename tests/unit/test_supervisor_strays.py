"""``down`` also stops cluster programs that run from the state dir without a pid file, and nothing else."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import psutil

from cluster.supervisor import ProcessSpec, Supervisor


def _program(tmp_path: Path, name: str) -> str:
    exe = tmp_path / "bin" / name
    exe.parent.mkdir(exist_ok=True)
    sleep = shutil.which("sleep")
    assert sleep
    shutil.copy(sleep, exe)
    return str(exe)


def _gone(proc: subprocess.Popen[bytes], timeout: float = 5.0) -> bool:
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        return False
    return True


def test_untracked_cluster_program_in_the_state_dir_is_stopped_but_a_learners_process_is_not(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    sup = Supervisor(state)
    tracked_pid = sup.start(ProcessSpec("kube-apiserver", (_program(tmp_path, "kube-apiserver"), "60")))
    stray = subprocess.Popen([_program(tmp_path, "kube-controller-manager"), "60"], cwd=state,
                             start_new_session=True)
    combined = subprocess.Popen([_program(tmp_path, "kube-control-plane-2"), "60"], cwd=state,
                                start_new_session=True)  # the one-process control plane, left without a pid file
    not_ours = subprocess.Popen([_program(tmp_path, "kube-control-plane-tool"), "60"], cwd=state,
                                start_new_session=True)
    shell_like = subprocess.Popen(["sleep", "60"], cwd=state, start_new_session=True)  # e.g. a learner's shell
    elsewhere = subprocess.Popen([_program(tmp_path, "kube-scheduler"), "60"], cwd=tmp_path, start_new_session=True)
    try:
        time.sleep(0.2)
        assert sorted(p.pid for p in sup.strays()) == sorted([stray.pid, combined.pid])
        assert sup.stop_all(["kube-apiserver"]) == ["kube-apiserver"]
        assert _gone(stray) and _gone(combined)
        assert not psutil.pid_exists(tracked_pid) or psutil.Process(tracked_pid).status() == psutil.STATUS_ZOMBIE
        assert shell_like.poll() is None and elsewhere.poll() is None and not_ours.poll() is None
    finally:
        for p in (stray, combined, not_ours, shell_like, elsewhere):
            p.kill()
            p.wait()


def test_stop_of_a_process_that_exits_on_its_own_meanwhile_is_not_an_error(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    sup = Supervisor(state)
    sup.start(ProcessSpec("etcd", (_program(tmp_path, "etcd"), "0.3")))
    time.sleep(0.05)
    sup.stop("etcd", timeout=2.0)
    assert sup.pid("etcd") is None


def test_down_after_the_state_dir_was_removed_still_stops_the_clusters_programs(tmp_path: Path) -> None:
    """`rm -rf` of the state dir under a running cluster, then `down`: its programs are stopped, not left running
    while down says the cluster stopped."""
    from cluster.backends.local import LocalBackend

    backend = LocalBackend("gpulab", tmp_path / "root")
    backend.dir.mkdir(parents=True)
    programs = [subprocess.Popen([_program(tmp_path, name), "60"], cwd=backend.dir, start_new_session=True)
                for name in ("etcd", "kube-control-plane-2")]
    try:
        time.sleep(0.2)
        shutil.rmtree(backend.dir)
        backend.down()
        assert all(_gone(p) for p in programs)
    finally:
        for p in programs:
            p.kill()
            p.wait()
