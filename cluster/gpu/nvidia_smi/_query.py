"""``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`` and ``--query-compute-apps``, as driver 580 does.

Recorded behaviour (``tests/fixtures/nvidia-smi``): names are case-sensitive and a space after a comma is part of the
next name; an empty name between commas is skipped; an alias prints under its canonical header; a value with a unit
prints ``81559 MiB`` (``81559`` with ``nounits``) and ``[N/A]`` never takes a unit; ``--format`` defaults to CSV
with a header, the last ``--format`` wins, and any word but ``csv``, ``noheader`` and ``nounits`` is refused.
The driver reports host PIDs, which a container cannot resolve, so it lists no compute apps (NVIDIA/nvidia-docker#1460).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from cluster.gpu.nvidia_smi import _facts as facts
from cluster.gpu.nvidia_smi import _fields as fields
from cluster.gpu.nvidia_smi import view

BAD_FORMAT = "Format modifier is not recognized.\n"
APP_FIELDS = {"timestamp": ("timestamp", ""), "gpu_name": ("gpu_name", ""), "gpu_bus_id": ("gpu_bus_id", ""),
              "gpu_serial": ("gpu_serial", ""), "gpu_uuid": ("gpu_uuid", ""), "pid": ("pid", ""),
              "process_name": ("process_name", ""), "name": ("process_name", ""),
              "used_gpu_memory": ("used_gpu_memory", "MiB"),
              "used_memory": ("used_gpu_memory", "MiB")}  # fmt: skip


@dataclass(frozen=True)
class Format:
    header: bool = True
    units: bool = True


def parse_format(text: str | None) -> Format | None:
    """``--format``'s value, or None when the real tool would refuse it."""
    if text is None:
        return Format()
    words = text.split(",")
    if any(w not in ("csv", "noheader", "nounits") for w in words):
        return None
    return Format(header="noheader" not in words, units="nounits" not in words)


def bad_field(name: str) -> str:
    return f'Field "{name}" is not a valid field to query.\n\n'


def gpu_fields(spec: str) -> list[fields.Field] | str:
    """The fields a ``--query-gpu`` list names, or the error text for the first it cannot."""
    wanted = []
    for name in spec.split(","):
        if not name:
            continue
        field = fields.lookup(name)
        if field is None:
            return bad_field(name)
        wanted.append(field)
    return wanted


def value(field: fields.Field, known: dict[str, str], units: bool) -> str:
    raw = known.get(field.name, field.idle)
    if raw is None:
        raw = facts.NA
    if units and field.unit and not raw.startswith("[") and raw != "N/A":
        return f"{raw} {field.unit}"
    return raw


def query_gpu(v: view.View, gpus: Sequence[view.Gpu], wanted: Sequence[fields.Field], fmt: Format,
              now: datetime) -> str:
    lines = []
    if fmt.header:
        lines.append(", ".join(f.name + (f" [{f.unit}]" if f.unit else "") for f in wanted))
    for gpu in gpus:
        known = facts.values(v, gpu, now)
        lines.append(", ".join(value(f, known, fmt.units) for f in wanted))
    return "".join(line + "\n" for line in lines)


def query_apps(spec: str, fmt: Format) -> tuple[str, int]:
    """The header alone: a container never sees the GPU's processes (inferred from the process panel's behaviour)."""
    names = []
    for name in spec.split(","):
        if not name:
            continue
        if name not in APP_FIELDS:
            return bad_field(name), 2
        header, unit = APP_FIELDS[name]
        names.append(header + (f" [{unit}]" if unit else ""))
    return (", ".join(names) + "\n" if fmt.header else ""), 0
