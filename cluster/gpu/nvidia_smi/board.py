"""What a GPU board reports that the model catalog does not say: limits, clocks, firmware, PCI and NVLink layout.

``ModelFacts`` holds what an idle GPU of one model printed on real hardware (``tests/fixtures/nvidia-smi``, driver
580.159.04): power limits, idle clocks, reserved memory, BAR1 size, firmware versions, part numbers. Models nobody
recorded get ``None`` for what was not seen (firmware, clocks, BAR1), and the renderers print ``N/A`` for it; their
power limits are the published board specifications, and their idle temperature, power draw and reserved memory are
estimates (a real GPU prints numbers there; no recording checks them). ``Board`` is the host side:
PCI bus ids, CPUs, NUMA nodes and NVLink wiring. Plain data; nothing here talks to NVML or a cluster.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from cluster.gpu import catalog

# NVLink links per SXM GPU (NVIDIA A100 and H100 architecture whitepapers; 18 seen on a real H200 board).
NVLINK_LINKS = MappingProxyType({"Ampere": 12, "Hopper": 18})
# One link's speed as ``nvidia-smi nvlink -s`` prints it (recorded on H200, NVLink 4); A100's NVLink 3 is 25 GB/s.
NVLINK_SPEED = MappingProxyType({"Ampere": "25 GB/s", "Hopper": "26.562 GB/s"})


@dataclass(frozen=True)
class Clocks:
    """MHz: idle (current) graphics/SM, memory, video; maximum graphics/SM, video; applications graphics."""

    idle_graphics: int
    memory: int
    idle_video: int
    max_graphics: int
    max_video: int


@dataclass(frozen=True)
class ModelFacts:
    """An idle GPU of one model, as ``nvidia-smi -q`` and ``--query-gpu`` showed it."""

    power_limit_w: int | None = None  # default, requested and enforced limit
    power_min_w: int | None = None
    idle_power_w: float | None = None
    idle_memory_power_w: float | None = None
    idle_temp_c: int | None = None
    idle_memory_temp_c: int | None = None
    temp_limit_c: int | None = None  # "GPU T.Limit Temp": degrees left before slowdown
    reserved_mib: int | None = None
    free_idle_mib: int | None = None  # memory.free with nothing running (total - reserved, as the driver rounds)
    bar1_mib: int | None = None
    mig_bar1_per_slice_mib: int | None = None
    sub_device_id: int | None = None
    vbios: str | None = None
    inforom_image: str | None = None
    inforom_oem: str | None = None
    inforom_ecc: str | None = None
    board_part: str | None = None
    gpu_part: str | None = None
    remap_banks: int | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    clocks: Clocks | None = None


_FACTS: Mapping[str, ModelFacts] = MappingProxyType({
    # Recorded 2026-11-28 (tests/fixtures/nvidia-smi/h100-80gb-hbm3-x1). VBIOS differs between boards of one model
    # (96.00.CF.00.01 on the first H100 of that day): the value is the last board recorded.
    "H100-80GB-HBM3": ModelFacts(
        power_limit_w=700, power_min_w=200, idle_power_w=70.55, idle_memory_power_w=40.14, idle_temp_c=38,
        idle_memory_temp_c=42, temp_limit_c=49, reserved_mib=480, free_idle_mib=81079, bar1_mib=131072,
        # 24740 MiB BAR1 for a 3g.40gb (4 memory slices) in NVIDIA's MIG guide v580; other sizes scale (unconfirmed).
        mig_bar1_per_slice_mib=6185, sub_device_id=0x16C110DE, vbios="96.00.DA.00.0C",
        inforom_image="G520.0200.00.05", inforom_oem="2.1", inforom_ecc="7.16", board_part="695-2G520-0200-000",
        gpu_part="2330-885-A1", remap_banks=2560, pcie_gen=5, pcie_width=16,
        clocks=Clocks(idle_graphics=345, memory=2619, idle_video=765, max_graphics=1980, max_video=1545)),
    # Recorded 2026-11-28 (tests/fixtures/nvidia-smi/h200-x4).
    "H200-141GB": ModelFacts(
        power_limit_w=700, power_min_w=200, idle_power_w=77.99, idle_memory_power_w=38.12, idle_temp_c=35,
        idle_memory_temp_c=35, temp_limit_c=52, reserved_mib=616, free_idle_mib=143156, bar1_mib=262144,
        sub_device_id=0x18BF10DE, vbios="96.00.A5.00.1A", inforom_image="G520.0282.02.02", inforom_oem="2.1",
        inforom_ecc="7.16", board_part="692-2G520-0282-000", gpu_part="2335-895-A1", remap_banks=3072, pcie_gen=5,
        pcie_width=16,
        clocks=Clocks(idle_graphics=345, memory=3201, idle_video=765, max_graphics=1980, max_video=1545)),
    # Not recorded here: published board power (TDP); the rest is estimated in ``facts`` or prints N/A.
    "A100-SXM4-40GB": ModelFacts(power_limit_w=400),
    "A100-SXM4-80GB": ModelFacts(power_limit_w=400),
    "A30-24GB": ModelFacts(power_limit_w=165),
    "L40S": ModelFacts(power_limit_w=350),
    "T4": ModelFacts(power_limit_w=70),
})
# Readings of an idle GPU for models nobody recorded: the recorded H100/H200 idled near 35 C, at a tenth of their
# power limit, with 0.4-0.6 % of memory reserved by the driver. Estimates, so that a learner sees numbers where a
# real GPU prints numbers; no recorded output checks them.
_IDLE_TEMP_C = 35
_IDLE_POWER_SHARE = 0.1
_RESERVED_SHARE = 0.006


def facts(model: catalog.GpuModel) -> ModelFacts:
    """The recorded facts of ``model``, idle readings and reserved memory estimated where none were recorded."""
    known = _FACTS.get(model.key, ModelFacts())
    if known.free_idle_mib is not None:
        return known
    reserved = round(model.memory_mib * _RESERVED_SHARE)
    power = None if known.power_limit_w is None else round(known.power_limit_w * _IDLE_POWER_SHARE, 2)
    return dataclasses.replace(known, idle_temp_c=_IDLE_TEMP_C, idle_power_w=power, reserved_mib=reserved,
                               free_idle_mib=model.memory_mib - reserved)


@dataclass(frozen=True)
class Board:
    """The host around the GPUs: PCI bus ids (by host GPU index), CPUs, NUMA nodes and NVLink wiring.

    ``nvswitch``: every pair of GPUs uses all of each GPU's links (an HGX 8-GPU board, or part of one); without it
    the links are split among the peers, as on a four-GPU board. ``None`` assumes NVSwitch above four GPUs.
    """

    bus_ids: tuple[str, ...]
    cpus: int = 1
    numa_nodes: int = 1
    nvlink: bool = False
    nvswitch: bool | None = None
    persistence: bool = True  # nvidia-persistenced runs (the GPU Operator's driver container starts it)
    virtualization: str = "None"  # -q "Virtualization Mode": bare metal; "Pass-Through" in a VM

    def numa_of(self, gpu: int) -> int:
        """GPUs fill the NUMA nodes in index order (GPUs 0-3 on NUMA 0 and 4-7 on NUMA 1 of an 8-GPU board)."""
        return gpu * self.numa_nodes // max(1, len(self.bus_ids))

    def cpu_range(self, numa: int) -> str:
        per = max(1, self.cpus // self.numa_nodes)
        return f"{numa * per}-{(numa + 1) * per - 1}"

    def has_nvswitch(self) -> bool:
        return self.nvswitch if self.nvswitch is not None else len(self.bus_ids) > 4

    def nvlinks(self, model: catalog.GpuModel) -> int:
        """NVLink links between one pair of GPUs; 0 without NVLink."""
        links = NVLINK_LINKS.get(model.architecture, 0) if self.nvlink else 0
        if not links or self.has_nvswitch():
            return links
        return max(1, links // max(1, len(self.bus_ids) - 1))

    def link(self, model: catalog.GpuModel, a: int, b: int) -> str:
        """The ``nvidia-smi topo -m`` cell for host GPUs ``a`` and ``b``."""
        if a == b:
            return " X "
        links = self.nvlinks(model)
        if links:
            return f"NV{links}"
        if self.numa_of(a) != self.numa_of(b):
            return "SYS"
        # GPUs on one root bus share its host bridge: a VM's passed-through GPUs all sit on bus 00 (PHB, recorded
        # on two H200s); a bare-metal board gives each GPU its own root port and bus (NODE within a NUMA node).
        return "PHB" if _root_bus(self.bus_ids[a]) == _root_bus(self.bus_ids[b]) else "NODE"


def _root_bus(bus_id: str) -> str:
    """PCI domain and bus of a GPU's address (``00000000:00:06.0`` -> ``00000000:00``)."""
    return bus_id.rsplit(":", 1)[0]


# PCI buses of the eight GPUs of an HGX H100 board (DGX H100 layout); fewer GPUs take every (8/n)-th slot.
_HGX_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)


def simulated_bus_ids(count: int) -> tuple[str, ...]:
    """Plausible bus ids for ``count`` GPUs of one host, spread over both sockets as on an HGX board."""
    if count <= len(_HGX_BUSES):
        buses = [_HGX_BUSES[i * len(_HGX_BUSES) // max(1, count)] for i in range(count)]
    else:
        buses = [0x10 + i * 0xE0 // count for i in range(count)]
    return tuple(f"00000000:{bus:02X}:00.0" for bus in buses)


def board_id(bus_id: str) -> str:
    """``Board ID`` as ``-q`` shows it: bus and device number of the GPU's PCI address (``00:06.0`` -> ``0x6``)."""
    _, bus, devfn = bus_id.split(":")
    return hex(int(bus, 16) << 8 | int(devfn.split(".")[0], 16))
