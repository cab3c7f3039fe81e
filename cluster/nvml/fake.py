"""A stand-in for the pynvml module that answers from a recorded snapshot (``snapshot.take`` output).

Tests, ``gpulab probe --replay`` and mirrored fleets use it to run the exact probe code path against recorded
hardware. It implements only the getters ``snapshot.take`` calls, with pynvml's names, error codes and the
ctypes placement struct; it has no setters at all.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_DEVICE_MIG_ENABLE = 1
NVML_GPU_INSTANCE_PROFILE_COUNT = 0x12

_NAMES = {2: "Invalid Argument", 3: "Not Supported", 4: "Insufficient Permissions", 6: "Not Found",
          9: "Driver Not Loaded", 12: "NVML Shared Library Not Found", 999: "Unknown Error"}


class NVMLError(Exception):
    """Same shape as pynvml's: ``.value`` holds the NVML_ERROR_* code."""

    def __init__(self, value: int) -> None:
        self.value = value
        super().__init__(_NAMES.get(value, f"NVML Error with code {value}"))


class c_nvmlGpuInstancePlacement_t(ctypes.Structure):  # noqa: N801 - pynvml's name
    _fields_ = [("start", ctypes.c_uint), ("size", ctypes.c_uint)]


@dataclass(frozen=True)
class _Handle:
    gpu: int
    mig: int | None = None
    gi: int | None = None


class FakePynvml:
    """Answers pynvml getters from ``snapshot``; ``nvmlInit`` raises the recorded ``initError`` if there is one."""

    NVMLError = NVMLError
    c_nvmlGpuInstancePlacement_t = c_nvmlGpuInstancePlacement_t
    NVML_ERROR_NOT_SUPPORTED = NVML_ERROR_NOT_SUPPORTED
    NVML_ERROR_NOT_FOUND = NVML_ERROR_NOT_FOUND
    NVML_ERROR_LIBRARY_NOT_FOUND = NVML_ERROR_LIBRARY_NOT_FOUND
    NVML_ERROR_DRIVER_NOT_LOADED = NVML_ERROR_DRIVER_NOT_LOADED
    NVML_DEVICE_MIG_ENABLE = NVML_DEVICE_MIG_ENABLE
    NVML_GPU_INSTANCE_PROFILE_COUNT = NVML_GPU_INSTANCE_PROFILE_COUNT

    def __init__(self, snapshot: dict[str, Any]) -> None:
        self.snap = snapshot
        self.calls: list[str] = []

    # --- plumbing ---
    def _answer(self, name: str, value: Any) -> Any:
        self.calls.append(name)
        if isinstance(value, dict) and set(value) == {"error"}:
            raise NVMLError(int(value["error"]))
        return value

    def _dev(self, h: _Handle) -> dict[str, Any]:
        return dict(self.snap["devices"][h.gpu])

    def _mig(self, h: _Handle) -> dict[str, Any]:
        return dict(self._dev(h)["migDevices"][h.mig])

    # --- system ---
    def nvmlInit(self) -> None:  # noqa: N802 - pynvml's names
        if "initError" in self.snap:
            raise NVMLError(int(self.snap["initError"]))
        self.calls.append("nvmlInit")

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.calls.append("nvmlShutdown")

    def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802
        return str(self._answer("nvmlSystemGetDriverVersion", self.snap["driverVersion"]))

    def nvmlSystemGetCudaDriverVersion(self) -> int:  # noqa: N802
        return int(self._answer("nvmlSystemGetCudaDriverVersion", self.snap["cudaDriverVersion"]))

    def nvmlSystemGetProcessName(self, pid: int) -> str:  # noqa: N802
        for d in self.snap["devices"]:
            for p in d["processes"] if isinstance(d["processes"], list) else []:
                if p["pid"] == pid:
                    return str(self._answer("nvmlSystemGetProcessName", p["name"]))
        raise NVMLError(NVML_ERROR_NOT_FOUND)

    # --- devices ---
    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return len(self.snap["devices"])

    def nvmlDeviceGetHandleByIndex(self, i: int) -> _Handle:  # noqa: N802
        return _Handle(i)

    def nvmlDeviceGetName(self, h: _Handle) -> str:  # noqa: N802
        return str(self._answer("nvmlDeviceGetName", self._dev(h)["name"]))

    def nvmlDeviceGetUUID(self, h: _Handle) -> str:  # noqa: N802
        src = self._mig(h) if h.mig is not None else self._dev(h)
        return str(self._answer("nvmlDeviceGetUUID", src["uuid"]))

    def nvmlDeviceGetMemoryInfo(self, h: _Handle) -> SimpleNamespace:  # noqa: N802
        src = self._mig(h) if h.mig is not None else self._dev(h)
        return SimpleNamespace(**self._answer("nvmlDeviceGetMemoryInfo", src["memory"]))

    def nvmlDeviceGetCudaComputeCapability(self, h: _Handle) -> tuple[int, int]:  # noqa: N802
        major, minor = self._answer("nvmlDeviceGetCudaComputeCapability", self._dev(h)["computeCapability"])
        return int(major), int(minor)

    def nvmlDeviceGetPciInfo(self, h: _Handle) -> SimpleNamespace:  # noqa: N802
        pci = self._answer("nvmlDeviceGetPciInfo", self._dev(h)["pci"])
        return SimpleNamespace(**{k: (v.encode() if k == "busId" else v) for k, v in pci.items()})

    def nvmlDeviceGetAttributes(self, h: _Handle) -> SimpleNamespace:  # noqa: N802
        src = self._mig(h) if h.mig is not None else self._dev(h)
        return SimpleNamespace(**self._answer("nvmlDeviceGetAttributes", src["attributes"]))

    def nvmlDeviceGetMigMode(self, h: _Handle) -> list[int]:  # noqa: N802
        return list(self._answer("nvmlDeviceGetMigMode", self._dev(h)["migMode"]))

    def nvmlDeviceGetMaxMigDeviceCount(self, h: _Handle) -> int:  # noqa: N802
        return int(self._answer("nvmlDeviceGetMaxMigDeviceCount", self._dev(h)["maxMigDeviceCount"]))

    def nvmlDeviceGetComputeMode(self, h: _Handle) -> int:  # noqa: N802
        return int(self._answer("nvmlDeviceGetComputeMode", self._dev(h)["computeMode"]))

    def nvmlDeviceGetComputeRunningProcesses(self, h: _Handle) -> list[SimpleNamespace]:  # noqa: N802
        procs = self._answer("nvmlDeviceGetComputeRunningProcesses", self._dev(h)["processes"])
        return [SimpleNamespace(**{k: v for k, v in p.items() if k != "name"}) for p in procs]

    # --- MIG ---
    def nvmlDeviceGetGpuInstanceProfileInfo(self, h: _Handle, const: int) -> SimpleNamespace:  # noqa: N802
        info = self._dev(h)["giProfiles"].get(str(const), {"error": NVML_ERROR_INVALID_ARGUMENT})
        return SimpleNamespace(**self._answer("nvmlDeviceGetGpuInstanceProfileInfo", info))

    def nvmlDeviceGetGpuInstancePossiblePlacements(self, h: _Handle, profile_id: int, array: Any, count_ref: Any) -> int:  # noqa: N802
        placements = self._answer("nvmlDeviceGetGpuInstancePossiblePlacements", self._dev(h)["possiblePlacements"][str(profile_id)])
        count = count_ref._obj  # ctypes.byref(c_uint)
        if array is not None:
            for i, (start, size) in enumerate(placements[: count.value]):
                array[i].start, array[i].size = start, size
        count.value = len(placements)
        return 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: _Handle, j: int) -> _Handle:  # noqa: N802
        entry = self._dev(h)["migDevices"][j]
        if "error" in entry:
            self._answer("nvmlDeviceGetMigDeviceHandleByIndex", {"error": entry["error"]})
        return _Handle(h.gpu, mig=j)

    def nvmlDeviceGetGpuInstanceId(self, h: _Handle) -> int:  # noqa: N802
        return int(self._answer("nvmlDeviceGetGpuInstanceId", self._mig(h)["giId"]))

    def nvmlDeviceGetComputeInstanceId(self, h: _Handle) -> int:  # noqa: N802
        return int(self._answer("nvmlDeviceGetComputeInstanceId", self._mig(h)["ciId"]))

    def nvmlDeviceGetGpuInstanceById(self, h: _Handle, gi_id: int) -> _Handle:  # noqa: N802
        self._answer("nvmlDeviceGetGpuInstanceById", self._dev(h)["gpuInstances"].get(str(gi_id), {"error": NVML_ERROR_NOT_FOUND}))
        return _Handle(h.gpu, gi=gi_id)

    def nvmlGpuInstanceGetInfo(self, gi: _Handle) -> SimpleNamespace:  # noqa: N802
        info = self._answer("nvmlGpuInstanceGetInfo", self._dev(gi)["gpuInstances"][str(gi.gi)])
        return SimpleNamespace(profileId=info["profileId"], placement=SimpleNamespace(**info["placement"]))
