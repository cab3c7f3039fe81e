"""Compare a Kubernetes Node with what its GPUs should make it advertise, and say how to fix each difference.

The expectation comes from ``cluster.gpu.advertise`` over the probed inventory, so real and simulated nodes are
judged by the same rules. Plain data in, ``Drift`` values out; fetching the Node is ``node_source``'s job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cluster import quantity
from cluster.gpu import advertise, inventory
from cluster.gpu import device_plugin_config as dpc

MIG_STATE = "nvidia.com/mig.config.state"
MIG_CONFIG = "nvidia.com/mig.config"


@dataclass(frozen=True)
class Drift:
    kind: str  # stable id, e.g. "mig-whole-gpus"
    message: str
    fix: str


def _quantity(value: Any) -> int:
    try:
        return int(quantity.parse(value).value)
    except quantity.QuantityError:
        return 0


def _gpu_resources(resources: Mapping[str, Any]) -> dict[str, int]:
    return {k: _quantity(v) for k, v in resources.items() if k.startswith("nvidia.com/")}


def drift(
    node: Mapping[str, Any], inv: inventory.NodeInventory, config: dpc.DevicePluginConfig | None, strategy: str
) -> list[Drift]:
    """Every way ``node`` disagrees with what ``inv`` under ``config`` and ``strategy`` should advertise."""
    name = str(node.get("metadata", {}).get("name", "NODE"))
    labels: Mapping[str, str] = node.get("metadata", {}).get("labels", {}) or {}
    status = node.get("status", {}) or {}
    capacity = _gpu_resources(status.get("capacity", {}) or {})
    allocatable = _gpu_resources(status.get("allocatable", {}) or {})
    expected = advertise.advertise(inv, config, strategy)
    found = [
        *_mig_whole_gpus(name, inv, labels, capacity),
        *_mig_state(name, labels),
        *_mig_mode_pending(inv),
        *_replicas(name, labels, expected),
        *_capacity(name, capacity, expected),
        *_allocatable(name, inv, capacity, allocatable),
    ]
    return found


def _mig_whole_gpus(name: str, inv: inventory.NodeInventory, labels: Mapping[str, str], capacity: Mapping[str, int]) -> list[Drift]:
    enabled = [g for g in inv.gpus if g.mig_enabled and g.mig_devices]
    whole = capacity.get("nvidia.com/gpu", 0) + capacity.get("nvidia.com/gpu.shared", 0)
    has_mig_resources = any(k.startswith("nvidia.com/mig-") for k in capacity)
    product = labels.get("nvidia.com/gpu.product", "")
    if not enabled or whole == 0 or has_mig_resources or "-MIG-" in product:
        return []
    return [Drift(
        "mig-whole-gpus",
        f"MIG is enabled on GPU(s) {', '.join(str(g.index) for g in enabled)} with "
        f"{sum(len(g.mig_devices) for g in enabled)} MIG device(s), but {name} advertises {whole} whole GPU(s) "
        "as nvidia.com/gpu: the device plugin runs with MIG strategy none (or predates the MIG change)",
        "choose a MIG strategy: kubectl patch clusterpolicies.nvidia.com cluster-policy --type merge "
        "-p '{\"spec\":{\"mig\":{\"strategy\":\"mixed\"}}}' (single if every GPU has one profile), then check "
        f"kubectl get node {name} -o jsonpath='{{.status.capacity}}'",
    )]


def _mig_state(name: str, labels: Mapping[str, str]) -> list[Drift]:
    state = labels.get(MIG_STATE)
    wanted = labels.get(MIG_CONFIG, "<unset>")
    if state in ("pending", "rebooting"):
        return [Drift(
            "mig-config-stuck",
            f"{MIG_STATE}={state} on {name}: the MIG manager has not finished applying {MIG_CONFIG}={wanted}",
            "GPU pods must stop before MIG changes: kubectl get pods -A --field-selector spec.nodeName="
            f"{name} and kubectl -n gpu-operator logs ds/nvidia-mig-manager; drain the node if pods hold GPUs",
        )]
    if state == "failed":
        return [Drift(
            "mig-config-failed",
            f"{MIG_STATE}=failed on {name}: {MIG_CONFIG}={wanted} is not in the mig-parted config or does not fit",
            "kubectl -n gpu-operator logs ds/nvidia-mig-manager shows why; pick a listed config, e.g. "
            f"kubectl label node {name} {MIG_CONFIG}=all-disabled --overwrite",
        )]
    return []


def _mig_mode_pending(inv: inventory.NodeInventory) -> list[Drift]:
    return [
        Drift(
            "mig-mode-pending",
            f"GPU {g.index}: MIG mode is {'on' if g.mig_enabled else 'off'} but "
            f"{'on' if g.mig_pending else 'off'} is pending: the change waits for a GPU reset",
            "stop every process on the GPU (nvidia-smi shows them) and let the MIG manager reset it, or reboot the node",
        )
        for g in inv.gpus
        if g.mig_capable and g.mig_enabled != g.mig_pending
    ]


def _replicas(name: str, labels: Mapping[str, str], expected: advertise.Advertisement) -> list[Drift]:
    key = "nvidia.com/gpu.replicas"
    have, want = labels.get(key), expected.labels.get(key)
    if have is None or want is None or have == want:
        return []
    return [Drift(
        "replicas-label",
        f"{name} is labelled {key}={have} but the device-plugin config gives {want}: GFD has not relabelled the node "
        "since the config changed, or the node runs a different config",
        f"kubectl get node {name} -o jsonpath='{{.metadata.labels.nvidia\\.com/device-plugin\\.config}}' names the "
        "config in use; restart GFD: kubectl -n gpu-operator rollout restart ds/gpu-feature-discovery",
    )]


def _capacity(name: str, capacity: Mapping[str, int], expected: advertise.Advertisement) -> list[Drift]:
    if expected.error is not None:
        return [Drift("plugin-error", f"the device plugin cannot start with this config: {expected.error}",
                      "fix the device-plugin config; kubectl -n gpu-operator logs ds/nvidia-device-plugin-daemonset shows the same line")]
    if capacity == expected.capacity:
        return []
    return [Drift(
        "capacity",
        f"{name} advertises {_fmt(capacity)} but NVML and the config give {_fmt(expected.capacity)}",
        "the device plugin has not picked up the current GPUs or config: kubectl -n gpu-operator rollout restart "
        "ds/nvidia-device-plugin-daemonset, then compare again",
    )]


def _allocatable(name: str, inv: inventory.NodeInventory, capacity: Mapping[str, int], allocatable: Mapping[str, int]) -> list[Drift]:
    if not all(g.healthy for g in inv.gpus):
        return []
    low = {k: (allocatable.get(k, 0), v) for k, v in capacity.items() if allocatable.get(k, 0) < v}
    if not low:
        return []
    detail = ", ".join(f"{k} {a}/{c}" for k, (a, c) in sorted(low.items()))
    return [Drift(
        "allocatable-below-capacity",
        f"{name} has allocatable below capacity ({detail}) although NVML sees every GPU healthy: the device plugin "
        "marked devices unhealthy (XID errors) or lost its kubelet registration",
        "kubectl -n gpu-operator logs ds/nvidia-device-plugin-daemonset | grep -i -e xid -e unhealthy; restarting "
        "the plugin pod re-registers healthy devices",
    )]


def _fmt(resources: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(resources.items())) or "no GPU resources"
