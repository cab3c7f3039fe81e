"""Time-slicing on the real control plane: the seeds/002 exercise (tasks 1-6), the seeds/004 `any`/10 exercise,
failRequestsGreaterThanOne at kubelet admission, combined DCGM metrics and the noisy-neighbour OOM."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from cluster.kube.client import JSON_PATCH, Client
from cluster.sim.gpu import names
from cluster.testing import LocalCluster
from gpu_e2e import (POLICY, configmap, create_pod, delete, events_for, ext, gpu_operator, gpu_pod, label, metrics,
                     metrics_url, pod, set_device_plugin_config, visible_devices, wait_event, wait_ext, wait_for,
                     wait_phase)

__all__ = ["gpu_operator"]
CM = "device-plugin-config"
TIMESLICE_4 = """version: v1
sharing:
  timeSlicing:
    renameByDefault: true
    failRequestsGreaterThanOne: true
    resources:
    - name: nvidia.com/gpu
      replicas: 4
"""
ANY_10 = """version: v1
flags:
  migStrategy: none
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/gpu
      replicas: 10
"""


@pytest.fixture
def timesliced(gpu_operator: Client) -> Iterator[Client]:
    """seeds/002 task 1: the 4x config, a node label and the ClusterPolicy pointing at it; reset afterwards."""
    client = gpu_operator
    configmap(client, CM, {"timeslice-4": TIMESLICE_4})
    label(client, "a100-0", names.DEVICE_PLUGIN_CONFIG, "timeslice-4")
    set_device_plugin_config(client, CM, "timeslice-4")
    try:
        yield client
    finally:
        set_device_plugin_config(client, None, None)
        label(client, "a100-0", names.DEVICE_PLUGIN_CONFIG, None)
        delete(client, f"/api/v1/namespaces/{names.NAMESPACE}/configmaps/{CM}")
        wait_ext(client, "a100-0", {"nvidia.com/gpu": "4"})
        wait_ext(client, "t4-0", {"nvidia.com/gpu": "1"}, "allocatable")


def test_seed_002_time_slicing_exercise(timesliced: Client, namespace: str) -> None:
    """Tasks 1-6: 4 GPUs -> gpu.shared 16; on the 1-GPU node 4 pods run on one UUID, the 5th is Pending with
    FailedScheduling naming nvidia.com/gpu.shared; metrics show combined use; cleanup restores the node."""
    client = timesliced
    wait_ext(client, "a100-0", {"nvidia.com/gpu.shared": "16"})  # task 1
    wait_ext(client, "a100-0", {"nvidia.com/gpu.shared": "16"}, "allocatable")
    wait_ext(client, "t4-0", {"nvidia.com/gpu.shared": "4"}, "allocatable")  # the default applies to every node
    load = {names.POD_GPU_UTIL: "30", names.POD_GPU_MEM: "3000"}
    for i in (1, 2, 3):  # task 2 (pinned to the T4 so they share one GPU)
        create_pod(client, namespace, gpu_pod(f"inference-worker-{i}", {"nvidia.com/gpu.shared": "1"}, "t4-0", load))
    pods = [wait_phase(client, namespace, f"inference-worker-{i}", "Running") for i in (1, 2, 3)]
    uuids = {visible_devices(wait_for(lambda n=p["metadata"]["name"]: visible_devices(pod(client, namespace, n))
                                      and pod(client, namespace, n))) for p in pods}
    assert len(uuids) == 1 and next(iter(uuids)).startswith("GPU-")  # task 3: same physical GPU
    url = metrics_url(client)  # task 4: combined utilisation and shared memory
    gpu_uuid = next(iter(uuids))

    def combined() -> Any:
        rows = [r for r in metrics(url) if r[1].get("UUID") == gpu_uuid]
        util = {r[1]["pod"]: r[2] for r in rows if r[0] == "DCGM_FI_DEV_GPU_UTIL"}
        used = {r[2] for r in rows if r[0] == "DCGM_FI_DEV_FB_USED"}
        return util if len(util) == 3 and set(util.values()) == {90.0} and used == {9000.0} else None

    util = wait_for(combined, 15, what="DCGM metrics with the three pods' combined load")
    assert set(util) == {"inference-worker-1", "inference-worker-2", "inference-worker-3"}
    create_pod(client, namespace, gpu_pod("inference-worker-4", {"nvidia.com/gpu.shared": "1"}, "t4-0"))  # task 5
    wait_phase(client, namespace, "inference-worker-4", "Running")
    create_pod(client, namespace, gpu_pod("inference-worker-5", {"nvidia.com/gpu.shared": "1"}, "t4-0"))
    ev = wait_event(client, namespace, "inference-worker-5", "FailedScheduling", "Insufficient nvidia.com/gpu.shared")
    assert pod(client, namespace, "inference-worker-5")["status"]["phase"] == "Pending", ev
    client.delete(f"/api/v1/namespaces/{namespace}/pods/inference-worker-4")  # task 6 begins: capacity frees
    wait_phase(client, namespace, "inference-worker-5", "Running", timeout=60)


def test_fail_requests_greater_than_one_rejects_at_the_kubelet(timesliced: Client, namespace: str) -> None:
    """§1: the pod binds, then fails: phase Failed, UnexpectedAdmissionError, the plugin's message."""
    client = timesliced
    wait_ext(client, "a100-0", {"nvidia.com/gpu.shared": "16"}, "allocatable")
    create_pod(client, namespace, gpu_pod("greedy", {"nvidia.com/gpu.shared": "2"}, "a100-0"))
    p = wait_phase(client, namespace, "greedy", "Failed")
    assert p["spec"]["nodeName"] == "a100-0"
    assert p["status"]["reason"] == "UnexpectedAdmissionError"
    assert p["status"]["message"] == ('Allocate failed due to invalid allocation request for "nvidia.com/gpu.shared": '
                                      "invalid request: maximum request size for shared resources is 1; found 2, "
                                      "which is unexpected")


def test_noisy_neighbour_runs_the_shared_gpu_out_of_memory(timesliced: Client, namespace: str,
                                                           local_cluster: LocalCluster) -> None:
    """docs GPU memory: on a 15360 MiB T4, the third 6000 MiB pod pushes it over: its process prints CUDA's error and
    exits 1, as a real one does (no Event, no pod reason); the others keep running."""
    client = timesliced
    wait_ext(client, "t4-0", {"nvidia.com/gpu.shared": "4"}, "allocatable")
    for i in (1, 2):
        create_pod(client, namespace, gpu_pod(f"tenant-{i}", {"nvidia.com/gpu.shared": "1"}, "t4-0",
                                              {names.POD_GPU_MEM: "6000"}, restart="Never"))
        wait_phase(client, namespace, f"tenant-{i}", "Running")
    wait_for(lambda: any(r[0] == "DCGM_FI_DEV_FB_USED" and r[2] == 12000.0 for r in metrics(metrics_url(client))),
             15, what="12000 MiB used on the T4")
    create_pod(client, namespace, gpu_pod("noisy", {"nvidia.com/gpu.shared": "1"}, "t4-0",
                                          {names.POD_GPU_MEM: "6000"}, restart="Never"))
    p = wait_phase(client, namespace, "noisy", "Failed", timeout=20)
    terminated = p["status"]["containerStatuses"][0]["state"]["terminated"]
    assert terminated["exitCode"] == 1 and terminated["reason"] == "Error"
    assert "reason" not in p["status"]  # no component of a real cluster names the cause on the pod
    assert local_cluster.kubectl("logs", "-n", namespace, "noisy").stdout == "CUDA error: out of memory\n"
    assert not [e for e in events_for(client, namespace, "noisy") if e["reason"] == "GPUOutOfMemory"]
    assert all(pod(client, namespace, f"tenant-{i}")["status"]["phase"] == "Running" for i in (1, 2))


def test_seed_004_any_key_with_10_replicas(gpu_operator: Client) -> None:
    """seeds/004: ConfigMap time-slicing-config key `any`, 10 replicas, ClusterPolicy patched to it ->
    nvidia.com/gpu at 10 per GPU in capacity and allocatable."""
    client = gpu_operator
    configmap(client, "time-slicing-config", {"any": ANY_10})
    try:  # the seed's own command: a JSON patch that replaces /spec/devicePlugin/config
        client.patch(POLICY, [{"op": "replace", "path": "/spec/devicePlugin/config",
                               "value": {"name": "time-slicing-config", "default": "any"}}], JSON_PATCH)
        for node, gpus in (("a100-0", 4), ("t4-0", 1), ("h100-0", 8)):
            wait_ext(client, node, {"nvidia.com/gpu": str(10 * gpus)})
            wait_ext(client, node, {"nvidia.com/gpu": str(10 * gpus)}, "allocatable")
        assert client.get(f"/api/v1/nodes/a100-0")["metadata"]["labels"]["nvidia.com/gpu.product"].endswith("-SHARED")
    finally:
        set_device_plugin_config(client, None, None)
        delete(client, f"/api/v1/namespaces/{names.NAMESPACE}/configmaps/time-slicing-config")
        wait_ext(client, "h100-0", {"nvidia.com/gpu": "8"})


def test_ext_helper_sees_no_leftovers(gpu_operator: Client) -> None:
    """After the exercises every node is back to whole GPUs (the fixtures reset what they changed)."""
    wait_ext(gpu_operator, "a100-0", {"nvidia.com/gpu": "4"})
    assert ext(gpu_operator, "l40s-0", "allocatable") == {"nvidia.com/gpu": "2"}


def test_a_missing_plugin_configmap_shows_init_0_of_2_and_failed_mount(gpu_operator: Client,
                                                                         local_cluster: LocalCluster) -> None:
    """A ClusterPolicy naming a ConfigMap that does not exist: `kubectl get pods` prints the plugin pod as
    `Init:0/2` (it has two init containers, none started; GPU Operator v26.7.0 assets/state-device-plugin), and
    the kubelet records FailedMount for the config volume."""
    set_device_plugin_config(gpu_operator, "no-such-config", "x")
    try:
        def plugin_status() -> str:
            out = local_cluster.kubectl("get", "pods", "-n", names.NAMESPACE, "--field-selector",
                                        "spec.nodeName=t4-0", "--no-headers").stdout
            return next((line.split()[2] for line in out.splitlines()
                         if line.startswith("nvidia-device-plugin-daemonset-")), "")
        wait_for(lambda: plugin_status() == "Init:0/2", 30, what="the plugin pod on t4-0 in Init:0/2")
        name = next(p for p in gpu_operator.get(f"/api/v1/namespaces/{names.NAMESPACE}/pods",
                                                fieldSelector="spec.nodeName=t4-0")["items"]
                    if p["metadata"]["name"].startswith("nvidia-device-plugin-daemonset-"))["metadata"]["name"]
        wait_event(gpu_operator, names.NAMESPACE, name, "FailedMount", 'configmap "no-such-config" not found')
    finally:
        set_device_plugin_config(gpu_operator, None, None)
