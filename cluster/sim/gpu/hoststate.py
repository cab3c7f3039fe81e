"""What a simulated node's GPUs are right now, read from the node object, and the faults injected on it.

The hardware comes from ``gpulab.dev/hardware`` (written at registration); the MIG layout the MIG manager last
applied lives in ``gpulab.dev/mig-layout`` (hardware state, so it survives stack restarts and operator
uninstalls); faults live in ``gpulab.dev/gpu-faults`` so every process (stack, pod agent, CLI) sees them.
Plain data: this module must not talk to a cluster.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cluster import errors
from cluster.gpu import advertise as advertise_mod, catalog, inventory, mig
from cluster.sim import nodes
from cluster.sim.gpu import names

# One fault per step of the operator's validation chain (driver -> toolkit -> CUDA -> plugin,
# ``OP cmd/nvidia-validator/main.go``), plus an unhealthy GPU.
FAULT_KINDS = ("driver-missing", "nouveau-bound", "toolkit-misconfigured", "cuda-validation-failing",
               "plugin-validation-failing", "gpu-unhealthy")


@dataclass(frozen=True)
class Hardware:
    model: catalog.GpuModel | None
    count: int


@dataclass(frozen=True)
class Faults:
    kinds: frozenset[str] = frozenset()
    unhealthy: frozenset[int] = frozenset()

    @property
    def driver_ok(self) -> bool:
        return not ({"driver-missing", "nouveau-bound"} & self.kinds)

    @property
    def toolkit_ok(self) -> bool:
        return "toolkit-misconfigured" not in self.kinds

    @property
    def cuda_fails(self) -> bool:
        return "cuda-validation-failing" in self.kinds

    @property
    def plugin_validation_fails(self) -> bool:
        return "plugin-validation-failing" in self.kinds


def node_annotations(node: Mapping[str, Any]) -> Mapping[str, str]:
    return node.get("metadata", {}).get("annotations") or {}


def node_labels(node: Mapping[str, Any]) -> Mapping[str, str]:
    return node.get("metadata", {}).get("labels") or {}


def hardware(node: Mapping[str, Any]) -> Hardware:
    return _hardware(node_annotations(node).get(nodes.HARDWARE_ANNOTATION, "{}"))


@functools.lru_cache(maxsize=256)
def _hardware(text: str) -> Hardware:
    try:
        raw = json.loads(text)
    except ValueError:
        return Hardware(None, 0)
    count = int(raw.get("gpus", 0) or 0) if isinstance(raw, dict) else 0
    model = catalog.lookup(str(raw.get("model", ""))) if count else None
    return Hardware(model, count if model else 0)


def faults(node: Mapping[str, Any]) -> Faults:
    try:
        raw = json.loads(node_annotations(node).get(names.FAULTS, "{}"))
    except ValueError:
        return Faults()
    if not isinstance(raw, dict):
        return Faults()
    kinds = frozenset(k for k in raw.get("kinds", []) if k in FAULT_KINDS)
    unhealthy = frozenset(int(i) for i in raw.get("unhealthy", []) if isinstance(i, int))
    if unhealthy:
        kinds |= {"gpu-unhealthy"}
    return Faults(kinds, unhealthy)


def faults_annotation(f: Faults) -> str | None:
    """The annotation value for ``f`` (``None`` removes the annotation)."""
    kinds = sorted(f.kinds - {"gpu-unhealthy"})
    if not kinds and not f.unhealthy:
        return None
    return json.dumps({"kinds": kinds, "unhealthy": sorted(f.unhealthy)}, sort_keys=True)


def with_fault(f: Faults, kind: str, gpu: int | None, present: bool) -> Faults:
    if kind not in FAULT_KINDS:
        raise errors.ConfigError("fault", [f"unknown fault kind {kind!r} (choose one of {', '.join(FAULT_KINDS)})"])
    if kind == "gpu-unhealthy":
        idx = {gpu if gpu is not None else 0}
        unhealthy = f.unhealthy | idx if present else (f.unhealthy - idx if gpu is not None else frozenset())
        kinds = f.kinds - {"gpu-unhealthy"}
        return Faults(kinds | ({"gpu-unhealthy"} if unhealthy else set()), frozenset(unhealthy))
    return Faults(f.kinds | {kind} if present else f.kinds - {kind}, f.unhealthy)


def mig_layout(node: Mapping[str, Any]) -> dict[int, tuple[inventory.Placement, ...]]:
    """GPU index -> its GPU instances, for every MIG-enabled GPU (an empty tuple means enabled but empty)."""
    try:
        raw = json.loads(node_annotations(node).get(names.MIG_LAYOUT, "{}"))
    except ValueError:
        return {}
    out: dict[int, tuple[inventory.Placement, ...]] = {}
    for idx, items in (raw.items() if isinstance(raw, dict) else ()):
        out[int(idx)] = tuple(inventory.Placement(str(p), int(s), int(z)) for p, s, z in items)
    return out


def layout_annotation(layouts: Sequence[mig.GpuLayout]) -> str:
    data = {str(l.index): [[p.profile, p.start, p.size] for p in l.placements] for l in layouts if l.mig_enabled}
    return json.dumps(data, sort_keys=True)


def inventory_of(node: Mapping[str, Any], *, with_faults: bool = True) -> inventory.NodeInventory | None:
    """The node's GPUs as NVML would report them, or ``None`` for a node without GPUs."""
    ann = node_annotations(node)
    return _inventory(str(node["metadata"]["name"]), ann.get(nodes.HARDWARE_ANNOTATION, ""),
                      ann.get(names.MIG_LAYOUT, ""), ann.get(names.FAULTS, "") if with_faults else "")


@functools.lru_cache(maxsize=8192)
def _inventory(name: str, hw_text: str, layout_text: str, faults_text: str) -> inventory.NodeInventory | None:
    """Built once per distinct (node, hardware, layout, faults): every reconcile and metrics sample asks again."""
    node = {"metadata": {"name": name, "annotations": {nodes.HARDWARE_ANNOTATION: hw_text, names.MIG_LAYOUT: layout_text,
                                                       names.FAULTS: faults_text}}}
    hw = hardware(node)
    if hw.model is None or hw.count == 0:
        return None
    layout = {i: p for i, p in mig_layout(node).items() if 0 <= i < hw.count}
    inv = inventory.simulated_inventory(name, hw.model, hw.count, layouts=layout)
    unhealthy = {i for i in faults(node).unhealthy if 0 <= i < hw.count}
    if unhealthy:
        inv = advertise_mod.with_health(inv, unhealthy)
    return inv

