"""Fleet specs: the simulated nodes of a lab cluster, as versioned strict YAML.

Decoding is strict (unknown fields rejected), defaults are applied in one place (``_defaults``), and
validation reports every problem at once with its path. Built-in fleets live in ``cluster/fleets/``.
This module only describes nodes; creating them is the backends' and agents' job.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from cluster import errors, quantity, strict
from cluster.gpu import catalog

__all__ = ["API_VERSION", "KIND", "Fleet", "GpuSpec", "NodePool", "Taint", "Topology", "builtin_names", "dump",
           "from_inventory", "load", "parse", "scaled", "to_data"]

API_VERSION = "gpulab.dev/v1"
KIND = "Fleet"
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$")
_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_MAX_NODES = 5000


@dataclass(frozen=True)
class Taint:
    key: str
    effect: str
    value: str = ""

    def to_api(self) -> dict[str, str]:
        out = {"key": self.key, "effect": self.effect}
        if self.value:
            out["value"] = self.value
        return out


@dataclass(frozen=True)
class Topology:
    numa_nodes: int = 1
    nvlink: bool = False


@dataclass(frozen=True)
class GpuSpec:
    model: catalog.GpuModel
    count: int
    topology: Topology = Topology()


@dataclass(frozen=True)
class NodePool:
    name: str
    count: int
    cpu: str
    memory: str
    pods: int
    gpu: GpuSpec | None
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()

    def node_names(self) -> list[str]:
        return [f"{self.name}-{i}" for i in range(self.count)]


@dataclass(frozen=True)
class Fleet:
    name: str
    pools: tuple[NodePool, ...]
    description: str = ""

    def node_names(self) -> list[str]:
        return [n for p in self.pools for n in p.node_names()]

    def pool_of(self, node_name: str) -> NodePool | None:
        for p in self.pools:
            if node_name in p.node_names():
                return p
        return None

    @property
    def node_count(self) -> int:
        return sum(p.count for p in self.pools)


_POOL_FIELDS = {"name", "count", "cpu", "memory", "pods", "gpu", "labels", "taints"}
_GPU_FIELDS = {"model", "count", "topology"}
_TOPO_FIELDS = {"numaNodes", "nvlink"}
_TAINT_FIELDS = {"key", "value", "effect"}


def _tn(value: Any) -> str:
    """The YAML type of a value in words Python users know (round-trip nodes named as their plain types)."""
    return "dict" if isinstance(value, dict) else "list" if isinstance(value, list) else type(value).__name__


def _int(p: strict.Problems, path: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        p.add(path, f"must be an integer, got {_tn(value)} {strict.shown(value)}")
        return lo
    if not lo <= value <= hi:
        p.add(path, f"must be between {lo} and {hi}, got {value}")
    return value


def _qty(p: strict.Problems, path: str, value: Any) -> str:
    text = str(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else None
    try:
        ok = text is not None and quantity.parse_text(text).value >= 0
    except quantity.QuantityError:
        ok = False
    if not ok or text is None:
        p.add(path, f"must be a Kubernetes quantity such as '8' or '32Gi', got {strict.shown(value)}")
        return "0"
    return text


def _str_map(p: strict.Problems, path: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        p.add(path, f"must be a mapping of strings, got {_tn(value)}")
        return {}
    out = {}
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, (str, int, bool)) or isinstance(v, bool):
            p.add(f"{path}.{k}", "label keys and values must be strings")
            continue
        out[k] = str(v)
    return out


def _taints(p: strict.Problems, path: str, value: Any) -> tuple[Taint, ...]:
    if not isinstance(value, list):
        p.add(path, "must be a list of taints")
        return ()
    out = []
    for i, t in enumerate(value):
        tp = f"{path}[{i}]"
        if not isinstance(t, dict):
            p.add(tp, "must be a mapping with key, value, effect")
            continue
        p.unknown(tp, t, _TAINT_FIELDS)
        key, effect = t.get("key"), t.get("effect")
        if not isinstance(key, str) or not key:
            p.add(f"{tp}.key", "required string")
        if effect not in _EFFECTS:
            p.add(f"{tp}.effect", f"must be one of {', '.join(_EFFECTS)}, got {strict.shown(effect)}")
        value = t.get("value", "")
        if not isinstance(value, str):
            p.add(f"{tp}.value", f"must be text, got {_tn(value)} {strict.shown(value)}")
        out.append(Taint(key if isinstance(key, str) else "", str(effect), value if isinstance(value, str) else ""))
    return tuple(out)


def _gpu(p: strict.Problems, path: str, value: Any) -> GpuSpec | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        p.add(path, "must be a mapping with model and count")
        return None
    p.unknown(path, value, _GPU_FIELDS)
    model_name = value.get("model")
    model = catalog.lookup(str(model_name)) if isinstance(model_name, str) else None
    if model is None:
        p.add(f"{path}.model", f"unknown GPU model {strict.shown(model_name)} (known: {', '.join(catalog.MODELS)})")
    count = _int(p, f"{path}.count", value.get("count", 1), 1, 16)
    topo_raw = value.get("topology", {})
    topo = Topology()
    if not isinstance(topo_raw, dict):
        p.add(f"{path}.topology", "must be a mapping")
    else:
        p.unknown(f"{path}.topology", topo_raw, _TOPO_FIELDS)
        numa = _int(p, f"{path}.topology.numaNodes", topo_raw.get("numaNodes", 1), 1, 8)
        nvlink = topo_raw.get("nvlink", False)
        if not isinstance(nvlink, bool):
            p.add(f"{path}.topology.nvlink", f"must be true or false, got {strict.shown(nvlink)}")
        topo = Topology(numa, bool(nvlink))
    return GpuSpec(model, count, topo) if model else None


def _defaults(pool: dict[str, Any]) -> dict[str, Any]:
    """The one place defaults are applied."""
    out = {"count": 1, "cpu": "8", "memory": "32Gi", "pods": 110, "labels": {}, "taints": []}
    out.update(pool)
    return out


def _pool(p: strict.Problems, path: str, raw: Any) -> NodePool | None:
    if not isinstance(raw, dict):
        p.add(path, "must be a mapping")
        return None
    p.unknown(path, raw, _POOL_FIELDS)
    data = _defaults(raw)
    name = data.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        p.add(f"{path}.name", f"must be a lower-case DNS label of at most 42 characters, got {strict.shown(name)}")
        name = "invalid"
    return NodePool(
        name=name,
        count=_int(p, f"{path}.count", data["count"], 0, _MAX_NODES),
        cpu=_qty(p, f"{path}.cpu", data["cpu"]),
        memory=_qty(p, f"{path}.memory", data["memory"]),
        pods=_int(p, f"{path}.pods", data["pods"], 1, 1000),
        gpu=_gpu(p, f"{path}.gpu", data.get("gpu")),
        labels=_str_map(p, f"{path}.labels", data["labels"]),
        taints=_taints(p, f"{path}.taints", data["taints"]),
    )


def _spec_not_a_mapping(data: dict[str, Any]) -> bool:
    return "spec" in data and data["spec"] is not None and not isinstance(data["spec"], dict)


def parse(data: Any, source: str = "<fleet>", text: str | None = None) -> Fleet:
    """Decode and validate a fleet document; raise ``ConfigError`` listing every problem (with its line when
    the YAML ``text`` it was read from is given, as ``load`` does)."""
    p = strict.Problems(lines=None if text is None else lambda: strict.load_yaml(text))
    if not isinstance(data, dict):
        raise errors.ConfigError(source, ["(root): a fleet spec must be a mapping"])
    p.unknown("", data, {"apiVersion", "kind", "metadata", "spec"})
    if data.get("apiVersion") != API_VERSION:
        p.add("apiVersion", f"must be {API_VERSION!r}, got {strict.shown(data.get('apiVersion'))}")
    if data.get("kind") != KIND:
        p.add("kind", f"must be {KIND!r}, got {strict.shown(data.get('kind'))}")
    raw_meta = data.get("metadata")
    meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
    p.unknown("metadata", meta, {"name", "description"})
    name = meta.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        p.add("metadata.name", f"must be a lower-case DNS label, got {strict.shown(name)}")
    if not isinstance(meta.get("description", ""), str):
        p.add("metadata.description", f"must be text, got {_tn(meta['description'])}")
    if raw_meta is not None and not isinstance(raw_meta, dict):
        p.add("metadata", f"must be a mapping with name, got {_tn(raw_meta)}")
    if _spec_not_a_mapping(data):
        p.add("spec", f"must be a mapping with pools, got {_tn(data['spec'])}")
    raw_spec = data.get("spec")
    spec: dict[str, Any] = raw_spec if isinstance(raw_spec, dict) else {}
    p.unknown("spec", spec, {"pools"})
    raw_pools = spec.get("pools")
    pools: list[NodePool] = []
    if not isinstance(raw_pools, list) or not raw_pools:
        p.add("spec.pools", "must be a non-empty list of node pools")
    else:
        for i, raw in enumerate(raw_pools):
            pool = _pool(p, f"spec.pools[{i}]", raw)
            if pool:
                pools.append(pool)
    seen: set[str] = set()
    for i, pool in enumerate(pools):
        if pool.name in seen:
            p.add(f"spec.pools[{i}].name", f"duplicate pool name {pool.name!r}")
        seen.add(pool.name)
    if sum(pool.count for pool in pools) > _MAX_NODES:
        p.add("spec.pools", f"at most {_MAX_NODES} nodes in total")
    if p.items:
        raise errors.ConfigError(source, p.items, hint="fix the fleet file and run `gpulab up` again")
    return Fleet(str(name), tuple(pools), str(meta.get("description", "")))


def builtin_names() -> list[str]:
    folder = resources.files("cluster") / "fleets"
    return sorted(f.name[:-5] for f in folder.iterdir() if f.name.endswith(".yaml"))


def load(name_or_path: str) -> Fleet:
    """Load a built-in fleet by name or a fleet file by path."""
    path = Path(name_or_path)
    if name_or_path in builtin_names():
        text = (resources.files("cluster") / "fleets" / f"{name_or_path}.yaml").read_text()
        source = f"built-in fleet {name_or_path!r}"
    elif path.is_file():
        if path.stat().st_size > 1 << 20:
            raise errors.ConfigError(str(path), ["file is larger than 1 MiB"])
        text = path.read_text(errors="replace")
        source = str(path)
    else:
        raise errors.ConfigError(name_or_path, [f"no such fleet file, and not a built-in fleet ({', '.join(builtin_names())})"])
    try:
        data = strict.read_yaml(text)
    except strict.YamlRefused as exc:
        raise errors.ConfigError(source, [f"refused: {exc}"], hint="write the fleet out plainly (a fleet needs no "
                                 "deep nesting nor aliases that repeat a value thousands of times) and run "
                                 "`gpulab up` again") from exc
    except YAMLError as exc:
        raise errors.ConfigError(source, [f"not valid YAML: {exc}"]) from exc
    return parse(data, source, text)


def scaled(nodes: int, name: str = "scale") -> Fleet:
    """A synthetic fleet of ``nodes`` nodes (a quarter with GPUs) for benchmarks."""
    a100 = catalog.MODELS["A100-SXM4-80GB"]
    gpu_nodes = nodes // 4
    pools = (
        NodePool("cpu", nodes - gpu_nodes, "16", "64Gi", 110, None),
        NodePool("gpu", gpu_nodes, "64", "512Gi", 110, GpuSpec(a100, 4),
                 taints=(Taint("nvidia.com/gpu", "NoSchedule", "present"),)),
    )
    return Fleet(name, pools, f"{nodes} synthetic nodes")


def to_data(fl: Fleet) -> dict[str, Any]:
    """The spec document of a fleet (round-trips through ``parse``)."""
    pools: list[dict[str, Any]] = []
    for p in fl.pools:
        raw: dict[str, Any] = {"name": p.name, "count": p.count, "cpu": p.cpu, "memory": p.memory, "pods": p.pods}
        if p.gpu:
            raw["gpu"] = {"model": p.gpu.model.key, "count": p.gpu.count,
                          "topology": {"numaNodes": p.gpu.topology.numa_nodes, "nvlink": p.gpu.topology.nvlink}}
        if p.labels:
            raw["labels"] = dict(p.labels)
        if p.taints:
            raw["taints"] = [t.to_api() for t in p.taints]
        pools.append(raw)
    meta: dict[str, Any] = {"name": fl.name}
    if fl.description:
        meta["description"] = fl.description
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": meta, "spec": {"pools": pools}}


def dump(fl: Fleet) -> str:
    import io

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    buf = io.StringIO()
    yaml.dump(to_data(fl), buf)
    return buf.getvalue()


def from_inventory(inv: Any, name: str = "mirror", node_name: str | None = None) -> Fleet:
    """A one-node fleet mirroring a real host's GPUs (a ``cluster.gpu.inventory.NodeInventory``).

    Labs use it to show "what NVML would report" for a recorded host on simulated nodes. Every GPU of the host
    must be one catalog model; a host with mixed models or a model the catalog lacks is refused with the reason.
    """
    problems: list[str] = []
    gpus = list(getattr(inv, "gpus", ()))
    if not gpus:
        problems.append("gpus: the inventory has no GPUs to mirror")
    keys = sorted({g.model.key for g in gpus})
    if len(keys) > 1:
        problems.append(f"gpus: mixed models {keys}; a simulated node has one GPU model")
    model = catalog.lookup(keys[0]) if keys else None
    if keys and model is None:
        problems.append(f"gpus[0].model: {keys[0]!r} is not in the GPU catalog")
    if problems or model is None:
        raise errors.ConfigError("inventory", problems)
    pool_name = (node_name or str(getattr(inv, "hostname", "mirror"))).lower()
    pool_name = re.sub(r"[^a-z0-9-]", "-", pool_name).strip("-")[:40] or "mirror"
    pool = NodePool(
        name=pool_name, count=1, cpu="16", memory="128Gi", pods=110,
        gpu=GpuSpec(model, len(gpus)),
        labels={"gpulab.dev/mirrored-from": "nvml"},
        taints=(Taint("nvidia.com/gpu", "NoSchedule", "present"),),
    )
    return Fleet(name, (pool,), f"mirrors {len(gpus)} x {model.nvml_name} read through NVML")
