"""One GPU's values as ``--query-gpu`` prints them (bare, without units), for the query and ``-q`` renderers.

Values come from the inventory (name, UUID, MIG mode, compute mode, processes), the board (bus id, NVLink fabric)
and ``board.facts`` (what an idle GPU of the model reported on real hardware). A field this module leaves out
takes the idle value ``fields`` recorded for every model, or ``[N/A]``. Memory in use is what the inventory's
processes hold; utilisation, clocks and power are those of an idle GPU. Plain data; no NVML, no cluster.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from cluster.gpu import inventory
from cluster.gpu.nvidia_smi import board, view

NA = "[N/A]"
COMPUTE_MODES = {"Default": "Default", "Exclusive_Thread": "Exclusive_Thread", "Prohibited": "Prohibited",
                 "Exclusive_Process": "Exclusive_Process"}  # fmt: skip


def timestamp(now: datetime) -> str:
    """``timestamp`` as queried: ``2026/11/28 06:24:19.190``."""
    return now.strftime("%Y/%m/%d %H:%M:%S.") + f"{now.microsecond // 1000:03d}"


def serial(uuid: str) -> str:
    """A stable 13-digit board serial for a simulated GPU (real ones look like ``1653823048014``)."""
    digest = int(hashlib.sha256(uuid.encode()).hexdigest()[:12], 16)
    return str(1650000000000 + digest % 10**11)


def pdi(uuid: str) -> str:
    """A stable ``GPU PDI`` (a per-chip 64-bit id, ``0xa01cf9daf129f1ea`` on a real H100)."""
    return "0x" + hashlib.sha256(("pdi/" + uuid).encode()).hexdigest()[:16]


def memory_used_mib(gpu: inventory.GpuInfo) -> int:
    return sum(p.used_memory_mib or 0 for p in gpu.processes)


def memory_free_mib(gpu: inventory.GpuInfo) -> int | None:
    known = board.facts(gpu.model)
    if known.free_idle_mib is None:
        return None
    return known.free_idle_mib - memory_used_mib(gpu)


def _opt(value: object) -> str:
    return NA if value is None else str(value)


def _watts(value: float | None) -> str:
    return NA if value is None else f"{value:.2f}"


def values(v: view.View, gpu: view.Gpu, now: datetime) -> dict[str, str]:
    """Every field this simulator decides, by canonical ``--query-gpu`` name."""
    info, model, known = gpu.info, gpu.model, board.facts(gpu.model)
    _, bus, devfn = gpu.bus_id.split(":")
    mig = ("Enabled" if info.mig_enabled else "Disabled") if info.mig_capable else NA
    mig_pending = ("Enabled" if info.mig_pending else "Disabled") if info.mig_capable else NA
    util = NA if info.mig_enabled else "0"
    free = memory_free_mib(info)
    out = {
        "timestamp": timestamp(now), "driver_version": v.driver_version, "count": str(len(v.gpus)),
        "name": model.nvml_name, "serial": serial(info.uuid), "uuid": info.uuid, "index": str(gpu.index),
        "pci.bus_id": gpu.bus_id, "pci.domain": "0x" + gpu.bus_id.split(":")[0][-4:], "pci.bus": f"0x{bus}",
        "pci.device": f"0x{devfn.split('.')[0]}", "pci.baseClass": hex(info.pci_class >> 16),
        "pci.subClass": hex(info.pci_class >> 8 & 0xFF), "pci.device_id": f"0x{model.pci_device_id:04X}10DE",
        "pci.sub_device_id": NA if known.sub_device_id is None else f"0x{known.sub_device_id:08X}",
        "pcie.link.gen.current": _opt(known.pcie_gen), "pcie.link.gen.gpucurrent": _opt(known.pcie_gen),
        "pcie.link.gen.max": _opt(known.pcie_gen), "pcie.link.gen.gpumax": _opt(known.pcie_gen),
        "pcie.link.width.current": _opt(known.pcie_width), "pcie.link.width.max": _opt(known.pcie_width),
        "vbios_version": _opt(known.vbios), "inforom.img": _opt(known.inforom_image),
        "inforom.oem": _opt(known.inforom_oem), "inforom.ecc": _opt(known.inforom_ecc),
        "memory.total": str(model.memory_mib), "memory.reserved": _opt(known.reserved_mib),
        "memory.used": str(memory_used_mib(info)), "memory.free": _opt(free),
        "compute_mode": COMPUTE_MODES.get(info.compute_mode, info.compute_mode),
        "compute_cap": "{}.{}".format(*model.compute_capability), "mig.mode.current": mig,
        "mig.mode.pending": mig_pending, "utilization.gpu": util, "utilization.memory": util,
        "temperature.gpu": _opt(known.idle_temp_c), "temperature.gpu.tlimit": _opt(known.temp_limit_c),
        "temperature.memory": _opt(known.idle_memory_temp_c), "remapped_rows.histogram.max": _opt(known.remap_banks),
        "platform.module_id": str(gpu.host_index + 1),
    }
    out.update(_power(known))
    out.update(_clocks(known.clocks))
    out.update(_fabric(v.host.board.has_nvswitch() and v.host.board.nvlink))
    return out


def _power(known: board.ModelFacts) -> dict[str, str]:
    limit = None if known.power_limit_w is None else float(known.power_limit_w)
    draw = _watts(known.idle_power_w)
    names = ("power.limit", "enforced.power.limit", "power.default_limit", "power.max_limit")
    limits = {k: _watts(limit) for k in names}
    return {"power.draw": draw, "power.draw.average": draw, "power.draw.instant": draw,
            "power.min_limit": _watts(None if known.power_min_w is None else float(known.power_min_w)), **limits}


def _clocks(clocks: board.Clocks | None) -> dict[str, str]:
    names = ("clocks.current.graphics", "clocks.current.sm", "clocks.current.memory", "clocks.current.video",
             "clocks.applications.graphics", "clocks.applications.memory", "clocks.default_applications.graphics",
             "clocks.default_applications.memory", "clocks.max.graphics", "clocks.max.sm", "clocks.max.memory")
    if clocks is None:
        return dict.fromkeys(names, NA)
    c = clocks
    numbers = (c.idle_graphics, c.idle_graphics, c.memory, c.idle_video, c.max_graphics, c.memory, c.max_graphics,
               c.memory, c.max_graphics, c.max_graphics, c.memory)
    return {name: str(n) for name, n in zip(names, numbers)}


def _fabric(on_nvswitch: bool) -> dict[str, str]:
    """An NVSwitch board's fabric manager has registered each GPU (as recorded on the H200 board); else N/A."""
    if not on_nvswitch:
        return dict.fromkeys(("fabric.state", "fabric.status", "fabric.cliqueId", "fabric.clusterUuid"), "N/A")
    return {"fabric.state": "Completed", "fabric.status": "Success", "fabric.cliqueId": "0",
            "fabric.clusterUuid": "00000000-0000-0000-0000-000000000000"}
