"""The NVIDIA device-plugin config file, read exactly as the real plugin reads it (reference section 1).

The real parser is *not* strict: it goes YAML -> JSON -> Go structs, so unknown keys vanish silently and struct
keys match case-insensitively, while the hand-written decoders inside ``sharing.timeSlicing``/``sharing.mps``
look keys up exactly. We mirror that, and also return the keys the plugin ignored so graders can warn about
them. A config the plugin would crash on raises ``PluginConfigError`` carrying the plugin's whole log line.
This module is plain data: it must not talk to a cluster. It is the runtime path; NVIDIA's own decoder, built as
the ``dpcheck`` helper (``cluster.gpu.dpcheck``), referees it in tests/unit/test_device_plugin_referee.py.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from cluster import errors
from cluster.gpu import goyaml as _yaml
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
CRASH_PREFIX = "error starting plugins: unable to load config: "  # then unable to finalize config: ...
VALIDATE_PREFIX = "error starting plugins: unable to validate flags: "  # validateFlags runs after loading
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
    ignored_keys: tuple[str, ...] = ()  # paths the real plugin silently dropped, e.g. sharing.mps.resources.0.replica
    log_lines: tuple[str, ...] = ()  # what the plugin logs while loading (rename/devices/resources ignored)
    folded_keys: tuple[tuple[str, str], ...] = ()  # (path, the field name) matched only case-insensitively
    imex_channel_ids: tuple[int, ...] = ()
    imex_required: bool = False

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
        raise PluginConfigError(source, problem, VALIDATE_PREFIX + problem)
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
    if config.imex_channel_ids and list(config.imex_channel_ids) != [0]:
        found = " ".join(str(i) for i in config.imex_channel_ids)
        return f"invalid IMEX channel IDs: invalid IMEX config: channelIDs must be [] or [0]; found [{found}]"
    if f.shared_devices_allocation_policy not in ("distributed", "packed"):  # v0.20 (docs/gpu-stack.md)
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
# sigs.k8s.io/yaml turns the first YAML document into JSON (cluster.gpu.goyaml.load_go) and encoding/json decodes
# it into v1.Config. Struct keys match exactly, else case-insensitively; a mismatched type is remembered and
# decoding goes on (the first one is reported at the end); the hand-written UnmarshalJSON methods of
# ReplicatedResources, ReplicatedResource, ReplicatedDevices, ResourceName, Resource, Duration and the
# device-list flag look keys up exactly and stop at their first error. NVIDIA's decoder (the dpcheck helper,
# tests/unit/test_device_plugin_referee.py) referees every rule here.


class _DecodeError(Exception):
    """A decode failure that stops decoding; str() is the plugin's ``<msg>``."""


class _TypeMismatch(_DecodeError):
    """encoding/json's UnmarshalTypeError: the message depends on where it surfaces."""

    def __init__(self, what: str, go_type: str) -> None:
        self.what, self.go_type = what, go_type
        super().__init__(f"json: cannot unmarshal {what} into Go value of type {go_type}")

    def at(self, struct: str, stack: tuple[str, ...]) -> str:
        return f"json: cannot unmarshal {self.what} into Go struct field {struct}.{'.'.join(stack)} of type {self.go_type}"


@dataclass(frozen=True)
class _T:
    """A Go type of the config: kind is str|bool|int|ptr|slice|struct|custom."""

    kind: str
    go: str = ""  # the name encoding/json prints, e.g. "string", "v1.Flags", "[]int"
    elem: "_T | None" = None
    fields: tuple[tuple[str, "_T", str], ...] = ()  # (json name, type, embedded struct name or "")
    keys: tuple[str, ...] = ()  # custom decoders: the keys they look up


_STRING, _BOOL, _INT = _T("str", "string"), _T("bool", "bool"), _T("int", "int")


def _ptr(t: _T) -> _T:
    return _T("ptr", t.go, t)


def _custom(go: str, keys: tuple[str, ...] = ()) -> _T:
    return _T("custom", go, keys=keys)


_RR = _custom("v1.ReplicatedResources", ("renameByDefault", "failRequestsGreaterThanOne", "resources"))
_RESOURCE = _custom("v1.Resource", ("pattern", "name"))
_PLUGIN = _T("struct", "v1.PluginCommandLineFlags", fields=tuple((n, t, "") for n, t in (
    ("passDeviceSpecs", _ptr(_BOOL)), ("deviceListStrategy", _ptr(_custom("v1.deviceListStrategyFlag"))),
    ("deviceIDStrategy", _ptr(_STRING)), ("cdiAnnotationPrefix", _ptr(_STRING)), ("nvidiaCTKPath", _ptr(_STRING)),
    ("containerDriverRoot", _ptr(_STRING)),
    # v0.20 (docs/gpu-stack.md): absent from v0.19.1, the newest version the Go module proxy serves.
    ("sharedDevicesAllocationPolicy", _ptr(_STRING)),
)))
_GFD = _T("struct", "v1.GFDCommandLineFlags", fields=tuple((n, t, "") for n, t in (
    ("oneshot", _ptr(_BOOL)), ("noTimestamp", _ptr(_BOOL)), ("sleepInterval", _ptr(_custom("v1.Duration"))),
    ("outputFile", _ptr(_STRING)), ("machineTypeFile", _ptr(_STRING)),
)))
_FLAGS = _T("struct", "v1.Flags", fields=tuple((n, t, "CommandLineFlags") for n, t in (
    ("migStrategy", _ptr(_STRING)), ("failOnInitError", _ptr(_BOOL)), ("mpsRoot", _ptr(_STRING)),
    ("nvidiaDriverRoot", _ptr(_STRING)), ("nvidiaDevRoot", _ptr(_STRING)), ("gdrcopyEnabled", _ptr(_BOOL)),
    ("gdsEnabled", _ptr(_BOOL)), ("mofedEnabled", _ptr(_BOOL)), ("useNodeFeatureAPI", _ptr(_BOOL)),
    ("deviceDiscoveryStrategy", _ptr(_STRING)), ("plugin", _ptr(_PLUGIN)), ("gfd", _ptr(_GFD)),
)))
_RESOURCES = _T("struct", "v1.Resources", fields=(
    ("gpus", _T("slice", "[]v1.Resource", _RESOURCE), ""), ("mig", _T("slice", "[]v1.Resource", _RESOURCE), "")))
_SHARING = _T("struct", "v1.Sharing", fields=(("timeSlicing", _RR, ""), ("mps", _ptr(_RR), "")))
_IMEX = _T("struct", "v1.Imex", fields=(("channelIDs", _T("slice", "[]int", _INT), ""), ("required", _BOOL, "")))
_CONFIG = _T("struct", "v1.Config", fields=(
    ("version", _STRING, ""), ("flags", _FLAGS, ""), ("resources", _RESOURCES, ""), ("sharing", _SHARING, ""),
    ("imex", _IMEX, "")))
_RESOURCE_ITEM_KEYS = ("name", "devices", "replicas", "rename")


def _field(t: _T, key: str) -> tuple[str, _T, str] | None:
    """encoding/json's field for a key: the exact name, else the first case-insensitive match."""
    for f in t.fields:
        if f[0] == key:
            return f
    folded = key.lower()
    return next((f for f in t.fields if f[0].lower() == folded), None)


class _Decoder:
    """One encoding/json decoder: type mismatches are saved (the first wins), the rest stops it."""

    def __init__(self) -> None:
        self.saved: str | None = None
        self.first: _TypeMismatch | None = None

    def mismatch(self, what: str, t: _T, ctx: tuple[str, tuple[str, ...]] | None) -> None:
        if self.first is None:
            self.first = _TypeMismatch(what, t.go)
            self.saved = self.first.at(*ctx) if ctx else str(self.first)

    def decode(self, value: Any, t: _T, old: Any, ctx: tuple[str, tuple[str, ...]] | None) -> Any:
        if t.kind == "ptr":
            assert t.elem is not None
            return None if value is None else self.decode(value, t.elem, old, ctx)
        if t.kind == "custom":
            try:
                return _CUSTOM[t.go](value)
            except _TypeMismatch as exc:
                raise _DecodeError(exc.at(*ctx) if ctx else str(exc)) from exc
        if value is None:
            return old
        if t.kind == "str":
            if isinstance(value, str):
                return value
        elif t.kind == "bool":
            if isinstance(value, bool):
                return value
        elif t.kind == "int":
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                number = _yaml.go_json_number(value)
                if re.fullmatch(r"-?\d+", number) and -(2**63) <= int(number) < 2**63:
                    return int(number)
                self.mismatch(f"number {number}", t, ctx)
                return old
        elif t.kind == "slice":
            if isinstance(value, list):
                assert t.elem is not None
                return [self.decode(item, t.elem, None if t.elem.kind != "int" else 0, ctx) for item in value]
        elif t.kind == "struct":
            if isinstance(value, dict):
                out = dict(old) if isinstance(old, dict) else {}
                for key, sub in value.items():
                    found = _field(t, key)
                    if found is None:
                        continue
                    name, ftype, embedded = found
                    stack = (ctx[1] if ctx else ()) + ((embedded,) if embedded else ()) + (name,)
                    out[name] = self.decode(sub, ftype, out.get(name), (t.go.split(".")[-1], stack))
                return out
        self.mismatch(_yaml.go_type(value), t, ctx)
        return old


def _fresh(value: Any, t: _T) -> Any:
    """``json.Unmarshal(raw, &x)`` inside a custom decoder: a new decoder, whose first type error is returned."""
    decoder = _Decoder()
    zero = {"str": "", "bool": False, "int": 0}.get(t.kind)
    out = decoder.decode(value, t, zero, None)
    if decoder.first is not None:
        raise decoder.first
    return out


def _object(value: Any) -> dict[str, Any]:
    """``json.Unmarshal(b, &map[string]json.RawMessage{})``: null gives an empty map."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _TypeMismatch(_yaml.go_type(value), "map[string]json.RawMessage")
    return value


def _replicated_resources(value: Any) -> dict[str, Any]:
    """``ReplicatedResources.UnmarshalJSON`` (``DP replicas.go``)."""
    raw = _object(value)
    rename_by_default = _fresh(raw.get("renameByDefault", False), _BOOL)
    fail = _fresh(raw["failRequestsGreaterThanOne"], _BOOL) if "failRequestsGreaterThanOne" in raw else None
    if "resources" not in raw:
        raise _DecodeError("no resources specified")
    items = raw["resources"]
    if items is not None and not isinstance(items, list):
        raise _TypeMismatch(_yaml.go_type(items), "[]v1.ReplicatedResource")
    resources = [_replicated_resource(item) for item in items or []]
    if not resources:
        raise _DecodeError("no resources specified")
    for r in resources:
        if rename_by_default and not r["rename"]:
            r["rename"] = r["name"] + ".shared"
    return {"renameByDefault": rename_by_default, "failRequestsGreaterThanOne": fail, "resources": resources,
            "written_fail": "failRequestsGreaterThanOne" in raw and raw["failRequestsGreaterThanOne"] is not None}


def _replicated_resource(value: Any) -> dict[str, Any]:
    """``ReplicatedResource.UnmarshalJSON``: name, devices (default all), replicas (>= 2), rename."""
    raw = _object(value)
    if "name" not in raw:
        raise _DecodeError("no resource name specified")
    name = _resource_name_json(raw["name"])
    all_devices = _devices(raw.get("devices", "all"))
    if "replicas" not in raw:
        raise _DecodeError("no replicas specified")
    replicas = _fresh(raw["replicas"], _INT)
    if replicas < 2:
        raise _DecodeError("number of replicas must be >= 2")
    rename = _resource_name_json(raw["rename"]) if "rename" in raw else ""
    return {"name": name, "replicas": replicas, "rename": rename, "all": all_devices}


def _resource_name_json(value: Any) -> str:
    """``ResourceName.UnmarshalJSON``: a JSON string (null reads as ""), then ``NewResourceName``."""
    return resource_name(_fresh(value, _STRING))


def _go_json(value: Any) -> str:
    """encoding/json's compact text of a value (keys sorted, <>& escaped)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{_go_json(k)}:{_go_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_go_json(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return _yaml.go_json_number(value)
    if value is None:
        return "null"
    text = json.dumps(value, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _devices(value: Any) -> bool:
    """``ReplicatedDevices.UnmarshalJSON``: "all", a count, or a list of indices/UUIDs; True for all."""
    if value is None or isinstance(value, str):
        text = value or ""
        if text != "all":
            raise _DecodeError(f"devices set as '{text}' but the only valid string input is 'all'")
        return True
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = _yaml.go_json_number(value)
        if re.fullmatch(r"-?\d+", number) and -(2**63) <= int(number) < 2**63:
            if int(number) <= 0:
                raise _DecodeError(f"devices set as '{int(number)}' but a count of devices must be > 0")
            return False
    if isinstance(value, list):
        for item in value:
            if isinstance(item, (int, float)) and not isinstance(item, bool):
                number = _yaml.go_json_number(item)
                if re.fullmatch(r"\d+", number) and int(number) < 2**64:
                    continue
            if isinstance(item, str) and _DEVICE_REF.fullmatch(item):
                continue
            shown = item if isinstance(item, str) else ""
            raise _DecodeError(f"unsupported type for device in devices list: {shown}, string")
        return False
    raise _DecodeError(f"unrecognized type for devices spec: {_go_json(value)}")


def _resource(value: Any) -> dict[str, str]:
    """``Resource.UnmarshalJSON`` (``DP resources.go``): pattern and name both required."""
    raw = _object(value)
    if "pattern" not in raw:
        raise _DecodeError("resources must have a 'pattern' field set")
    if "name" not in raw:
        raise _DecodeError("resources must have a 'name' field set")
    pattern = _fresh(raw["pattern"], _T("str", "v1.ResourcePattern"))
    return {"pattern": pattern, "name": _resource_name_json(raw["name"])}


def _device_list_strategy(value: Any) -> tuple[str, ...]:
    """``deviceListStrategyFlag.UnmarshalJSON``: one string or a list of strings."""
    if value is None or isinstance(value, str):
        return (value or "",)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise _DecodeError(f"invalid deviceListStrategy: {_go_json(value)}")


def _duration(value: Any) -> float:
    """``Duration.UnmarshalJSON``: a number of nanoseconds, "infinite" or a Go duration string."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        return math.inf if value == "infinite" else parse_go_duration(value)
    raise _DecodeError("invalid duration")


_CUSTOM: Mapping[str, Any] = {
    "v1.ReplicatedResources": _replicated_resources,
    "v1.Resource": _resource,
    "v1.deviceListStrategyFlag": _device_list_strategy,
    "v1.Duration": _duration,
}

_UNITS = {"ns": 1, "us": 1e3, "µs": 1e3, "μs": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9, "h": 3600e9}


def parse_go_duration(text: str) -> float:
    """``time.ParseDuration``, in nanoseconds; its error texts."""
    quoted = '"' + text + '"'
    rest = text
    sign = 1
    if rest[:1] in "+-" and rest:
        sign = -1 if rest[0] == "-" else 1
        rest = rest[1:]
    if rest == "0":
        return 0.0
    if not rest:
        raise _DecodeError(f"time: invalid duration {quoted}")
    total = 0.0
    while rest:
        number = re.match(r"(\d*)(\.\d*)?", rest)
        assert number is not None
        if not number.group(0) or number.group(0) == ".":
            raise _DecodeError(f"time: invalid duration {quoted}")
        rest = rest[number.end():]
        unit = re.match(r"[^0-9.]*", rest)
        assert unit is not None
        if not unit.group(0):
            raise _DecodeError(f"time: missing unit in duration {quoted}")
        if unit.group(0) not in _UNITS:
            raise _DecodeError(f'time: unknown unit "{unit.group(0)}" in duration {quoted}')
        total += float(number.group(0)) * _UNITS[unit.group(0)]
        rest = rest[unit.end():]
    if total > 2**63 - 1:
        raise _DecodeError(f"time: invalid duration {quoted}")
    return sign * total


def _dropped(value: Any, t: _T, path: str, out: list[str], folded: list[tuple[str, str]]) -> None:
    """The keys no decoder reads (what the plugin drops silently), as dotted paths with list indices; and the
    struct keys that match their field only case-insensitively."""
    while t.kind == "ptr" and t.elem is not None:
        t = t.elem
    if isinstance(value, dict):
        if t.kind == "custom" and t.keys:
            for key, sub in value.items():
                if key not in t.keys:
                    out.append(f"{path}.{key}" if path else key)
                elif t is _RR and key == "resources" and isinstance(sub, list):
                    for i, item in enumerate(sub):
                        if isinstance(item, dict):
                            out.extend(f"{path}.resources.{i}.{k}" for k in item if k not in _RESOURCE_ITEM_KEYS)
            return
        if t.kind != "struct":
            return
        for key, sub in value.items():
            found = _field(t, key)
            where = f"{path}.{key}" if path else key
            if found is None:
                out.append(where)
                continue
            if found[0] != key:
                folded.append((where, found[0]))
            _dropped(sub, found[1], where, out, folded)
    elif isinstance(value, list) and t.kind == "slice" and t.elem is not None:
        for i, item in enumerate(value):
            _dropped(item, t.elem, f"{path}.{i}", out, folded)


def parse(text: str, *, source: str = "config.yaml") -> DevicePluginConfig:
    """``parseConfigFrom``: the first YAML document to JSON to ``v1.Config``, non-strict; raises
    ``PluginConfigError`` with the plugin's log line on the errors it stops with."""
    try:
        data = _yaml.load_go(text)
    except _yaml.YamlSyntaxError as exc:
        msg = f"unmarshal error: error converting YAML to JSON: {exc}"
        raise PluginConfigError(source, msg, CRASH_PREFIX + PARSE_PREFIX + msg) from exc
    if isinstance(data, dict):  # sigs.k8s.io/yaml writes numbers and booleans under `version` as strings
        key = next((k for k in data if k == "version"), None) or next((k for k in data if k.lower() == "version"), None)
        value = data.get(key) if key else None
        if isinstance(value, bool):
            data = {**data, key: "true" if value else "false"}
        elif isinstance(value, (int, float)) and key:
            data = {**data, key: str(value) if isinstance(value, int) else _yaml.format_float32_g(value)}
    decoder = _Decoder()
    zero = {"sharing": {"timeSlicing": None, "mps": None}, "version": ""}
    try:
        raw = decoder.decode(data, _CONFIG, zero, None)
    except _DecodeError as exc:
        raise PluginConfigError(source, str(exc), CRASH_PREFIX + PARSE_PREFIX + DECODE_PREFIX + str(exc)) from exc
    if decoder.saved is not None:
        msg = decoder.saved
        raise PluginConfigError(source, msg, CRASH_PREFIX + PARSE_PREFIX + DECODE_PREFIX + msg)
    raw = raw if isinstance(raw, dict) else zero
    version = raw.get("version") or VERSION
    if version != VERSION:
        msg = f"unknown version: {version}"
        raise PluginConfigError(source, msg, CRASH_PREFIX + PARSE_PREFIX + msg)
    ignored: list[str] = []
    folded: list[tuple[str, str]] = []
    _dropped(data, _CONFIG, "", ignored, folded)
    return replace(_config_from(raw, version, tuple(sorted(ignored))), folded_keys=tuple(folded))


def _config_from(raw: dict[str, Any], version: str, ignored: tuple[str, ...]) -> DevicePluginConfig:
    lines: list[str] = []
    resources = raw.get("resources") or {}
    if resources.get("gpus") or resources.get("mig"):
        lines.append("Customizing the 'resources' field is not yet supported in the config. Ignoring...")
    sharing = raw.get("sharing") or {}
    ts = _sharing_spec(sharing.get("timeSlicing"), "timeSlicing", lines)
    mps = _sharing_spec(sharing.get("mps"), "mps", lines)
    flags = raw.get("flags") or {}
    plugin = flags.get("plugin") or {}
    values: dict[str, Any] = {}
    for attr, got in (("mig_strategy", flags.get("migStrategy")), ("fail_on_init_error", flags.get("failOnInitError")),
                      ("mps_root", flags.get("mpsRoot")), ("nvidia_driver_root", flags.get("nvidiaDriverRoot")),
                      ("device_discovery_strategy", flags.get("deviceDiscoveryStrategy")),
                      ("pass_device_specs", plugin.get("passDeviceSpecs")),
                      ("device_list_strategy", plugin.get("deviceListStrategy")),
                      ("device_id_strategy", plugin.get("deviceIDStrategy")),
                      ("shared_devices_allocation_policy", plugin.get("sharedDevicesAllocationPolicy"))):
        if got is not None:  # a nil pointer takes the CLI default (updateFromCLIFlag)
            values[attr] = got
    imex = raw.get("imex") or {}
    return DevicePluginConfig(
        version=version, flags=Flags(**values), time_slicing=ts, mps=mps, ignored_keys=ignored,
        log_lines=tuple(lines), imex_channel_ids=tuple(imex.get("channelIDs") or ()),
        imex_required=bool(imex.get("required")),
    )


def _sharing_spec(block: dict[str, Any] | None, key: str, lines: list[str]) -> SharingSpec | None:
    if block is None:
        return None
    rename_by_default = bool(block["renameByDefault"])
    resources = tuple(ReplicatedResource(name=r["name"], replicas=r["replicas"], rename=r["rename"])
                      for r in block["resources"])
    if any(_rename_ignored(r, rename_by_default) for r in resources):
        lines.append(f"Setting the 'rename' field in sharing.{key}.resources is not yet supported in the config. Ignoring...")
    if any(not r["all"] for r in block["resources"]):
        lines.append(f"Customizing the 'devices' field in sharing.{key}.resources is not yet supported in the config. Ignoring...")
    return SharingSpec(resources=resources, rename_by_default=rename_by_default,
                       fail_requests_greater_than_one=block["failRequestsGreaterThanOne"] if block["written_fail"] else None)


def _rename_ignored(r: ReplicatedResource, rename_by_default: bool) -> bool:
    """Whether ``DisableResourceNamingInConfig`` throws this ``rename`` away (and says so in the log)."""
    if rename_by_default:
        return r.rename not in ("", r.name + ".shared")
    return r.rename != ""


def resource_name(raw: Any) -> str:
    """``NewResourceName``: ``gpu`` becomes ``nvidia.com/gpu``; at most 63 characters; a DNS-1123 subdomain."""
    if not isinstance(raw, str):
        raise _DecodeError(f"json: cannot unmarshal {_yaml.go_type(raw)} into Go value of type string")
    name = raw if raw.startswith(RESOURCE_PREFIX + "/") else f"{RESOURCE_PREFIX}/{raw}"
    if len(name) > MAX_RESOURCE_NAME_LENGTH:
        raise _DecodeError(f"fully-qualified resource name must be {MAX_RESOURCE_NAME_LENGTH} characters or less: {name}")
    short = name.split("/", 1)[1]
    problems = []
    if len(short) > 253:
        problems.append("must be no more than 253 characters")
    if not re.fullmatch(_DNS1123, short):
        problems.append(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
            "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
            f"'{_DNS1123}')"
        )
    if problems:
        raise _DecodeError(f"incorrect format for resource name '{name}': [{' '.join(problems)}]")
    return name
