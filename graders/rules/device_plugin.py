"""Rule ``device-plugin-config``: NVIDIA device-plugin config files, alone or inside a ConfigMap, and ClusterPolicy.

The config is read by ``cluster.gpu.device_plugin_config`` exactly as the plugin reads it. What would
crash the plugin (``replicas: 1``, a ``devices`` string other than ``all``, MPS under the mixed MIG
strategy, an unknown ``migStrategy``) is an error quoting the plugin's log line. What the plugin accepts
but ignores is a warning, because it silently changes nothing: unknown keys such as ``time-slicing``, keys
inside ``timeSlicing``/``mps`` that are matched case-sensitively (``renamebydefault``), ``rename`` and
``devices`` fields. MPS on MIG devices is refused by the plugin at start. Information notes explain the
defaults that surprise people (``failRequestsGreaterThanOne``, renamed ``.shared`` resources, the
operator's ``MIG_STRATEGY`` overriding the file).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from cluster import strict
from cluster.gpu import device_plugin_config as dpc
from graders import findings, manifests, source
from graders.rules import base

RULE_ID = "device-plugin-config"

MAX_NODES = 5_000  # a real config has a few dozen; bigger ones are not worth a slow exact parse
MPS_MAX_REPLICAS = 48
MPS_ROOT = "/run/nvidia/mps"  # what deployments pass as MPS_ROOT; only used to keep checking the rest
_SHARING_KEYS = ("renameByDefault", "failRequestsGreaterThanOne", "resources")
_RESOURCE_KEYS = ("name", "replicas", "rename", "devices")
_TOP_KEYS = ("version", "flags", "resources", "sharing", "imex")
_FLAG_KEYS = ("migStrategy", "failOnInitError", "mpsRoot", "nvidiaDriverRoot", "nvidiaDevRoot", "gdsEnabled",
              "mofedEnabled", "gdrcopyEnabled", "useNodeFeatureAPI", "deviceDiscoveryStrategy", "plugin", "gfd")
_PLUGIN_KEYS = ("passDeviceSpecs", "deviceListStrategy", "deviceIDStrategy", "cdiAnnotationPrefix", "nvidiaCTKPath",
                "containerDriverRoot", "sharedDevicesAllocationPolicy")
_GFD_KEYS = ("oneshot", "noTimestamp", "sleepInterval", "outputFile", "machineTypeFile")


def check(doc: source.Document, ctx: base.RuleContext) -> Iterator[findings.Finding]:
    doc_type = manifests.classify(doc)
    if doc_type is manifests.DocType.DEVICE_PLUGIN_CONFIG:
        yield from _config(doc)
    elif doc_type is manifests.DocType.OBJECT and manifests.kind(doc) == "ClusterPolicy":
        yield from _cluster_policy(doc)


def _config(doc: source.Document) -> Iterator[findings.Finding]:
    data = doc.data
    assert isinstance(data, dict)
    if sum(1 for _ in source.walk(data)) > MAX_NODES:
        yield base.emit(doc, (), "device-plugin-config/too-big", limit=MAX_NODES)
        return
    try:
        text = json.dumps(data, allow_nan=False)
    except ValueError:
        text = None
    if text is None:
        yield base.emit(doc, (), "device-plugin-config/crash", message="a number that is not finite",
                        crash=dpc.CRASH_PREFIX + dpc.PARSE_PREFIX
                        + "unmarshal error: error converting YAML to JSON: json: unsupported value: NaN")
        return
    try:
        config, root_from_deployment = _load(text, doc.file)
    except dpc.PluginConfigError as exc:
        yield base.emit(doc, _locate(data, exc.plugin_message), "device-plugin-config/crash",
                        message=exc.plugin_message, crash=exc.crash_message)
        return
    if doc.embedded_in:  # DP cmd/config-manager/main.go: nothing watches the files (reference section 9)
        yield base.emit(doc, (), "device-plugin-config/reload-needs-restart")
    if config.sharing_strategy == "mps" and root_from_deployment:
        yield base.emit(doc, ("sharing",), "device-plugin-config/mps-root-from-deployment")
    yield from _ignored(doc, config)
    yield from _sharing_notes(doc, config)


_KNOWN_UNDER = {
    "": _TOP_KEYS, "sharing": ("timeSlicing", "mps"), "flags": _FLAG_KEYS, "imex": ("channelIDs", "required"),
    "resources": ("gpus", "mig"), "flags.plugin": _PLUGIN_KEYS, "flags.gfd": _GFD_KEYS,
}


def _known(parent: str) -> tuple[str, ...]:
    last = parent.rsplit(".", 1)[-1]
    if last.lower() in ("timeslicing", "mps"):
        return _SHARING_KEYS
    if re.fullmatch(r".*\.resources\.\d+", parent):
        return _RESOURCE_KEYS if "sharing" in parent.lower() else ("pattern", "name")
    return _KNOWN_UNDER.get(parent, ())


def _ignored(doc: source.Document, config: dpc.DevicePluginConfig) -> Iterator[findings.Finding]:
    """Every key the plugin dropped (``ignored_keys`` comes from the same walk as NVIDIA's decoder)."""
    for dotted in config.ignored_keys:
        path = _path_of(doc.data, dotted)
        parent, _, key = dotted.rpartition(".")
        variant = "ignored-sharing-key" if parent.lower() == "sharing" else "ignored-key"
        yield base.emit(doc, path, f"device-plugin-config/{variant}", key=dotted, suggestion=_closest(key, _known(parent)))
    for dotted, canonical in config.folded_keys:
        yield base.emit(doc, _path_of(doc.data, dotted), "device-plugin-config/case-folded", key=dotted,
                        canonical=canonical)
    for line in config.log_lines:
        yield base.emit(doc, _log_line_path(doc.data, line), "device-plugin-config/field-ignored", line=line)


def _sharing_notes(doc: source.Document, config: dpc.DevicePluginConfig) -> Iterator[findings.Finding]:
    data = manifests.as_map(doc.data)
    sharing_key, _ = _folded(data, "sharing")
    spec = config.sharing
    if spec is None or sharing_key is None:
        return
    is_mps = spec is config.mps
    block = ("sharing", _folded(manifests.as_map(data.get(sharing_key)), "mps" if is_mps else "timeSlicing")[0] or "")
    if config.time_slicing is not None and config.mps is not None:
        yield base.emit(doc, block, "device-plugin-config/both-strategies")
    for i, res in enumerate(spec.resources):
        where = block + ("resources", i)
        if is_mps and res.name.startswith("nvidia.com/mig-"):
            yield base.emit(doc, where, "device-plugin-config/mps-with-mig", resource=res.name)
        elif is_mps and config.flags.mig_strategy == "single":
            yield base.emit(doc, ("flags", "migStrategy"), "device-plugin-config/mps-with-mig-single")
        if is_mps and res.replicas > MPS_MAX_REPLICAS:
            yield base.emit(doc, where + ("replicas",), "device-plugin-config/mps-too-many-replicas",
                            replicas=res.replicas, limit=MPS_MAX_REPLICAS)
        if res.name.startswith("nvidia.com/mig-") and config.flags.mig_strategy != "mixed":
            yield base.emit(doc, where + ("name",), "device-plugin-config/mig-resource-needs-mixed",
                            resource=res.name, strategy=config.flags.mig_strategy)
    names = ", ".join(r.name + (".shared" if spec.rename_by_default else "") for r in spec.resources)
    if spec.rename_by_default:
        yield base.emit(doc, block + ("renameByDefault",), "device-plugin-config/renamed", names=names)
    if not config.fail_requests_greater_than_one:
        yield base.emit(doc, block, "device-plugin-config/shared-multi-request",
                        strategy="MPS" if is_mps else "time-slicing")
    if "flags" in data and "migStrategy" in manifests.as_map(data.get("flags")):
        yield base.emit(doc, ("flags", "migStrategy"), "device-plugin-config/operator-overrides-strategy")


def _load(text: str, file: str) -> tuple[dpc.DevicePluginConfig, bool]:
    """Load as the plugin would; a missing MPS root is supplied the way deployments pass it (MPS_ROOT).

    The second value says whether that was needed."""
    try:
        return dpc.load(text, source=file), False
    except dpc.PluginConfigError as exc:
        if "--mps-root" not in exc.plugin_message:
            raise
    return dpc.load(text, source=file, env_mps_root=MPS_ROOT), True


def _cluster_policy(doc: source.Document) -> Iterator[findings.Finding]:
    spec = manifests.as_map(manifests.as_map(doc.data).get("spec"))
    strategy = manifests.as_map(spec.get("mig")).get("strategy")
    if strategy is not None and strategy not in dpc.MIG_STRATEGIES:
        yield base.emit(doc, ("spec", "mig", "strategy"), "device-plugin-config/bad-mig-strategy", value=str(strategy),
                        crash=dpc.VALIDATE_PREFIX + f"unknown MIG strategy: {strategy}")


def _folded(block: dict[str, object], canonical: str) -> tuple[str | None, object]:
    """The key Go's encoding/json would bind to ``canonical``: exact first, else case-insensitive (last wins)."""
    if canonical in block:
        return canonical, block[canonical]
    found = [k for k in block if isinstance(k, str) and k.lower() == canonical.lower()]
    return (found[-1], block[found[-1]]) if found else (None, None)


def _closest(key: str, known: tuple[str, ...]) -> str:
    normal = key.lower().replace("-", "").replace("_", "")
    for option in known:
        if option.lower() == normal:
            return option
    return strict.closest(key, known, cutoff=0.4) or ""


def _path_of(data: object, dotted: str) -> source.YPath:
    path: list[str | int] = []
    node = data
    for part in dotted.split("."):
        if isinstance(node, dict) and part in node:
            path.append(part)
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            path.append(int(part))
            node = node[int(part)]
        else:
            break
    return tuple(path)


_CRASH_KEYS = (
    ("number of replicas", "replicas"), ("no replicas specified", "resources"), ("no resource name", "resources"),
    ("no resources specified", "sharing"), ("devices set as", "devices"), ("unknown version", "version"),
    ("MIG strategy", "migStrategy"), ("mig-strategy", "migStrategy"), ("mps-root", "mpsRoot"),
    ("device-list-strategy", "deviceListStrategy"), ("device-id-strategy", "deviceIDStrategy"),
    ("resource name", "name"), ("allocation-policy", "sharedDevicesAllocationPolicy"),
    ("deviceListStrategy", "deviceListStrategy"), ("type bool", "renameByDefault"),
)


def _locate(data: dict[str, object], message: str) -> source.YPath:
    """Best effort: the place in the file a plugin error message is about."""
    field = re.search(r"Go struct field \w+\.([\w.]+)", message)
    if field:
        return _path_of(data, field.group(1))
    for needle, key in _CRASH_KEYS:
        if needle in message:
            found = _find_key(data, key, bad_replicas=needle == "number of replicas")
            if found is not None:
                return found
    return ()


def _find_key(data: object, key: str, *, bad_replicas: bool) -> source.YPath | None:
    for path, value in source.walk(data):
        if path and path[-1] == key:
            if bad_replicas and isinstance(value, int) and value >= 2:
                continue
            return path
    return None


def _log_line_path(data: object, line: str) -> source.YPath:
    key = "rename" if "'rename'" in line else "devices" if "'devices'" in line else "resources"
    found = _find_key(data, key, bad_replicas=False)
    return found if found is not None else ()
