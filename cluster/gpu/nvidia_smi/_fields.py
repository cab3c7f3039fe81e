"""Every field ``--query-gpu`` accepts with driver 580: canonical name, unit, aliases, and an idle GPU's value.

Generated from ``tests/fixtures/nvidia-smi/*/query-each.tsv`` (each name ``--help-query-gpu`` lists, queried alone on
a real H100 and H200); ``tests/unit/test_nvidia_smi_fields.py`` checks the table against those files. The last
column is the value both GPUs printed, kept only where it is the same on both and ``facts`` does not decide the
field (ECC counters, vGPU capabilities, clock-event reasons of an idle GPU); it is missing where the simulator
decides. An alias is printed under its canonical name (``gpu_name`` as ``name``), as the real tool does.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping


@dataclass(frozen=True)
class Field:
    name: str  # canonical, as the CSV header prints it
    unit: str  # "" for none; else the header shows " [unit]" and values " unit"
    idle: str | None  # the recorded value of an idle GPU, or None when the simulator decides


# name, unit (- for none), aliases (- for none), idle value (rest of the line; none: facts decides; "(empty)": "")
_TABLE = """
timestamp - -
driver_version - -
vgpu_driver_capability.heterogenous_multivGPU - - [N/A]
count - -
name - gpu_name
serial - gpu_serial
uuid - gpu_uuid
pci.bus_id - gpu_bus_id
pci.domain - -
pci.bus - -
pci.device - -
pci.baseClass - -
pci.subClass - -
pci.device_id - -
pci.sub_device_id - -
vgpu_device_capability.fractional_multiVgpu - - [N/A]
vgpu_device_capability.heterogeneous_timeSlice_profile - - [N/A]
vgpu_device_capability.heterogeneous_timeSlice_sizes - - [N/A]
vgpu_device_capability.homogeneous_placements - - [N/A]
vgpu_device_capability.mig_timeSlicing - - [N/A]
vgpu_device_capability.mig_timeSlicing_mode - - [N/A]
pcie.link.gen.current - -
pcie.link.gen.gpucurrent - -
pcie.link.gen.max - -
pcie.link.gen.gpumax - -
pcie.link.gen.hostmax - - [N/A]
pcie.link.width.current - -
pcie.link.width.max - -
index - -
display_mode - - [Requested functionality has been deprecated]
display_attached - - Yes
display_active - - Disabled
persistence_mode - - Enabled
addressing_mode - - None
accounting.mode - - Disabled
accounting.buffer_size - - 4000
driver_model.current - - [N/A]
driver_model.pending - - [N/A]
vbios_version - -
inforom.img - inforom.image
inforom.oem - -
inforom.ecc - -
inforom.pwr - inforom.power [N/A]
inforom.checksum_validation - - valid
gpu_recovery_action - - None
gom.current - gpu_operation_mode.current [N/A]
gom.pending - gpu_operation_mode.pending [N/A]
fan.speed % - [N/A]
pstate - - P0
clocks_event_reasons.supported - clocks_throttle_reasons.supported 0x00000000000001FF
clocks_event_reasons.active - clocks_throttle_reasons.active 0x0000000000000001
clocks_event_reasons.gpu_idle - clocks_throttle_reasons.gpu_idle Active
clocks_event_reasons.applications_clocks_setting - clocks_throttle_reasons.applications_clocks_setting Not Active
clocks_event_reasons.sw_power_cap - clocks_throttle_reasons.sw_power_cap Not Active
clocks_event_reasons.hw_slowdown - clocks_throttle_reasons.hw_slowdown Not Active
clocks_event_reasons.hw_thermal_slowdown - clocks_throttle_reasons.hw_thermal_slowdown Not Active
clocks_event_reasons.hw_power_brake_slowdown - clocks_throttle_reasons.hw_power_brake_slowdown Not Active
clocks_event_reasons.sw_thermal_slowdown - clocks_throttle_reasons.sw_thermal_slowdown Not Active
clocks_event_reasons.sync_boost - clocks_throttle_reasons.sync_boost Not Active
clocks_event_reasons_counters.sw_power_cap us - 0
clocks_event_reasons_counters.sync_boost us - 0
clocks_event_reasons_counters.sw_thermal_slowdown us - 0
clocks_event_reasons_counters.hw_thermal_slowdown us - 0
clocks_event_reasons_counters.hw_power_brake_slowdown us - 0
memory.total MiB -
memory.reserved MiB -
memory.used MiB -
memory.free MiB -
compute_mode - -
compute_cap - -
utilization.gpu % -
utilization.memory % -
utilization.encoder % - 0
utilization.decoder % - 0
utilization.jpeg % - 0
utilization.ofa % - 0
encoder.stats.sessionCount - - 0
encoder.stats.averageFps - - 0
encoder.stats.averageLatency - - 0
dramEncryption.mode.current - - [N/A]
dramEncryption.mode.pending - - [N/A]
ecc.mode.current - - Enabled
ecc.mode.pending - - Enabled
ecc.errors.corrected.volatile.device_memory - - 0
ecc.errors.corrected.volatile.dram - - 0
ecc.errors.corrected.volatile.register_file - - [N/A]
ecc.errors.corrected.volatile.l1_cache - - [N/A]
ecc.errors.corrected.volatile.l2_cache - - [N/A]
ecc.errors.corrected.volatile.texture_memory - - [N/A]
ecc.errors.corrected.volatile.cbu - - [N/A]
ecc.errors.corrected.volatile.sram - - 0
ecc.errors.corrected.volatile.total - - 0
ecc.errors.corrected.aggregate.device_memory - - 0
ecc.errors.corrected.aggregate.dram - - 0
ecc.errors.corrected.aggregate.register_file - - [N/A]
ecc.errors.corrected.aggregate.l1_cache - - [N/A]
ecc.errors.corrected.aggregate.l2_cache - - [N/A]
ecc.errors.corrected.aggregate.texture_memory - - [N/A]
ecc.errors.corrected.aggregate.cbu - - [N/A]
ecc.errors.corrected.aggregate.sram - - 0
ecc.errors.corrected.aggregate.total - - 0
ecc.errors.uncorrected.volatile.device_memory - - 0
ecc.errors.uncorrected.volatile.dram - - 0
ecc.errors.uncorrected.volatile.register_file - - [N/A]
ecc.errors.uncorrected.volatile.l1_cache - - [N/A]
ecc.errors.uncorrected.volatile.l2_cache - - [N/A]
ecc.errors.uncorrected.volatile.texture_memory - - [N/A]
ecc.errors.uncorrected.volatile.cbu - - [N/A]
ecc.errors.uncorrected.volatile.sram - - 0
ecc.errors.uncorrected.volatile.total - - 0
ecc.errors.uncorrected.aggregate.device_memory - - 0
ecc.errors.uncorrected.aggregate.dram - - 0
ecc.errors.uncorrected.aggregate.register_file - - [N/A]
ecc.errors.uncorrected.aggregate.l1_cache - - [N/A]
ecc.errors.uncorrected.aggregate.l2_cache - - [N/A]
ecc.errors.uncorrected.aggregate.texture_memory - - [N/A]
ecc.errors.uncorrected.aggregate.cbu - - [N/A]
ecc.errors.uncorrected.aggregate.sram - - 0
ecc.errors.uncorrected.aggregate.total - - 0
ecc.errors.uncorrected.volatile.sram.parity - - 0
ecc.errors.uncorrected.volatile.sram.secded - - 0
ecc.errors.uncorrected.aggregate.sram.parity - - 0
ecc.errors.uncorrected.aggregate.sram.secded - - 0
ecc.errors.uncorrected.aggregate.sram.thresholdExceeded - - No
ecc.errors.uncorrected.aggregate.sram.l2 - - 0
ecc.errors.uncorrected.aggregate.sram.sm - - 0
ecc.errors.uncorrected.aggregate.sram.mcu - - 0
ecc.errors.uncorrected.aggregate.sram.pcie - - 0
ecc.errors.uncorrected.aggregate.sram.other - - 0
retired_pages.single_bit_ecc.count - retired_pages.sbe [N/A]
retired_pages.double_bit.count - retired_pages.dbe [N/A]
retired_pages.pending - - [N/A]
remapped_rows.correctable - remapped_rows.sbe 0
remapped_rows.correctable_inactive - - 0
remapped_rows.uncorrectable - remapped_rows.dbe 0
remapped_rows.uncorrectable_inactive - - 0
remapped_rows.pending - - No
remapped_rows.failure - - No
remapped_rows.histogram.max - -
remapped_rows.histogram.high - - 0
remapped_rows.histogram.partial - - 0
remapped_rows.histogram.low - - 0
remapped_rows.histogram.none - - 0
temperature.gpu - -
temperature.gpu.tlimit - -
temperature.memory - -
power.management - - Enabled
power.draw W -
power.draw.average W gpu.power.draw.average
power.draw.instant W gpu.power.draw.instant
power.limit W gpu.power.requested_limit
enforced.power.limit W gpu.power.current_limit
power.default_limit W gpu.power.default_limit
power.min_limit W gpu.power.min_limit
power.max_limit W gpu.power.max_limit
module.power.draw.average W - [N/A]
module.power.draw.instant W - [N/A]
module.power.limit W module.power.requested_limit [N/A]
module.enforced.power.limit W module.power.current_limit [N/A]
module.power.default_limit W - [N/A]
module.power.min_limit W - [N/A]
module.power.max_limit W - [N/A]
power_smoothing.delayed_power_smoothing_supported - - [N/A]
power_smoothing.primary_power_floor W - [N/A]
power_smoothing.secondary_power_floor W - [N/A]
power_smoothing.min_primary_floor_activation_offset W - [N/A]
power_smoothing.min_primary_floor_activation_point W - [N/A]
power_smoothing.window_multiplier ms - [N/A]
power_smoothing.curr_profile.secondary_power_floor W - [N/A]
power_smoothing.curr_profile.primary_floor_act_window_multiplier - - [N/A]
power_smoothing.curr_profile.primary_floor_tar_window_multiplier - - [N/A]
power_smoothing.curr_profile.primary_floor_act_offset W - [N/A]
power_smoothing.admin_override.secondary_power_floor W - [N/A]
power_smoothing.admin_override.primary_floor_act_window_multiplier - - [N/A]
power_smoothing.admin_override.primary_floor_tar_window_multiplier - - [N/A]
power_smoothing.admin_override.primary_floor_act_offset W - [N/A]
clocks.current.graphics MHz clocks.gr
clocks.current.sm MHz clocks.sm
clocks.current.memory MHz clocks.mem
clocks.current.video MHz clocks.video
clocks.applications.graphics MHz clocks.applications.gr
clocks.applications.memory MHz clocks.applications.mem
clocks.default_applications.graphics MHz clocks.default_applications.gr
clocks.default_applications.memory MHz clocks.default_applications.mem
clocks.max.graphics MHz clocks.max.gr
clocks.max.sm MHz -
clocks.max.memory MHz clocks.max.mem
mig.mode.current - -
mig.mode.pending - -
gsp.mode.current - - Enabled
gsp.mode.default - - Enabled
c2c.mode - - Disabled
protected_memory.total MiB - 0
protected_memory.used MiB - 0
protected_memory.free MiB - 0
fabric.state - -
fabric.status - -
fabric.cliqueId - -
fabric.clusterUuid - -
fabric.health.summary - - N/A
fabric.health.bandwidth - - N/A
fabric.health.route_recovery_in_progress - - N/A
fabric.health.route_unhealthy - - N/A
fabric.health.access_timeout_recovery - - N/A
fabric.health.incorrect_configuration - - N/A
fabric.health.partition_assigned - - N/A
platform.chassis_serial_number - - (empty)
platform.slot_number - - 0
platform.tray_index - - 0
platform.host_id - - 1
platform.peer_type - - Direct Connected
platform.module_id - -
platform.gpu_fabric_guid - - 0x0000000000000000
hostname - - [N/A]
"""


def _parse() -> tuple[Mapping[str, Field], Mapping[str, Field], tuple[str, ...]]:
    by_name: dict[str, Field] = {}
    by_alias: dict[str, Field] = {}
    for line in _TABLE.strip().splitlines():
        name, unit, aliases, *rest = line.split(" ", 3)
        idle = None if not rest else "" if rest[0] == "(empty)" else rest[0]
        field = Field(name, "" if unit == "-" else unit, idle)
        by_name[name] = field
        for alias in ([] if aliases == "-" else aliases.split(",")):
            by_alias[alias] = field
    return MappingProxyType(by_name), MappingProxyType({**by_name, **by_alias}), tuple(by_name)


CANONICAL, BY_NAME, ORDER = _parse()


def lookup(name: str) -> Field | None:
    """The field a name or alias means (case-sensitive, as the real tool is), or None."""
    return BY_NAME.get(name)
