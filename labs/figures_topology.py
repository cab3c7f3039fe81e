"""Module 03's picture: a node's GPU topology matrix (as ``nvidia-smi topo -m`` prints it) and its NUMA placement.

The topology comes from the fleet spec (``gpu.topology.numaNodes`` and ``nvlink``) or, on a live cluster, from
the node's ``gpulab.dev/hardware`` annotation, which holds the same fields. GPUs are spread over the NUMA nodes in
index order, as on a two-socket HGX board. The matrix uses ``nvidia-smi topo -m``'s legend: ``NV#`` (NVLink
with # links), ``NODE`` (PCIe and the host bridges inside one NUMA node), ``SYS`` (PCIe and the CPU interconnect
between NUMA nodes). Links per pair: an A100 has 12 NVLink links and an H100 18 (NVIDIA A100 and H100 Tensor
Core GPU architecture whitepapers); with NVSwitch (eight GPUs) a pair uses all of them, a four-GPU board without
switches splits them among the three peers. That board model is ``cluster.gpu.nvidia_smi.board.Board``, which the
simulated ``nvidia-smi topo -m`` prints from too.

Given a GPU count, it also shows what the kubelet's Topology Manager does with a pod asking for that many GPUs:
the device manager prefers hints spanning the fewest NUMA nodes that could hold the request
(``K8S pkg/kubelet/cm/devicemanager/topology_hints.go``, ``generateDeviceTopologyHints``); ``single-numa-node``
rejects a pod whose merged hint spans more than one NUMA node, with ``TopologyAffinityError``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from matplotlib.axes import Axes
from matplotlib.patches import FancyBboxPatch, Rectangle

from cluster import errors, fleet as fleet_mod, quantity
from cluster.gpu import catalog
from cluster.gpu.nvidia_smi import board as smi_board
from cluster import gpustack
from labs import figures

_CELL = {"X": "#dddddd", "NV": "#cde8cd", "NODE": "#fff1c7", "SYS": "#f6d5d5"}


@dataclass(frozen=True)
class NodeTopology:
    """What a node's GPU topology figure needs: model, GPU count, NUMA nodes, NVLink, CPUs."""

    node: str
    model: catalog.GpuModel
    gpus: int
    numa_nodes: int
    nvlink: bool
    cpus: int

    @property
    def board(self) -> smi_board.Board:
        """The same board the simulated ``nvidia-smi topo -m`` prints, so the figure and the tool agree."""
        buses = smi_board.simulated_bus_ids(self.gpus)
        return smi_board.Board(buses, cpus=self.cpus, numa_nodes=self.numa_nodes, nvlink=self.nvlink)

    def numa_of(self, gpu: int) -> int:
        """GPUs fill the NUMA nodes in index order (GPU 0-3 on NUMA 0 and 4-7 on NUMA 1 of an 8-GPU board)."""
        return self.board.numa_of(gpu)

    def cpu_range(self, numa: int) -> str:
        return self.board.cpu_range(numa)

    def link(self, a: int, b: int) -> str:
        return self.board.link(self.model, a, b).strip()


def _cpus(cpu: str) -> int:
    return max(1, int(quantity.parse(cpu).value))


def from_fleet(node: str = "h100-0", fleet: str | fleet_mod.Fleet = "starter") -> NodeTopology:
    """The topology of ``node`` in a fleet spec (a built-in name, a file, or a parsed ``Fleet``)."""
    fl = fleet if isinstance(fleet, fleet_mod.Fleet) else fleet_mod.load(fleet)
    pool = fl.pool_of(node)
    if pool is None:
        raise errors.ConfigError("topology figure", [f"fleet {fl.name!r} has no node {node!r}"],
                                 hint="one of: " + ", ".join(fl.node_names()))  # fmt: skip
    if pool.gpu is None:
        raise errors.ConfigError("topology figure", [f"node {node!r} has no GPUs"], hint="pick a GPU node")
    topo = pool.gpu.topology
    return NodeTopology(node, pool.gpu.model, pool.gpu.count, topo.numa_nodes, topo.nvlink, _cpus(pool.cpu))


def from_node(node: Mapping[str, Any]) -> NodeTopology:
    """The topology of a live Node object (``kubectl get node NAME -o json``) from its hardware annotation."""
    meta = node.get("metadata") or {}
    name = str(meta.get("name", "?"))
    try:
        hw = json.loads((meta.get("annotations") or {}).get(gpustack.HARDWARE_ANNOTATION, "{}"))
    except ValueError:
        hw = {}
    model = catalog.lookup(str(hw.get("model", ""))) if isinstance(hw, dict) else None
    if model is None or not int(hw.get("gpus", 0) or 0):
        raise errors.ConfigError("topology figure", [f"node {name!r} has no simulated GPUs"],
                                 hint="pass a GPU node, e.g. kubectl get node h100-0 -o json")  # fmt: skip
    cpu = str(((node.get("status") or {}).get("capacity") or {}).get("cpu", "1"))
    return NodeTopology(name, model, int(hw["gpus"]), int(hw.get("numaNodes", 1) or 1), bool(hw.get("nvlink")),
                        _cpus(cpu))  # fmt: skip


def matrix(topo: NodeTopology) -> figures.Table:
    """The ``nvidia-smi topo -m`` matrix as a table: one row per GPU, then its CPU and NUMA affinity."""
    columns = ("", *(f"GPU{j}" for j in range(topo.gpus)), "CPU affinity", "NUMA affinity")
    rows = tuple((f"GPU{i}", *(topo.link(i, j) for j in range(topo.gpus)), topo.cpu_range(topo.numa_of(i)),
                  str(topo.numa_of(i))) for i in range(topo.gpus))  # fmt: skip
    return figures.Table(columns, rows)


@dataclass(frozen=True)
class Alignment:
    """Where the Topology Manager puts a request of ``gpus`` GPUs on an idle node, and each policy's verdict."""

    gpus: int
    numa_nodes: tuple[int, ...]  # the preferred (narrowest) hint
    chosen: tuple[int, ...]  # GPU indices
    verdicts: tuple[tuple[str, str], ...]


def align(topo: NodeTopology, gpus: int) -> Alignment:
    if not 1 <= gpus <= topo.gpus:
        raise errors.ConfigError("topology figure", [f"a request of {gpus} GPUs does not fit {topo.node} "
                                                     f"({topo.gpus} GPUs)"])  # fmt: skip
    per_numa = [sum(1 for g in range(topo.gpus) if topo.numa_of(g) == n) for n in range(topo.numa_nodes)]
    span, held = 0, 0
    while held < gpus:
        held += per_numa[span]
        span += 1
    numa = tuple(range(span))
    chosen = tuple(g for g in range(topo.gpus) if topo.numa_of(g) in numa)[:gpus]
    single = span == 1
    where = " and ".join(map(str, numa))
    verdicts = (
        ("none", "admitted, no alignment asked for"),
        ("best-effort", "admitted" + ("" if single else f", spread over NUMA {where}")),
        ("restricted", "admitted" + ("" if single else f": NUMA {where} is the narrowest hint, so preferred")),
        ("single-numa-node", "admitted on one NUMA node" if single else "rejected: TopologyAffinityError"),
    )
    return Alignment(gpus, numa, chosen, verdicts)


# --- drawing -------------------------------------------------------------------------------------------------------


def _draw_matrix(ax: Axes, topo: NodeTopology) -> None:
    n = topo.gpus
    for i in range(n):
        for j in range(n):
            value = topo.link(i, j)
            kind = "NV" if value.startswith("NV") else value
            ax.add_patch(Rectangle((j, n - 1 - i), 1, 1, fc=_CELL[kind], ec="white", lw=1.5))
            ax.text(j + 0.5, n - 0.5 - i, value, ha="center", va="center", fontsize=8, family="monospace")
        ax.text(n + 0.15, n - 0.5 - i, f"CPUs {topo.cpu_range(topo.numa_of(i))}  NUMA {topo.numa_of(i)}",
                va="center", fontsize=7.5, family="monospace")  # fmt: skip
    ax.set_xlim(0, n + 2.6)
    ax.set_ylim(0, n)
    ax.set_xticks([j + 0.5 for j in range(n)], [f"GPU{j}" for j in range(n)], fontsize=7.5)
    ax.set_yticks([n - 0.5 - i for i in range(n)], [f"GPU{i}" for i in range(n)], fontsize=7.5)
    ax.xaxis.tick_top()
    for side in ("top", "right", "bottom", "left"):
        ax.spines[side].set_visible(False)
    ax.tick_params(length=0)
    legend = ("NV#: NVLink, # links" if topo.nvlink else "NODE: PCIe within one NUMA node   SYS: across NUMA nodes")
    ax.set_title(f"nvidia-smi topo -m on {topo.node}\n{legend}", fontsize=9)


def _draw_numa(ax: Axes, topo: NodeTopology, alignment: Alignment | None) -> None:
    ax.axis("off")
    width = 10.0 / topo.numa_nodes
    ax.set_xlim(0, 10)
    ax.set_ylim(-2.6 if alignment else 0, 4.2)
    chosen = set(alignment.chosen) if alignment else set()
    for numa in range(topo.numa_nodes):
        x0 = numa * width + 0.15
        ax.add_patch(FancyBboxPatch((x0, 0.2), width - 0.3, 3.6, boxstyle="round,pad=0.05", fc="#f5f8fc", ec="#4c72b0"))
        ax.text(x0 + (width - 0.3) / 2, 3.45, f"NUMA node {numa}", ha="center", fontsize=9, weight="bold")
        ax.add_patch(Rectangle((x0 + 0.3, 2.45), width - 0.9, 0.6, fc="#e0e0e0", ec="#777"))
        ax.text(x0 + (width - 0.3) / 2, 2.75, f"CPUs {topo.cpu_range(numa)} + memory", ha="center", va="center",
                fontsize=8)  # fmt: skip
        here = [g for g in range(topo.gpus) if topo.numa_of(g) == numa]
        slot = (width - 0.9) / max(1, len(here))
        for k, g in enumerate(here):
            gx = x0 + 0.3 + k * slot
            fc = "#55a868" if g in chosen else "#ffffff"
            ax.add_patch(Rectangle((gx + 0.05, 0.6), slot - 0.1, 1.3, fc=fc, ec="#333"))
            ax.text(gx + slot / 2, 1.25, f"GPU{g}", ha="center", va="center", fontsize=8,
                    color="white" if g in chosen else "black", weight="bold")  # fmt: skip
    if topo.numa_nodes > 1:
        ax.text(5, 0.0, "CPU interconnect between sockets (SYS)", ha="center", va="top", fontsize=7.5, color="#8a1c1c")
    ax.set_title(f"{topo.node}: {topo.gpus} x {topo.model.nvml_name}, {topo.numa_nodes} NUMA node(s)", fontsize=9)
    if alignment:
        ax.text(0.15, -0.55, f"A Guaranteed pod asks for {alignment.gpus} GPUs (green: the aligned choice)",
                fontsize=8, weight="bold", va="top")  # fmt: skip
        for k, (policy, verdict) in enumerate(alignment.verdicts):
            colour = "#b00020" if verdict.startswith("rejected") else "#1b5e20"
            ax.text(0.3, -1.0 - 0.38 * k, f"{policy:17}{verdict}", fontsize=8, family="monospace", va="top",
                    color=colour)  # fmt: skip


def gpu_topology(node: str | Mapping[str, Any] = "h100-0", fleet: str | fleet_mod.Fleet = "starter",
                 request: int | None = None) -> figures.CourseFigure:  # fmt: skip
    """The topology matrix and NUMA layout of ``node`` (a fleet node name, or a live Node object); with
    ``request``, where the Topology Manager aligns a pod asking for that many GPUs and what each policy does."""
    topo = from_node(node) if isinstance(node, Mapping) else from_fleet(node, fleet)
    alignment = align(topo, request) if request is not None else None
    fig = figures.CourseFigure(figsize=(13, 5.2 if alignment else 4.4))
    left, right = fig.subplots(1, 2, width_ratios=[1, 1.05])
    _draw_matrix(left, topo)
    _draw_numa(right, topo, alignment)
    return fig
