"""The node labels GPU Feature Discovery would publish for an inventory (reference section 3).

Follows ``DP internal/lm/{nvml,resource,mig-strategy,machine-type,vgpu}.go`` rule by rule, quirks included: MIG-enabled
parents are labelled without sharing (``gpu.replicas=0``) even under the ``none`` strategy, and a single-strategy
layout GFD cannot describe becomes ``<product>-MIG-INVALID``. ``gfd.timestamp`` is left to the caller. Plain
data: this module must not talk to a cluster.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from cluster.gpu import device_plugin_config as dpc
from cluster.gpu import inventory

log = logging.getLogger(__name__)

P = "nvidia.com/"
FULL_GPU = "nvidia.com/gpu"
PCI_CLASS_COMPUTE = 0x030200
PCI_CLASS_GRAPHICS = 0x030000


class GfdError(Exception):
    """GFD itself fails (and publishes nothing new); str() is its error."""


def sanitise(part: str) -> str:
    """``sanitise`` of ``DP internal/lm/resource.go``: drop chars outside ``[A-Za-z0-9-_. ]``, spaces become ``-``."""
    return "-".join(re.sub(r"[^A-Za-z0-9\-_. ]", "", part).split())


def labels(inv: inventory.NodeInventory, config: dpc.DevicePluginConfig, strategy: str, machine: str = "unknown") -> dict[str, str]:
    """Every GFD label for this host; raises ``GfdError`` where GFD would exit instead."""
    if not inv.gpus:
        return {}
    out: dict[str, str] = {P + "gpu.machine": "-".join(machine.split()) or "unknown"}
    out.update(_version_labels(inv))
    out[P + "mig.capable"] = "true" if any(g.mig_capable for g in inv.gpus) else "false"
    out.update(_sharing_labels(inv, config))
    out.update(_full_gpu_labels(inv, config))
    if strategy not in ("none", "single", "mixed"):
        raise GfdError(f"error creating resource labeler: failed to construct MIG resource labeler: unknown strategy: {strategy}")
    if strategy != "none":
        out[P + "mig.strategy"] = strategy
        out.update(_single_labels(inv, config) if strategy == "single" else _mixed_labels(inv, config))
    out[P + "gpu.mode"] = _gpu_mode(inv)
    # ``DP internal/lm/vgpu.go``: merged beside the device labels; true only on a vGPU guest, whose NVIDIA PCI
    # device carries the vGPU host capability. Simulated GPUs are physical (or passed through), as on the
    # recorded H100 (tests/fixtures/gfd).
    out[P + "vgpu.present"] = "false"
    return out


def _version_labels(inv: inventory.NodeInventory) -> dict[str, str]:
    parts = inv.driver_version.split(".")
    if not 2 <= len(parts) <= 3:
        raise GfdError(f'error getting driver version: Version "{inv.driver_version}" does not match format "X.Y[.Z]"')
    major, minor = parts[0], parts[1]
    rev = parts[2] if len(parts) == 3 else ""
    cmajor, cminor = (str(v) for v in inv.cuda_driver_version)
    return {
        P + "cuda.driver.major": major,
        P + "cuda.driver.minor": minor,
        P + "cuda.driver.rev": rev,
        P + "cuda.runtime.major": cmajor,
        P + "cuda.runtime.minor": cminor,
        P + "cuda.driver-version.major": major,
        P + "cuda.driver-version.minor": minor,
        P + "cuda.driver-version.revision": rev,
        P + "cuda.driver-version.full": inv.driver_version,
        P + "cuda.runtime-version.major": cmajor,
        P + "cuda.runtime-version.minor": cminor,
        P + "cuda.runtime-version.full": f"{cmajor}.{cminor}",
    }


def _sharing_labels(inv: inventory.NodeInventory, config: dpc.DevicePluginConfig) -> dict[str, str]:
    if config.sharing_strategy != "mps":
        return {P + "mps.capable": "false"}
    if any(g.mig_enabled for g in inv.gpus):
        raise GfdError("error creating sharing labeler: failed to check MPS-capable: MPS sharing is not supported for mig devices")
    return {P + "mps.capable": "true"}


class _Resource:
    """``resourceLabeler``: labels ``<resource>.<suffix>`` with the sharing facts of one resource name."""

    def __init__(self, name: str, config: dpc.DevicePluginConfig | None) -> None:
        self.name = name
        self.config = config  # None: sharing disabled (MIG-enabled parents)

    def replicas(self) -> int:
        if self.config is None:
            return 0
        r = self.config.replication(self.name)
        return r.replicas if r is not None and r.replicas > 0 else 1

    def base(self, count: int, *parts: str) -> dict[str, str]:
        replicas = self.replicas()
        strategy = self.config.sharing_strategy if self.config is not None and replicas > 1 else "none"
        return {
            f"{self.name}.product": self.product(*parts),
            f"{self.name}.count": str(count),
            f"{self.name}.replicas": str(replicas),
            f"{self.name}.sharing-strategy": strategy,
        }

    def product(self, *parts: str) -> str:
        kept = [sanitise(p) for p in parts if p]
        r = self.config.replication(self.name) if self.config is not None else None
        if r is not None and r.replicas > 1 and not r.rename:
            kept.append("SHARED")
        return "-".join(kept)


def _full_gpu_labels(inv: inventory.NodeInventory, config: dpc.DevicePluginConfig) -> dict[str, str]:
    counts: dict[str, int] = {}
    for g in inv.gpus:
        counts[g.model.nvml_name] = counts.get(g.model.nvml_name, 0) + 1
    if len(counts) > 1:
        log.warning("Multiple device types detected: %s", sorted(counts))
    out: dict[str, str] = {}
    # MIG-enabled parents first, without sharing; full GPUs of the same name then override them.
    ordered = sorted(inv.gpus, key=lambda g: not g.mig_enabled)
    for g in ordered:
        rl = _Resource(FULL_GPU, None if g.mig_enabled else config)
        out.update(rl.base(counts[g.model.nvml_name], g.model.nvml_name))
        if g.model.memory_mib:
            out[FULL_GPU + ".memory"] = str(g.model.memory_mib)
        major, minor = g.model.compute_capability
        if major:
            out[FULL_GPU + ".family"] = g.model.family
            out[FULL_GPU + ".compute.major"] = str(major)
            out[FULL_GPU + ".compute.minor"] = str(minor)
    return out


def _mig_attribute_labels(name: str, m: inventory.MigDevice) -> dict[str, str]:
    return {
        f"{name}.memory": str(m.memory_mib),
        f"{name}.multiprocessors": str(m.multiprocessors),
        f"{name}.slices.gi": str(m.gi_slices),
        f"{name}.slices.ci": str(m.ci_slices),
        f"{name}.engines.copy": str(m.engines.copy),
        f"{name}.engines.decoder": str(m.engines.decoder),
        f"{name}.engines.encoder": str(m.engines.encoder),
        f"{name}.engines.jpeg": str(m.engines.jpeg),
        f"{name}.engines.ofa": str(m.engines.ofa),
    }


def single_strategy_problem(gpus: Sequence[inventory.GpuInfo]) -> str | None:
    """Why GFD labels a single-strategy node ``MIG-INVALID``, or None (``newMigStrategySingleLabeler``)."""
    enabled = [g for g in gpus if g.mig_enabled]
    if not enabled:
        return None
    if any(not g.mig_devices for g in enabled):
        return "at least one MIG device is enabled but empty"
    if len(enabled) != len(gpus):
        return "devices with MIG enabled and disable detected"
    if len({m.profile for g in enabled for m in g.mig_devices}) != 1:
        return "more than one MIG device type present on node"
    return None


def _single_labels(inv: inventory.NodeInventory, config: dpc.DevicePluginConfig) -> dict[str, str]:
    enabled = [g for g in inv.gpus if g.mig_enabled]
    if not enabled:
        return {}
    problem = single_strategy_problem(inv.gpus)
    if problem is not None:
        log.warning("Invalid configuration detected for mig-strategy=single: %s", problem)
        rl = _Resource(FULL_GPU, None)
        return {
            FULL_GPU + ".product": rl.product(enabled[0].model.nvml_name, "MIG", "INVALID"),
            FULL_GPU + ".count": "0",
            FULL_GPU + ".replicas": "0",
            FULL_GPU + ".memory": "0",
        }
    migs = [m for g in enabled for m in g.mig_devices]
    rl = _Resource(FULL_GPU, config)
    out = rl.base(len(migs), enabled[0].model.nvml_name, "MIG", migs[0].profile)
    out.update(_mig_attribute_labels(FULL_GPU, migs[0]))
    return out


def _mixed_labels(inv: inventory.NodeInventory, config: dpc.DevicePluginConfig) -> dict[str, str]:
    out: dict[str, str] = {}
    groups: dict[str, list[tuple[inventory.GpuInfo, inventory.MigDevice]]] = {}
    for g in inv.gpus:
        for m in g.mig_devices if g.mig_enabled else ():
            groups.setdefault(m.resource_suffix, []).append((g, m))
    for suffix, members in sorted(groups.items()):
        name = f"{P}mig-{suffix}"
        parent, first = members[0]
        rl = _Resource(name, config)
        out.update(rl.base(len(members), parent.model.nvml_name, "MIG", first.profile))
        out.update(_mig_attribute_labels(name, first))
    return out


def _gpu_mode(inv: inventory.NodeInventory) -> str:
    # GFD keeps the first device's class (its loop stops at the first device that differs).
    cls = inv.gpus[0].pci_class
    if cls == PCI_CLASS_COMPUTE:
        return "compute"
    if cls == PCI_CLASS_GRAPHICS:
        return "graphics"
    return "unknown"
