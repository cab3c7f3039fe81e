"""When an edited device-plugin ConfigMap reaches a node, on the real control plane (reference section 9).

Editing the ConfigMap changes no node; relabelling a node to the key it already uses changes nothing; a rollout
restart of the plugin DaemonSet (the real DaemonSet controller replaces the pods) or a label switch to another
key loads the contents as they are now.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from cluster.kube.client import Client
from cluster.sim.gpu import names, operator
from cluster.testing import LocalCluster
from gpu_e2e import (configmap, delete, ext, gpu_operator, label, operand_pods, set_device_plugin_config, wait_ext,
                     wait_for)

__all__ = ["gpu_operator"]
CM = "reload-config"
NODE = "l40s-0"  # 2 GPUs
PLUGIN_DS = "nvidia-device-plugin-daemonset"


def sharing(replicas: int) -> str:
    return ("version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n"
            f"    - name: nvidia.com/gpu\n      replicas: {replicas}\n")


@pytest.fixture
def configured(gpu_operator: Client) -> Iterator[Client]:
    client = gpu_operator
    configmap(client, CM, {"shared": sharing(4), "other": sharing(3)})
    set_device_plugin_config(client, CM, "shared")
    try:
        wait_ext(client, NODE, {"nvidia.com/gpu.shared": "8"}, "allocatable")
        yield client
    finally:
        label(client, NODE, names.DEVICE_PLUGIN_CONFIG, None)
        set_device_plugin_config(client, None, None)
        delete(client, f"/api/v1/namespaces/{names.NAMESPACE}/configmaps/{CM}")
        wait_ext(client, NODE, {"nvidia.com/gpu": "2"}, "allocatable")


def _unchanged(client: Client, want: dict[str, str], seconds: float = 2.5) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert ext(client, NODE, "allocatable") == want
        time.sleep(0.25)


def test_configmap_edit_waits_for_a_rollout_restart(configured: Client, local_cluster: LocalCluster) -> None:
    """An edit of the key in use changes nothing, nor does relabelling the node to that same key (the default);
    `kubectl rollout restart` (the real kubectl) replaces the plugin pod, which reads the new contents."""
    client = configured
    plugin_uid = operand_pods(client, NODE)[PLUGIN_DS]["metadata"]["uid"]
    configmap(client, CM, {"shared": sharing(2), "other": sharing(3)})
    _unchanged(client, {"nvidia.com/gpu.shared": "8"})
    label(client, NODE, names.DEVICE_PLUGIN_CONFIG, "shared")
    _unchanged(client, {"nvidia.com/gpu.shared": "8"})
    assert operand_pods(client, NODE)[PLUGIN_DS]["metadata"]["uid"] == plugin_uid
    shown = {n.name: n.plugin_config for n in operator.status(client).nodes}
    assert shown[NODE] == "shared (ConfigMap edited since loaded; restart the plugin)"
    local_cluster.kubectl("-n", names.NAMESPACE, "rollout", "restart", f"daemonset/{PLUGIN_DS}")
    wait_ext(client, NODE, {"nvidia.com/gpu.shared": "4"}, "allocatable", timeout=60)
    assert operand_pods(client, NODE)[PLUGIN_DS]["metadata"]["uid"] != plugin_uid
    assert {n.name: n.plugin_config for n in operator.status(client).nodes}[NODE] == "shared"


def test_label_switch_to_another_key_loads_it(configured: Client) -> None:
    """The config-manager follows the label to another key and reads that key as it is now."""
    client = configured
    configmap(client, CM, {"shared": sharing(4), "other": sharing(5)})
    _unchanged(client, {"nvidia.com/gpu.shared": "8"}, 1.0)
    label(client, NODE, names.DEVICE_PLUGIN_CONFIG, "other")
    wait_ext(client, NODE, {"nvidia.com/gpu.shared": "10"}, "allocatable")
    assert ext(client, "a100-0", "allocatable") == {"nvidia.com/gpu.shared": "16"}  # other nodes keep theirs
    wait_for(lambda: operator.policy_state(client) == "ready", 30, what="policy ready")
