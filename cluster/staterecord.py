"""A lab cluster's state record (``<state folder>/state.json``): one typed value, one reader and one writer.

Every backend records here which backend made the cluster and what it needs to find it again; ``backends.detect``,
``backends.guard.owner``, the backends themselves and ``safefs`` (an older gpulab's unmarked folder) all read it
through ``read``, and only ``write`` writes it (atomically: a crash never leaves half a file). Which fields a
backend fills:

- ``local``: ``fleet``, ``ports`` (component -> port on loopback), ``kubernetes`` (the version it runs);
- ``kind``: ``fleet``, ``kind_cluster``, ``kind_version``, ``node_image``, ``created`` (a kind cluster is there),
  ``nodes`` (fleet node -> kind node container);
- ``attach``: ``kubeconfig`` (the file attached) and ``context`` (None: the file's current context).

Fields a newer gpulab wrote and this one does not know are kept as they are when the record is written back.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster import errors

FILE = "state.json"
BACKENDS = ("local", "kind", "attach")
_MAX_BYTES = 1 << 20  # a record is a few hundred bytes; anything this large is not one of ours


class Unreadable(errors.ClusterError):
    """A state record that exists but is not one: unreadable, not JSON, or with a field of the wrong type."""


@dataclass(frozen=True)
class StateRecord:
    backend: str
    fleet: str | None = None
    ports: Mapping[str, int] = field(default_factory=dict)
    kubernetes: str | None = None
    kind_cluster: str | None = None
    kind_version: str | None = None
    node_image: str | None = None
    created: bool = False
    nodes: Mapping[str, str] = field(default_factory=dict)
    kubeconfig: str | None = None
    context: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)  # fields this gpulab does not know, kept as written

    def replace(self, **changes: Any) -> StateRecord:
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.extra)
        out["backend"] = self.backend
        for f in dataclasses.fields(self):
            if f.name in ("backend", "extra"):
                continue
            value = getattr(self, f.name)
            if value is None or (f.name in ("ports", "nodes") and not value) or (f.name == "created" and
                                                                                 self.backend != "kind"):
                continue
            out[f.name] = dict(value) if isinstance(value, Mapping) else value
        return out

    @classmethod
    def from_json(cls, data: object, where: str = FILE) -> StateRecord:
        """The record in ``data`` (parsed JSON); ``Unreadable`` names the first field that is not what it must be."""
        if not isinstance(data, dict):
            raise Unreadable(f"{where} holds {type(data).__name__}, not an object", hint=_HINT)
        backend = data.get("backend")
        if backend not in BACKENDS:
            raise Unreadable(f"{where} records backend {backend!r}, which is none of {', '.join(BACKENDS)}",
                             hint=_HINT)
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        values: dict[str, Any] = {"backend": backend}
        for name in known - {"backend"}:
            if name not in data or data[name] is None:
                continue
            values[name] = _typed(name, data[name], where)
        extra = {k: v for k, v in data.items() if k not in known}
        return cls(**values, extra=extra)


_HINT = "name the backend (`gpulab up --backend local|kind|attach`), or remove the cluster's state: gpulab down --purge"
_STRINGS = ("fleet", "kubernetes", "kind_cluster", "kind_version", "node_image", "kubeconfig", "context")


def _typed(name: str, value: object, where: str) -> Any:
    def wrong(expected: str) -> Unreadable:
        return Unreadable(f"{where}: field {name!r} is {value!r}, not {expected}", hint=_HINT)

    if name in _STRINGS:
        if not isinstance(value, str):
            raise wrong("a string")
        return value
    if name == "created":
        if not isinstance(value, bool):
            raise wrong("true or false")
        return value
    if name == "ports":
        if not isinstance(value, dict) or not all(isinstance(k, str) and type(v) is int and 0 < v < 65536
                                                  for k, v in value.items()):
            raise wrong("a map of component names to port numbers")
        return dict(value)
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise wrong("a map of node names to node names")  # nodes
    return dict(value)


def path(directory: Path) -> Path:
    return directory / FILE


def read(directory: Path) -> StateRecord | None:
    """The record in ``directory`` (None when there is none); ``Unreadable`` when the file is there but is not one."""
    file = path(directory)
    try:
        with file.open("rb") as fh:
            raw = fh.read(_MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise Unreadable(f"cannot read {file}: {exc.strerror or exc}", hint=_HINT) from exc
    if len(raw) > _MAX_BYTES:
        raise Unreadable(f"{file} is larger than {_MAX_BYTES >> 20} MiB: not a gpulab state record", hint=_HINT)
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise Unreadable(f"{file} is not JSON ({exc})", hint=_HINT) from exc
    return StateRecord.from_json(data, str(file))


def read_or_none(directory: Path) -> StateRecord | None:
    """The record, or None when there is none or it cannot be read (for callers that then treat the folder as
    holding no cluster of theirs: ``detect`` is the one that reports an unreadable record)."""
    try:
        return read(directory)
    except Unreadable:
        return None


def write(directory: Path, record: StateRecord) -> None:
    """Write ``record`` atomically into ``directory`` (which the caller has claimed)."""
    file = path(directory)
    tmp = file.with_suffix(".tmp")
    tmp.write_text(json.dumps(record.to_json(), indent=2, sort_keys=True))
    tmp.replace(file)
