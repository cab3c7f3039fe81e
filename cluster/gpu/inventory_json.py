"""The JSON form of ``cluster.gpu.inventory`` values: TypedDicts for the payloads and the two conversions.

A recorded inventory (``gpulab probe --json``, a mirrored fleet) round-trips losslessly through these. Plain
data: this module must not talk to NVML or to a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict

from cluster import errors
from cluster.gpu import catalog
from cluster.gpu.inventory import COMPUTE_MODES, Engines, GpuInfo, MigDevice, NodeInventory, Process


class MigProfileJson(TypedDict):
    name: str
    profileId: int
    computeSlices: int
    memorySlices: int
    maxCount: int
    starts: list[int]
    memoryMiB: int
    multiprocessors: int


class ModelJson(TypedDict):
    key: str
    nvmlName: str
    pciDeviceId: str
    memoryMiB: int
    computeCapability: str
    multiprocessors: int
    architecture: str
    brand: str
    migMemorySlices: int
    migProfiles: list[MigProfileJson]


class MigDeviceJson(TypedDict):
    profile: str
    uuid: str
    giId: int
    ciId: int
    placement: dict[str, int]
    memoryMiB: int
    multiprocessors: int
    engines: dict[str, int]


class ProcessJson(TypedDict):
    pid: int
    name: str
    usedMemoryMiB: int | None
    giId: int | None
    ciId: int | None


class GpuJson(TypedDict):
    index: int
    uuid: str
    model: ModelJson
    migCapable: bool
    migEnabled: bool
    migPending: bool
    migDevices: list[MigDeviceJson]
    healthy: bool
    computeMode: str
    processes: list[ProcessJson]
    pciClass: str


class InventoryJson(TypedDict):
    hostname: str
    driverVersion: str
    cudaDriverVersion: str
    gpus: list[GpuJson]
    extra: NotRequired[dict[str, Any]]


def model_to_json(m: catalog.GpuModel) -> ModelJson:
    return {
        "key": m.key,
        "nvmlName": m.nvml_name,
        "pciDeviceId": f"0x{m.pci_device_id:04X}",
        "memoryMiB": m.memory_mib,
        "computeCapability": f"{m.compute_capability[0]}.{m.compute_capability[1]}",
        "multiprocessors": m.multiprocessors,
        "architecture": m.architecture,
        "brand": m.brand,
        "migMemorySlices": m.mig_memory_slices,
        "migProfiles": [
            {
                "name": p.name,
                "profileId": p.profile_id,
                "computeSlices": p.compute_slices,
                "memorySlices": p.memory_slices,
                "maxCount": p.max_count,
                "starts": list(p.starts),
                "memoryMiB": p.memory_mib,
                "multiprocessors": p.multiprocessors,
            }
            for p in m.mig_profiles
        ],
    }


def model_from_json(d: Mapping[str, Any]) -> catalog.GpuModel:
    """Raises KeyError/ValueError/TypeError on malformed input; callers turn that into a problem line."""
    major, minor = (int(x) for x in str(d["computeCapability"]).split("."))
    profiles = tuple(
        catalog.MigProfile(
            name=str(p["name"]),
            profile_id=int(p["profileId"]),
            compute_slices=int(p["computeSlices"]),
            memory_slices=int(p["memorySlices"]),
            max_count=int(p["maxCount"]),
            starts=tuple(int(s) for s in p["starts"]),
            memory_mib=int(p["memoryMiB"]),
            multiprocessors=int(p["multiprocessors"]),
        )
        for p in d.get("migProfiles", [])
    )
    model = catalog.GpuModel(
        key=str(d["key"]),
        nvml_name=str(d["nvmlName"]),
        pci_device_id=int(str(d["pciDeviceId"]), 0),
        memory_mib=int(d["memoryMiB"]),
        compute_capability=(major, minor),
        multiprocessors=int(d["multiprocessors"]),
        architecture=str(d["architecture"]),
        brand=str(d["brand"]),
        mig_memory_slices=int(d.get("migMemorySlices", 0)),
        mig_profiles=profiles,
    )
    known = catalog.MODELS.get(model.key)
    # A catalog model carries its aliases; keep identity with the catalog when nothing else differs.
    if known is not None and _same_model(known, model):
        return known
    return model


def _same_model(a: catalog.GpuModel, b: catalog.GpuModel) -> bool:
    return model_to_json(a) == model_to_json(b)


def _gpu_to_json(g: GpuInfo) -> GpuJson:
    return {
        "index": g.index,
        "uuid": g.uuid,
        "model": model_to_json(g.model),
        "migCapable": g.mig_capable,
        "migEnabled": g.mig_enabled,
        "migPending": g.mig_pending,
        "migDevices": [
            {
                "profile": m.profile,
                "uuid": m.uuid,
                "giId": m.gi_id,
                "ciId": m.ci_id,
                "placement": {"start": m.placement_start, "size": m.placement_size},
                "memoryMiB": m.memory_mib,
                "multiprocessors": m.multiprocessors,
                "engines": {
                    "copy": m.engines.copy,
                    "decoder": m.engines.decoder,
                    "encoder": m.engines.encoder,
                    "jpeg": m.engines.jpeg,
                    "ofa": m.engines.ofa,
                },
            }
            for m in g.mig_devices
        ],
        "healthy": g.healthy,
        "computeMode": g.compute_mode,
        "processes": [
            {"pid": p.pid, "name": p.name, "usedMemoryMiB": p.used_memory_mib, "giId": p.gi_id, "ciId": p.ci_id}
            for p in g.processes
        ],
        "pciClass": f"0x{g.pci_class:06X}",
    }


def inventory_from_json(data: Mapping[str, Any], problems: list[str]) -> NodeInventory | None:
    if not isinstance(data, Mapping):
        return None
    for key in ("hostname", "driverVersion", "cudaDriverVersion", "gpus"):
        if key not in data:
            problems.append(f"{key}: required field is missing")
    if problems:
        return None
    cuda = str(data["cudaDriverVersion"]).split(".")
    if len(cuda) != 2 or not all(c.isdigit() for c in cuda):
        problems.append(f"cudaDriverVersion: want MAJOR.MINOR, got {data['cudaDriverVersion']!r}")
        return None
    gpus: list[GpuInfo] = []
    for i, raw in enumerate(data["gpus"] if isinstance(data["gpus"], list) else []):
        try:
            gpus.append(_gpu_from_json(raw))
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            problems.append(f"gpus[{i}]: {type(exc).__name__}: {exc}")
    if not isinstance(data["gpus"], list):
        problems.append("gpus: must be a list")
    return NodeInventory(
        hostname=str(data["hostname"]),
        gpus=tuple(gpus),
        driver_version=str(data["driverVersion"]),
        cuda_driver_version=(int(cuda[0]), int(cuda[1])),
    )


def _gpu_from_json(d: Mapping[str, Any]) -> GpuInfo:
    migs = tuple(
        MigDevice(
            profile=str(m["profile"]),
            uuid=str(m["uuid"]),
            gi_id=int(m["giId"]),
            ci_id=int(m["ciId"]),
            placement_start=int(m["placement"]["start"]),
            placement_size=int(m["placement"]["size"]),
            memory_mib=int(m["memoryMiB"]),
            multiprocessors=int(m["multiprocessors"]),
            engines=Engines(**{k: int(v) for k, v in m.get("engines", {}).items()}),
        )
        for m in d.get("migDevices", [])
    )
    procs = tuple(
        Process(
            pid=int(p["pid"]),
            name=str(p.get("name", "")),
            used_memory_mib=p.get("usedMemoryMiB"),
            gi_id=p.get("giId"),
            ci_id=p.get("ciId"),
        )
        for p in d.get("processes", [])
    )
    mode = str(d.get("computeMode", "Default"))
    if mode not in COMPUTE_MODES:
        raise ValueError(f"computeMode {mode!r} is not one of {', '.join(COMPUTE_MODES)}")
    return GpuInfo(
        index=int(d["index"]),
        uuid=str(d["uuid"]),
        model=model_from_json(d["model"]),
        mig_capable=bool(d["migCapable"]),
        mig_enabled=bool(d["migEnabled"]),
        mig_pending=bool(d.get("migPending", d["migEnabled"])),
        mig_devices=migs,
        healthy=bool(d.get("healthy", True)),
        compute_mode=mode,
        processes=procs,
        pci_class=int(str(d.get("pciClass", "0x030200")), 0),
    )


def inventory_to_json(inv: NodeInventory) -> InventoryJson:
    return {
        "hostname": inv.hostname,
        "driverVersion": inv.driver_version,
        "cudaDriverVersion": f"{inv.cuda_driver_version[0]}.{inv.cuda_driver_version[1]}",
        "gpus": [_gpu_to_json(g) for g in inv.gpus],
    }


def from_json(data: Mapping[str, Any], *, source: str = "inventory") -> NodeInventory:
    """Rebuild an inventory from ``inventory_to_json`` output; every problem is reported at once."""
    problems: list[str] = []
    inv = inventory_from_json(data, problems)
    if problems or inv is None:
        raise errors.ConfigError(source, problems or ["not an inventory object"])
    return inv
