"""Everything the GPU stack wants one node to show, computed from the node, the ClusterPolicy and the ConfigMaps.

This is the pure core of the operator, device plugin, GFD and validator controllers: the stack turns a
``NodePlan`` into patches. Mode rule (docs/gpu-stack.md): a node labelled ``nvidia.com/dra-driver.enabled=true``
is served by the DRA driver and never by the device plugin; any other GPU node by the device plugin, unless
the policy disables it or an admin set ``nvidia.com/gpu.deploy.device-plugin=false``. Plain data.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cluster.gpu import advertise as advertise_mod, inventory
from cluster.sim.gpu import devicefile, dra, hoststate, names, operands, plugin, policy as policy_mod

# ``client`` is no operand of the operator's: GPU Operator v26.7 sets ``nvidia.com/gpu.deploy.client=true`` on GPU
# nodes so that third-party GPU clients can select it and be paused with the operands (names.CLIENT).
DEPLOY_OPERANDS = ("driver", "gpu-feature-discovery", "container-toolkit", "device-plugin", "dcgm", "dcgm-exporter",
                   "node-status-exporter", "operator-validator", "client")


@dataclass(frozen=True)
class NodePlan:
    labels: dict[str, str | None] = field(default_factory=dict)  # merge patch: only what changes
    annotations: dict[str, str | None] = field(default_factory=dict)
    capacity: dict[str, str | None] = field(default_factory=dict)
    allocatable: dict[str, str | None] = field(default_factory=dict)
    operands: dict[str, operands.OperandState] = field(default_factory=dict)
    dra_mode: bool = False
    dra_inventory: inventory.NodeInventory | None = None  # publish a slice for these GPUs; None = no slice
    awaiting_validation: bool = False  # driver and toolkit pass; the plugin has not registered yet
    # The devices behind the wanted capacity and allocatable (not a patch: the whole list), and the resources
    # whose Allocate refuses more than one device: what a node plugin registers with a real kubelet (devicefile).
    devices: devicefile.Devices = field(default_factory=dict)
    single_request: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.labels or self.annotations or self.capacity or self.allocatable)


def operator_labels(pol: policy_mod.Policy, hw: hoststate.Hardware, current: Mapping[str, str]) -> dict[str, str]:
    """NFD's PCI label, ``gpu.present``, the deploy labels and the default ``mig.config`` on a GPU node.

    A deploy label an admin set to ``false`` stays ``false``; one the MIG manager paused stays paused.
    """
    if hw.model is None:
        return {}
    out = {names.NFD_PCI: "true", names.GPU_PRESENT: "true"}
    operands_here = DEPLOY_OPERANDS + (("mig-manager",) if hw.model.mig_capable else ())
    for operand in operands_here:
        key = names.DEPLOY_PREFIX + operand
        out[key] = current[key] if current.get(key) in ("false", names.PAUSED) else "true"
    if hw.model.mig_capable and pol.mig_manager and pol.mig_config_default and names.MIG_CONFIG not in current:
        out[names.MIG_CONFIG] = pol.mig_config_default
    return out


def _managed(key: str) -> bool:
    """Labels the operator side of the stack owns (and removes when it no longer wants them)."""
    return key in (names.NFD_PCI, names.GPU_PRESENT) or key.startswith(names.DEPLOY_PREFIX) or plugin.is_gfd_label(key)


def label_patch(current: Mapping[str, str], wanted: Mapping[str, str]) -> dict[str, str | None]:
    patch: dict[str, str | None] = {k: v for k, v in wanted.items() if current.get(k) != v}
    patch.update({k: None for k in current if _managed(k) and k not in wanted})
    return patch


def map_patch(current: Mapping[str, str], wanted: Mapping[str, str]) -> dict[str, str | None]:
    """A merge patch for the ``nvidia.com/*`` keys of capacity or allocatable."""
    patch: dict[str, str | None] = {k: v for k, v in wanted.items() if current.get(k) != v}
    patch.update({k: None for k in current if plugin.is_extended(k) and k not in wanted})
    return patch


def registry(adv: advertise_mod.Advertisement | None, choice: plugin.ConfigChoice | None) -> str | None:
    """The device list the plugin registered with the kubelet, for the kubelet-side admission hook."""
    if adv is None or adv.error is not None or choice is None or choice.config is None:
        return None
    resources: dict[str, list[list[Any]]] = {}
    for name, devs in sorted(adv.devices.items()):
        resources[name] = [[d.id, d.uuid, d.gpu_index, int(d.healthy)] for d in devs]
    data = {"resources": resources, "policy": choice.config.flags.shared_devices_allocation_policy,
            "singleRequest": sorted(adv.single_request_resources)}
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def plugin_state(pol: policy_mod.Policy, node_labels: Mapping[str, str], dra_mode: bool, operand: str,
                 st: operands.OperandState) -> str:
    enabled = pol.device_plugin if operand == "device-plugin" else pol.gfd
    deploy = node_labels.get(names.DEPLOY_PREFIX + operand, "true")
    if not enabled or deploy == "false" or (dra_mode and operand == "device-plugin"):
        return plugin.ABSENT
    if deploy == names.PAUSED or st.phase != operands.OK:
        return plugin.DOWN
    return plugin.RUNNING


def _loaded_patch(ann: Mapping[str, str], key: str, loaded: plugin.Loaded | None, state: str) -> dict[str, str | None]:
    value = loaded.annotation() if loaded is not None and state != plugin.ABSENT else None
    return {key: value} if ann.get(key) != value else {}


def plan(node: Mapping[str, Any], pol: policy_mod.Policy | None, configmaps: Mapping[str, Mapping[str, str]],
         *, validated: bool, timestamp: str, pod_uids: Mapping[str, str] | None = None) -> NodePlan:
    """What ``node`` should show under ``pol`` (``None``: the operator is not installed).

    ``pod_uids`` maps an operand (``device-plugin``, ``gpu-feature-discovery``) to its pod on the node now: a new
    pod reads the config afresh, as a restarted plugin does. Without it, what the node loaded before is kept.
    """
    meta = node.get("metadata", {})
    current = dict(meta.get("labels") or {})
    ann = hoststate.node_annotations(node)
    status = node.get("status", {})
    cap_now, alloc_now = dict(status.get("capacity") or {}), dict(status.get("allocatable") or {})
    hw = hoststate.hardware(node)
    inv = hoststate.inventory_of(node)
    if pol is None or inv is None:
        gone = label_patch(current, {})
        if names.MIG_CONFIG_STATE in current:
            gone[names.MIG_CONFIG_STATE] = None
        return NodePlan(labels=gone, capacity=map_patch(cap_now, {}),
                        allocatable=map_patch(alloc_now, {}),
                        annotations={k: None for k in (names.DEVICE_REGISTRY, names.PLUGIN_CONFIG_APPLIED,
                                                       names.PLUGIN_CONFIG_LOADED, names.GFD_CONFIG_LOADED) if k in ann})
    wanted = operator_labels(pol, hw, current)
    labels_now = {**current, **wanted}
    f = hoststate.faults(node)
    dra_mode = labels_now.get(names.DRA_ENABLED) == "true"
    uids = pod_uids or {}
    choice, loaded = plugin.choose_config(pol, labels_now, configmaps,
                                          plugin.Loaded.from_annotation(ann.get(names.PLUGIN_CONFIG_LOADED)),
                                          uids.get("device-plugin"))
    gfd_choice, gfd_loaded = plugin.choose_config(pol, labels_now, configmaps,
                                                  plugin.Loaded.from_annotation(ann.get(names.GFD_CONFIG_LOADED)),
                                                  uids.get("gpu-feature-discovery"))
    adv = plugin.advertisement(inv, choice)
    gfd_adv = plugin.advertisement(inv, gfd_choice)
    states = operands.states(f, choice, adv.error if adv else None, gfd_adv.gfd_error if gfd_adv else None,
                             gfd_choice)
    prereq = f.driver_ok and f.toolkit_ok
    # The plugin waits for driver-ready and toolkit-ready only; a failing CUDA or plugin validation leaves the
    # GPUs allocatable (reference section 9, ``OP assets/state-device-plugin/0500_daemonset.yaml``).
    gate = validated and prereq
    dp_state = plugin_state(pol, labels_now, dra_mode, "device-plugin", states["device-plugin"])
    gfd_state = plugin_state(pol, labels_now, dra_mode, "gpu-feature-discovery", states["gpu-feature-discovery"])
    cap, alloc = plugin.resources(dp_state, cap_now, adv, gate)
    single = adv.single_request_resources if adv is not None and dp_state == plugin.RUNNING else ()
    wanted.update(plugin.gfd_labels(gfd_state, current, gfd_adv, timestamp))
    annotations: dict[str, str | None] = {**_loaded_patch(ann, names.PLUGIN_CONFIG_LOADED, loaded, dp_state),
                                          **_loaded_patch(ann, names.GFD_CONFIG_LOADED, gfd_loaded, gfd_state)}
    reg = registry(adv, choice) if dp_state == plugin.RUNNING else None
    if ann.get(names.DEVICE_REGISTRY) != reg:
        annotations[names.DEVICE_REGISTRY] = reg
    if dp_state == plugin.RUNNING and choice.config is not None:
        applied = choice.key or ""
        if ann.get(names.PLUGIN_CONFIG_APPLIED) != applied:
            annotations[names.PLUGIN_CONFIG_APPLIED] = applied
    return NodePlan(
        labels=label_patch(current, wanted), annotations=annotations,
        capacity=map_patch(cap_now, cap), allocatable=map_patch(alloc_now, alloc),
        operands=states, dra_mode=dra_mode,
        dra_inventory=inv if dra_mode and gate else None,
        awaiting_validation=prereq and not validated,
        devices=devicefile.devices(cap, alloc, adv), single_request=single,
    )
