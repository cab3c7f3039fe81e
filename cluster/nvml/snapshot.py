"""Record what NVML answers about every GPU as plain JSON, using only NVML getters.

``take(nv)`` is the only code that calls NVML. ``nv`` is the pynvml module or a stand-in with the same names
(``cluster.nvml.fake``), so the same walk runs on hardware and on recorded answers. Each call's error is kept
as its NVML code instead of being raised, except at ``nvmlInit``. Read-only: only ``Get``/``Is`` calls here.
"""

from __future__ import annotations

import ctypes
import logging
import socket
from pathlib import Path
from typing import Any, Callable, NotRequired, TypedDict

log = logging.getLogger(__name__)

SCHEMA = "gpulab.nvml-snapshot/v1"
GI_PROFILE_COUNT_FALLBACK = 0x12  # NVML_GPU_INSTANCE_PROFILE_COUNT in nvidia-ml-py 13.615.71


class DeviceSnapshot(TypedDict):
    index: int
    name: Any
    uuid: Any
    memory: Any
    computeCapability: Any
    pci: Any
    pciClass: str | None
    attributes: Any
    migMode: Any
    maxMigDeviceCount: Any
    migDevices: list[Any]
    gpuInstances: dict[str, Any]
    giProfiles: dict[str, Any]
    possiblePlacements: dict[str, Any]
    computeMode: Any
    processes: Any


class Snapshot(TypedDict):
    schema: str
    hostname: str
    machine: str
    driverVersion: Any
    cudaDriverVersion: Any
    devices: list[DeviceSnapshot]
    initError: NotRequired[int]


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _call(nv: Any, fn: Callable[[], Any]) -> Any:
    """Run one NVML getter; an NVMLError becomes ``{"error": code}`` so the walk goes on."""
    try:
        return fn()
    except nv.NVMLError as exc:
        return {"error": int(exc.value)}


def _struct(obj: Any, fields: tuple[str, ...]) -> dict[str, Any]:
    return {f: (_text(getattr(obj, f)) if isinstance(getattr(obj, f), bytes) else getattr(obj, f)) for f in fields}


def is_error(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"error"}


def take(nv: Any, *, sysfs: Path = Path("/sys")) -> Snapshot:
    """Walk every GPU. Raises the ``NVMLError`` of ``nvmlInit`` (no library, no driver) for the caller to map."""
    nv.nvmlInit()
    try:
        count = nv.nvmlDeviceGetCount()
        snap: Snapshot = {
            "schema": SCHEMA,
            "hostname": socket.gethostname(),
            "machine": _read(sysfs / "class/dmi/id/product_name") or "unknown",
            "driverVersion": _call(nv, lambda: _text(nv.nvmlSystemGetDriverVersion())),
            "cudaDriverVersion": _call(nv, nv.nvmlSystemGetCudaDriverVersion),
            "devices": [_device(nv, i, sysfs) for i in range(count)],
        }
    finally:
        nv.nvmlShutdown()
    return snap


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _device(nv: Any, index: int, sysfs: Path) -> DeviceSnapshot:
    h = nv.nvmlDeviceGetHandleByIndex(index)
    pci = _call(nv, lambda: _struct(nv.nvmlDeviceGetPciInfo(h), ("busId", "pciDeviceId", "pciSubSystemId")))
    bus = pci.get("busId", "") if not is_error(pci) else ""
    mig_mode = _call(nv, lambda: list(nv.nvmlDeviceGetMigMode(h)))
    snap: DeviceSnapshot = {
        "index": index,
        "name": _call(nv, lambda: _text(nv.nvmlDeviceGetName(h))),
        "uuid": _call(nv, lambda: _text(nv.nvmlDeviceGetUUID(h))),
        "memory": _call(nv, lambda: _struct(nv.nvmlDeviceGetMemoryInfo(h), ("total", "free", "used"))),
        "computeCapability": _call(nv, lambda: list(nv.nvmlDeviceGetCudaComputeCapability(h))),
        "pci": pci,
        "pciClass": _read(sysfs / "bus/pci/devices" / bus[-12:].lower() / "class") if bus else None,
        "attributes": _call(nv, lambda: _attributes(nv, h)),
        "migMode": mig_mode,
        "maxMigDeviceCount": _call(nv, lambda: nv.nvmlDeviceGetMaxMigDeviceCount(h)),
        "migDevices": [],
        "gpuInstances": {},
        "giProfiles": {},
        "possiblePlacements": {},
        "computeMode": _call(nv, lambda: nv.nvmlDeviceGetComputeMode(h)),
        "processes": _call(nv, lambda: _processes(nv, h)),
    }
    if is_error(mig_mode):  # NotSupported: not a MIG-capable GPU; nothing more to ask
        return snap
    _profiles(nv, h, snap)
    if mig_mode[0] == nv.NVML_DEVICE_MIG_ENABLE and isinstance(snap["maxMigDeviceCount"], int):
        _mig_devices(nv, h, snap)
    return snap


def _attributes(nv: Any, h: Any) -> dict[str, Any]:
    fields = ("multiprocessorCount", "sharedCopyEngineCount", "sharedDecoderCount", "sharedEncoderCount",
              "sharedJpegCount", "sharedOfaCount", "gpuInstanceSliceCount", "computeInstanceSliceCount", "memorySizeMB")
    return _struct(nv.nvmlDeviceGetAttributes(h), fields)


def _processes(nv: Any, h: Any) -> list[dict[str, Any]]:
    out = []
    for p in nv.nvmlDeviceGetComputeRunningProcesses(h):
        name = _call(nv, lambda: _text(nv.nvmlSystemGetProcessName(p.pid)))
        out.append({
            "pid": p.pid,
            "usedGpuMemory": p.usedGpuMemory,
            "gpuInstanceId": getattr(p, "gpuInstanceId", None),
            "computeInstanceId": getattr(p, "computeInstanceId", None),
            "name": name,
        })
    return out


_PROFILE_FIELDS = ("id", "isP2pSupported", "sliceCount", "instanceCount", "multiprocessorCount", "copyEngineCount",
                   "decoderCount", "encoderCount", "jpegCount", "ofaCount", "memorySizeMB", "name")


def _profiles(nv: Any, h: Any, snap: DeviceSnapshot) -> None:
    """Every GPU-instance profile the GPU supports and its placements; NVML answers these with MIG disabled."""
    for const in range(getattr(nv, "NVML_GPU_INSTANCE_PROFILE_COUNT", GI_PROFILE_COUNT_FALLBACK)):
        info = _call(nv, lambda: _struct(nv.nvmlDeviceGetGpuInstanceProfileInfo(h, const), _PROFILE_FIELDS))
        snap["giProfiles"][str(const)] = info
        if not is_error(info):
            snap["possiblePlacements"][str(info["id"])] = _call(nv, lambda: _placements(nv, h, info["id"]))


def _placements(nv: Any, h: Any, profile_id: int) -> list[list[int]]:
    """The caller allocates the placement array and the count (nvidia-ml-py's low-level form)."""
    count = ctypes.c_uint(0)
    nv.nvmlDeviceGetGpuInstancePossiblePlacements(h, profile_id, None, ctypes.byref(count))
    array = (nv.c_nvmlGpuInstancePlacement_t * max(count.value, 1))()
    nv.nvmlDeviceGetGpuInstancePossiblePlacements(h, profile_id, array, ctypes.byref(count))
    return [[array[i].start, array[i].size] for i in range(count.value)]


def _mig_devices(nv: Any, h: Any, snap: DeviceSnapshot) -> None:
    for j in range(int(snap["maxMigDeviceCount"])):
        try:
            m = nv.nvmlDeviceGetMigDeviceHandleByIndex(h, j)
        except nv.NVMLError as exc:  # empty slots answer NotFound (go-nvlib also skips InvalidArgument)
            snap["migDevices"].append({"index": j, "error": int(exc.value)})
            continue
        gi_id = nv.nvmlDeviceGetGpuInstanceId(m)
        snap["migDevices"].append({
            "index": j,
            "uuid": _call(nv, lambda: _text(nv.nvmlDeviceGetUUID(m))),
            "giId": gi_id,
            "ciId": _call(nv, lambda: nv.nvmlDeviceGetComputeInstanceId(m)),
            "attributes": _call(nv, lambda: _attributes(nv, m)),
            "memory": _call(nv, lambda: _struct(nv.nvmlDeviceGetMemoryInfo(m), ("total", "free", "used"))),
        })
        if str(gi_id) not in snap["gpuInstances"]:
            snap["gpuInstances"][str(gi_id)] = _call(nv, lambda: _gi_info(nv, h, gi_id))


def _gi_info(nv: Any, h: Any, gi_id: int) -> dict[str, Any]:
    info = nv.nvmlGpuInstanceGetInfo(nv.nvmlDeviceGetGpuInstanceById(h, gi_id))
    return {"profileId": info.profileId, "placement": {"start": info.placement.start, "size": info.placement.size}}


# -- reading recorded snapshots ------------------------------------------------------------------------------

_WORDS: dict[type, str] = {dict: "an object", list: "a list", str: "text", int: "a whole number",
                           float: "a number", bool: "true/false"}
_DEVICE_SHAPES: dict[str, tuple[type, ...]] = {
    "name": (str,), "uuid": (str,), "memory": (dict,), "pci": (dict,), "migMode": (list,), "processes": (list,),
    "computeMode": (int,), "migDevices": (list,), "gpuInstances": (dict,), "giProfiles": (dict,),
    "possiblePlacements": (dict,), "pciClass": (str,), "maxMigDeviceCount": (int,),
}


def problems(doc: Any) -> list[str]:
    """Every way a recorded snapshot (``gpulab probe --json`` or a bare snapshot) differs from what we read.

    Each problem names its path (``devices[0].memory``). A field may hold its NVML error (``{"error": N}``)
    instead of a value, as ``take`` records it. An empty list means the probe code can read the document.
    """
    if not isinstance(doc, dict):
        return ["(root): must be a JSON object (a `gpulab probe --json` document or an NVML snapshot)"]
    out: list[str] = []
    schema = doc.get("schema")
    if schema != SCHEMA:
        out.append(f"schema: must be {SCHEMA!r}, got {schema!r}" + (" (written by a newer gpulab?)"
                                                                     if str(schema).startswith("gpulab.nvml") else ""))
    if "initError" in doc:
        if not isinstance(doc["initError"], int) or isinstance(doc["initError"], bool):
            out.append("initError: must be an NVML error code (a whole number)")
        return out
    devices = doc.get("devices")
    if not isinstance(devices, list):
        return out + ["devices: must be a list of recorded GPUs"]
    for i, dev in enumerate(devices):
        out += _device_problems(f"devices[{i}]", dev)
    return out


def _device_problems(where: str, dev: Any) -> list[str]:
    if not isinstance(dev, dict):
        return [f"{where}: must be an object describing one GPU"]
    out = []
    if not isinstance(dev.get("index"), int) or isinstance(dev.get("index"), bool):
        out.append(f"{where}.index: must be a whole number")
    for key, kinds in _DEVICE_SHAPES.items():
        value = dev.get(key)
        if value is None or is_error(value) or isinstance(value, kinds):
            continue
        out.append(f"{where}.{key}: must be {' or '.join(_WORDS[k] for k in kinds)} or an NVML error, "
                   f"got {_WORDS.get(type(value), type(value).__name__)}")
    memory = dev.get("memory")
    if isinstance(memory, dict) and not isinstance(memory.get("total"), int):
        out.append(f"{where}.memory.total: must be a whole number of bytes")
    pci = dev.get("pci")
    if isinstance(pci, dict) and not isinstance(pci.get("pciDeviceId"), int):
        out.append(f"{where}.pci.pciDeviceId: must be a whole number")
    mig_mode = dev.get("migMode")
    if isinstance(mig_mode, list) and len(mig_mode) != 2:
        out.append(f"{where}.migMode: must be [current, pending]")
    return out
