"""When an edited device-plugin ConfigMap reaches a node (reference section 9, ``DP cmd/config-manager/main.go``).

The config-manager reacts only to the node label switching to another key; nothing watches the ConfigMap's
contents. A new plugin pod (rollout restart, MIG reconfiguration) or a changed ``devicePlugin.config`` reads
the file as it is now.
"""

from __future__ import annotations

from typing import Any

import pytest

from cluster.sim.gpu import names, nodeplan
from gpustack_factories import TS_RENAME_4, apply, default_policy, ext, make_node

pytestmark = pytest.mark.unit
CM = "device-plugin-config"
TS_RENAME_2 = TS_RENAME_4.replace("replicas: 4", "replicas: 2")


def run(node: dict[str, Any], pol: Any, cms: dict[str, dict[str, str]], pods: dict[str, str]) -> dict[str, Any]:
    """The node once the stack settled with these plugin and GFD pods on it."""
    for _ in range(6):
        plan = nodeplan.plan(node, pol, cms, validated=True, timestamp="1700000000", pod_uids=pods)
        if plan.empty:
            return node
        node = apply(node, plan)
    raise AssertionError("the plan did not settle")


PODS = {"device-plugin": "dp-1", "gpu-feature-discovery": "gfd-1"}


def test_configmap_edit_changes_nothing_until_the_plugin_pod_is_replaced() -> None:
    """Editing the selected key's contents: same pods -> same resources; a new plugin pod -> the new contents."""
    pol = default_policy(device_plugin_config=CM, device_plugin_default="shared")
    node = run(make_node(), pol, {CM: {"shared": TS_RENAME_4}}, PODS)
    assert ext(node) == {"nvidia.com/gpu.shared": "16"}
    edited = {CM: {"shared": TS_RENAME_2}}
    node = run(node, pol, edited, PODS)
    assert ext(node) == {"nvidia.com/gpu.shared": "16"}
    node = run(node, pol, edited, {**PODS, "device-plugin": "dp-2"})  # kubectl rollout restart
    assert ext(node) == {"nvidia.com/gpu.shared": "8"}
    assert node["metadata"]["labels"]["nvidia.com/gpu.replicas"] == "4"  # GFD has not restarted
    node = run(node, pol, edited, {"device-plugin": "dp-2", "gpu-feature-discovery": "gfd-2"})
    assert node["metadata"]["labels"]["nvidia.com/gpu.replicas"] == "2"


def test_no_pod_seen_keeps_what_was_loaded() -> None:
    """While the plugin pod is being replaced (none on the node), the old config stays."""
    pol = default_policy(device_plugin_config=CM, device_plugin_default="shared")
    node = run(make_node(), pol, {CM: {"shared": TS_RENAME_4}}, PODS)
    node = run(node, pol, {CM: {"shared": TS_RENAME_2}}, {})
    assert ext(node) == {"nvidia.com/gpu.shared": "16"}


def test_label_switch_to_another_key_loads_it_and_same_key_does_nothing() -> None:
    """The config-manager follows a label change to a different key, reading that key as it is now; a relabel
    to the key already in use (the default here) is "Already configured. Skipping update"."""
    pol = default_policy(device_plugin_config=CM, device_plugin_default="shared")
    node = run(make_node(), pol, {CM: {"shared": TS_RENAME_4, "two": TS_RENAME_2}}, PODS)
    cms = {CM: {"shared": TS_RENAME_2, "two": TS_RENAME_2}}
    node["metadata"]["labels"][names.DEVICE_PLUGIN_CONFIG] = "shared"
    node = run(node, pol, cms, PODS)
    assert ext(node) == {"nvidia.com/gpu.shared": "16"}
    cms = {CM: {"shared": TS_RENAME_2, "two": TS_RENAME_4}}
    node["metadata"]["labels"][names.DEVICE_PLUGIN_CONFIG] = "two"
    node = run(node, pol, cms, PODS)
    assert ext(node) == {"nvidia.com/gpu.shared": "16"}  # "two" as it is now: 4 replicas
    node["metadata"]["labels"][names.DEVICE_PLUGIN_CONFIG] = "shared"
    node = run(node, pol, cms, PODS)
    assert ext(node) == {"nvidia.com/gpu.shared": "8"}


def test_policy_config_change_reloads_like_a_rolled_daemonset() -> None:
    """A new devicePlugin.config default changes the DaemonSet spec, so the plugin starts again with it."""
    cms = {CM: {"shared": TS_RENAME_4, "plain": "version: v1\n"}}
    node = run(make_node(), default_policy(device_plugin_config=CM, device_plugin_default="plain"), cms, PODS)
    assert ext(node) == {"nvidia.com/gpu": "4"}
    node = run(node, default_policy(device_plugin_config=CM, device_plugin_default="shared"), cms, PODS)
    assert ext(node) == {"nvidia.com/gpu.shared": "16"}


def test_a_crash_looping_plugin_reads_the_fixed_file_on_its_next_start() -> None:
    """A container restarted by the kubelet reads the mounted file again, so a fixed ConfigMap ends a crash loop."""
    pol = default_policy(device_plugin_config=CM, device_plugin_default="shared")
    broken = TS_RENAME_4.replace("replicas: 4", "replicas: 1")
    node = run(make_node(), pol, {CM: {"shared": broken}}, PODS)
    assert node["status"]["allocatable"].get("nvidia.com/gpu", "0") == "0" and "nvidia.com/gpu.shared" not in ext(node)
    node = run(node, pol, {CM: {"shared": TS_RENAME_4}}, PODS)
    assert ext(node) == {"nvidia.com/gpu.shared": "16"}
