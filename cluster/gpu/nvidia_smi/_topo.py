"""``nvidia-smi topo -m`` (and ``-mp``) and ``nvidia-smi nvlink -s``, from the board's NUMA and NVLink wiring.

Format as recorded on driver 580 (``tests/fixtures/nvidia-smi``): tab-separated cells, the header row underlined
with ANSI escapes even when stdout is not a terminal, a ``GPU NUMA ID`` column after an empty cell, then the legend.
Cells: ``NV#`` (NVLink, # links), ``PHB`` (same PCI root bus, as in a VM), ``NODE`` (same NUMA node), ``SYS``
(across NUMA nodes); ``Board.link`` decides.
The simulated nodes have no NICs, so no NIC columns. ``nvlink -s`` lists each GPU's links at the architecture's
speed, and nothing for a GPU without NVLink (as the single H100 printed). Plain data; no NVML.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from cluster.gpu.nvidia_smi import board, view

LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""
UNDERLINE, RESET = "\x1b[4m", "\x1b[0m"


def matrix(v: view.View, *, pci_only: bool = False) -> str:
    """The GPUDirect matrix between the container's GPUs (``-mp``: PCIe paths only, no NVLink), with affinities."""
    b = dataclasses.replace(v.host.board, nvlink=False) if pci_only else v.host.board
    names = [f"GPU{g.index}" for g in v.gpus]
    lines = ["\t" + UNDERLINE + "\t".join([*names, "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]) + RESET]
    for gpu in v.gpus:
        numa = b.numa_of(gpu.host_index)
        cells = [b.link(gpu.model, gpu.host_index, other.host_index) for other in v.gpus]
        lines.append("\t".join([f"GPU{gpu.index}", *cells, b.cpu_range(numa), str(numa), "", "N/A"]))
    legend = LEGEND.replace(LEGEND.splitlines()[-1] + "\n", "") if pci_only else LEGEND
    return "\n".join(lines) + "\n" + legend


def nvlink_status(v: view.View, gpus: Sequence[view.Gpu]) -> str:
    lines = []
    b = v.host.board
    for gpu in gpus:
        links = board.NVLINK_LINKS.get(gpu.model.architecture, 0)  # a GPU has them all, however they are wired
        if not b.nvlink or not links:
            continue
        lines.append(f"GPU {gpu.index}: {gpu.model.nvml_name} (UUID: {gpu.info.uuid})")
        speed = board.NVLINK_SPEED.get(gpu.model.architecture, "N/A")
        lines += [f"\t Link {i}: {speed}" for i in range(links)]
    return "".join(line + "\n" for line in lines)
