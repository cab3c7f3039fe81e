"""NVIDIA's ClusterPolicy CRD (``nvidia.com/v1``) and what the API server does with fields it does not know.

The CRD is the file controller-gen writes from NVIDIA's ``api/nvidia/v1`` types at the pinned GPU Operator
(``crds/nvidia.com_clusterpolicies.yaml``; ``gpulab binaries crd`` regenerates it, a test proves it unchanged).
``gpulab gpu-operator install`` installs exactly that, so the real API server validates, defaults and prunes
ClusterPolicy writes as on a real cluster, and the linter reads the same schema.

Its schema is structural and nowhere keeps unknown fields (no ``x-kubernetes-preserve-unknown-fields``), so the
API server prunes any field the schema does not name (apiextensions-apiserver ``pkg/apiserver/schema/pruning``).
Whether the write also fails depends on the request's ``fieldValidation``: ``kubectl patch`` sends none, the
server's default is ``Warn``, so the field is dropped and kubectl prints ``Warning: unknown field``; ``kubectl
apply``, ``create`` and ``replace`` send ``Strict`` (``--validate=strict``, their default) and the write is
refused (apiserver ``pkg/endpoints/handlers/rest.go`` ``fieldValidation``; kubectl ``pkg/cmd/util``
``GetValidationDirective``). Plain data: nothing here talks to a cluster.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cluster import versions

CRD_PATH = Path(__file__).parent / "crds" / "nvidia.com_clusterpolicies.yaml"
_Loader: Any = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
_ROOT_KEEPS = frozenset({"apiVersion", "kind", "metadata"})  # the API server handles these itself


@functools.cache
def _loaded() -> dict[str, Any]:
    data: dict[str, Any] = yaml.load(CRD_PATH.read_text(), Loader=_Loader)
    _as_taught(data)
    return data


def _as_taught(data: dict[str, Any]) -> None:
    """Bring the pinned (v25.3.4) schema to the taught GPU Operator (v26.7.0) where the course depends on it:
    v26.7.0's ``MIGPartedConfigSpec.Name`` has no ``+kubebuilder:default=default-mig-parted-config`` (an empty
    name makes MIG manager v0.14+ generate its config from the GPUs; ``OP api/nvidia/v1/clusterpolicy_types.go``
    at v26.7.0), so the API server must not fill the name in. The committed file stays controller-gen's."""
    spec = data["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    spec["migManager"]["properties"]["config"]["properties"]["name"].pop("default", None)


def crd() -> dict[str, Any]:
    """The CustomResourceDefinition object, ready to create (a fresh copy each call)."""
    return copy.deepcopy(_loaded())


def schema() -> Mapping[str, Any]:
    """The ``openAPIV3Schema`` of ``v1`` (read-only: do not modify)."""
    schema_: Mapping[str, Any] = _loaded()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema_


def source() -> str:
    """Where the schema comes from, for messages: ``GPU Operator v25.3.4``."""
    return f"GPU Operator {versions.GPU_OPERATOR_RELEASE}"


@dataclass(frozen=True)
class UnknownField:
    """A field the API server prunes: its path in the object, and the fields known at that place."""

    path: tuple[str | int, ...]
    known: tuple[str, ...]

    @property
    def dotted(self) -> str:
        return ".".join(f"[{p}]" if isinstance(p, int) else p for p in self.path).replace(".[", "[")


def unknown_fields(obj: Mapping[str, Any]) -> list[UnknownField]:
    """Every field of a ClusterPolicy object (or merge patch) that the CRD's schema would prune, in order."""
    return list(_walk(obj, schema(), (), root=True))


def _walk(value: Any, node: Mapping[str, Any], path: tuple[str | int, ...], *, root: bool = False
          ) -> Iterator[UnknownField]:
    if node.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, Mapping) and node.get("type") == "object":
        props: Mapping[str, Any] = node.get("properties") or {}
        extra = node.get("additionalProperties")
        for key, child in value.items():
            if root and key in _ROOT_KEEPS:
                continue
            if key in props:
                yield from _walk(child, props[key], path + (key,))
            elif isinstance(extra, Mapping):
                yield from _walk(child, extra, path + (key,))
            elif extra is not True:
                yield UnknownField(path + (str(key),), tuple(sorted(props)))
    elif isinstance(value, list) and node.get("type") == "array" and isinstance(node.get("items"), Mapping):
        for i, item in enumerate(value):
            yield from _walk(item, node["items"], path + (i,))


def describe(path: str) -> str | None:
    """The description ``kubectl explain clusterpolicy.<path>`` shows (``spec.devicePlugin.config``), or None."""
    node: Mapping[str, Any] = schema()
    for part in [p for p in path.split(".") if p]:
        if node.get("type") == "array":
            node = node.get("items") or {}
        props = node.get("properties") or {}
        if part not in props:
            return None
        node = props[part]
    text = node.get("description")
    return str(text) if text is not None else None
