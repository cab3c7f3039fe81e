"""Turn an NVML snapshot into the shared ``NodeInventory`` plus the facts only real hardware has.

``probe()`` takes a snapshot with pynvml (or a given stand-in) and maps it; ``from_snapshot`` is the pure mapping,
used for recorded answers too. MIG profile names are derived from GPU-instance profile info the way go-nvlib
does (``<G>g.<GB>gb[+me]``, ``<C>c.<G>g.<GB>gb`` when C != G), never from a device name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cluster.gpu import catalog, gfd_labels, inventory, inventory_json
from cluster.nvml import _pynvml, errors, snapshot

MIB = 1024 * 1024
_COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}
# NVML_GPU_INSTANCE_PROFILE_* constant -> (G slices, attribute suffix), from go-nvlib NewMigProfile.
_GI_CONSTS: Mapping[int, tuple[int, str]] = {
    0x0: (1, ""), 0x1: (2, ""), 0x2: (3, ""), 0x3: (4, ""), 0x4: (7, ""), 0x5: (8, ""), 0x6: (6, ""),
    0x7: (1, "+me"), 0x8: (2, "+me"), 0x9: (1, ""), 0xA: (1, "+gfx"), 0xB: (2, "+gfx"), 0xC: (4, "+gfx"),
    0xD: (1, "-me"), 0xE: (2, "-me"), 0xF: (1, "+me.all"), 0x10: (2, "+me.all"),
}
_ARCH_BY_MAJOR = {7: "Turing", 8: "Ampere", 9: "Hopper", 10: "Blackwell", 12: "Blackwell"}
_ERROR_NAMES = {3: "NotSupported", 4: "NoPermission", 6: "NotFound", 9: "DriverNotLoaded", 12: "LibraryNotFound"}


@dataclass(frozen=True)
class ProfileInfo:
    """A GPU-instance profile the GPU could take (answered even with MIG disabled)."""

    name: str
    profile_id: int
    instances: int
    multiprocessors: int
    memory_mib: int
    engines: inventory.Engines
    placements: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class GpuProbe:
    """What NVML said about one GPU beyond the inventory: raw name, PCI, memory use and possible profiles."""

    index: int
    pci_bus_id: str
    pci_device_id: int  # device << 16 | vendor, the form mig-parted filters on
    memory_total: int
    memory_used: int
    profiles: tuple[ProfileInfo, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class ProbeResult:
    inventory: inventory.NodeInventory
    gpus: tuple[GpuProbe, ...]
    machine: str
    snapshot: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "inventory": inventory_json.inventory_to_json(self.inventory),
            "machine": self.machine,
            "gpus": [
                {
                    "index": g.index,
                    "pciBusId": g.pci_bus_id,
                    "pciDeviceId": f"0x{g.pci_device_id:08X}",
                    "memoryTotal": g.memory_total,
                    "memoryUsed": g.memory_used,
                    "profiles": [
                        {"name": p.name, "profileId": p.profile_id, "instances": p.instances,
                         "multiprocessors": p.multiprocessors, "memoryMiB": p.memory_mib,
                         "engines": vars(p.engines), "placements": [list(x) for x in p.placements]}
                        for p in g.profiles
                    ],
                    "notes": list(g.notes),
                }
                for g in self.gpus
            ],
            "snapshot": dict(self.snapshot),
        }


def probe(nv: Any | None = None) -> ProbeResult:
    """Read this machine's GPUs. Raises ``NvmlUnavailable`` (exit code 3) when there is nothing to read."""
    module = nv if nv is not None else _pynvml.load()
    try:
        snap = snapshot.take(module)
    except module.NVMLError as exc:
        raise _unavailable(int(exc.value), str(exc)) from exc
    return from_snapshot(snap)


def _unavailable(code: int, text: str) -> errors.NvmlUnavailable:
    if code == 12:
        return errors.NvmlUnavailable("no NVIDIA driver here: libnvidia-ml.so.1 was not found (NVML_ERROR_LIBRARY_NOT_FOUND)",
                                      hint="run gpulab probe on a machine with an NVIDIA GPU and driver, or use --replay FILE")
    if code == 9:
        return errors.NvmlUnavailable("the NVIDIA driver is installed but not loaded (NVML_ERROR_DRIVER_NOT_LOADED)",
                                      hint="check `nvidia-smi` and `lsmod | grep nvidia`")
    return errors.NvmlUnavailable(f"NVML could not start: {text} (code {code})", hint="check `nvidia-smi`")


def from_snapshot(snap: Mapping[str, Any]) -> ProbeResult:
    """Map recorded NVML answers to an inventory; raises ``NvmlUnavailable`` for an init error or zero GPUs."""
    if "initError" in snap:
        raise _unavailable(int(snap["initError"]), _ERROR_NAMES.get(int(snap["initError"]), "error"))
    devices = snap.get("devices", [])
    if not devices:
        raise errors.NvmlUnavailable("NVML is working but reports no GPU on this machine", hint="check `nvidia-smi -L`")
    pairs = [_gpu(d) for d in devices]
    inv = inventory.NodeInventory(
        hostname=str(snap.get("hostname", "localhost")),
        gpus=tuple(g for g, _ in pairs),
        driver_version=_ok(snap.get("driverVersion"), "unknown"),
        cuda_driver_version=_cuda(snap.get("cudaDriverVersion")),
    )
    return ProbeResult(inventory=inv, gpus=tuple(p for _, p in pairs), machine=str(snap.get("machine", "unknown")), snapshot=snap)


def _ok(value: Any, default: Any) -> Any:
    return default if snapshot.is_error(value) or value is None else value


def _cuda(value: Any) -> tuple[int, int]:
    v = int(_ok(value, 0))
    return v // 1000, (v % 1000) // 10


def mig_memory_gb(total_bytes: int, mig_mib: int) -> int:
    """go-nvlib ``getMigMemorySizeGB``: the memory fraction rounded up to eighths, times whole GB (rounded up)."""
    fraction = math.ceil(mig_mib * MIB / total_bytes * 8) / 8
    total_gb = (total_bytes + 1024**3 - 1) // 1024**3
    return math.floor(fraction * total_gb + 0.5)


def _profile_name(const: int, info: Mapping[str, Any], total_bytes: int, ci_slices: int | None = None) -> str:
    g, suffix = _GI_CONSTS.get(const, (int(info["sliceCount"]), ""))
    gb = mig_memory_gb(total_bytes, int(info["memorySizeMB"]))
    c = g if ci_slices is None else ci_slices
    return f"{g}g.{gb}gb{suffix}" if c == g else f"{c}c.{g}g.{gb}gb{suffix}"


def _gpu(d: Mapping[str, Any]) -> tuple[inventory.GpuInfo, GpuProbe]:
    notes: list[str] = []
    name = _ok(d.get("name"), "unknown GPU")
    memory = _ok(d.get("memory"), {"total": 0, "used": 0})
    total = int(memory["total"])
    pci = _ok(d.get("pci"), {"busId": "", "pciDeviceId": 0})
    mig_mode: Any = d.get("migMode")
    capable = not snapshot.is_error(mig_mode)
    if not capable:
        notes.append(f"MIG: {_ERROR_NAMES.get(int(mig_mode['error']), 'error')} (not a MIG-capable GPU)")
    current, pending = (bool(mig_mode[0]), bool(mig_mode[1])) if capable else (False, False)
    profiles = _possible_profiles(d, total)
    model = _model(name, total, d, int(pci["pciDeviceId"]) >> 16, profiles)
    migs = _mig_devices(d, total, notes) if current else ()
    procs = tuple(
        inventory.Process(
            pid=int(p["pid"]), name=_ok(p.get("name"), ""),
            used_memory_mib=None if p.get("usedGpuMemory") is None else int(p["usedGpuMemory"]) // MIB,
            gi_id=_valid_id(p.get("gpuInstanceId")), ci_id=_valid_id(p.get("computeInstanceId")),
        )
        for p in _ok(d.get("processes"), [])
    )
    gpu = inventory.GpuInfo(
        index=int(d["index"]), uuid=_ok(d.get("uuid"), f"GPU-unknown-{d['index']}"), model=model,
        mig_capable=capable, mig_enabled=current, mig_pending=pending, mig_devices=migs,
        compute_mode=_COMPUTE_MODES.get(int(_ok(d.get("computeMode"), 0)), "Default"), processes=procs,
        pci_class=int(d["pciClass"], 0) if d.get("pciClass") else gfd_labels.PCI_CLASS_COMPUTE,
    )
    extra = GpuProbe(int(d["index"]), str(pci["busId"]), int(pci["pciDeviceId"]), total, int(memory["used"]),
                     tuple(p for p, _ in profiles), tuple(notes))
    return gpu, extra


def _valid_id(value: Any) -> int | None:
    # NVML reports 0xFFFFFFFF for "no GPU/compute instance" on non-MIG GPUs.
    return None if value is None or int(value) >= 0xFFFFFFFF else int(value)


def _possible_profiles(d: Mapping[str, Any], total: int) -> list[tuple[ProfileInfo, int]]:
    out = []
    for const_text, info in sorted(d.get("giProfiles", {}).items(), key=lambda kv: int(kv[0])):
        if snapshot.is_error(info):
            continue
        places = _ok(d.get("possiblePlacements", {}).get(str(info["id"])), [])
        engines = inventory.Engines(int(info["copyEngineCount"]), int(info["decoderCount"]), int(info["encoderCount"]),
                                    int(info["jpegCount"]), int(info["ofaCount"]))
        out.append((ProfileInfo(_profile_name(int(const_text), info, total), int(info["id"]), int(info["instanceCount"]),
                                int(info["multiprocessorCount"]), int(info["memorySizeMB"]), engines,
                                tuple((int(s), int(z)) for s, z in places)), int(const_text)))
    return out


def _model(name: str, total: int, d: Mapping[str, Any], device_id: int, profiles: list[tuple[ProfileInfo, int]]) -> catalog.GpuModel:
    """The model as NVML describes it; catalog facts NVML lacks (SMs, brand) fill in when the name is known."""
    known = catalog.by_nvml_name(name)
    cc = _ok(d.get("computeCapability"), [0, 0])
    mig_profiles = tuple(
        catalog.MigProfile(p.name, p.profile_id, _GI_CONSTS.get(const, (0, ""))[0], p.placements[0][1] if p.placements else 0,
                           p.instances, tuple(s for s, _ in p.placements), p.memory_mib, p.multiprocessors)
        for p, const in sorted(profiles, key=lambda pc: (_GI_CONSTS.get(pc[1], (0, ""))[0], pc[0].placements[0][1] if pc[0].placements else 0, pc[1]))
    )
    slices = max((s + z for p, _ in profiles for s, z in p.placements), default=0)
    full = max((p.multiprocessors for p, _ in profiles), default=0)
    return catalog.GpuModel(
        key=known.key if known else gfd_labels.sanitise(name),
        nvml_name=name,
        pci_device_id=device_id or (known.pci_device_id if known else 0),
        memory_mib=total // MIB,
        compute_capability=(int(cc[0]), int(cc[1])),
        multiprocessors=full or (known.multiprocessors if known else 0),
        architecture=known.architecture if known else _ARCH_BY_MAJOR.get(int(cc[0]), "unknown"),
        brand=known.brand if known else "Nvidia",
        mig_memory_slices=slices,
        mig_profiles=mig_profiles,
        aliases=known.aliases if known else (),
    )


def _mig_devices(d: Mapping[str, Any], total: int, notes: list[str]) -> tuple[inventory.MigDevice, ...]:
    by_id = {int(info["id"]): (int(c), info) for c, info in d.get("giProfiles", {}).items() if not snapshot.is_error(info)}
    out = []
    for m in d.get("migDevices", []):
        if "error" in m:
            continue  # an empty slot (NotFound), as go-nvlib skips it
        gi = _ok(d.get("gpuInstances", {}).get(str(m["giId"])), None)
        attrs = _ok(m.get("attributes"), None)
        if gi is None or attrs is None or int(gi["profileId"]) not in by_id:
            notes.append(f"MIG device {m.get('uuid')}: NVML did not describe its GPU instance; skipped")
            continue
        const, info = by_id[int(gi["profileId"])]
        ci = int(attrs["computeInstanceSliceCount"])
        out.append(inventory.MigDevice(
            profile=_profile_name(const, info, total, ci if ci != int(attrs["gpuInstanceSliceCount"]) else None),
            uuid=_ok(m.get("uuid"), ""), gi_id=int(m["giId"]), ci_id=int(_ok(m.get("ciId"), 0)),
            placement_start=int(gi["placement"]["start"]), placement_size=int(gi["placement"]["size"]),
            memory_mib=int(attrs["memorySizeMB"]), multiprocessors=int(attrs["multiprocessorCount"]),
            engines=inventory.Engines(int(attrs["sharedCopyEngineCount"]), int(attrs["sharedDecoderCount"]),
                                      int(attrs["sharedEncoderCount"]), int(attrs["sharedJpegCount"]), int(attrs["sharedOfaCount"])),
        ))
    return tuple(out)
