"""What ``nvidia-smi`` sees in a container on a simulated node: one function for both places it is asked.

On ``local`` the kubelet endpoint (``server``) asks it for ``kubectl exec … nvidia-smi``, with the
``NVIDIA_VISIBLE_DEVICES`` it derives from the device manager's checkpoint; on kind the GPU stack's nvidia-smi
socket (``smisocket``) asks it with the variable the real kubelet set from gpulab's node plugin's ``Allocate``
(``cluster/gosrc/kindplugin``). Either way the answer comes from the node object alone: its hardware annotation, MIG
layout and faults (``cluster.sim.gpu.hoststate``). Plain data: nothing here talks to a cluster.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cluster import errors, quantity
from cluster.gpu.nvidia_smi import view as smi_view
from cluster.sim import nodes as nodes_mod
from cluster.sim.gpu import admission, hoststate
from cluster.sim.kubelet import programs


def container(node: Mapping[str, Any] | None, visible: str | None) -> programs.Container:
    """The container's GPU tools for ``visible`` (its ``NVIDIA_VISIBLE_DEVICES``) on ``node``: no view when the
    toolkit injected nothing (no GPUs on the node, the variable unset, ``void`` or empty)."""
    inv = hoststate.inventory_of(node) if node else None
    if node is None or inv is None:
        return programs.Container(None)
    if visible is None or visible.strip() in smi_view.NOT_INJECTED:
        return programs.Container(None)
    try:
        cpus = max(1, int(quantity.parse(node.get("status", {}).get("capacity", {}).get("cpu", "1")).value))
    except quantity.QuantityError:
        cpus = 1
    try:
        hardware = json.loads(hoststate.node_annotations(node).get(nodes_mod.HARDWARE_ANNOTATION, "") or "{}")
    except ValueError:
        hardware = {}
    nvlink = bool(hardware.get("nvlink")) if isinstance(hardware, dict) else False
    host = smi_view.simulated_host(inv, cpus=cpus, numa_nodes=admission.numa_nodes(node), nvlink=nvlink)
    try:
        view = smi_view.container(host, visible)
    except errors.ConfigError:  # a device the node no longer has (repartitioned since): the tool finds none
        view = smi_view.container(host, "none")
    return programs.Container(view, hoststate.faults(node).driver_ok)
