"""mig-parted configs and MIG geometry: the strict config parser, device filters, placement fit and ``apply``.

The parser is strict like ``nvidia-mig-parted`` (``MP api/spec/v1/spec.go``): unknown fields are errors and the
messages are the real ones. ``apply`` works out what a GPU looks like after the MIG manager applied a named
config, or why it fails; the simulated MIG manager turns that into ``nvidia.com/mig.config.state``. This module
is plain data: it must not talk to NVML or to a cluster.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cluster import errors
from cluster.gpu import catalog, goyaml as _yaml, inventory

NVIDIA_VENDOR_ID = 0x10DE
VERSION = "v1"
_FIELD_RE = re.compile(r"^(\d+)(c|g|gb)$")


@dataclass(frozen=True)
class MigConfigEntry:
    """One item of a named mig-config: which GPUs it selects and what they should look like."""

    devices: str | tuple[int, ...]  # "all" or GPU indexes
    mig_enabled: bool
    mig_devices: tuple[tuple[str, int], ...] = ()  # profile -> count, in file order
    device_filter: tuple[str, ...] = ()  # "0x20B210DE" strings; empty matches every GPU

    def matches(self, index: int, pci_id: int) -> bool:
        """``MatchesDeviceFilter`` and ``MatchesDevices`` of mig-parted (``MP api/spec/v1/helpers.go``)."""
        if self.device_filter and pci_id not in {_device_id(f) for f in self.device_filter}:
            return False
        return self.devices == "all" or index in self.devices


@dataclass(frozen=True)
class MigPartedConfig:
    version: str
    configs: Mapping[str, tuple[MigConfigEntry, ...]]


def pci_id(model: catalog.GpuModel) -> int:
    """The id mig-parted compares device filters with: PCI device id, then the NVIDIA vendor id (0x20B210DE)."""
    return (model.pci_device_id << 16) | NVIDIA_VENDOR_ID


def device_filter_string(model: catalog.GpuModel) -> str:
    return f"0x{pci_id(model):08X}"


def _device_id(text: str) -> int | None:
    # Go: strconv.ParseInt(str, 0, 32); a filter that does not parse simply never matches.
    try:
        value = int(text, 0)
    except ValueError:
        return None
    return value if -(2**31) <= value < 2**31 else None


# --- strict parsing -------------------------------------------------------------------------------------------


def parse(text: str, *, source: str = "mig-parted config") -> MigPartedConfig:
    """Parse a mig-parted config file; every problem is reported at once, each with the tool's own words."""
    try:
        data = _yaml.load(text)
    except _yaml.YamlSyntaxError as exc:
        raise errors.ConfigError(source, [f"error converting YAML to JSON: {exc}"]) from exc
    problems: list[str] = []
    config = _parse_spec(data, problems)
    if problems or config is None:
        raise errors.ConfigError(source, problems or ["empty document"])
    return config


def _parse_spec(data: Any, problems: list[str]) -> MigPartedConfig | None:
    if not isinstance(data, dict):
        problems.append(f"json: cannot unmarshal {_yaml.go_type(data)} into Go value of type v1.Spec")
        return None
    if "version" not in data and data:
        problems.append("unable to parse with missing 'version' field")
        return None
    if data.get("version") != VERSION:
        problems.append(f"unknown version: {data.get('version', '')}")
        return None
    for key in data:
        if key not in ("version", "mig-configs"):
            problems.append(f"unexpected field: {key}")
    raw = data.get("mig-configs")
    configs: dict[str, tuple[MigConfigEntry, ...]] = {}
    if raw is None:
        return MigPartedConfig(VERSION, configs)
    if not isinstance(raw, dict) or not raw:
        problems.append("at least one entry in 'mig-configs' is required")
        return None
    for name, items in raw.items():
        if not isinstance(items, list) or not items:
            problems.append(f"mig-configs.{name}: at least one entry in '{name}' is required")
            continue
        entries = [_parse_entry(item, f"mig-configs.{name}[{i}]", problems) for i, item in enumerate(items)]
        configs[str(name)] = tuple(e for e in entries if e is not None)
    return MigPartedConfig(VERSION, configs)


def _parse_entry(item: Any, path: str, problems: list[str]) -> MigConfigEntry | None:
    if not isinstance(item, dict):
        problems.append(f"{path}: json: cannot unmarshal {_yaml.go_type(item)} into Go value of type v1.MigConfigSpec")
        return None
    missing = [r for r in ("devices", "mig-enabled") if r not in item]
    if missing:
        problems.append(f"{path}: missing required field: {missing[0]}")
        return None
    before = len(problems)
    for key in item:
        if key not in ("device-filter", "devices", "mig-enabled", "mig-devices"):
            problems.append(f"{path}: unexpected field: {key}")
    device_filter = _parse_filter(item.get("device-filter"), path, problems)
    devices = _parse_devices(item["devices"], path, problems)
    enabled = item["mig-enabled"]
    if not isinstance(enabled, bool):
        problems.append(f"{path}: json: cannot unmarshal {_yaml.go_type(enabled)} into Go value of type bool")
    mig_devices = _parse_mig_devices(item.get("mig-devices"), path, problems)
    if enabled is True and "mig-devices" not in item:
        problems.append(f"{path}: missing required field 'mig-devices' when 'mig-enabled' is true")
    if enabled is False and mig_devices:
        problems.append(f"{path}: MIG devices included when 'mig-enabled' is false")
    if len(problems) > before or devices is None:
        return None
    return MigConfigEntry(devices=devices, mig_enabled=bool(enabled), mig_devices=mig_devices, device_filter=device_filter)


def _parse_filter(value: Any, path: str, problems: list[str]) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value else ()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    kind = _yaml.go_type(value)
    problems.append(
        f"{path}: (json: cannot unmarshal {kind} into Go value of type string, "
        f"json: cannot unmarshal {kind} into Go value of type []string)"
    )
    return ()


def _parse_devices(value: Any, path: str, problems: list[str]) -> str | tuple[int, ...] | None:
    if isinstance(value, str):
        if value != "all":
            problems.append(f"{path}: invalid string input for 'devices': {value}")
            return None
        return "all"
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(value)
    kind = _yaml.go_type(value)
    problems.append(
        f"{path}: (json: cannot unmarshal {kind} into Go value of type string, "
        f"json: cannot unmarshal {kind} into Go value of type []int)"
    )
    return None


def _parse_mig_devices(value: Any, path: str, problems: list[str]) -> tuple[tuple[str, int], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        problems.append(f"{path}: json: cannot unmarshal {_yaml.go_type(value)} into Go value of type types.MigConfig")
        return ()
    pairs: list[tuple[str, int]] = []
    for profile, count in value.items():
        if not isinstance(count, int) or isinstance(count, bool):
            problems.append(f"{path}: json: cannot unmarshal {_yaml.go_type(count)} into Go value of type int")
            return ()
        pairs.append((str(profile), count))
    problem = _assert_valid(pairs)
    if problem:
        problems.append(f"{path}: error validating values in 'mig-devices' field: {problem}")
        return ()
    return tuple(pairs)


def _assert_valid(pairs: Sequence[tuple[str, int]]) -> str | None:
    """``types.MigConfig.AssertValid`` (``MP pkg/types/mig_config.go``)."""
    if not pairs:
        return None
    for profile, count in pairs:
        problem = profile_format_problem(profile)
        if problem:
            return f"invalid format for '{profile}': {problem}"
        if count < 0:
            return f"invalid count for '{count}': <nil>"
    if all(count == 0 for _, count in pairs):
        return "all counts for all MigProfiles are 0"
    return None


def profile_format_problem(profile: str) -> str | None:
    """go-nvlib ``parseMigProfile``: why a string is not a MIG profile, or None when it is one."""
    if profile == "":
        return "profile is the empty string"
    plus, minus = profile.split("+", 1), profile.split("-", 1)
    if len(plus) == 2 and len(minus) == 2:
        return f"profile '{profile}' contains both '+/-' attributes"
    split = plus if len(plus) == 2 else minus
    fields = split[0].split(".", 2)
    if len(fields) not in (2, 3):
        return f"cannot parse fields of '{profile}': parsed wrong number of fields, expected 2 or 3"
    for text, want in zip(fields, ("c", "g", "gb")[3 - len(fields):]):
        problem = _field_problem(text, want)
        if problem:
            return f"cannot parse fields of '{profile}': {problem}"
    if len(split) == 2:
        problem = _attributes_problem(split[1])
        if problem:
            return f"cannot parse attributes of '{profile}': {problem}"
    return None


def _field_problem(text: str, want: str) -> str | None:
    if text.strip() != text:
        return f"leading or trailing spaces on '%d{want}'"
    if not text.endswith(want):
        return f"missing '{want}' from '%d{want}'"
    m = _FIELD_RE.match(text)
    if m is None or m.group(2) != want:
        return f"malformed number in '%d{want}'"
    return None


def _attributes_problem(text: str) -> str | None:
    seen: set[str] = set()
    for a in text.split(","):
        if a in seen:
            return "non unique attribute in list"
        if a == "":
            return "empty attribute in list"
        if a.strip() != a:
            return "leading or trailing spaces in attribute"
        if a[0].isdigit():
            return "attribute begins with a number"
        if a[0] == "." or a[-1] == ".":
            return "attribute begins/ends with a dot"
        if not all(c.isascii() and (c.isalnum() or c == ".") for c in a):
            return "non alpha-numeric character or digit in attribute"
        seen.add(a)
    return None


# --- placement fit --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fit:
    """The outcome of fitting a set of profiles on one GPU: placements in creation order, or why not."""

    placements: tuple[inventory.Placement, ...] = ()
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.reason is None


def fit(model: catalog.GpuModel, wanted: Mapping[str, int] | Sequence[tuple[str, int]]) -> Fit:
    """Place the requested instances largest first (mig-parted's ``Flatten`` order), backtracking over starts.

    A ``+me`` profile uses the starts of its base profile; an instance occupies ``[start, start+size)`` of the
    GPU's memory slices and two instances may not overlap (reference section 4).
    """
    pairs = list(wanted.items()) if isinstance(wanted, Mapping) else list(wanted)
    if not model.mig_capable:
        return Fit(reason=f"{model.nvml_name} is not MIG capable")
    instances: list[catalog.MigProfile] = []
    for name, count in pairs:
        profile = model.profile(name)
        if profile is None:
            names = ", ".join(p.name for p in model.mig_profiles)
            return Fit(reason=f"MIG profile {name} is not available on {model.nvml_name} (available: {names})")
        if count > profile.max_count:
            return Fit(reason=f"{count} x {profile.name} asked, but at most {profile.max_count} fit on {model.nvml_name}")
        instances.extend([profile] * count)
    instances.sort(key=lambda p: (-p.compute_slices, -p.memory_slices, p.is_media_extension is False))
    placed = _place(instances, model.mig_memory_slices, 0, [])
    if placed is None:
        asked = ", ".join(f"{n}:{c}" for n, c in pairs if c)
        return Fit(reason=f"{asked} does not fit on {model.nvml_name}: no placement of all instances exists")
    return Fit(placements=tuple(placed))


def _place(
    todo: Sequence[catalog.MigProfile], slices: int, used: int, done: list[inventory.Placement]
) -> list[inventory.Placement] | None:
    if not todo:
        return list(done)
    profile, rest = todo[0], todo[1:]
    size = profile.memory_slices
    for start in profile.starts:
        mask = ((1 << size) - 1) << start
        if start + size > slices or used & mask:
            continue
        found = _place(rest, slices, used | mask, [*done, inventory.Placement(profile.name, start, size)])
        if found is not None:
            return found
    return None


# --- apply ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuLayout:
    """What one GPU looks like after an apply: MIG mode and its GPU instances in creation order."""

    index: int
    mig_enabled: bool
    placements: tuple[inventory.Placement, ...] = ()


@dataclass(frozen=True)
class ApplyResult:
    """Every GPU's layout after applying a named config, or the reason the MIG manager would report ``failed``."""

    layouts: tuple[GpuLayout, ...] = ()
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.reason is None


def current_layout(gpu: inventory.GpuInfo) -> GpuLayout:
    placements = tuple(inventory.Placement(m.profile, m.placement_start, m.placement_size) for m in gpu.mig_devices)
    return GpuLayout(gpu.index, gpu.mig_enabled, placements)


def apply(config_name: str, config: MigPartedConfig, gpus: Sequence[inventory.GpuInfo]) -> ApplyResult:
    """Apply ``config_name`` the way ``nvidia-mig-parted apply`` walks it: each entry in order, over every GPU it
    selects; a later entry that selects the same GPU wins. GPUs no entry selects keep their layout."""
    entries = config.configs.get(config_name)
    if entries is None:
        return ApplyResult(reason=f"selected mig-config not present: {config_name}")
    layouts = {g.index: current_layout(g) for g in gpus}
    for entry in entries:
        for gpu in gpus:
            if not entry.matches(gpu.index, pci_id(gpu.model)):
                continue
            layout, reason = _layout_for(entry, gpu)
            if reason is not None:
                return ApplyResult(reason=reason)
            layouts[gpu.index] = layout
    return ApplyResult(layouts=tuple(layouts[i] for i in sorted(layouts)))


def _layout_for(entry: MigConfigEntry, gpu: inventory.GpuInfo) -> tuple[GpuLayout, str | None]:
    if not entry.mig_enabled:
        return GpuLayout(gpu.index, False), None
    if not gpu.mig_capable:
        return GpuLayout(gpu.index, False), f"GPU {gpu.index} ({gpu.model.nvml_name}) is not MIG capable"
    for profile, _ in entry.mig_devices:
        parts = profile.split("+", 1)[0].split(".")
        if len(parts) == 3:
            return GpuLayout(gpu.index, False), f"compute-instance profile {profile} is not simulated; use a GPU-instance profile"
    result = fit(gpu.model, entry.mig_devices)
    if not result.ok:
        return GpuLayout(gpu.index, False), f"GPU {gpu.index}: {result.reason}"
    return GpuLayout(gpu.index, True, result.placements), None


# --- default configs ------------------------------------------------------------------------------------------


def default_config_yaml(models: Sequence[catalog.GpuModel]) -> str:
    """The operator's default mig-parted config (``default-mig-parted-config``) for these models, as YAML text.

    Configs every GPU shares (``all-disabled``, ``all-enabled``) have no device filter; the others list, per
    distinct layout, the PCI ids of the models that take it, as the operator's ConfigMap does.
    """
    capable = [m for m in models if m.mig_capable]
    lines = ["version: v1", "mig-configs:"]
    lines += ["  all-disabled:", "    - devices: all", "      mig-enabled: false", ""]
    lines += ["  all-enabled:", "    - devices: all", "      mig-enabled: true", "      mig-devices: {}", ""]
    names: list[str] = []
    for m in capable:
        names += [n for n in catalog.default_mig_configs(m) if n not in names and n not in ("all-disabled", "all-enabled")]
    for name in names:
        lines.append(f"  {name}:")
        groups: dict[tuple[tuple[str, int], ...], list[str]] = {}
        for m in capable:
            layout = catalog.default_mig_configs(m).get(name)
            if layout:
                groups.setdefault(tuple(layout.items()), []).append(device_filter_string(m))
        for layout_items, filters in groups.items():
            quoted = ", ".join(f'"{f}"' for f in filters)
            lines += [f"    - device-filter: [{quoted}]", "      devices: all", "      mig-enabled: true", "      mig-devices:"]
            lines += [f'        "{profile}": {count}' for profile, count in layout_items]
        lines.append("")
    return "\n".join(lines)
