"""The GPU Operator Helm chart's values, read as ``helm install -f values.yaml --set k=v`` reads them, and the
ClusterPolicy fields and ConfigMaps the chart's templates make of them.

The known value paths are the chart's own ``values.yaml`` (``crds/gpu-operator-values.yaml``, copied from ``OP
deployments/gpu-operator/values.yaml``). A path the chart does not know is reported with the nearest known
sibling ("did you mean"): Helm itself renders nothing for it, so a typo such as ``dcgmExporter.enable=false``
silently leaves the exporter on. Below a key whose default is an empty mapping or list (``data``, ``env``,
``resources``, ...) any content is accepted, as the templates copy it whole.

What is rendered follows ``OP deployments/gpu-operator/templates/clusterpolicy.yaml``: ``<operand>.enabled``
always; ``mig.strategy`` only when non-empty; ``devicePlugin.config`` (``name`` and ``default``) only when
``devicePlugin.config.name`` is set; ``migManager.config.default`` always, with ``name`` only when set;
``dcgmExporter.config.name`` when set. ``plugin_config.yaml`` and ``mig_config.yaml`` create a ConfigMap named
``<...>.config.name`` holding ``<...>.config.data`` when ``create`` is true and ``data`` is not empty. Note that
the template never renders ``devicePlugin.mps.root``. Only the paths a user sets are applied over gpulab's
default policy, so an install without values is unchanged. ``--set`` typing follows Helm's ``pkg/strvals``
(``true``/``false`` are booleans, ``null`` removes a key, whole numbers are integers, the rest strings).
Plain data: nothing here talks to a cluster.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cluster import errors, strict
from cluster.gpu import goyaml

VALUES_PATH = Path(__file__).parent / "crds" / "gpu-operator-values.yaml"
SOURCE = "GPU Operator Helm values"
# Operand sections whose ``enabled`` the ClusterPolicy template renders (``OP templates/clusterpolicy.yaml``).
ENABLED = ("driver", "toolkit", "devicePlugin", "dcgm", "dcgmExporter", "gfd", "migManager", "nodeStatusExporter",
           "gds", "vgpuManager", "vgpuDeviceManager", "vfioManager", "kataManager", "ccManager", "psa", "cdi",
           "sandboxWorkloads")
# The value paths gpulab's simulated operator acts on; other known paths are accepted and reported as ignored.
MODELLED = ("mig.strategy", "driver.enabled", "toolkit.enabled", "devicePlugin.enabled", "devicePlugin.config",
            "dcgm.enabled", "dcgmExporter.enabled", "gfd.enabled", "migManager.enabled", "migManager.config",
            "nodeStatusExporter.enabled")
_INT = re.compile(r"^-?(0|[1-9][0-9]*)$")


@functools.cache
def _chart() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(VALUES_PATH.read_text(encoding="utf-8"))
    return data


def chart_defaults() -> dict[str, Any]:
    """A copy of the chart's default values."""
    return copy.deepcopy(_chart())


def _scalar(text: str) -> Any:
    if text == "true":
        return True
    if text == "false":
        return False
    if text == "null":
        return None
    if _INT.match(text):
        return int(text)
    return text


def _split(text: str, sep: str) -> list[str]:
    """Split on ``sep`` unless escaped with a backslash (Helm's ``\\,`` and ``\\.``)."""
    parts, cur, i = [], "", 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            cur += text[i + 1]
            i += 2
            continue
        if text[i] == sep:
            parts.append(cur)
            cur = ""
        else:
            cur += text[i]
        i += 1
    parts.append(cur)
    return parts


def parse_set(expr: str) -> dict[str, Any]:
    """The values of one ``--set a.b=c,d=e`` argument, as a nested mapping."""
    out: dict[str, Any] = {}
    problems = []
    for item in _split(expr.replace("\\.", "\0"), ","):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            problems.append(f"--set {item!r}: expected KEY=VALUE, e.g. devicePlugin.config.name=plugin-config")
            continue
        if "[" in key:
            problems.append(f"--set {key}: list items ([N]) are not supported by gpulab; write the list in a "
                            "values file (-f)")
            continue
        path = [k.replace("\0", ".") for k in key.strip().split(".")]
        if any(not k for k in path):
            problems.append(f"--set {key}: empty key between dots")
            continue
        node = out
        for k in path[:-1]:
            if not isinstance(node.get(k), dict):
                node[k] = {}  # a later --set of a.b replaces a scalar a, as Helm does
            node = node[k]
        node[path[-1]] = _scalar(value.replace("\0", "."))
    if problems:
        raise errors.ConfigError(SOURCE, problems, hint="helm's syntax: --set a.b=value,c=value")
    return out


def load_file(text: str, name: str) -> dict[str, Any]:
    """The values of one ``-f`` file, read as Helm reads it (``sigs.k8s.io/yaml``: ``cluster.gpu.goyaml.load_go``,
    which also refuses an alias bomb or deep nesting at once); bad YAML is a ConfigError naming the line."""
    try:
        data = goyaml.load_go(text)
    except goyaml.YamlSyntaxError as exc:
        raise errors.ConfigError(name, [f"not valid YAML: {exc}"],
                                 hint="a values file is a YAML mapping, e.g. `devicePlugin:\\n  enabled: false`") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise errors.ConfigError(name, [f"must be a mapping of chart values, not a {type(data).__name__}"])
    return data


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Helm's coalescing: mappings merge key by key, anything else replaces, ``null`` removes the key."""
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _free(default: Any) -> bool:
    return isinstance(default, (dict, list)) and not default


def unknown_paths(user: Mapping[str, Any], chart: Mapping[str, Any] | None = None, prefix: str = "") -> list[str]:
    """Every path of ``user`` the chart does not know, each with the nearest known sibling when there is one."""
    chart = _chart() if chart is None else chart
    problems = []
    for key, value in user.items():
        path = f"{prefix}{key}"
        if key not in chart:
            near = strict.closest(str(key), [str(k) for k in chart], cutoff=0.6)
            hint = f"; did you mean {prefix}{near}?" if near else ""
            problems.append(f"{path}: not a value of the gpu-operator chart{hint}")
            continue
        default = chart[key]
        if _free(default) or default is None:
            continue
        if isinstance(default, dict):
            if isinstance(value, Mapping):
                problems.extend(unknown_paths(value, default, f"{path}."))
            elif value is not None:
                problems.append(f"{path}: is a section of the chart ({', '.join(sorted(map(str, default))[:6])}, "
                                f"...), not a single value")
        elif key == "enabled" and value is not None and not isinstance(value, bool):
            problems.append(f"{path}: must be true or false, not {value!r}")
    return problems


def _leaves(values: Mapping[str, Any], prefix: str = "") -> list[str]:
    out = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.extend(_leaves(value, f"{path}."))
        else:
            out.append(path)
    return out


def _get(values: Mapping[str, Any], dotted: str) -> Any:
    node: Any = values
    for k in dotted.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(k)
    return node


@dataclass(frozen=True)
class Rendered:
    """What the chart makes of the values: ClusterPolicy ``spec`` fields to set, ConfigMaps to create in the
    operator's namespace, and the set paths gpulab's simulated operator does not act on."""

    spec: dict[str, Any] = field(default_factory=dict)
    configmaps: tuple[dict[str, Any], ...] = ()
    ignored: tuple[str, ...] = ()


def _touched(leaves: Sequence[str], *prefixes: str) -> bool:
    return any(leaf == p or leaf.startswith(p + ".") for leaf in leaves for p in prefixes)


def render(user: Mapping[str, Any], namespace: str = "gpu-operator") -> Rendered:
    """The ClusterPolicy fields and ConfigMaps the chart renders for the paths ``user`` sets (over the chart's
    defaults). Raises ConfigError listing every unknown path or inconsistent setting."""
    problems = unknown_paths(user)
    values = merge(_chart(), user)
    leaves = _leaves(user)
    spec: dict[str, Any] = {}
    for section in ENABLED:
        if _touched(leaves, f"{section}.enabled"):
            spec.setdefault(section, {})["enabled"] = bool(_get(values, f"{section}.enabled"))
    if _touched(leaves, "mig.strategy") and _get(values, "mig.strategy"):
        spec["mig"] = {"strategy": str(_get(values, "mig.strategy"))}
    if _touched(leaves, "devicePlugin.config") and _get(values, "devicePlugin.config.name"):
        spec.setdefault("devicePlugin", {})["config"] = {
            "name": str(_get(values, "devicePlugin.config.name")),
            "default": str(_get(values, "devicePlugin.config.default") or "")}
    if _touched(leaves, "migManager.config"):
        cfg: dict[str, Any] = {"default": str(_get(values, "migManager.config.default") or "")}
        if _get(values, "migManager.config.name"):
            cfg["name"] = str(_get(values, "migManager.config.name"))
        spec.setdefault("migManager", {})["config"] = cfg
    if _touched(leaves, "dcgmExporter.config") and _get(values, "dcgmExporter.config.name"):
        spec.setdefault("dcgmExporter", {})["config"] = {"name": str(_get(values, "dcgmExporter.config.name"))}
    configmaps = []
    for section in ("devicePlugin", "migManager"):
        create, data = _get(values, f"{section}.config.create"), _get(values, f"{section}.config.data")
        if create and data:
            name = _get(values, f"{section}.config.name")
            if not name:
                problems.append(f"{section}.config.create: the chart names the ConfigMap after "
                                f"{section}.config.name, which is empty")
                continue
            if not isinstance(data, Mapping):
                problems.append(f"{section}.config.data: must be a mapping of file name to text")
                continue
            configmaps.append({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": str(name), "namespace": namespace},
                               "data": {str(k): str(v) for k, v in data.items()}})
    if problems:
        raise errors.ConfigError(SOURCE, problems,
                                 hint="the chart's values: deployments/gpu-operator/values.yaml in NVIDIA/gpu-operator")
    ignored = tuple(leaf for leaf in leaves if not _touched([leaf], *MODELLED) and not leaf.endswith(
        (".config.create", ".config.data")) and ".config.data." not in leaf)
    return Rendered(spec, tuple(configmaps), ignored)


def values_from(files: Sequence[tuple[str, str]], sets: Sequence[str]) -> dict[str, Any]:
    """The user's values: ``-f`` files in order, then every ``--set`` (later wins), as Helm merges them."""
    out: dict[str, Any] = {}
    for name, text in files:
        out = merge(out, load_file(text, name))
    for expr in sets:
        out = _merge_keep_null(out, parse_set(expr))
    return out


def _merge_keep_null(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge_keep_null(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def apply(policy: Mapping[str, Any], rendered: Rendered) -> dict[str, Any]:
    """``policy`` (a ClusterPolicy object) with the rendered spec fields set over it."""
    out = copy.deepcopy(dict(policy))
    out["spec"] = _merge_keep_null(out.get("spec") or {}, rendered.spec)
    return out
