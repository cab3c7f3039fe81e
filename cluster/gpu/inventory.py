"""What one host's GPUs are: frozen value types shared by the NVML probe and the simulated GPU stack.

A ``NodeInventory`` is what NVML would report on a host: each GPU's model, UUID, MIG mode and MIG devices,
health, compute mode and running processes. The probe builds one from real NVML answers; fleet specs build one
with ``simulated_inventory``; both feed the same ``advertise`` function. This module is plain data: it must not
talk to NVML or to a cluster.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cluster.gpu import catalog

MPS_SERVER_NAME = "nvidia-cuda-mps-server"
COMPUTE_MODES = ("Default", "Exclusive_Thread", "Prohibited", "Exclusive_Process")

# One namespace for every simulated UUID, so a simulated node and "what NVML would report" agree.
_UUID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_DNS, "gpulab.simulated-gpus")
_PROFILE_RE = re.compile(r"^(?:(?P<c>\d+)c\.)?(?P<g>\d+)g\.(?P<gb>\d+)gb(?P<attrs>[+-].*)?$")


@dataclass(frozen=True)
class Engines:
    """The media and copy engines a MIG device gets (NVML device attributes ``shared*Count``)."""

    copy: int = 0
    decoder: int = 0
    encoder: int = 0
    jpeg: int = 0
    ofa: int = 0


@dataclass(frozen=True)
class MigDevice:
    """One MIG device (a compute instance inside a GPU instance) as NVML describes it."""

    profile: str  # go-nvlib form: "1g.10gb", "1g.10gb+me", "1c.3g.40gb"
    uuid: str
    gi_id: int
    ci_id: int
    placement_start: int  # memory-slice units
    placement_size: int
    memory_mib: int
    multiprocessors: int
    engines: Engines = field(default_factory=Engines)

    @property
    def gi_slices(self) -> int:
        return _profile_numbers(self.profile)[1]

    @property
    def ci_slices(self) -> int:
        return _profile_numbers(self.profile)[0]

    @property
    def resource_suffix(self) -> str:
        """The profile as a resource name suffix: ``+`` becomes ``.`` (``nvidia.com/mig-1g.10gb.me``)."""
        return self.profile.replace("+", ".")


@dataclass(frozen=True)
class Process:
    """A running compute process on a GPU (``nvmlDeviceGetComputeRunningProcesses``)."""

    pid: int
    name: str = ""
    used_memory_mib: int | None = None
    gi_id: int | None = None
    ci_id: int | None = None

    @property
    def is_mps_server(self) -> bool:
        return self.name.rsplit("/", 1)[-1] == MPS_SERVER_NAME


@dataclass(frozen=True)
class GpuInfo:
    """One physical GPU."""

    index: int
    uuid: str
    model: catalog.GpuModel
    mig_capable: bool
    mig_enabled: bool
    mig_pending: bool  # the pending MIG mode (applies after a GPU reset); equals mig_enabled when nothing waits
    mig_devices: tuple[MigDevice, ...] = ()
    healthy: bool = True
    compute_mode: str = "Default"
    processes: tuple[Process, ...] = ()
    pci_class: int = 0x030200  # 3D controller; GFD's gpu.mode reads it ("compute")

    @property
    def mps_server_running(self) -> bool:
        return any(p.is_mps_server for p in self.processes)


@dataclass(frozen=True)
class NodeInventory:
    """Every GPU of one host plus the driver facts GFD labels come from."""

    hostname: str
    gpus: tuple[GpuInfo, ...]
    driver_version: str
    cuda_driver_version: tuple[int, int]


# --- profiles, engines and simulated GPUs -----------------------------------------------------------------


def _profile_numbers(profile: str) -> tuple[int, int, int]:
    """(C, G, GB) of a go-nvlib profile string; C defaults to G."""
    m = _PROFILE_RE.match(profile)
    if m is None:
        raise ValueError(f"not a MIG profile: {profile!r}")
    g = int(m["g"])
    c = int(m["c"]) if m["c"] else g
    return c, g, int(m["gb"])


# (copy, decoder, encoder, jpeg, ofa) per profile shape: (compute slices, memory slices, media extension).
_HOPPER_ENGINES: Mapping[tuple[int, int, bool], tuple[int, int, int, int, int]] = {
    # Read with nvmlDeviceGetGpuInstanceProfileInfo on a real H100 80GB HBM3 (driver 580.159.04); see
    # tests/fixtures/nvml/h100-real-probe.json and h100-real-nvidia-smi-mig-lgip.txt. H200 assumed the same.
    (1, 1, False): (1, 1, 0, 1, 0), (1, 1, True): (1, 1, 0, 1, 1), (1, 2, False): (1, 1, 0, 1, 0),
    (2, 2, False): (2, 2, 0, 2, 0), (3, 4, False): (3, 3, 0, 3, 0), (4, 4, False): (4, 4, 0, 4, 0),
    (7, 8, False): (8, 7, 0, 7, 1),
}
_AMPERE_8_ENGINES: Mapping[tuple[int, int, bool], tuple[int, int, int, int, int]] = {
    # NVIDIA MIG user guide `nvidia-smi mig -lgip` for A100; unconfirmed on hardware here.
    (1, 1, False): (1, 0, 0, 0, 0), (1, 1, True): (1, 1, 0, 1, 1), (1, 2, False): (1, 1, 0, 0, 0),
    (2, 2, False): (2, 1, 0, 0, 0), (3, 4, False): (3, 2, 0, 0, 0), (4, 4, False): (4, 2, 0, 0, 0),
    (7, 8, False): (7, 5, 0, 1, 1),
}
_A30_ENGINES: Mapping[tuple[int, int, bool], tuple[int, int, int, int, int]] = {
    # A30 MIG guide tables as commonly published; unconfirmed on hardware here.
    (1, 1, False): (1, 1, 0, 0, 0), (1, 1, True): (1, 1, 0, 1, 1), (2, 2, False): (2, 2, 0, 0, 0),
    (2, 2, True): (2, 2, 0, 1, 1), (4, 4, False): (4, 4, 0, 1, 1),
}


def profile_engines(model: catalog.GpuModel, profile: catalog.MigProfile) -> Engines:
    """Engine counts of a GPU-instance profile, as ``nvmlDeviceGetGpuInstanceProfileInfo`` reports them."""
    table = _HOPPER_ENGINES if model.architecture == "Hopper" else _A30_ENGINES if model.mig_memory_slices == 4 else _AMPERE_8_ENGINES
    key = (profile.compute_slices, profile.memory_slices, profile.is_media_extension)
    return Engines(*table.get(key, (profile.compute_slices, 0, 0, 0, 0)))


def gpu_uuid(hostname: str, index: int) -> str:
    return f"GPU-{uuid.uuid5(_UUID_NAMESPACE, f'{hostname}/gpu/{index}')}"


def mig_uuid(hostname: str, index: int, gi_id: int, ci_id: int) -> str:
    return f"MIG-{uuid.uuid5(_UUID_NAMESPACE, f'{hostname}/gpu/{index}/gi/{gi_id}/ci/{ci_id}')}"


@dataclass(frozen=True)
class Placement:
    """One GPU instance placed on a GPU: its profile and the memory slices it occupies."""

    profile: str
    start: int
    size: int


def mig_devices_for_layout(
    hostname: str, gpu_index: int, model: catalog.GpuModel, placements: Sequence[Placement]
) -> tuple[MigDevice, ...]:
    """MIG devices a GPU shows after creating ``placements`` in order (one full-size CI per GI).

    GI ids are handed out 1, 2, ... in creation order; that is how a simulated GPU numbers them, not a claim
    about the driver's numbering.
    """
    devices: list[MigDevice] = []
    for gi_id, p in enumerate(placements, start=1):
        profile = model.profile(p.profile)
        if profile is None:
            raise ValueError(f"{model.nvml_name} has no MIG profile {p.profile!r}")
        devices.append(
            MigDevice(
                profile=profile.name,
                uuid=mig_uuid(hostname, gpu_index, gi_id, 0),
                gi_id=gi_id,
                ci_id=0,
                placement_start=p.start,
                placement_size=p.size,
                memory_mib=profile.memory_mib,
                multiprocessors=profile.multiprocessors,
                engines=profile_engines(model, profile),
            )
        )
    return tuple(devices)


def simulated_inventory(
    hostname: str,
    model: catalog.GpuModel,
    count: int,
    *,
    driver_version: str = "580.95.05",
    cuda: tuple[int, int] = (13, 0),
    layouts: Mapping[int, Sequence[Placement]] | None = None,
) -> NodeInventory:
    """A host with ``count`` GPUs of ``model``, MIG disabled unless ``layouts`` gives a GPU its placements.

    UUIDs are stable: the same hostname and index always give the same UUID.
    """
    gpus = []
    for i in range(count):
        placements = (layouts or {}).get(i)
        enabled = placements is not None and model.mig_capable
        gpus.append(
            GpuInfo(
                index=i,
                uuid=gpu_uuid(hostname, i),
                model=model,
                mig_capable=model.mig_capable,
                mig_enabled=enabled,
                mig_pending=enabled,
                mig_devices=mig_devices_for_layout(hostname, i, model, placements) if enabled and placements else (),
            )
        )
    return NodeInventory(hostname=hostname, gpus=tuple(gpus), driver_version=driver_version, cuda_driver_version=cuda)
