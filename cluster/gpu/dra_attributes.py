"""What DRA drivers publish about each device: attribute and capacity names, with their CEL types.

Facts from ``shared/reference/gpu-semantics.md`` section 7: the NVIDIA driver ``gpu.nvidia.com`` (full
GPUs and MIG devices) and the example driver ``gpu.example.com``. Plain data; used to check CEL device
selectors before a claim ever reaches the scheduler.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

STRING, VERSION, INT, BOOL = "string", "version", "int", "bool"


@dataclass(frozen=True)
class DriverSchema:
    driver: str
    attributes: Mapping[str, str]  # name -> string|version|int|bool
    capacities: frozenset[str]
    capacity_patterns: tuple[str, ...] = ()  # regexes for numbered capacities (memorySlice0..7)
    removed: Mapping[str, str] = field(default_factory=dict)  # attribute -> when it went away
    device_classes: frozenset[str] = frozenset()
    type_values: frozenset[str] = frozenset()  # values of the "type" attribute, when the driver has one

    def has_capacity(self, name: str) -> bool:
        return name in self.capacities or any(re.fullmatch(p, name) for p in self.capacity_patterns)


_NVIDIA_COMMON = {
    "type": STRING,
    "uuid": STRING,
    "productName": STRING,
    "brand": STRING,
    "architecture": STRING,
    "cudaComputeCapability": VERSION,
    "driverVersion": VERSION,
    "cudaDriverVersion": VERSION,
}

NVIDIA = DriverSchema(
    driver="gpu.nvidia.com",
    attributes=MappingProxyType({**_NVIDIA_COMMON, "addressingMode": STRING, "parentUUID": STRING, "profile": STRING}),
    capacities=frozenset({"memory", "multiprocessors", "copyEngines", "decoders", "encoders", "jpegEngines", "ofaEngines"}),
    capacity_patterns=(r"memorySlice[0-7]",),
    removed=MappingProxyType(
        {"index": "v25.8.0", "minor": "v25.8.0", "parentIndex": "v25.8.0", "pcieBusID": "v25.8.0"}
    ),
    device_classes=frozenset({"gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"}),
    type_values=frozenset({"gpu", "mig", "vfio"}),
)

EXAMPLE = DriverSchema(
    driver="gpu.example.com",
    attributes=MappingProxyType(
        {"index": INT, "uuid": STRING, "model": STRING, "driverVersion": VERSION, "partition": INT,
         "partitionable": BOOL, "full": BOOL}
    ),
    capacities=frozenset({"memory", "compute"}),
    device_classes=frozenset({"gpu.example.com"}),
)

# Attributes every driver may publish under the standard domain.
STANDARD_DOMAIN = "resource.kubernetes.io"
STANDARD_ATTRIBUTES: Mapping[str, str] = MappingProxyType({"pciBusID": STRING, "pcieRoot": STRING})

DRIVERS: Mapping[str, DriverSchema] = MappingProxyType({NVIDIA.driver: NVIDIA, EXAMPLE.driver: EXAMPLE})


def known_device_classes() -> frozenset[str]:
    return frozenset(c for s in DRIVERS.values() for c in s.device_classes)
