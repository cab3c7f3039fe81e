"""What one container's ``nvidia-smi`` can see: the node's GPUs and board, narrowed by ``NVIDIA_VISIBLE_DEVICES``.

The variable as nvidia-container-toolkit reads it: unset, empty or ``void`` injects nothing (not even the
``nvidia-smi`` binary); ``none`` injects the driver and tools but no device; ``all``; or a comma list of GPU indexes,
GPU UUIDs, MIG UUIDs (also the old ``MIG-GPU-<uuid>/<gi>/<ci>`` form) and ``<gpu>:<mig>`` indexes. The device plugin
writes UUIDs; a time-sliced or MPS replica carries its whole GPU's UUID, so that container sees the whole GPU.

NVML in the container enumerates only the GPUs whose device nodes it was given, in PCI order, numbered from 0. A
container given MIG devices sees their parent GPU (in MIG mode) and only those MIG devices; one given a whole GPU
that is in MIG mode sees all of its MIG devices (inferred: no recording of that case). Plain data; nothing here
talks to NVML or a cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

from cluster import errors
from cluster.gpu import catalog, inventory
from cluster.gpu.nvidia_smi import board as board_mod

ENV = "NVIDIA_VISIBLE_DEVICES"
NOT_INJECTED = ("", "void")


@dataclass(frozen=True)
class Host:
    """A node as NVML on the host reports it, with the board facts NVML does not carry in the inventory."""

    inventory: inventory.NodeInventory
    board: board_mod.Board

    def __post_init__(self) -> None:
        if len(self.board.bus_ids) != len(self.inventory.gpus):
            raise ValueError(f"{len(self.inventory.gpus)} GPUs but {len(self.board.bus_ids)} bus ids")


@dataclass(frozen=True)
class Gpu:
    """One GPU as the container sees it: its own index, the host's, and the MIG devices it can see."""

    index: int
    host_index: int
    info: inventory.GpuInfo
    bus_id: str
    mig_devices: tuple[inventory.MigDevice, ...] = ()

    @property
    def model(self) -> catalog.GpuModel:
        return self.info.model


@dataclass(frozen=True)
class View:
    """Everything ``nvidia-smi`` in one container can see."""

    host: Host
    gpus: tuple[Gpu, ...]

    @property
    def driver_version(self) -> str:
        return self.host.inventory.driver_version

    @property
    def cuda_version(self) -> str:
        major, minor = self.host.inventory.cuda_driver_version
        return f"{major}.{minor}"


def simulated_host(inv: inventory.NodeInventory, *, cpus: int = 1, numa_nodes: int = 1, nvlink: bool = False,
                   nvswitch: bool | None = None) -> Host:
    """A host for a simulated node: its inventory on a board with plausible bus ids (``board.simulated_bus_ids``)."""
    bus_ids = board_mod.simulated_bus_ids(len(inv.gpus))
    return Host(inv, board_mod.Board(bus_ids, cpus=cpus, numa_nodes=numa_nodes, nvlink=nvlink, nvswitch=nvswitch))


def ordered_mig_devices(gpu: inventory.GpuInfo) -> tuple[inventory.MigDevice, ...]:
    """MIG devices in NVML's order (GPU instance id, then compute instance id): ``MIG Dev`` and ``-L`` numbering."""
    return tuple(sorted(gpu.mig_devices, key=lambda m: (m.gi_id, m.ci_id)))


def container(host: Host, visible: str | None) -> View | None:
    """The view of a container whose ``NVIDIA_VISIBLE_DEVICES`` is ``visible``; None when nothing is injected.

    A name the node does not have fails the container's start in nvidia-container-cli; here it raises
    ``ConfigError`` with that tool's message, since the simulator itself wrote the variable.
    """
    if visible is None or visible.strip() in NOT_INJECTED:
        return None
    tokens = [t.strip() for t in visible.split(",") if t.strip()]
    if tokens == ["none"]:
        return View(host, ())
    wanted: dict[int, set[int] | None] = {}  # host GPU index -> MIG devices (positions) or None for the whole GPU
    problems: list[str] = []
    for token in tokens:
        found = _resolve(host, token)
        if found is None:
            problems.append(f"nvidia-container-cli: device error: {token}: unknown device")
            continue
        for gpu_index, mig in found:
            _merge(wanted, gpu_index, mig)
    if problems:
        raise errors.ConfigError(ENV, problems, hint="the simulated device plugin wrote a device this node lacks")
    return View(host, _gpus(host, wanted))


def whole_node(host: Host) -> View:
    """What ``nvidia-smi`` on the node itself (or in a container given ``all``) sees."""
    view = container(host, "all")
    assert view is not None
    return view


def _merge(wanted: dict[int, set[int] | None], gpu_index: int, mig: int | None) -> None:
    """Add one GPU or MIG device; a whole GPU swallows any of its MIG devices named beside it."""
    if mig is None:
        wanted[gpu_index] = None
        return
    migs = wanted.setdefault(gpu_index, set())
    if migs is not None:
        migs.add(mig)


def _gpus(host: Host, wanted: dict[int, set[int] | None]) -> tuple[Gpu, ...]:
    gpus = []
    for position, host_index in enumerate(sorted(wanted, key=lambda i: host.board.bus_ids[i])):
        info = host.inventory.gpus[host_index]
        ordered = ordered_mig_devices(info)
        picks = wanted[host_index]
        migs = ordered if picks is None else tuple(m for i, m in enumerate(ordered) if i in picks)
        gpus.append(Gpu(position, host_index, info, host.board.bus_ids[host_index], migs))
    return tuple(gpus)


def _resolve(host: Host, token: str) -> list[tuple[int, int | None]] | None:
    """(host GPU index, MIG device position or None) pairs a token names, or None when it names nothing."""
    gpus = host.inventory.gpus
    if token == "all":
        return [(i, None) for i in range(len(gpus))]
    if token.isdigit():
        return [(int(token), None)] if int(token) < len(gpus) else None
    if token.count(":") == 1 and all(p.isdigit() for p in token.split(":")):
        g, m = (int(p) for p in token.split(":"))
        return [(g, m)] if g < len(gpus) and m < len(gpus[g].mig_devices) else None
    for i, gpu in enumerate(gpus):
        if token == gpu.uuid:
            return [(i, None)]
        for position, mig in enumerate(ordered_mig_devices(gpu)):
            old_form = f"MIG-{gpu.uuid}/{mig.gi_id}/{mig.ci_id}"
            if token in (mig.uuid, old_form):
                return [(i, position)]
    return None
