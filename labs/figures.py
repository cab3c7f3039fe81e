"""Course pictures drawn at run time from project data: the notebooks call these instead of embedding images.

Each function returns a ``matplotlib.figure.Figure`` (wrapped so a notebook shows it as the cell's value) and
computes what it draws from the same code the simulated GPU stack runs: MIG placements come from the catalog's
placement table through ``cluster.gpu.mig.fit``, schedulable units from ``cluster.gpu.advertise``. Nothing here
talks to a cluster; the live allocation figure takes plain numbers that ``labs.shell`` reads.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch, Rectangle

from cluster import errors
from cluster.gpu import advertise, catalog, inventory, mig
from cluster.gpu import device_plugin_config as dpc
from cluster.gpustack import names

_PALETTE = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")


class CourseFigure(Figure):
    """A Figure that IPython shows as a PNG without needing pyplot's inline backend to be active."""

    def _repr_png_(self) -> bytes:
        import io

        buffer = io.BytesIO()
        self.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
        return buffer.getvalue()


def _new(width: float, height: float) -> CourseFigure:
    return CourseFigure(figsize=(width, height))


def _model(name: str) -> catalog.GpuModel:
    found = catalog.lookup(name)
    if found is None:
        known = ", ".join(catalog.MODELS)
        raise errors.ConfigError("figure", [f"unknown GPU model {name!r}"], hint=f"use one of: {known}")
    return found


# --- the path from driver to pod --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PathStep:
    """One layer a GPU crosses before a container can use it."""

    layer: str
    component: str  # what provides it (operator operand name where the operator deploys it)
    does: str


def driver_to_pod_steps() -> tuple[PathStep, ...]:
    """The layers, bottom to top, named after the operands the (simulated) GPU Operator deploys."""
    ds = {key: value[0] for key, value in names.OPERANDS.items()}
    return (
        PathStep("GPU hardware", "PCI device 10de:*", "NFD labels the node pci-10de.present=true"),
        PathStep("kernel driver", ds["driver"], "loads the nvidia module; NVML can now see the GPUs"),
        PathStep("container runtime hook", ds["container-toolkit"], "containerd/CRI-O inject /dev/nvidia* and libraries (or CDI)"),
        PathStep("validation gate", ds["operator-validator"], "driver and toolkit checks pass: the plugin may start"),
        PathStep("device plugin", ds["device-plugin"], "NVML discovery; registers nvidia.com/gpu with the kubelet over gRPC"),
        PathStep("node labels", ds["gpu-feature-discovery"], "gpu.product, gpu.memory, mig.capable, ... for affinity"),
        PathStep("kubelet", "kubelet", "publishes capacity/allocatable; calls Allocate when a pod lands"),
        PathStep("scheduler", "kube-scheduler", "counts free nvidia.com/gpu per node; checks taints and affinity"),
        PathStep("pod", "your container", "sees only the GPU(s) it was allocated (NVIDIA_VISIBLE_DEVICES)"),
    )


def driver_to_pod() -> CourseFigure:
    """A stack of boxes from GPU hardware up to the pod, each with the component that provides the layer."""
    steps = driver_to_pod_steps()
    fig = _new(12.5, 0.62 * len(steps) + 0.8)
    ax = fig.add_subplot()
    ax.set_xlim(0, 10)
    ax.set_ylim(-0.5, len(steps) - 0.2)
    ax.axis("off")
    for i, step in enumerate(steps):
        node_side = i <= 6
        colour = "#e8f0fb" if node_side else "#fdf0e6"
        ax.add_patch(FancyBboxPatch((0.1, i - 0.35), 9.8, 0.7, boxstyle="round,pad=0.02", fc=colour, ec="#555"))
        ax.text(0.3, i, step.layer, va="center", fontsize=10, weight="bold")
        ax.text(2.3, i, step.component, va="center", fontsize=8.5, family="monospace")
        ax.text(5.3, i, step.does, va="center", fontsize=8)
        if i:
            ax.annotate("", xy=(1.2, i - 0.35), xytext=(1.2, i - 0.65), arrowprops={"arrowstyle": "->", "color": "#333"})
    ax.set_title("From GPU to pod: each layer and what provides it (blue: on the node, orange: control plane)")
    return fig


# --- the sharing spectrum -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SharingOption:
    name: str
    isolation: str
    units: int  # schedulable units one GPU advertises under this option
    resource: str
    config: str  # the device-plugin config YAML (empty for none)
    layout: str  # the MIG layout name, or "" when MIG is off


def _units(model: catalog.GpuModel, config_text: str, strategy: str, layout: str) -> tuple[int, str]:
    placements: dict[int, Sequence[inventory.Placement]] | None = None
    if layout:
        wanted = catalog.default_mig_configs(model)[layout] or {}
        placements = {0: mig.fit(model, wanted).placements}
    inv = inventory.simulated_inventory("figure", model, 1, layouts=placements)
    config = dpc.parse(config_text) if config_text else None
    result = advertise.advertise(inv, config, strategy)
    if result.error:
        raise errors.ConfigError("sharing figure", [result.error])
    (resource, count), = result.capacity.items()
    return count, resource


def _ts(resource: str, replicas: int, kind: str = "timeSlicing", extra: str = "") -> str:
    return (f"version: v1\n{extra}sharing:\n  {kind}:\n    resources:\n"
            f"    - name: {resource}\n      replicas: {replicas}\n")  # fmt: skip


def sharing_options(model_name: str = "A100-SXM4-80GB", replicas: int = 4) -> tuple[SharingOption, ...]:
    """Whole GPU, MIG, MIG + time-slicing, time-slicing and MPS on one GPU, counted by ``advertise``."""
    model = _model(model_name)
    specs: list[tuple[str, str, str, str, str]] = [("whole GPU", "exclusive device", "", "none", "")]
    if model.mig_capable:
        small = model.mig_profiles[0]
        layout = f"all-{small.resource_suffix}"
        specs += [
            ("MIG", "hardware: own SMs, memory, cache", "", "mixed", layout),
            ("MIG + time-slicing", "hardware between slices, none within", _ts(f"nvidia.com/mig-{small.resource_suffix}", replicas), "mixed", layout),
        ]
    mps_flags = "flags:\n  mpsRoot: /run/nvidia/mps\n"
    specs += [
        ("time-slicing", "none: shared memory, turns on SMs", _ts("nvidia.com/gpu", replicas), "none", ""),
        ("MPS", "process-level limits, shared faults", _ts("nvidia.com/gpu", replicas, "mps", mps_flags), "none", ""),
    ]
    options = []
    for name, isolation, config, strategy, layout in specs:
        units, resource = _units(model, config, strategy, layout)
        options.append(SharingOption(name, isolation, units, resource, config, layout))
    return tuple(options)


def sharing_spectrum(model_name: str = "A100-SXM4-80GB", replicas: int = 4) -> CourseFigure:
    """Bars of schedulable units per GPU for each sharing option, ordered from strongest to weakest isolation."""
    options = sharing_options(model_name, replicas)
    fig = _new(11, 4.6)
    ax = fig.add_subplot()
    xs = range(len(options))
    bars = ax.bar(xs, [o.units for o in options], color=_PALETTE[: len(options)])
    for bar, option in zip(bars, options):
        ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height() + 0.3, f"{option.units} x\n{option.resource}",
                ha="center", va="bottom", fontsize=8)  # fmt: skip
    labels = [o.name + "\n" + "\n".join(textwrap.wrap(o.isolation, 22)) for o in options]
    ax.set_xticks(list(xs), labels, fontsize=8)
    ax.set_ylabel("pods one GPU can admit")
    ax.set_ylim(0, max(o.units for o in options) * 1.35)
    ax.set_title(f"The sharing spectrum on one {_model(model_name).nvml_name} ({replicas} replicas where shared): "
                 "more pods, weaker isolation", fontsize=10)  # fmt: skip
    return fig


# --- a MIG layout from the placement table ------------------------------------------------------------------------


def mig_layout(model_name: str = "A100-SXM4-80GB", layout: str | Mapping[str, int] = "all-balanced") -> CourseFigure:
    """The placement table of a MIG-capable model (valid starts per profile) and where ``layout`` puts each instance."""
    model = _model(model_name)
    if not model.mig_capable:
        raise errors.ConfigError("MIG figure", [f"{model.nvml_name} is not MIG capable"],
                                 hint="pick an A100, A30, H100 or H200 model")  # fmt: skip
    wanted, title = _wanted(model, layout)
    result = mig.fit(model, wanted)
    slices = model.mig_memory_slices
    profiles = model.mig_profiles
    fig = _new(11, 0.45 * len(profiles) + 2.6)
    table, placed = fig.subplots(2, 1, height_ratios=[len(profiles), 2.2])
    for row, profile in enumerate(profiles):
        y = len(profiles) - 1 - row
        for start in profile.starts:
            table.add_patch(Rectangle((start + 0.05, y + 0.15), profile.memory_slices - 0.1, 0.7, fc="#dfe7f2",
                                      ec="#4c72b0", lw=0.8, alpha=0.6))  # fmt: skip
            table.plot(start + 0.2, y + 0.5, "o", color="#4c72b0", ms=3)
        table.text(-0.15, y + 0.5, f"{profile.name}  (max {profile.max_count})", ha="right", va="center", fontsize=8)
    table.set_xlim(0, slices)
    table.set_ylim(0, len(profiles))
    table.set_xticks(range(slices + 1))
    table.set_yticks([])
    table.set_title(f"{model.nvml_name}: where each profile may start (dot) and how many memory slices it spans",
                    fontsize=9)  # fmt: skip
    _draw_placements(placed, result, slices)
    placed.set_title(title + ("" if result.ok else f"  -- does not fit: {result.reason}"), fontsize=9)
    return fig


@dataclass(frozen=True)
class Table:
    """Rows of plain values that a notebook shows as an HTML table (and a terminal as text)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def _repr_html_(self) -> str:
        """Text left-aligned (JupyterLab right-aligns table cells by default), numbers right-aligned."""
        import html
        import re

        def number(value: str) -> bool:
            return re.fullmatch(r"[\d.,/ ]+( ?[KMGT]iB)?", value) is not None

        right = [bool(self.rows) and all(number(r[i]) for r in self.rows) for i in range(len(self.columns))]

        def cell(value: str, i: int, tag: str = "td") -> str:
            return f"<{tag} style='text-align:{'right' if right[i] else 'left'}'>{html.escape(value)}</{tag}>"

        head = "".join(cell(c, i, "th") for i, c in enumerate(self.columns))
        body = "".join("<tr>" + "".join(cell(v, i) for i, v in enumerate(row)) + "</tr>" for row in self.rows)
        return f"<table><tr>{head}</tr>{body}</table>"

    def __str__(self) -> str:
        widths = [max(len(c), *(len(r[i]) for r in self.rows)) for i, c in enumerate(self.columns)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(self.columns, widths))]
        lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in self.rows]
        return "\n".join(lines)


def mig_profiles(model_name: str = "A100-SXM4-80GB") -> Table:
    """The MIG profiles of a model as the GPU catalog stores them (the same data the placement chart draws)."""
    model = _model(model_name)
    if not model.mig_capable:
        raise errors.ConfigError("MIG table", [f"{model.nvml_name} is not MIG capable"])
    whole = max(p.compute_slices for p in model.mig_profiles)
    rows = tuple((p.name, f"{p.compute_slices}/{whole}", f"{p.memory_slices}/{model.mig_memory_slices}",
                  f"{p.memory_mib / 1024:.1f} GiB", str(p.multiprocessors), str(p.max_count),
                  ", ".join(map(str, p.starts)), f"nvidia.com/mig-{p.resource_suffix}") for p in model.mig_profiles)
    columns = ("profile", "compute", "memory slices", "memory", "SMs", "max per GPU", "valid starts",
               "resource (mixed strategy)")
    return Table(columns, rows)


def _wanted(model: catalog.GpuModel, layout: str | Mapping[str, int]) -> tuple[dict[str, int], str]:
    if isinstance(layout, str):
        configs = catalog.default_mig_configs(model)
        if layout not in configs:
            raise errors.ConfigError("MIG figure", [f"{layout!r} is not a default mig-parted config of {model.key}"],
                                     hint="one of: " + ", ".join(configs))  # fmt: skip
        wanted = dict(configs[layout] or {})
        text = ", ".join(f"{c} x {p}" for p, c in wanted.items()) or "MIG off"
        return wanted, f"nvidia.com/mig.config={layout}: {text}"
    wanted = dict(layout)
    return wanted, "requested: " + ", ".join(f"{c} x {p}" for p, c in wanted.items())


def _draw_placements(ax: object, result: mig.Fit, slices: int) -> None:
    from matplotlib.axes import Axes

    assert isinstance(ax, Axes)
    ax.add_patch(Rectangle((0, 0.1), slices, 0.8, fc="#f4f4f4", ec="#999", ls="--"))
    for i, p in enumerate(result.placements):
        colour = _PALETTE[i % len(_PALETTE)]
        ax.add_patch(Rectangle((p.start + 0.04, 0.15), p.size - 0.08, 0.7, fc=colour, ec="black", alpha=0.85))
        ax.text(p.start + p.size / 2, 0.5, f"{p.profile}\n@{p.start}", ha="center", va="center", fontsize=8,
                color="white", weight="bold")  # fmt: skip
    ax.set_xlim(0, slices)
    ax.set_ylim(0, 1)
    ax.set_xticks(range(slices + 1))
    ax.set_yticks([])
    ax.set_xlabel("memory slice")


# --- allocation versus utilisation ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkloadClass:
    name: str
    gpus: int  # whole GPUs it holds (allocation)
    busy: float  # average utilisation of those GPUs, 0..1


# The worked example of the advanced-scheduling seed: one GPU per inference service and per notebook.
EXAMPLE_FLEET = (
    WorkloadClass("training (4 jobs x 4 GPUs)", 16, 0.95),
    WorkloadClass("inference (12 services)", 12, 0.15),
    WorkloadClass("notebooks (8 users)", 8, 0.05),
)


def effective_utilisation(workloads: Sequence[WorkloadClass]) -> float:
    """Busy GPU-equivalents divided by GPUs held, across all classes."""
    held = sum(w.gpus for w in workloads)
    return sum(w.gpus * w.busy for w in workloads) / held if held else 0.0


def allocation_vs_utilisation(workloads: Sequence[WorkloadClass] = EXAMPLE_FLEET, capacity: int = 32,
                              title: str = "") -> CourseFigure:  # fmt: skip
    """Two stacked bars: GPUs held by each class (what the scheduler counts) and the work they do (what DCGM sees)."""
    fig = _new(11, 3.4)
    ax = fig.add_subplot()
    held_left = busy_left = 0.0
    for i, w in enumerate(workloads):
        colour = _PALETTE[i % len(_PALETTE)]
        ax.barh(1, w.gpus, left=held_left, color=colour, alpha=0.45, ec="white", label=w.name)
        ax.barh(0, w.gpus * w.busy, left=busy_left, color=colour, ec="white")
        ax.text(held_left + w.gpus / 2, 1, f"{w.gpus}", ha="center", va="center", fontsize=8)
        held_left += w.gpus
        busy_left += w.gpus * w.busy
    ax.axvline(capacity, color="#c44e52", ls="--", lw=1)
    ax.text(capacity, 1.45, f" {capacity} GPUs exist", color="#c44e52", fontsize=8, va="center")
    ax.text(held_left + 0.3, 1, f"{held_left:g} held", va="center", fontsize=8)
    ax.text(busy_left + 0.3, 0, f"{busy_left:.1f} GPUs' worth of work", va="center", fontsize=8)
    ax.set_yticks([0, 1], ["busy (utilisation)", "allocated (requests)"], fontsize=9)
    ax.set_ylim(-0.6, 1.7)
    ax.set_xlim(0, max(held_left, capacity) * 1.3)
    ax.set_xlabel("GPUs")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(title or (f"Allocated is not busy: effective utilisation "
                           f"{100 * effective_utilisation(workloads):.0f}% of the GPUs held"), fontsize=10)  # fmt: skip
    return fig
