"""Killing any component in the middle of a lab loses nothing, and `gpulab up` brings the cluster back.

The lab in progress is the real lab 04a (time-slicing), started and worked through the public runtime: the
plugin ConfigMap, the ClusterPolicy pointing at it, t4-0 relabelled, three inference workers sharing its GPU,
a fourth and a fifth that cannot fit. Each test SIGKILLs one control-plane component or agent, checks that
`gpulab status` names it, runs `gpulab up`, then checks that the lab's progress (every check that passed
before) still passes, that the workers kept their node and their GPU, and that new GPU work still runs.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import labs
from cluster.backends.local import AGENTS, COMBINED, HOSTED
from cluster.kube.client import Client
from cluster.testing import LocalCluster, wait_for
from gpu_e2e import create_pod, delete, ext, gpu_operator, gpu_pod, visible_devices, wait_phase

__all__ = ["gpu_operator"]

LAB = "04a-time-slicing"
NS = "lab-04a"
WORKERS = ("inference-worker-1", "inference-worker-2", "inference-worker-3", "inference-worker-4")
NEW_WORK_NODE = "a100-0"  # the policy's default config makes its GPUs shared too


@dataclass(frozen=True)
class InProgress:
    lab: labs.Lab
    passed: frozenset[str]
    placed: dict[str, tuple[str, str]]  # worker -> (node, visible devices)


def _worker_pod(c: Client, worker: str) -> dict[str, Any]:
    """The Running pod of a worker: a bare pod of that name, or the pod of the Deployment labelled app=<worker>."""
    def running() -> dict[str, Any] | None:
        pods = c.get(f"/api/v1/namespaces/{NS}/pods", labelSelector=f"app={worker}")["items"]
        if c.exists(f"/api/v1/namespaces/{NS}/pods/{worker}"):
            pods.append(c.get(f"/api/v1/namespaces/{NS}/pods/{worker}"))
        live = [p for p in pods if p.get("status", {}).get("phase") == "Running"
                and not p["metadata"].get("deletionTimestamp")]
        return live[0] if len(live) == 1 else None

    found: dict[str, Any] = wait_for(running, timeout=60, what=f"{NS}/{worker} Running")
    return found


def _placements(c: Client) -> dict[str, tuple[str, str]]:
    return {w: (p["spec"]["nodeName"], visible_devices(p)) for w in WORKERS for p in [_worker_pod(c, w)]}


@pytest.fixture(scope="module")
def lab_in_progress(local_cluster: LocalCluster, gpu_operator: Client,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProgress]:
    lab = labs.start(LAB, workdir=tmp_path_factory.mktemp("lab-04a"), kubeconfig=local_cluster.kubeconfig,
                     fresh=True)
    lab.solve()
    report = lab.check(wait=60)
    passed = frozenset(c.id for c in report.checks if c.passed)
    assert report.passed, [(c.id, c.message) for c in report.checks if not c.passed]  # solve -> full marks
    try:
        yield InProgress(lab, passed, _placements(gpu_operator))
    finally:
        lab.reset()


def _kill(local_cluster: LocalCluster, process: str) -> None:
    sup = local_cluster.backend.sup
    pid = sup.pid(process)
    assert pid, f"{process} is not running before the test"
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: sup.pid(process) is None, timeout=10, what=f"{process} gone")


# Each process of a local cluster: the API server, controller manager and scheduler are one (kube-control-plane).
@pytest.mark.parametrize("process", [*AGENTS, "etcd", COMBINED])
def test_killed_component_mid_lab_loses_nothing_and_up_recovers(local_cluster: LocalCluster,
                                                                lab_in_progress: InProgress, process: str) -> None:
    _kill(local_cluster, process)
    status = local_cluster.gpulab("status", "--json", check=False)
    assert status.returncode == 2
    problems = json.loads(status.stdout)["problems"]
    for component in HOSTED if process == COMBINED else (process,):
        assert f"{component} is not running" in problems

    local_cluster.gpulab("up")
    assert json.loads(local_cluster.gpulab("status", "--json").stdout)["healthy"] is True
    report = lab_in_progress.lab.check(wait=60)
    now = frozenset(c.id for c in report.checks if c.passed)
    assert now == lab_in_progress.passed, f"lab progress changed: lost {sorted(lab_in_progress.passed - now)}, " \
                                          f"gained {sorted(now - lab_in_progress.passed)}"
    with local_cluster.client() as c:
        assert _placements(c) == lab_in_progress.placed
        name = f"after-{process}"
        create_pod(c, "default", gpu_pod(name, {"nvidia.com/gpu.shared": "1"}, node=NEW_WORK_NODE))
        try:
            after = wait_phase(c, "default", name, "Running", timeout=60)
            assert visible_devices(after), "the restarted stack gave the new pod no device"
            assert ext(c, NEW_WORK_NODE, "allocatable").get("nvidia.com/gpu.shared") == "16"
        finally:
            delete(c, f"/api/v1/namespaces/default/pods/{name}")
            wait_for(lambda: not c.exists(f"/api/v1/namespaces/default/pods/{name}"), timeout=30,
                     what=f"pod {name} deleted")
    assert Path(lab_in_progress.lab.workdir, "answers.yaml").is_file()  # the learner's files are untouched
