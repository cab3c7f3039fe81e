"""Killing any component in the middle of a lab loses nothing, and `gpulab up` brings the cluster back.

The lab in progress: the GPU Operator is installed, one A100 node is switched to a 4x time-slicing config by
its device-plugin label (a task done), and the learner's namespace holds a ConfigMap of answers and a running
pod on a shared GPU (another task done). Each test SIGKILLs one control-plane component or agent, checks that
`gpulab status` names it, runs `gpulab up`, then checks that every object and every effect of the lab is as it
was and that new work still runs (the scheduler, the kubelet stand-ins and the GPU stack all answer).
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from cluster.backends.local import AGENTS, CONTROL_PLANE
from cluster.kube.client import Client
from cluster.sim.gpu import names
from cluster.testing import LocalCluster, wait_for
from gpu_e2e import (configmap, create_pod, delete, ext, gpu_operator, gpu_pod, label, set_device_plugin_config,
                     visible_devices, wait_ext, wait_phase)

__all__ = ["gpu_operator"]

NODE = "a100-1"
CM = "faults-plugin-config"
TS4 = ("version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n"
       "    - name: nvidia.com/gpu\n      replicas: 4\n")
SHARED = {"nvidia.com/gpu.shared": "16"}


@dataclass(frozen=True)
class Lab:
    namespace: str
    node: str
    devices: str


@pytest.fixture(scope="module")
def lab(local_cluster: LocalCluster, gpu_operator: Client) -> Iterator[Lab]:
    c = gpu_operator
    ns = local_cluster.namespace("faults")
    configmap(c, CM, {"ts": TS4})
    set_device_plugin_config(c, CM, None)
    label(c, NODE, names.DEVICE_PLUGIN_CONFIG, "ts")
    wait_ext(c, NODE, SHARED, "allocatable", timeout=60)
    c.create(f"/api/v1/namespaces/{ns}/configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                                      "metadata": {"name": "answers"}, "data": {"task-1": "done"}})
    create_pod(c, ns, gpu_pod("trainer", {"nvidia.com/gpu.shared": "1"}, node=NODE))
    running = wait_phase(c, ns, "trainer", "Running", timeout=60)
    try:
        yield Lab(ns, NODE, visible_devices(running))
    finally:
        label(c, NODE, names.DEVICE_PLUGIN_CONFIG, None)
        set_device_plugin_config(c, None, None)
        delete(c, f"/api/v1/namespaces/{names.NAMESPACE}/configmaps/{CM}")
        delete(c, f"/api/v1/namespaces/{ns}")


def _kill(local_cluster: LocalCluster, component: str) -> None:
    sup = local_cluster.backend.sup
    pid = sup.pid(component)
    assert pid, f"{component} is not running before the test"
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: sup.pid(component) is None, timeout=10, what=f"{component} gone")


def _lab_intact(c: Client, lab: Lab) -> None:
    assert c.get(f"/api/v1/namespaces/{lab.namespace}/configmaps/answers")["data"] == {"task-1": "done"}
    trainer = wait_phase(c, lab.namespace, "trainer", "Running", timeout=60)
    assert trainer["spec"]["nodeName"] == lab.node
    assert visible_devices(trainer) == lab.devices
    node_labels: dict[str, Any] = c.get(f"/api/v1/nodes/{lab.node}")["metadata"]["labels"]
    assert node_labels.get(names.DEVICE_PLUGIN_CONFIG) == "ts"
    policy = c.get(f"{names.POLICY_PATH}/{names.POLICY_NAME}")
    assert policy["spec"]["devicePlugin"]["config"]["name"] == CM
    wait_ext(c, lab.node, SHARED, "allocatable", timeout=60)


@pytest.mark.parametrize("component", [*AGENTS, *CONTROL_PLANE])
def test_killed_component_mid_lab_loses_nothing_and_up_recovers(local_cluster: LocalCluster, lab: Lab,
                                                                component: str) -> None:
    _kill(local_cluster, component)
    status = local_cluster.gpulab("status", "--json", check=False)
    assert status.returncode == 2
    assert f"{component} is not running" in json.loads(status.stdout)["problems"]

    local_cluster.gpulab("up")
    assert json.loads(local_cluster.gpulab("status", "--json").stdout)["healthy"] is True
    with local_cluster.client() as c:
        _lab_intact(c, lab)
        name = f"after-{component}"
        create_pod(c, lab.namespace, gpu_pod(name, {"nvidia.com/gpu.shared": "1"}, node=lab.node))
        try:
            after = wait_phase(c, lab.namespace, name, "Running", timeout=60)
            assert visible_devices(after), "the restarted stack gave the new pod no device"
            assert ext(c, lab.node, "allocatable") == SHARED
        finally:
            delete(c, f"/api/v1/namespaces/{lab.namespace}/pods/{name}")
            wait_for(lambda: not c.exists(f"/api/v1/namespaces/{lab.namespace}/pods/{name}"), timeout=30,
                     what=f"pod {name} deleted")
