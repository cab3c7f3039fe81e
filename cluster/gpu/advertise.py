"""What a node advertises for its GPUs: the one function both the simulator and the NVML probe use.

``advertise`` turns an inventory, a device-plugin config and the effective MIG strategy into the extended
resources (capacity, allocatable, device IDs) the NVIDIA device plugin registers and the labels GFD publishes,
or into the error the plugin crashes with. Rules follow ``DP internal/rm/{device_map,rm}.go`` and reference
sections 1-3. Plain data: this module must not talk to a cluster or to NVML.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from cluster.gpu import device_plugin_config as dpc
from cluster.gpu import gfd_labels, inventory

FULL_GPU = "nvidia.com/gpu"
NFD_PCI_LABEL = "feature.node.kubernetes.io/pci-10de.present"
# The plugin's error travels up through these wrappers before main logs it (DP main.go startPlugins,
# plugin manager GetPlugins, rm.NewNVMLResourceManagers); a layer between them could be missing.
DEVICE_MAP_PREFIX = "error starting plugins: error getting plugins: failed to construct resource managers: error building device map: "
CREATE_PLUGIN_PREFIX = "error starting plugins: error getting plugins: failed to create plugin: "
MPS_DAEMON_PREFIX = "invalid MPS configuration: "


@dataclass(frozen=True)
class AdvertisedDevice:
    """One device ID the plugin registers with the kubelet (a replica ``<id>::<i>`` when shared)."""

    id: str
    uuid: str  # the GPU or MIG device behind it
    gpu_index: int
    healthy: bool = True


@dataclass(frozen=True)
class Advertisement:
    capacity: dict[str, int] = field(default_factory=dict)  # extended resources only
    allocatable: dict[str, int] = field(default_factory=dict)
    devices: dict[str, tuple[AdvertisedDevice, ...]] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    error: str | None = None  # the device plugin's (or MPS daemon's) crash line; nothing is advertised
    gfd_error: str | None = None  # GFD fails too and publishes no new labels
    sharing_strategy: str = "none"
    single_request_resources: tuple[str, ...] = ()  # failRequestsGreaterThanOne is on for these names
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Physical:
    """A device before replication: a whole GPU or a MIG device."""

    id: str
    uuid: str
    gpu_index: int
    healthy: bool
    is_mig: bool


def nfd_labels(inv: inventory.NodeInventory) -> dict[str, str]:
    """The NFD PCI label the GPU Operator's node selection keys on (reference section 3)."""
    return {NFD_PCI_LABEL: "true"} if inv.gpus else {}


def advertise(
    inv: inventory.NodeInventory,
    config: dpc.DevicePluginConfig | None,
    mig_strategy: str,
    *,
    machine: str = "unknown",
) -> Advertisement:
    """Resources and labels for ``inv`` under ``config`` (``None``: the empty config) and the effective strategy.

    ``mig_strategy`` wins over ``config.flags.migStrategy``, as the operator's ``MIG_STRATEGY`` env does.
    """
    config = dpc.with_operator_mig_strategy(config or dpc.empty(), mig_strategy)
    labels, gfd_error = _labels(inv, config, mig_strategy, machine)
    problem = dpc.validate_flags(config)
    if problem is not None:
        return Advertisement(labels=labels, gfd_error=gfd_error, error=dpc.VALIDATE_PREFIX + problem)
    resources, warnings, error = _device_map(inv, mig_strategy, config.flags.device_id_strategy)
    if error is None:
        error = _sharing_error(inv, config, resources)
    if error is not None:
        return Advertisement(labels=labels, gfd_error=gfd_error, error=error, warnings=warnings)
    devices = _replicate(resources, config)
    capacity = {name: len(devs) for name, devs in devices.items() if devs}
    allocatable = {name: sum(d.healthy for d in devs) for name, devs in devices.items() if devs}
    single = tuple(sorted(_single_request(config, devices)))
    return Advertisement(
        capacity=capacity,
        allocatable=allocatable,
        devices={k: v for k, v in devices.items() if v},
        labels=labels,
        gfd_error=gfd_error,
        sharing_strategy=config.sharing_strategy,
        single_request_resources=single,
        warnings=warnings,
    )


def _labels(inv: inventory.NodeInventory, config: dpc.DevicePluginConfig, strategy: str, machine: str) -> tuple[dict[str, str], str | None]:
    try:
        return gfd_labels.labels(inv, config, strategy, machine), None
    except gfd_labels.GfdError as exc:
        return {}, str(exc)


def _gpu_id(g: inventory.GpuInfo, id_strategy: str) -> str:
    return g.uuid if id_strategy == "uuid" else str(g.index)


def _device_map(
    inv: inventory.NodeInventory, strategy: str, id_strategy: str
) -> tuple[dict[str, list[_Physical]], tuple[str, ...], str | None]:
    """``buildDeviceMapFromConfigResources``: which physical devices back which resource name."""
    out: dict[str, list[_Physical]] = {}
    warnings: list[str] = []
    for g in inv.gpus:
        if g.mig_enabled and strategy != "none":
            continue
        out.setdefault(FULL_GPU, []).append(_Physical(_gpu_id(g, id_strategy), g.uuid, g.index, g.healthy, False))
    if strategy == "none":
        return out, (), None
    num_gpus = len(out.get(FULL_GPU, []))
    num_migs = 0
    for g in inv.gpus:
        if not g.mig_enabled:
            continue
        for j, m in enumerate(g.mig_devices):
            if strategy == "single":
                name = FULL_GPU
            elif m.ci_slices != m.gi_slices:
                return out, (), DEVICE_MAP_PREFIX + f"error building MIG device map: MIG profile '{m.profile}' does not match any resource patterns"
            else:
                name = f"nvidia.com/mig-{m.resource_suffix}"
            mig_id = m.uuid if id_strategy == "uuid" else f"{g.index}:{j}"
            out.setdefault(name, []).append(_Physical(mig_id, m.uuid, g.index, g.healthy, True))
            num_migs += 1
    for g in inv.gpus:
        if g.mig_enabled and not g.mig_devices:
            if strategy == "single":
                detail = f"at least one device with migEnabled=true was not configured correctly: device {g.index} has no MIG devices configured"
                return out, (), DEVICE_MAP_PREFIX + "invalid MIG configuration: " + detail
            warnings.append(f"device {g.index} has no MIG devices configured")
    if strategy == "single":
        profiles = {m.profile for g in inv.gpus if g.mig_enabled for m in g.mig_devices}
        if len(profiles) > 1:
            return out, (), DEVICE_MAP_PREFIX + "invalid MIG configuration: more than one MIG device type present on node"
        if num_gpus > 0 and num_migs > 0:
            return out, (), DEVICE_MAP_PREFIX + "all devices on the node must be configured with the same migEnabled value"
    return out, tuple(warnings), None


def _sharing_error(inv: inventory.NodeInventory, config: dpc.DevicePluginConfig, resources: dict[str, list[_Physical]]) -> str | None:
    if config.sharing_strategy != "mps":
        return None
    shared = {r.name for r in config.sharing.resources} if config.sharing else set()
    for name, devs in resources.items():
        if any(d.is_mig for d in devs):
            return CREATE_PLUGIN_PREFIX + "sharing using MPS is not supported for MIG devices"
        r = config.replication(name)
        if name not in shared or r is None:
            continue
        for d in devs:
            gpu = next(g for g in inv.gpus if g.index == d.gpu_index)
            limit = 48 if gpu.model.compute_capability >= (7, 5) else 16
            if r.replicas > limit:
                return MPS_DAEMON_PREFIX + f"invalid device maximum allowed replicas exceeded: {r.replicas} > {limit}"
    return None


def _replicate(resources: dict[str, list[_Physical]], config: dpc.DevicePluginConfig) -> dict[str, tuple[AdvertisedDevice, ...]]:
    """``updateDeviceMapWithReplicas``: each device of a shared resource becomes ``replicas`` IDs ``<id>::<i>``."""
    out: dict[str, list[AdvertisedDevice]] = {}
    for name, devs in resources.items():
        r = config.replication(name)
        if r is None:
            out.setdefault(name, []).extend(AdvertisedDevice(d.id, d.uuid, d.gpu_index, d.healthy) for d in devs)
            continue
        target = out.setdefault(r.advertised_name, [])
        for d in devs:
            target.extend(AdvertisedDevice(f"{d.id}::{i}", d.uuid, d.gpu_index, d.healthy) for i in range(r.replicas))
    return {k: tuple(v) for k, v in out.items()}


def _single_request(config: dpc.DevicePluginConfig, devices: dict[str, tuple[AdvertisedDevice, ...]]) -> set[str]:
    if not config.fail_requests_greater_than_one or config.sharing is None:
        return set()
    return {r.advertised_name for r in config.sharing.resources if devices.get(r.advertised_name)}


def with_health(inv: inventory.NodeInventory, unhealthy: set[int]) -> inventory.NodeInventory:
    """The same host with the GPUs at these indexes marked unhealthy (a fault the simulator injects)."""
    gpus = tuple(replace(g, healthy=g.index not in unhealthy) for g in inv.gpus)
    return replace(inv, gpus=gpus)
