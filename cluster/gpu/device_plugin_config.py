"""The NVIDIA device-plugin config file, read exactly as the real plugin reads it (reference section 1).

The real parser is *not* strict: it goes YAML -> JSON -> Go structs, so unknown keys vanish silently and struct
keys match case-insensitively, while the hand-written decoders inside ``sharing.timeSlicing``/``sharing.mps``
look keys up exactly. We mirror that, and also return the keys the plugin ignored so graders can warn about
them. A config the plugin would crash on raises ``PluginConfigError`` carrying the plugin's whole log line.
This module is plain data: it must not talk to a cluster.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from cluster import errors
from cluster.gpu import _yaml
# Per-node selection lives in config_manager and is re-exported here, next to the parser.
from cluster.gpu.config_manager import NAMED_FALLBACK as NAMED_FALLBACK
from cluster.gpu.config_manager import Selection as Selection
from cluster.gpu.config_manager import select_config as select_config

log = logging.getLogger(__name__)

VERSION = "v1"
RESOURCE_PREFIX = "nvidia.com"
MAX_RESOURCE_NAME_LENGTH = 63
MIG_STRATEGIES = ("none", "single", "mixed")
DEVICE_LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")
PARSE_PREFIX = "unable to finalize config: unable to parse config file: error parsing config file: "
DECODE_PREFIX = "unmarshal error: error unmarshaling JSON: while decoding JSON: "
CRASH_PREFIX = "error starting plugins: unable to load config: "
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_DEVICE_REF = re.compile(rf"\d+|\d+:\d+|GPU-{_UUID}|MIG-{_UUID}|MIG-GPU-{_UUID}/\d+/\d+")
_DNS1123 = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"


class PluginConfigError(errors.ConfigError):
    """The device plugin would refuse this config and crash; ``crash_message`` is the line it logs."""

    def __init__(self, source: str, message: str, crash_message: str) -> None:
        self.plugin_message = message
        self.crash_message = crash_message
        super().__init__(source, [message], hint="the device plugin pod would crash-loop with: " + crash_message)


@dataclass(frozen=True)
class ReplicatedResource:
    name: str  # fully qualified, e.g. nvidia.com/gpu or nvidia.com/mig-1g.10gb
    replicas: int
    rename: str = ""  # after neutralisation: "" or "<name>.shared"

    @property
    def advertised_name(self) -> str:
        return self.rename or self.name


@dataclass(frozen=True)
class SharingSpec:
    """``sharing.timeSlicing`` or ``sharing.mps``."""

    resources: tuple[ReplicatedResource, ...]
    rename_by_default: bool = False
    fail_requests_greater_than_one: bool | None = None  # None: not written in the file


@dataclass(frozen=True)
class Flags:
    mig_strategy: str = "none"
    fail_on_init_error: bool = True
    mps_root: str = ""
    nvidia_driver_root: str = "/"
    device_discovery_strategy: str = "auto"
    pass_device_specs: bool = False
    device_list_strategy: tuple[str, ...] = ("envvar",)
    device_id_strategy: str = "uuid"
    shared_devices_allocation_policy: str = "distributed"


@dataclass(frozen=True)
class DevicePluginConfig:
    version: str = VERSION
    flags: Flags = field(default_factory=Flags)
    time_slicing: SharingSpec | None = None
    mps: SharingSpec | None = None
    ignored_keys: tuple[str, ...] = ()  # paths the real plugin silently dropped
    log_lines: tuple[str, ...] = ()  # what the plugin logs while loading (rename/devices/resources ignored)

    @property
    def sharing(self) -> SharingSpec | None:
        """The active sharing section: MPS wins over time-slicing (``DP sharing.go ReplicatedResources``)."""
        return self.mps if self.mps is not None else self.time_slicing

    @property
    def sharing_strategy(self) -> str:
        if self.mps is not None and any(r.replicas > 1 for r in self.mps.resources):
            return "mps"
        if self.time_slicing is not None and any(r.replicas > 1 for r in self.time_slicing.resources):
            return "time-slicing"
        return "none"

    @property
    def fail_requests_greater_than_one(self) -> bool:
        """timeSlicing defaults to false; MPS to true, and from v0.20.0 an explicit false is honoured."""
        spec = self.sharing
        if spec is None:
            return False
        if spec.fail_requests_greater_than_one is None:
            return spec is self.mps
        return spec.fail_requests_greater_than_one

    def replication(self, resource: str) -> ReplicatedResource | None:
        spec = self.sharing
        return next((r for r in spec.resources if r.name == resource), None) if spec else None


def empty() -> DevicePluginConfig:
    """What the plugin runs with when the config-manager picked no file (the operator's ``empty`` fallback)."""
    return DevicePluginConfig()


def load(text: str | None, *, source: str = "config.yaml", env_mig_strategy: str | None = None,
         env_mps_root: str | None = None) -> DevicePluginConfig:
    """Parse, apply the operator's ``MIG_STRATEGY`` (and ``MPS_ROOT``) env, validate flags and neutralise
    rename/devices.

    Raises ``PluginConfigError`` with the plugin's crash line when the real plugin would refuse to start.
    """
    config = parse(text, source=source) if text is not None and text.strip() else empty()
    config = with_operator_mig_strategy(config, env_mig_strategy)
    if env_mps_root:  # an env var marks the flag as set, so it beats the file (DP README precedence)
        config = replace(config, flags=replace(config.flags, mps_root=env_mps_root))
    problem = validate_flags(config)
    if problem:
        raise PluginConfigError(source, problem, CRASH_PREFIX + "unable to validate flags: " + problem)
    return neutralise_renaming(config)


def with_operator_mig_strategy(config: DevicePluginConfig, cluster_policy_strategy: str | None) -> DevicePluginConfig:
    """The GPU Operator sets ``MIG_STRATEGY`` from ``ClusterPolicy.spec.mig.strategy`` when non-empty, and an env
    var beats the file (``OP applyMIGConfiguration``, ``DP README`` precedence)."""
    if not cluster_policy_strategy:
        return config
    return replace(config, flags=replace(config.flags, mig_strategy=cluster_policy_strategy))


def validate_flags(config: DevicePluginConfig) -> str | None:
    """``validateFlags`` of the plugin's main.go, in its order; the first problem, or None."""
    f = config.flags
    bad = [s for s in f.device_list_strategy if s not in DEVICE_LIST_STRATEGIES]
    if bad:
        return f"invalid --device-list-strategy option: invalid strategy: {bad[0]}"
    if f.device_id_strategy not in ("uuid", "index"):
        return f"invalid --device-id-strategy option: {f.device_id_strategy}"
    if config.sharing_strategy == "mps":
        if f.mig_strategy == "mixed":
            return "using --mig-strategy=mixed is not supported with MPS"
        if not f.mps_root:
            return "using MPS requires --mps-root to be specified"
    if f.device_discovery_strategy not in ("auto", "nvml", "tegra"):
        return f"invalid --device-discovery-strategy option {f.device_discovery_strategy}"
    if f.mig_strategy not in MIG_STRATEGIES:
        return f"unknown MIG strategy: {f.mig_strategy}"
    if f.shared_devices_allocation_policy not in ("distributed", "packed"):
        return f"invalid --shared-devices-allocation-policy option: {f.shared_devices_allocation_policy}"
    return None


def neutralise_renaming(config: DevicePluginConfig) -> DevicePluginConfig:
    """``DisableResourceNamingInConfig``: only ``renameByDefault`` renames; ``devices`` is forced to all.

    The matching log lines were gathered while parsing, in ``log_lines``.
    """

    def fixed(spec: SharingSpec | None) -> SharingSpec | None:
        if spec is None:
            return None
        renamed = tuple(replace(r, rename=r.name + ".shared" if spec.rename_by_default else "") for r in spec.resources)
        return replace(spec, resources=renamed)

    for line in config.log_lines:
        log.info("device plugin would log: %s", line)
    return replace(config, time_slicing=fixed(config.time_slicing), mps=fixed(config.mps))


# --- parsing ---------------------------------------------------------------------------------------------


class _DecodeError(Exception):
    """A decode failure; str() is the plugin's ``<msg>``."""


_FLAG_FIELDS: Mapping[str, tuple[str, type]] = {
    "migStrategy": ("mig_strategy", str),
    "failOnInitError": ("fail_on_init_error", bool),
    "mpsRoot": ("mps_root", str),
    "nvidiaDriverRoot": ("nvidia_driver_root", str),
    "nvidiaDevRoot": ("", str),
    "gdsEnabled": ("", bool),
    "mofedEnabled": ("", bool),
    "gdrcopyEnabled": ("", bool),
    "useNodeFeatureAPI": ("", bool),
    "deviceDiscoveryStrategy": ("device_discovery_strategy", str),
    "plugin": ("", dict),
    "gfd": ("", dict),
}
_PLUGIN_FIELDS: Mapping[str, tuple[str, type]] = {
    "passDeviceSpecs": ("pass_device_specs", bool),
    "deviceListStrategy": ("device_list_strategy", list),
    "deviceIDStrategy": ("device_id_strategy", str),
    "cdiAnnotationPrefix": ("", str),
    "nvidiaCTKPath": ("", str),
    "containerDriverRoot": ("", str),
    "sharedDevicesAllocationPolicy": ("shared_devices_allocation_policy", str),
}
_GFD_FIELDS: Mapping[str, tuple[str, type]] = {
    "oneshot": ("", bool),
    "noTimestamp": ("", bool),
    "sleepInterval": ("", str),
    "outputFile": ("", str),
    "machineTypeFile": ("", str),
}


def parse(text: str, *, source: str = "config.yaml") -> DevicePluginConfig:
    """``parseConfigFrom``: YAML to JSON to structs, non-strict; raises ``PluginConfigError`` on the errors the
    plugin crashes with."""
    try:
        data = _yaml.load(text)
    except _yaml.YamlSyntaxError as exc:
        msg = f"unmarshal error: error converting YAML to JSON: {exc}"
        raise PluginConfigError(source, msg, CRASH_PREFIX + PARSE_PREFIX + msg) from exc
    ignored: list[str] = []
    try:
        config = _decode_config(data if data is not None else {}, ignored)
    except _DecodeError as exc:
        raise PluginConfigError(source, str(exc), CRASH_PREFIX + PARSE_PREFIX + DECODE_PREFIX + str(exc)) from exc
    version = config.version or VERSION
    if version != VERSION:
        msg = f"unknown version: {version}"
        raise PluginConfigError(source, msg, CRASH_PREFIX + PARSE_PREFIX + msg)
    return replace(config, version=version, ignored_keys=tuple(ignored))


def _struct_fields(data: Any, known: Mapping[str, Any], path: str, struct: str, ignored: list[str]) -> dict[str, Any]:
    """Go's encoding/json on a struct: exact key first, else a case-insensitive match; last one wins."""
    if not isinstance(data, dict):
        raise _DecodeError(f"json: cannot unmarshal {_yaml.go_type(data)} into Go struct field {struct}.{path} of type v1.{struct}")
    out: dict[str, Any] = {}
    folded = {k.lower(): k for k in known}
    for key, value in data.items():
        name = key if key in known else folded.get(str(key).lower())
        if name is None:
            ignored.append(f"{path}.{key}" if path else str(key))
        else:
            out[name] = value
    return out


def _decode_config(data: Any, ignored: list[str]) -> DevicePluginConfig:
    top = _struct_fields(data, dict.fromkeys(("version", "flags", "resources", "sharing", "imex")), "", "Config", ignored)
    version = top.get("version")
    if version is not None and not isinstance(version, str):
        raise _DecodeError(f"json: cannot unmarshal {_yaml.go_type(version)} into Go struct field Config.version of type string")
    lines: list[str] = []
    resources = top.get("resources")
    if isinstance(resources, dict) and (resources.get("gpus") or resources.get("mig")):
        lines.append("Customizing the 'resources' field is not yet supported in the config. Ignoring...")
    flags = _decode_flags(top.get("flags"), ignored)
    ts = mps = None
    if top.get("sharing") is not None:
        sharing = _struct_fields(top["sharing"], dict.fromkeys(("timeSlicing", "mps")), "sharing", "Sharing", ignored)
        if sharing.get("timeSlicing") is not None:
            ts = _decode_sharing(sharing["timeSlicing"], "timeSlicing", lines)
        if sharing.get("mps") is not None:
            mps = _decode_sharing(sharing["mps"], "mps", lines)
    return DevicePluginConfig(version=version or "", flags=flags, time_slicing=ts, mps=mps, log_lines=tuple(lines))


def _typed(value: Any, want: type, struct: str, path: str) -> Any:
    if want is list:  # deviceListStrategy: one string or a list of strings
        if isinstance(value, str):
            return (value,)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return tuple(value)
        raise _DecodeError(f"invalid deviceListStrategy: {value}")
    ok = isinstance(value, bool) if want is bool else isinstance(value, want) and not isinstance(value, bool)
    if not ok:
        go = {str: "string", bool: "bool", dict: "struct"}[want]
        raise _DecodeError(f"json: cannot unmarshal {_yaml.go_type(value)} into Go struct field {struct}.{path} of type {go}")
    return value


def _decode_flags(data: Any, ignored: list[str]) -> Flags:
    if data is None:
        return Flags()
    values: dict[str, Any] = {}
    top = _struct_fields(data, _FLAG_FIELDS, "flags", "CommandLineFlags", ignored)
    sections = [("flags", top, _FLAG_FIELDS, "CommandLineFlags")]
    for sub, known, struct in (("plugin", _PLUGIN_FIELDS, "PluginCommandLineFlags"), ("gfd", _GFD_FIELDS, "GFDCommandLineFlags")):
        if top.get(sub) is not None:
            sections.append((f"flags.{sub}", _struct_fields(top[sub], known, f"flags.{sub}", struct, ignored), known, struct))
    for path, got, known, struct in sections:
        for key, value in got.items():
            attr, want = known[key]
            if value is None or want is dict:
                continue
            checked = _typed(value, want, struct, f"{path}.{key}")
            if attr:
                values[attr] = checked
    return Flags(**values)


def _decode_sharing(data: Any, key: str, lines: list[str]) -> SharingSpec:
    """``ReplicatedResources.UnmarshalJSON``: exact key lookups, errors as in ``DP replicas.go``."""
    if not isinstance(data, dict):
        raise _DecodeError(f"json: cannot unmarshal {_yaml.go_type(data)} into Go value of type map[string]json.RawMessage")
    rename_by_default = data.get("renameByDefault", False)
    fail_gt1 = data.get("failRequestsGreaterThanOne")
    for name, value in (("renameByDefault", rename_by_default), ("failRequestsGreaterThanOne", fail_gt1)):
        if value is not None and not isinstance(value, bool):
            raise _DecodeError(f"json: cannot unmarshal {_yaml.go_type(value)} into Go value of type bool")
    items = data.get("resources")
    if items is None or (isinstance(items, list) and not items):
        raise _DecodeError("no resources specified")
    if not isinstance(items, list):
        raise _DecodeError(f"json: cannot unmarshal {_yaml.go_type(items)} into Go value of type []v1.ReplicatedResource")
    resources = tuple(_decode_resource(item) for item in items)
    if any(_rename_ignored(r, bool(rename_by_default)) for r, _ in resources):
        lines.append(f"Setting the 'rename' field in sharing.{key}.resources is not yet supported in the config. Ignoring...")
    if any(not all_devices for _, all_devices in resources):
        lines.append(f"Customizing the 'devices' field in sharing.{key}.resources is not yet supported in the config. Ignoring...")
    return SharingSpec(
        resources=tuple(r for r, _ in resources),
        rename_by_default=bool(rename_by_default),
        fail_requests_greater_than_one=fail_gt1,
    )


def _rename_ignored(r: ReplicatedResource, rename_by_default: bool) -> bool:
    """Whether ``DisableResourceNamingInConfig`` throws this ``rename`` away (and says so in the log)."""
    if rename_by_default:
        return r.rename not in ("", r.name + ".shared")
    return r.rename != ""


def _decode_resource(item: Any) -> tuple[ReplicatedResource, bool]:
    """``ReplicatedResource.UnmarshalJSON``; returns the resource and whether ``devices`` was ``all``."""
    if not isinstance(item, dict):
        raise _DecodeError(f"json: cannot unmarshal {_yaml.go_type(item)} into Go value of type map[string]json.RawMessage")
    if "name" not in item:
        raise _DecodeError("no resource name specified")
    name = resource_name(item["name"])
    all_devices = _decode_devices(item.get("devices", "all"))
    if "replicas" not in item:
        raise _DecodeError("no replicas specified")
    replicas = item["replicas"]
    if not isinstance(replicas, int) or isinstance(replicas, bool):
        raise _DecodeError(f"json: cannot unmarshal {_yaml.go_type(replicas)} into Go value of type int")
    if replicas < 2:
        raise _DecodeError("number of replicas must be >= 2")
    rename = resource_name(item["rename"]) if "rename" in item else ""
    return ReplicatedResource(name=name, replicas=replicas, rename=rename), all_devices


def _decode_devices(value: Any) -> bool:
    if isinstance(value, str):
        if value != "all":
            raise _DecodeError(f"devices set as '{value}' but the only valid string input is 'all'")
        return True
    if isinstance(value, int) and not isinstance(value, bool):
        if value <= 0:
            raise _DecodeError(f"devices set as '{value}' but a count of devices must be > 0")
        return False
    if isinstance(value, list):
        for item in value:
            if isinstance(item, int) and not isinstance(item, bool) and item >= 0:
                continue
            if isinstance(item, str) and _DEVICE_REF.fullmatch(item):
                continue
            shown = item if isinstance(item, str) else ""
            raise _DecodeError(f"unsupported type for device in devices list: {shown}, string")
        return False
    raise _DecodeError(f"unrecognized type for devices spec: {value}")


def resource_name(raw: Any) -> str:
    """``NewResourceName``: ``gpu`` becomes ``nvidia.com/gpu``; at most 63 characters; a DNS-1123 subdomain."""
    if not isinstance(raw, str):
        raise _DecodeError(f"json: cannot unmarshal {_yaml.go_type(raw)} into Go value of type string")
    name = raw if raw.startswith(RESOURCE_PREFIX + "/") else f"{RESOURCE_PREFIX}/{raw}"
    if len(name) > MAX_RESOURCE_NAME_LENGTH:
        raise _DecodeError(f"fully-qualified resource name must be {MAX_RESOURCE_NAME_LENGTH} characters or less: {name}")
    short = name.split("/", 1)[1]
    if len(short) > 253 or not re.fullmatch(_DNS1123, short):
        detail = (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
            "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
            f"'{_DNS1123}')"
        )
        raise _DecodeError(f"incorrect format for resource name '{name}': [{detail}]")
    return name
