"""MIG on the real control plane: the nvidia.com/mig.config contract, mixed-strategy resources, eviction, an
impossible layout, a T4 that is not MIG capable, and time-sliced MIG devices (28 per GPU)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from cluster.kube.client import Client
from cluster.sim.gpu import manifests, names
from gpu_e2e import (configmap, create_pod, delete, ext, gpu_operator, gpu_pod, label, labels, set_device_plugin_config,
                     set_mig_strategy, wait_ext, wait_for, wait_phase)

__all__ = ["gpu_operator"]
NODE = "a100-1"
IMPOSSIBLE = """
  impossible:
  - devices: all
    mig-enabled: true
    mig-devices:
      "3g.40gb": 2
      "1g.10gb": 1
"""


def state(client: Client, node: str = NODE) -> str:
    return labels(client, node).get(names.MIG_CONFIG_STATE, "")


def apply_config(client: Client, config: str, expect: str = "success", node: str = NODE) -> None:
    label(client, node, names.MIG_CONFIG, config)
    wait_for(lambda: labels(client, node).get(names.MIG_CONFIG) == config and state(client, node) == expect
             and client.get(f"/api/v1/nodes/{node}")["metadata"]["annotations"].get(
                 names.MIG_APPLIED if expect == "success" else names.MIG_FAILURE, "").find(config) >= 0,
             20, what=f"{node} mig.config={config} state {expect}")


@pytest.fixture
def mixed(gpu_operator: Client) -> Iterator[Client]:
    client = gpu_operator
    set_mig_strategy(client, "mixed")
    try:
        yield client
    finally:
        apply_config(client, "all-disabled")
        set_mig_strategy(client, "single")
        wait_ext(client, NODE, {"nvidia.com/gpu": "4"}, "allocatable")


def test_all_1g_10gb_mixed_gives_7_per_gpu_and_evicts_gpu_pods(mixed: Client, namespace: str) -> None:
    """§3/§2: pending (GPU clients paused, GPU pods evicted) -> success; nvidia.com/mig-1g.10gb 7 per GPU and no
    nvidia.com/gpu; MIG parents keep gpu.replicas=0."""
    client = mixed
    wait_ext(client, NODE, {"nvidia.com/gpu": "4"}, "allocatable")
    create_pod(client, namespace, gpu_pod("holder", {"nvidia.com/gpu": "1"}, NODE))
    wait_phase(client, namespace, "holder", "Running")
    label(client, NODE, names.MIG_CONFIG, "all-1g.10gb")
    seen = wait_for(lambda: (l := labels(client, NODE)).get(names.MIG_CONFIG_STATE) == "pending" and l, 10,
                    interval=0.05, what="state pending")
    assert seen[names.DEPLOY_PREFIX + "device-plugin"] == names.PAUSED
    wait_for(lambda: not any(p["metadata"]["name"] == "holder" for p in
                             client.get(f"/api/v1/namespaces/{namespace}/pods")["items"]), 15, what="holder evicted")
    apply_config(client, "all-1g.10gb")
    wait_ext(client, NODE, {"nvidia.com/mig-1g.10gb": "28"})
    wait_ext(client, NODE, {"nvidia.com/mig-1g.10gb": "28"}, "allocatable")
    after = labels(client, NODE)
    assert after[names.DEPLOY_PREFIX + "device-plugin"] == "true"
    assert after["nvidia.com/gpu.replicas"] == "0" and after["nvidia.com/mig-1g.10gb.count"] == "28"


def test_all_balanced_gives_2_1_1_per_gpu(mixed: Client) -> None:
    """§4 defaults: all-balanced = 1g.10gb x2 + 2g.20gb x1 + 3g.40gb x1 per A100-80GB."""
    apply_config(mixed, "all-balanced")
    wait_ext(mixed, NODE, {"nvidia.com/mig-1g.10gb": "8", "nvidia.com/mig-2g.20gb": "4", "nvidia.com/mig-3g.40gb": "4"})


def test_impossible_layout_fails_with_a_reason(mixed: Client) -> None:
    """§3/§4: a layout with no placement -> state failed, reason recorded (annotation and node event)."""
    client = mixed
    cm_path = f"/api/v1/namespaces/{names.NAMESPACE}/configmaps/{names.MIG_CONFIGMAP}"
    original = client.get(cm_path)["data"][names.MIG_CONFIG_KEY]
    configmap(client, names.MIG_CONFIGMAP, {names.MIG_CONFIG_KEY: original.rstrip("\n") + "\n" + IMPOSSIBLE})
    try:
        apply_config(client, "impossible", expect="failed")
        failure = json.loads(client.get(f"/api/v1/nodes/{NODE}")["metadata"]["annotations"][names.MIG_FAILURE])
        assert failure["config"] == "impossible" and "does not fit" in failure["reason"]
        events = client.get("/api/v1/namespaces/default/events")["items"]
        assert any(e["involvedObject"]["name"] == NODE and e["reason"] == "MigConfigFailed" for e in events)
        assert ext(client, NODE) == {"nvidia.com/gpu": "4"}  # the old layout stays
        apply_config(client, "all-9g.99gb", expect="failed")  # a name that is not in the file
    finally:
        configmap(client, names.MIG_CONFIGMAP, {names.MIG_CONFIG_KEY: original})


def test_t4_is_not_mig_capable(gpu_operator: Client) -> None:
    """§3: mig.capable=false on a T4; no MIG manager there, so a mig.config label changes nothing."""
    client = gpu_operator
    assert labels(client, "t4-0")["nvidia.com/mig.capable"] == "false"
    assert names.DEPLOY_PREFIX + "mig-manager" not in labels(client, "t4-0")
    label(client, "t4-0", names.MIG_CONFIG, "all-1g.10gb")
    try:
        import time

        time.sleep(2.5)
        assert names.MIG_CONFIG_STATE not in labels(client, "t4-0")
        assert ext(client, "t4-0") == {"nvidia.com/gpu": "1"}
    finally:
        label(client, "t4-0", names.MIG_CONFIG, None)


def test_time_sliced_1g_10gb_gives_28_per_gpu(mixed: Client) -> None:
    """§1: {name: nvidia.com/mig-1g.10gb, replicas: 4} on all-1g.10gb -> 28 allocations per GPU."""
    client = mixed
    cfg = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/mig-1g.10gb\n      replicas: 4\n"
    configmap(client, "mig-sharing", {"mig-ts": cfg})
    set_device_plugin_config(client, "mig-sharing", None)
    label(client, NODE, names.DEVICE_PLUGIN_CONFIG, "mig-ts")
    try:
        apply_config(client, "all-1g.10gb")
        wait_ext(client, NODE, {"nvidia.com/mig-1g.10gb": str(28 * 4)}, "allocatable")
        assert labels(client, NODE)["nvidia.com/mig-1g.10gb.replicas"] == "4"
    finally:
        label(client, NODE, names.DEVICE_PLUGIN_CONFIG, None)
        set_device_plugin_config(client, None, None)
        delete(client, f"/api/v1/namespaces/{names.NAMESPACE}/configmaps/mig-sharing")


def test_default_mig_config_is_installed(gpu_operator: Client) -> None:
    """Install: default-mig-parted-config carries the operator's named configs; MIG nodes default to all-disabled."""
    data = gpu_operator.get(f"/api/v1/namespaces/{names.NAMESPACE}/configmaps/{names.MIG_CONFIGMAP}")["data"]
    assert data == manifests.mig_configmap()["data"]
    assert labels(gpu_operator, "h100-0")[names.MIG_CONFIG] == "all-disabled"
    assert labels(gpu_operator, "h100-0")[names.MIG_CONFIG_STATE] == "success"
