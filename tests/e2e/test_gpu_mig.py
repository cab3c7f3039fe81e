"""MIG on the real control plane: the nvidia.com/mig.config contract, mixed-strategy resources, paused operands,
a busy GPU that makes the change fail (user pods are never evicted), an impossible layout, a T4 that is not MIG
capable, and time-sliced MIG devices (28 per GPU)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import operand_logs
import pytest

from cluster.kube.client import Client
from cluster.sim.gpu import manifests, names
from gpu_e2e import (POLICY, configmap, create_pod, delete, ext, gpu_operator, gpu_pod, label, labels, mig_manager_log,
                     operand_pods, pod, set_device_plugin_config, set_mig_strategy, wait_ext, wait_for, wait_phase)

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


# A change waits, as the MIG manager does, until the GPU clients it paused (device plugin, GFD, DCGM exporter) are
# gone, and a failed one until they are back: on the loaded 2-core CI machine a failed change took over 20 s
# (2026-12-03, with the kind tier in the other worker).
MIG_CHANGE_S = 90


def apply_config(client: Client, config: str, expect: str = "success", node: str = NODE) -> None:
    label(client, node, names.MIG_CONFIG, config)
    wait_for(lambda: labels(client, node).get(names.MIG_CONFIG) == config and state(client, node) == expect
             and client.get(f"/api/v1/nodes/{node}")["metadata"]["annotations"].get(
                 names.MIG_APPLIED if expect == "success" else names.MIG_FAILURE, "").find(config) >= 0,
             MIG_CHANGE_S, what=f"{node} mig.config={config} state {expect}")


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


def test_all_1g_10gb_mixed_gives_7_per_gpu_and_pauses_operands(mixed: Client) -> None:
    """§3/§2/§9: pending (the operator's GPU clients paused, their pods gone) -> success; nvidia.com/mig-1g.10gb 7
    per GPU and no nvidia.com/gpu; MIG parents keep gpu.replicas=0; operand pods and deploy labels come back."""
    client = mixed
    wait_ext(client, NODE, {"nvidia.com/gpu": "4"}, "allocatable")
    plugin_before = operand_pods(client, NODE)["nvidia-device-plugin-daemonset"]["metadata"]["uid"]
    validator_before = operand_pods(client, NODE)["nvidia-operator-validator"]["metadata"]["uid"]
    label(client, NODE, names.MIG_CONFIG, "all-1g.10gb")
    seen = wait_for(lambda: (l := labels(client, NODE)).get(names.MIG_CONFIG_STATE) == "pending" and l, 10,
                    interval=0.05, what="state pending")
    for operand in ("device-plugin", "gpu-feature-discovery", "dcgm-exporter"):
        assert seen[names.DEPLOY_PREFIX + operand] == names.PAUSED
    wait_for(lambda: "nvidia-device-plugin-daemonset" not in operand_pods(client, NODE)
             or labels(client, NODE).get(names.MIG_CONFIG_STATE) == "success", 15, what="plugin pod gone")
    apply_config(client, "all-1g.10gb")
    wait_ext(client, NODE, {"nvidia.com/mig-1g.10gb": "28"})
    wait_ext(client, NODE, {"nvidia.com/mig-1g.10gb": "28"}, "allocatable")
    after = labels(client, NODE)
    assert after[names.DEPLOY_PREFIX + "device-plugin"] == "true"
    assert after["nvidia.com/gpu.replicas"] == "0" and after["nvidia.com/mig-1g.10gb.count"] == "28"
    back = wait_for(lambda: (p := operand_pods(client, NODE)).get("nvidia-device-plugin-daemonset")
                    and p.get("nvidia-operator-validator") and p, 15, what="plugin and validator pods back")
    assert back["nvidia-device-plugin-daemonset"]["metadata"]["uid"] != plugin_before
    assert back["nvidia-operator-validator"]["metadata"]["uid"] != validator_before  # restartValidatorPod


def test_reconfiguration_never_evicts_a_running_mig_pod(mixed: Client, namespace: str, local_cluster: Any) -> None:
    """§9: a Running pod on a MIG instance survives a mig.config change; the driver refuses the busy GPU, the state
    becomes failed and the deploy labels return to true; the mig-manager pod's log says why, in mig-parted's words,
    and no Event is recorded (neither mig-parted nor the operator records one). Once the pod is gone, a new
    mig-manager pod applies the same label and it succeeds."""
    client = mixed
    apply_config(client, "all-1g.10gb")
    wait_ext(client, NODE, {"nvidia.com/mig-1g.10gb": "28"}, "allocatable")
    create_pod(client, namespace, gpu_pod("holder", {"nvidia.com/mig-1g.10gb": "1"}, NODE))
    running = wait_phase(client, namespace, "holder", "Running")
    apply_config(client, "all-3g.40gb", expect="failed")
    failure = json.loads(client.get(f"/api/v1/nodes/{NODE}")["metadata"]["annotations"][names.MIG_FAILURE])
    assert "In use by another client" in failure["reason"], failure
    said = mig_manager_log(local_cluster, client, NODE)
    assert "msg=\"Updating to MIG config: all-3g.40gb\"" in said, said
    assert "error walking compute instances for '0': error destroying Compute instance for profile '(0, 0)': " \
           "In use by another client" in said, said  # a 1g.10gb GPU instance (NVML profile 0) held by the pod
    assert "level=fatal msg=\"Error applying MIG configuration with hooks: error setting MIGConfig: error attempting " \
           "multiple config orderings: all orderings failed\"" in said, said
    assert [line.split(" msg=", 1)[-1] for line in said.splitlines()[-4:]] == [
        '"Restarting any GPU clients previously shutdown in Kubernetes by reenabling their component-specific '
        'nodeSelector labels"', '"Changing the \'nvidia.com/mig.config.state\' node label to \'failed\'"',
        '"Error: failed to apply MIG configuration: exit status 1"',
        '"Waiting for change to \'nvidia.com/mig.config\' label"']
    events = client.get("/api/v1/namespaces/default/events")["items"]
    assert not [e for e in events if e["involvedObject"].get("name") == NODE and "MIG" in e.get("message", "")]
    still = pod(client, namespace, "holder")
    assert still["metadata"]["uid"] == running["metadata"]["uid"] and still["status"]["phase"] == "Running"
    assert not still["metadata"].get("deletionTimestamp")
    restored = labels(client, NODE)
    for operand in ("device-plugin", "gpu-feature-discovery", "dcgm-exporter"):
        assert restored[names.DEPLOY_PREFIX + operand] == "true"
    delete(client, f"/api/v1/namespaces/{namespace}/pods/holder")
    wait_for(lambda: not any(p["metadata"]["name"] == "holder"
                             for p in client.get(f"/api/v1/namespaces/{namespace}/pods")["items"]), 20,
             what="holder gone")
    manager = operand_pods(client, NODE)["nvidia-mig-manager"]["metadata"]["name"]
    delete(client, f"/api/v1/namespaces/{names.NAMESPACE}/pods/{manager}")
    apply_config(client, "all-3g.40gb")
    wait_ext(client, NODE, {"nvidia.com/mig-3g.40gb": "8"}, "allocatable")


def test_all_balanced_gives_2_1_1_per_gpu(mixed: Client) -> None:
    """§4 defaults: all-balanced = 1g.10gb x2 + 2g.20gb x1 + 3g.40gb x1 per A100-80GB."""
    apply_config(mixed, "all-balanced")
    wait_ext(mixed, NODE, {"nvidia.com/mig-1g.10gb": "8", "nvidia.com/mig-2g.20gb": "4", "nvidia.com/mig-3g.40gb": "4"})


def test_impossible_layout_fails_with_a_reason(mixed: Client, local_cluster: Any) -> None:
    """§3/§4: a layout with no placement -> state failed, the mig-manager's log ends as mig-parted's does (no node
    event); a name that is not in the file fails mig-parted's ``assert --valid-config``. The layout lives in a
    ConfigMap that ``migManager.config.name`` names (with no name the manager generates its file)."""
    client = mixed
    original = manifests.mig_configmap()["data"][names.MIG_CONFIG_KEY]
    configmap(client, "impossible-mig-config", {names.MIG_CONFIG_KEY: original.rstrip("\n") + "\n" + IMPOSSIBLE})
    client.patch(POLICY, {"spec": {"migManager": {"config": {"name": "impossible-mig-config"}}}})
    try:
        apply_config(client, "impossible", expect="failed")

        def failure() -> dict[str, str]:
            return dict(json.loads(client.get(f"/api/v1/nodes/{NODE}")["metadata"]["annotations"][names.MIG_FAILURE]))

        # A reconcile that ran before the stack read the new policy failed against the generated file; a failure
        # against another file than the policy's now names is tried again (the operator rolls the DaemonSet).
        wait_for(lambda: failure()["file"] == "impossible-mig-config", 20, what="the failure read impossible-mig-config")
        assert failure()["config"] == "impossible" and "does not fit" in failure()["reason"]
        said = mig_manager_log(local_cluster, client, NODE)
        assert "error setting MIGConfig: error attempting multiple config orderings: all orderings failed" in said
        events = client.get("/api/v1/namespaces/default/events")["items"]
        assert not any(e["involvedObject"]["name"] == NODE and "MIG" in e.get("message", "") for e in events)
        assert ext(client, NODE) == {"nvidia.com/gpu": "4"}  # the old layout stays
        apply_config(client, operand_logs.BAD_MIG_CONFIG, expect="failed")  # a name that is not in the file
        said = mig_manager_log(local_cluster, client, NODE)
        assert all(line in said for line in operand_logs.BAD_MIG_CONFIG_SAYS), said
    finally:
        client.patch(POLICY, [{"op": "replace", "path": "/spec/migManager/config", "value": {"default": "all-disabled"}}],
                     "application/json-patch+json")
        delete(client, f"/api/v1/namespaces/{names.NAMESPACE}/configmaps/impossible-mig-config")


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
    """Install: default-mig-parted-config carries the operator's named configs (the MIG manager's fallback); the
    default policy names no ConfigMap; MIG nodes default to all-disabled."""
    data = gpu_operator.get(f"/api/v1/namespaces/{names.NAMESPACE}/configmaps/{names.MIG_CONFIGMAP}")["data"]
    assert data == manifests.mig_configmap()["data"]
    assert gpu_operator.get(POLICY)["spec"]["migManager"]["config"] == {"default": "all-disabled"}
    assert labels(gpu_operator, "h100-0")[names.MIG_CONFIG] == "all-disabled"
    assert labels(gpu_operator, "h100-0")[names.MIG_CONFIG_STATE] == "success"


def test_a_gpu_client_daemonset_that_opts_in_is_paused_and_comes_back(mixed: Client, namespace: str) -> None:
    """mig-parted v0.15 / GPU Operator v26.7: a third-party DaemonSet that selects nvidia.com/gpu.deploy.client=true
    is paused with the operands (the real DaemonSet controller removes its pod when the label turns
    paused-for-mig-change), the MIG manager waits for that pod to go, and it comes back once the label is true."""
    client = mixed
    key = names.DEPLOY_PREFIX + names.CLIENT
    wait_for(lambda: labels(client, NODE).get(key) == "true", 20, what=f"{key}=true on {NODE}")
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "gpu-client", "namespace": namespace},
          "spec": {"selector": {"matchLabels": {"app": "gpu-client"}},
                   "template": {"metadata": {"labels": {"app": "gpu-client"}},
                                "spec": {"nodeSelector": {key: "true", "kubernetes.io/hostname": NODE},
                                         "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                                         "containers": [{"name": "agent", "image": "example.com/gpu-agent:1"}]}}}}
    client.create(f"/apis/apps/v1/namespaces/{namespace}/daemonsets", ds)

    def client_pod() -> dict[str, Any] | None:
        items = client.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
        return next((p for p in items if p["spec"].get("nodeName") == NODE
                     and p.get("status", {}).get("phase") == "Running"), None)

    before = wait_for(client_pod, 30, what="the client DaemonSet's pod Running on " + NODE)
    label(client, NODE, names.MIG_CONFIG, "all-1g.10gb")
    seen = wait_for(lambda: (l := labels(client, NODE)).get(names.MIG_CONFIG_STATE) == "pending" and l, 10,
                    interval=0.05, what="state pending")
    assert seen[key] == names.PAUSED
    apply_config(client, "all-1g.10gb")
    assert labels(client, NODE)[key] == "true"
    after = wait_for(client_pod, 30, what="the client pod back")
    assert after["metadata"]["uid"] != before["metadata"]["uid"]
