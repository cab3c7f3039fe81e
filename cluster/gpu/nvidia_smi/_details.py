"""``nvidia-smi -q`` and ``-q -d GROUP[,GROUP]``: the per-GPU report, filled from ``facts`` into ``qtemplate``.

The layout is the one recorded with driver 580 on a real H100 and H200; values an idle GPU of another model would
print but nobody recorded come out as ``N/A``. With ``-d``, only the named groups print (the sample blocks only
there); the groups are those the real tool accepted and printed, but ``SUPPORTED_CLOCKS`` (each memory clock with
every graphics clock it allows), which ``cli`` answers as not simulated. A GPU in MIG mode lacks the real report's
per-MIG-device section (not recorded). Plain data.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from cluster.gpu.nvidia_smi import _facts as facts
from cluster.gpu.nvidia_smi import _fields as fields
from cluster.gpu.nvidia_smi import _qtemplate as qtemplate
from cluster.gpu.nvidia_smi import board, view

COLUMN = 55  # where ": value" starts
GROUPS = ("MEMORY", "UTILIZATION", "ECC", "TEMPERATURE", "POWER", "CLOCK", "COMPUTE", "PIDS", "PERFORMANCE",
          "PAGE_RETIREMENT", "ROW_REMAPPER", "ACCOUNTING", "ENCODER_STATS", "FBC_STATS", "VOLTAGE",
          "GSP_FIRMWARE_VERSION", "SUPPORTED_GPU_TARGET_TEMP", "POWER_SMOOTHING", "POWER_PROFILES")  # fmt: skip
UNRECORDED = ("SUPPORTED_CLOCKS",)  # recorded, but its clock list is not simulated
BAD_DISPLAY = "Failed to parse --display/-d flags\n"
_KEY = re.compile(r"\{([^}]+)\}")


@dataclass(frozen=True)
class _Line:
    depth: int
    label: str
    value: str | None
    group: str | None
    only_with_d: bool
    trailing: bool


def _parse() -> tuple[_Line, ...]:
    lines = []
    group: str | None = None
    only = False
    for raw in qtemplate.TEMPLATE.strip("\n").splitlines():
        text, *tags = raw.split("  #")
        depth = (len(text) - len(text.lstrip())) // 4
        if depth == 0:
            marks = [t.strip() for t in " #".join(tags).split("#") if t.strip() and t.strip() != "TRAIL"]
            group = marks[0].rstrip("!") if marks else None
            only = bool(marks) and marks[0].endswith("!")
        label, _, value = text.strip().partition(" = ")
        lines.append(_Line(depth, label, value if _ else None, group, only, any("TRAIL" in t for t in tags)))
    return tuple(lines)


_LINES = _parse()


def display_groups(text: str) -> tuple[str, ...] | None:
    """``-d``'s value (case-insensitive, comma-separated), or None when the real tool refuses it."""
    names = tuple(n.strip().upper() for n in text.split(","))
    if not all(n in GROUPS or n in UNRECORDED for n in names):
        return None
    return names


def values(v: view.View, gpu: view.Gpu, now: datetime) -> dict[str, str]:
    """What the template's ``{keys}`` stand for on this GPU: query values (``[N/A]`` as ``N/A``) and ``q.`` keys."""
    known = facts.values(v, gpu, now)
    out = {name: (field.idle or "") for name, field in fields.CANONICAL.items() if field.idle is not None}
    out.update(known)
    model, info, fact = gpu.model, gpu.info, board.facts(gpu.model)
    temps = fact.temp_limit_c is not None
    extra = {
        "q.brand": "NVIDIA" if model.brand == "Nvidia" else model.brand, "q.arch": model.architecture,
        "q.pdi": facts.pdi(info.uuid), "q.minor": str(gpu.host_index), "q.board_id": board.board_id(gpu.bus_id),
        "q.board_part": fact.board_part, "q.gpu_part": fact.gpu_part,
        "q.bar1_total": _opt(fact.bar1_mib), "q.bar1_used": "1" if fact.bar1_mib else None,
        "q.bar1_free": None if fact.bar1_mib is None else str(fact.bar1_mib - 1),
        "q.virtualization": v.host.board.virtualization, "q.tx": "0", "q.rx": "0",
        "q.memory_power": None if fact.idle_memory_power_w is None else f"{fact.idle_memory_power_w:.2f}",
        "q.shutdown": "-8" if temps else None, "q.slowdown": "-2" if temps else None,
        "q.max_operating": "0" if temps else None,
        "q.max_video": None if fact.clocks is None else str(fact.clocks.max_video),
        "q.samples_duration": "14.00", "q.samples": "71", "q.power_samples_duration": "2.36", "q.power_samples": "119",
    }
    out.update({k: (val if val is not None else "N/A") for k, val in extra.items()})
    return {k: ("N/A" if val == facts.NA else val) for k, val in out.items()}


def _opt(value: int | None) -> str | None:
    return None if value is None else str(value)


def _fill(value: str, known: dict[str, str]) -> str:
    if any(known.get(key, "N/A") == "N/A" for key in _KEY.findall(value)):
        return "N/A"
    return _KEY.sub(lambda m: known[m.group(1)], value)


def _gpu_block(known: dict[str, str], groups: Sequence[str] | None) -> list[str]:
    lines = []
    for line in _LINES:
        if groups is None and line.only_with_d:
            continue
        if groups is not None and line.group not in groups:
            continue
        label = "    " * (line.depth + 1) + line.label + (" " if line.trailing else "")
        if line.value is None:
            lines.append(label)
        else:
            lines.append(label.ljust(COLUMN) + ": " + _fill(line.value, known))
    return lines


def report(v: view.View, gpus: Sequence[view.Gpu], now: datetime, groups: Sequence[str] | None = None) -> str:
    """``-q`` (``groups`` None) or ``-q -d``: the log header, then one block per GPU, each ending with a blank line."""
    stamp = f"{now:%a %b} {now.day:>2} {now:%H:%M:%S %Y}"
    lines = ["", "==============NVSMI LOG==============", "", _pair("Timestamp", stamp),
             _pair("Driver Version", v.driver_version), _pair("CUDA Version", v.cuda_version), "",
             _pair("Attached GPUs", str(len(v.gpus)))]  # fmt: skip
    for gpu in gpus:
        lines.append(f"GPU {gpu.bus_id}")
        lines += _gpu_block(values(v, gpu, now), groups)
        lines.append("")
    return "".join(line + "\n" for line in lines)


def _pair(label: str, value: str) -> str:
    return label.ljust(COLUMN) + ": " + value
