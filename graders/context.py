"""What the static rules know about the cluster a submission targets: its nodes, labels, taints and GPUs.

``FleetFacts`` is plain data. It is built from Kubernetes Node objects (``from_nodes``, the seam the fleet
spec and live clusters use), from a small plain-data form (``from_data``), or as the default
``starter()`` fleet. Rules only read it; nothing here talks to a cluster.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from cluster import errors, quantity
from cluster import fleet as fleet_mod
from cluster.gpu import advertise, catalog, inventory
from cluster import gpustack
from graders import findings, source

GPU_TAINT_KEY = "nvidia.com/gpu"
DEFAULT_MIG_STRATEGY = "single"  # the GPU Operator's default, which the simulated operator uses too
# Extended resources that are not accelerators: never relevant to these rules.
_IGNORED_PREFIXES = ("hugepages-", "kubernetes.io/", "attachable-volumes-")


@dataclass(frozen=True, order=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True)
class NodeFacts:
    """One node as the scheduler sees it: labels, taints and the extended resources it advertises."""

    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...] = ()
    resources: Mapping[str, int] = field(default_factory=dict)
    gpu_model: str | None = None  # catalog key
    mig_strategy: str = ""  # none|single|mixed on GPU nodes, "" elsewhere

    @property
    def has_gpus(self) -> bool:
        return self.gpu_model is not None or any(k.startswith(("nvidia.com/", "amd.com/")) for k in self.resources)


@dataclass(frozen=True)
class FleetFacts:
    """The nodes of a fleet and what follows from them."""

    name: str
    nodes: tuple[NodeFacts, ...]
    device_classes: frozenset[str] = frozenset()

    @functools.cached_property
    def labels(self) -> Mapping[str, frozenset[str]]:
        """Label key -> every value some node carries."""
        out: dict[str, set[str]] = {}
        for node in self.nodes:
            for key, value in node.labels.items():
                out.setdefault(key, set()).add(value)
        return MappingProxyType({k: frozenset(v) for k, v in sorted(out.items())})

    @functools.cached_property
    def taints(self) -> tuple[Taint, ...]:
        return tuple(sorted({t for n in self.nodes for t in n.taints}))

    @functools.cached_property
    def resources(self) -> Mapping[str, int]:
        """Extended resource -> the most any single node advertises."""
        out: dict[str, int] = {}
        for node in self.nodes:
            for key, count in node.resources.items():
                out[key] = max(out.get(key, 0), count)
        return MappingProxyType(dict(sorted(out.items())))

    @functools.cached_property
    def gpu_models(self) -> tuple[catalog.GpuModel, ...]:
        keys = sorted({n.gpu_model for n in self.nodes if n.gpu_model})
        return tuple(catalog.MODELS[k] for k in keys if k in catalog.MODELS)

    @functools.cached_property
    def mig_strategies(self) -> frozenset[str]:
        return frozenset(n.mig_strategy for n in self.nodes if n.mig_strategy)

    @functools.cached_property
    def gpu_nodes(self) -> tuple[NodeFacts, ...]:
        return tuple(n for n in self.nodes if n.has_gpus)

    # -- constructors --------------------------------------------------------------------------------

    @classmethod
    def starter(cls) -> FleetFacts:
        """The default fleet: the built-in ``starter`` fleet spec (CPU, T4, L40S, A100-SXM4-80GB and H100 pools).

        GPU nodes carry ``nvidia.com/gpu=present:NoSchedule``; MIG is disabled and the MIG strategy is the
        operator's default, ``single``.
        """
        return cls.from_fleet(fleet_mod.load("starter"))

    @classmethod
    def from_fleet(
        cls, spec: fleet_mod.Fleet, *, mig_strategy: str = DEFAULT_MIG_STRATEGY, device_classes: frozenset[str] = frozenset()
    ) -> FleetFacts:
        """What a fleet spec's nodes advertise once the simulated device plugin and GFD have run on them."""
        return cls.from_nodes(_simulated_nodes(spec, mig_strategy), name=spec.name, device_classes=device_classes)

    @classmethod
    def from_nodes(
        cls, nodes: Sequence[Mapping[str, Any]], name: str = "cluster", device_classes: frozenset[str] = frozenset()
    ) -> FleetFacts:
        """Build facts from Kubernetes Node objects (``kubectl get nodes -o json`` items)."""
        return cls(name, tuple(_node_from_api(n, i) for i, n in enumerate(nodes) if isinstance(n, Mapping)), device_classes)

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> FleetFacts:
        """Build facts from plain data.

        Accepts ``{"kind": "List", "items": [Node...]}`` (kubectl output), or
        ``{"name": ..., "nodes": [{"name", "labels", "taints": ["k=v:Effect"|{key,value,effect}],
        "resources": {name: count}, "gpu": "<catalog model>", "migStrategy": ...}], "deviceClasses": [...]}``.
        Raises ``ValueError`` naming every problem with its path (one per line), never a bare ``TypeError``.
        """
        problems: list[str] = []
        if data.get("kind") in ("List", "NodeList") and isinstance(data.get("items"), list):
            for i, item in enumerate(data["items"]):
                problems.extend(_api_node_problems(item, f"items[{i}]"))
            if problems:
                raise ValueError("\n".join(problems))
            return cls.from_nodes(data["items"], name=str(data.get("name", "cluster")))
        raw_nodes = data.get("nodes")
        if not isinstance(raw_nodes, list):
            raise ValueError("fleet data needs a 'nodes' list (or a kubectl List of Node objects)")
        problems.extend(_unknown("", data, _PLAIN_FIELDS))
        name = data.get("name", "custom")
        if not isinstance(name, str):
            problems.append(f"name: must be text, got {_shape(name)}")
        classes = data.get("deviceClasses", [])
        if not isinstance(classes, list) or not all(isinstance(c, str) for c in classes):
            problems.append(f"deviceClasses: must be a list of DeviceClass names, got {_shape(classes)}")
            classes = []
        nodes = []
        for i, raw in enumerate(raw_nodes):
            node, found = _node_from_plain(raw, i)
            problems.extend(found)
            if node is not None:
                nodes.append(node)
        if problems:
            raise ValueError("\n".join(problems))
        return cls(str(name), tuple(nodes), frozenset(classes))

    def nodes_with(self, resource: str) -> tuple[NodeFacts, ...]:
        return tuple(n for n in self.nodes if n.resources.get(resource, 0) > 0)


def _simulated_nodes(spec: fleet_mod.Fleet, mig_strategy: str) -> list[dict[str, Any]]:
    """Node objects as the simulator builds them, plus the resources and labels the device plugin and GFD add."""
    out = []
    for index, (pool, name) in enumerate((p, n) for p in spec.pools for n in p.node_names()):
        node = gpustack.build_node(pool, name, index)
        if pool.gpu is not None:
            inv = inventory.simulated_inventory(name, pool.gpu.model, pool.gpu.count)
            adv = advertise.advertise(inv, None, mig_strategy)
            hw = gpustack.Hardware(pool.gpu.model, pool.gpu.count)
            operator = gpustack.operator_labels(gpustack.Policy(mig_strategy=mig_strategy), hw, {})
            node["metadata"]["labels"].update({**operator, **adv.labels})
            node["status"]["capacity"].update({k: str(v) for k, v in adv.capacity.items()})
        out.append(node)
    return out


def _node_from_api(node: Mapping[str, Any], index: int) -> NodeFacts:
    meta = node.get("metadata") if isinstance(node.get("metadata"), Mapping) else {}
    spec = node.get("spec") if isinstance(node.get("spec"), Mapping) else {}
    status = node.get("status") if isinstance(node.get("status"), Mapping) else {}
    assert isinstance(meta, Mapping) and isinstance(spec, Mapping) and isinstance(status, Mapping)
    labels = _str_map(meta.get("labels"))
    raw_taints = spec.get("taints")
    taints = tuple(_taint(t) for t in raw_taints if isinstance(t, Mapping)) if isinstance(raw_taints, list) else ()
    capacity = status.get("capacity") if isinstance(status.get("capacity"), Mapping) else {}
    assert isinstance(capacity, Mapping)
    return NodeFacts(
        name=str(meta.get("name", f"node-{index}")),
        labels=MappingProxyType(labels),
        taints=tuple(t for t in taints if t is not None),
        resources=MappingProxyType(_extended(capacity)),
        gpu_model=_model_from_labels(labels),
        mig_strategy=_strategy_from_labels(labels),
    )


_PLAIN_FIELDS = ("name", "nodes", "deviceClasses")
_PLAIN_NODE_FIELDS = ("name", "labels", "taints", "resources", "gpu", "migStrategy")


def _shape(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def _unknown(path: str, data: Mapping[str, Any], allowed: Sequence[str]) -> list[str]:
    return [f"{path}{'.' if path else ''}{k}: unknown field (allowed: {', '.join(sorted(allowed))})"
            for k in data if k not in allowed]


def _is_text_map(value: Any) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, (str, int, float)) and not isinstance(v, bool) for k, v in value.items())


def _api_node_problems(item: Any, path: str) -> list[str]:
    """Shape problems of one Node object read from a file (a live API server never sends these)."""
    if not isinstance(item, Mapping):
        return [f"{path}: must be a Node object, got {_shape(item)}"]
    out = []
    for section, key, want in (("metadata", "labels", "a mapping of text"), ("spec", "taints", "a list"),
                               ("status", "capacity", "a mapping of text")):
        part = item.get(section)
        if part is None:
            continue
        if not isinstance(part, Mapping):
            out.append(f"{path}.{section}: must be a mapping, got {_shape(part)}")
            continue
        value = part.get(key)
        ok = isinstance(value, list) if want == "a list" else _is_text_map(value)
        if value is not None and not ok:
            out.append(f"{path}.{section}.{key}: must be {want}, got {_shape(value)}")
    return out


def _node_from_plain(raw: Any, index: int) -> tuple[NodeFacts | None, list[str]]:
    where = f"nodes[{index}]"
    if not isinstance(raw, Mapping):
        return None, [f"{where} must be a mapping, got {_shape(raw)}"]
    problems = _unknown(where, raw, _PLAIN_NODE_FIELDS)
    name = raw.get("name", f"node-{index}")
    if not isinstance(name, str):
        problems.append(f"{where}.name: must be text, got {_shape(name)}")
    raw_labels = raw.get("labels") or {}
    if not _is_text_map(raw_labels):
        problems.append(f"{where}.labels: must be a mapping of label keys to text, got {_shape(raw_labels)}")
        raw_labels = {}
    labels = _str_map(raw_labels)
    raw_taints = raw.get("taints") or []
    if not isinstance(raw_taints, list):
        problems.append(f"{where}.taints: must be a list of key=value:Effect texts or mappings, got {_shape(raw_taints)}")
        raw_taints = []
    taints = []
    for item in raw_taints:
        taint = _taint(item) if isinstance(item, Mapping) else _taint_text(item) if isinstance(item, str) else None
        if taint is None:
            problems.append(f"{where}.taints: cannot read {item!r} (write key=value:Effect)")
        else:
            taints.append(taint)
    model_name = raw.get("gpu")
    model = catalog.lookup(model_name) if isinstance(model_name, str) and model_name else None
    if model_name and model is None:
        problems.append(f"{where}.gpu: unknown GPU model {model_name!r} (known: {', '.join(catalog.MODELS)})")
    resources = raw.get("resources") or {}
    if not isinstance(resources, Mapping):
        problems.append(f"{where}.resources must be a mapping of resource name to count, got {_shape(resources)}")
        resources = {}
    for key, count in resources.items():
        if isinstance(count, bool) or not isinstance(count, (int, str)) or not str(count).isdigit():
            problems.append(f"{where}.resources.{key}: must be a whole number, got {_shape(count)}")
    strategy = raw.get("migStrategy") or _strategy_from_labels(labels)
    if not isinstance(strategy, str):
        problems.append(f"{where}.migStrategy: must be none, single or mixed, got {_shape(strategy)}")
        strategy = ""
    if problems:
        return None, problems
    return NodeFacts(
        name=str(name),
        labels=MappingProxyType(labels),
        taints=tuple(taints),
        resources=MappingProxyType(_extended(resources)),
        gpu_model=model.key if model else _model_from_labels(labels),
        mig_strategy=strategy,
    ), []


def _str_map(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): str(v) for k, v in value.items()}


def _taint(raw: Mapping[str, Any]) -> Taint | None:
    key, effect = raw.get("key"), raw.get("effect")
    if not isinstance(key, str) or not isinstance(effect, str):
        return None
    return Taint(key, str(raw.get("value") or ""), effect)


def _taint_text(text: str) -> Taint | None:
    head, sep, effect = text.rpartition(":")
    if not sep or not head:
        return None
    key, _, value = head.partition("=")
    return Taint(key, value, effect)


def _extended(capacity: Mapping[str, Any]) -> dict[str, int]:
    out = {}
    for key, value in capacity.items():
        name = str(key)
        if "/" not in name or name.startswith(_IGNORED_PREFIXES):
            continue
        try:
            parsed = quantity.parse(value)
        except quantity.QuantityError:
            continue
        if parsed.is_integer:
            out[name] = int(parsed.value)
    return dict(sorted(out.items()))


def _model_from_labels(labels: Mapping[str, str]) -> str | None:
    product = labels.get("nvidia.com/gpu.product")
    if not product:
        return None
    base = product.split("-MIG-", 1)[0].removesuffix("-SHARED")
    model = catalog.lookup(base)
    return model.key if model else None


def _strategy_from_labels(labels: Mapping[str, str]) -> str:
    if "nvidia.com/mig.strategy" in labels:
        return labels["nvidia.com/mig.strategy"]
    return "none" if "nvidia.com/gpu.product" in labels else ""


def resolve(spec: str | None) -> FleetFacts:
    """``--fleet``: a built-in fleet name (default ``starter``) or a file.

    A file may hold a gpulab Fleet spec, ``kubectl get nodes -o json`` output, or the plain form of
    ``FleetFacts.from_data``. Raises ``ConfigError`` with every problem when it cannot be used.
    """
    if spec is None or spec == "starter":
        return FleetFacts.starter()
    path = Path(spec)
    if not path.exists():
        names = fleet_mod.builtin_names()
        if spec in names:
            return FleetFacts.from_fleet(fleet_mod.load(spec))
        raise errors.ConfigError("--fleet", [f"{spec}: neither a built-in fleet ({', '.join(names)}) nor a file"],
                                 hint="pass a fleet name, a Fleet spec file or `kubectl get nodes -o json` output")
    parsed = source.read_file(path)
    problems = [f"line {f.line}: {f.message}" for f in parsed.findings if f.severity is findings.Severity.ERROR]
    if problems or not parsed.documents or not isinstance(parsed.documents[0].data, dict):
        raise errors.ConfigError(spec, problems or ["the file holds no fleet"])
    data = parsed.documents[0].data
    assert isinstance(data, dict)
    try:
        if data.get("kind") == "Fleet":  # read again as `gpulab up --fleet` reads it: one reader, one YAML dialect
            return FleetFacts.from_fleet(fleet_mod.load(str(path.resolve())))
        return FleetFacts.from_data(data)
    except ValueError as exc:
        raise errors.ConfigError(spec, str(exc).splitlines()) from exc
