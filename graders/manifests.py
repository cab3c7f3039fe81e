"""What a parsed document is (Kubernetes object, device-plugin config, mig-parted config) and where pods live in it.

Pod specs sit at different paths in each workload kind (``spec`` in a Pod, ``spec.template.spec`` in a
Deployment, ``spec.jobTemplate.spec.template.spec`` in a CronJob); this module finds them and formats field
paths the way the apiserver does (``spec.containers[0].resources.limits[nvidia.com/gpu]``), so rules can
quote its errors exactly. It tolerates any shape: wrong types simply yield nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from graders import source


class DocType(enum.Enum):
    OBJECT = "object"  # apiVersion + kind
    DEVICE_PLUGIN_CONFIG = "device-plugin-config"
    MIG_PARTED_CONFIG = "mig-parted-config"
    UNKNOWN = "unknown"


class Key(str):
    """A map key inside a field path: printed as ``[key]``, not ``.key``."""


def api_path(parts: tuple[source.PathPart | Key, ...]) -> str:
    """Format a path as apimachinery's ``field.Path.String()`` does."""
    out = ""
    for part in parts:
        if isinstance(part, Key):
            out += f"[{part}]"
        elif isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def as_map(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def as_str(value: object) -> str:
    return value if isinstance(value, str) else ""


def classify(doc: source.Document) -> DocType:
    data = doc.data
    if not isinstance(data, dict):
        return DocType.UNKNOWN
    if "apiVersion" in data or "kind" in data:
        return DocType.OBJECT
    if "mig-configs" in data:
        return DocType.MIG_PARTED_CONFIG
    # The plugin's decoder matches these keys case-insensitively (``Sharing:`` works), so the test does too.
    folded = {str(k).lower(): v for k, v in data.items()}
    if any(k in folded for k in ("sharing", "flags", "imex")) or (
        "version" in folded and (folded["version"] == "v1" or "resources" in folded)
    ):
        return DocType.DEVICE_PLUGIN_CONFIG
    return DocType.UNKNOWN


def kind(doc: source.Document) -> str:
    return as_str(as_map(doc.data).get("kind"))


def api_group_version(doc: source.Document) -> tuple[str, str]:
    """(group, version) of an object's apiVersion; group "" is the core group."""
    text = as_str(as_map(doc.data).get("apiVersion"))
    group, _, version = text.rpartition("/")
    return group, version


def name(doc: source.Document) -> str:
    return as_str(as_map(as_map(doc.data).get("metadata")).get("name"))


# Where each workload kind keeps its pod spec.
POD_SPEC_PATHS: Mapping[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "PodTemplate": ("template", "spec"),
    "Deployment": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}


@dataclass(frozen=True)
class PodSpecAt:
    """A pod spec inside a document."""

    doc: source.Document
    path: source.YPath
    spec: dict[str, Any]
    kind: str
    name: str

    @property
    def is_template(self) -> bool:
        return self.kind != "Pod"

    @property
    def owner(self) -> str:
        return f'{self.kind} "{self.name}"' if self.name else self.kind

    def api(self, *parts: source.PathPart | Key) -> str:
        return api_path(self.path + parts)


@dataclass(frozen=True)
class ContainerAt:
    pod: PodSpecAt
    group: str  # "containers" | "initContainers"
    index: int
    data: dict[str, Any]

    @property
    def path(self) -> source.YPath:
        return self.pod.path + (self.group, self.index)

    @property
    def name(self) -> str:
        return as_str(self.data.get("name")) or f"{self.group}[{self.index}]"

    @property
    def label(self) -> str:
        return f'container "{self.name}" of {self.pod.owner}'

    def api(self, *parts: source.PathPart | Key) -> str:
        return api_path(self.path + parts)


def pod_specs(doc: source.Document) -> Iterator[PodSpecAt]:
    if classify(doc) is not DocType.OBJECT:
        return
    spec_path = POD_SPEC_PATHS.get(kind(doc))
    if spec_path is None:
        return
    spec = doc.get(spec_path)
    if isinstance(spec, dict):
        yield PodSpecAt(doc, spec_path, spec, kind(doc), name(doc))


def containers(pod: PodSpecAt) -> Iterator[ContainerAt]:
    for group in ("initContainers", "containers"):
        for index, item in enumerate(as_list(pod.spec.get(group))):
            if isinstance(item, dict):
                yield ContainerAt(pod, group, index, item)


def invalid(kind_name: str, obj_name: str, errors: list[str]) -> str:
    """The apiserver's "is invalid" message for one object, as kubectl prints it."""
    body = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return f'The {kind_name} "{obj_name}" is invalid: {body}'


def go_quote(text: str) -> str:
    """Go's ``%q`` for the plain strings that appear in field errors."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'
