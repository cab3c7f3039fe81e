"""DCGM-exporter-style GPU metrics computed from the simulated load pods declare (pure part).

A pod sets its load with annotations: ``gpulab.dev/gpu-util`` (percent of each GPU it holds) and
``gpulab.dev/gpu-mem-mib`` (MiB it allocates on each GPU it holds). Time-sliced pods on one GPU share its
memory: pods get their memory in the order they claimed it (admission order; a pod that raises its figure moves
to the end, as a fresh allocation would), and a pod whose claim does not fit in what is left is the one that
pushed the GPU over: it fails with a CUDA out-of-memory error (see docs/gpu-stack.md, "GPU memory"). Utilisation
adds up and is capped at 100. Plain data; the exporter process is in ``dcgm_exporter``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cluster.gpu import inventory
from cluster.sim import checkpoint
from cluster.sim.gpu import admission, dra, hoststate, names

# Board power limits (W) used to scale simulated power draw; public spec-sheet figures.
TDP_WATTS = {"T4": 70, "L40S": 350, "A100-SXM4-40GB": 400, "A100-SXM4-80GB": 400, "H100-80GB-HBM3": 700,
             "H200-141GB": 700, "A30-24GB": 165}
METRICS = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_TEMP",
           "DCGM_FI_DEV_POWER_USAGE")


@dataclass(frozen=True)
class Claim:
    """One pod's load on one device (a GPU or a MIG device)."""

    uid: str
    namespace: str
    pod: str
    container: str
    util: float
    mem_mib: int


@dataclass(frozen=True)
class Device:
    node: str
    gpu: int
    uuid: str  # the physical GPU's UUID (dcgm-exporter labels MIG series with the parent)
    device_uuid: str  # the GPU or MIG device the pods hold
    model_name: str
    model_key: str
    total_mib: int
    mig_profile: str = ""
    gi_id: int = -1


@dataclass(frozen=True)
class Sample:
    device: Device
    util: float
    used_mib: int
    temp_c: float
    power_w: float
    pods: tuple[tuple[str, str, str], ...]  # (namespace, pod, container) of the pods that hold it


def devices(node: str, inv: inventory.NodeInventory) -> list[Device]:
    out: list[Device] = []
    for g in inv.gpus:
        if g.mig_enabled:
            out.extend(Device(node, g.index, g.uuid, m.uuid, g.model.nvml_name, g.model.key, m.memory_mib,
                              m.profile, m.gi_id) for m in g.mig_devices)
        else:
            out.append(Device(node, g.index, g.uuid, g.uuid, g.model.nvml_name, g.model.key, g.model.memory_mib))
    return out


def pod_load(pod: Mapping[str, Any]) -> tuple[float, int]:
    ann = pod.get("metadata", {}).get("annotations") or {}
    try:
        util = max(0.0, min(100.0, float(ann.get(names.POD_GPU_UTIL, "0"))))
    except ValueError:
        util = 0.0
    try:
        mem = max(0, int(float(ann.get(names.POD_GPU_MEM, "0"))))
    except ValueError:
        mem = 0
    return util, mem


def held_devices(entries: Sequence[checkpoint.Entry], node: Mapping[str, Any]) -> dict[str, str]:
    """Device UUID -> the container holding it, from the kubelet's checkpoint entries of one pod.

    IDs become UUIDs through what the node's plugin registered (extended resources) or its DRA devices (claims):
    nothing a pod's owner can write decides which GPU's memory a pod uses."""
    registered, _, _ = admission.registry(node)
    by_id = {d.id: d.uuid for devices in registered.values() for d in devices}
    inv = hoststate.inventory_of(node)
    by_name = dra.uuids_by_device(inv) if inv is not None else {}
    out: dict[str, str] = {}
    for e in entries:
        table = by_name if e.resource.startswith(admission.CLAIM_PREFIX) else by_id
        for device in e.device_ids:
            if device in table:
                out.setdefault(table[device], e.container)
    return out


def pod_devices(pod: Mapping[str, Any]) -> dict[str, str]:
    """Device UUID -> the container holding it, from the allocation shown on the pod (``gpulab.dev/devices``).

    Only for clusters whose kubelets gpulab does not play (no checkpoint): anyone who can edit the pod can
    write the annotation."""
    ann = pod.get("metadata", {}).get("annotations") or {}
    try:
        raw = json.loads(ann.get(names.POD_DEVICES, "{}"))
    except ValueError:
        return {}
    out: dict[str, str] = {}
    for container, items in (raw.items() if isinstance(raw, dict) else ()):
        for item in items if isinstance(items, list) else ():
            if isinstance(item, dict) and item.get("uuid"):
                out.setdefault(str(item["uuid"]), str(container))
    return out


def admitted(claims: Sequence[Claim], total_mib: int) -> tuple[list[Claim], list[Claim]]:
    """Split claims (in claim order) into those whose memory fits and those that ran the GPU out of memory."""
    fits: list[Claim] = []
    over: list[Claim] = []
    used = 0
    for c in claims:
        if used + c.mem_mib > total_mib:
            over.append(c)
        else:
            used += c.mem_mib
            fits.append(c)
    return fits, over


def sample(device: Device, running: Sequence[Claim]) -> Sample:
    util = min(100.0, sum(c.util for c in running))
    used = sum(c.mem_mib for c in running)
    tdp = TDP_WATTS.get(device.model_key, 300)
    idle = round(tdp * 0.12, 1)
    return Sample(
        device=device, util=util, used_mib=min(used, device.total_mib),
        temp_c=round(31.0 + util * 0.45, 1), power_w=round(idle + (tdp - idle) * util / 100.0, 1),
        pods=tuple((c.namespace, c.pod, c.container) for c in running),
    )


def series(s: Sample) -> list[tuple[str, dict[str, str], float]]:
    """(metric, labels, value) rows for one device: one row per pod holding it, or one without pod labels."""
    d = s.device
    base = {"gpu": str(d.gpu), "UUID": d.uuid, "modelName": d.model_name, "Hostname": d.node}
    if d.mig_profile:
        base.update(GPU_I_PROFILE=d.mig_profile, GPU_I_ID=str(d.gi_id))
    holders = s.pods or (("", "", ""),)
    values = {"DCGM_FI_DEV_GPU_UTIL": s.util, "DCGM_FI_DEV_FB_USED": float(s.used_mib),
              "DCGM_FI_DEV_FB_FREE": float(d.total_mib - s.used_mib), "DCGM_FI_DEV_GPU_TEMP": s.temp_c,
              "DCGM_FI_DEV_POWER_USAGE": s.power_w}
    rows = []
    for metric in METRICS:
        for ns, pod, container in holders:
            rows.append((metric, {**base, "namespace": ns, "pod": pod, "container": container}, values[metric]))
    return rows


# What the process whose allocation did not fit prints before it exits 1: the CUDA runtime's error string for
# cudaErrorMemoryAllocation ("out of memory", cudaGetErrorString), in the form CUDA programs and PyTorch's c10
# error check print it. The exporter writes nothing else: no Event, no pod reason (a real DCGM exporter only reads).
OOM_LOG_LINE = "CUDA error: out of memory"
