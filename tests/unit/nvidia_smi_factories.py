"""Factories for the simulated nvidia-smi tests: recorded machines rebuilt in the simulator, and the normaliser.

``recorded_host`` rebuilds a machine of ``tests/fixtures/nvidia-smi`` from its ``device.json`` alone (model, UUIDs,
bus ids, driver, CPUs, NUMA, NVLink). ``normalise`` blanks ONLY what changes from run to run or board to board:
dates and times, temperatures, power draw, current clocks, utilisation (and its samples, PCIe throughput), memory
in use, per-board identifiers (serial number, GPU PDI, module id: the board's slot) and the PCIe replay counter.
Everything else, borders, column widths, headers and spacing included, must match byte for byte.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from cluster.gpu import catalog, inventory
from cluster.gpu.nvidia_smi import board, view

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"
MACHINES = ("h100-80gb-hbm3-x1", "h200-x2", "h200-x4")
NOW = datetime(2026, 11, 28, 6, 33, 47)


def device(machine: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / machine / "device.json").read_text())
    return data


def recorded_host(machine: str) -> view.Host:
    """The recorded machine as the simulator models it: its GPUs' model, UUIDs and bus ids, its board."""
    d = device(machine)
    model = catalog.by_nvml_name(d["gpus"][0]["name"])
    assert model is not None, d["gpus"][0]["name"]
    major, minor = (int(x) for x in d["cudaVersion"].split("."))
    inv = inventory.simulated_inventory("recorded", model, len(d["gpus"]), driver_version=d["driverVersion"],
                                        cuda=(major, minor))  # fmt: skip
    gpus = tuple(dataclasses.replace(g, uuid=r["uuid"]) for g, r in zip(inv.gpus, d["gpus"]))
    b = board.Board(tuple(r["busId"] for r in d["gpus"]), cpus=d["cpus"], numa_nodes=d["numaNodes"],
                    nvlink=d["nvlinkLinksPerPair"] is not None, nvswitch=d["nvswitch"], virtualization="Pass-Through")
    return view.Host(dataclasses.replace(inv, gpus=gpus), b)


def recorded_view(machine: str) -> view.View:
    """What the recording container saw: ``NVIDIA_VISIBLE_DEVICES`` as its runtime set it (host indexes)."""
    v = view.container(recorded_host(machine), device(machine)["nvidiaVisibleDevices"])
    assert v is not None
    return v


def commands(machine: str) -> Iterator[tuple[str, int, list[str]]]:
    """(name, exit code, args without the program name) for every recorded command."""
    for line in (FIXTURES / machine / "commands.tsv").read_text().splitlines():
        if line.startswith("#"):
            continue
        name, code, argv = line.split("\t")
        yield name, int(code), shlex.split(argv)[1:]


def stdout(machine: str, name: str) -> str:
    return (FIXTURES / machine / f"{name}.txt").read_text()


# --- normalising -------------------------------------------------------------------------------------------------

_DATE = re.compile(r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}|\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}")
# A figure and the spaces that pad it to its column: the padding changes with the figure's width, the column does not.
_TABLE_FIGURES = (
    (re.compile(r"^(\| N/A) +(\d+C|N/A)(    P\d) +(\d+W|N/A ) / "), r"\1 <T>\3 <P> / "),  # temperature, power
    (re.compile(r"\| +\d+MiB / "), "| <U>MiB / "),  # memory in use (GPU and MIG rows)
    (re.compile(r"\| +(\d+%|N/A) "), "| <%> "),  # GPU-Util
)
_Q_DYNAMIC = {"Serial Number", "GPU PDI", "Module Id", "Tx Throughput", "Rx Throughput", "GPU Current Temp",
              "GPU T.Limit Temp", "Memory Current Temp", "Average Power Draw", "Instantaneous Power Draw",
              "Replays Since Reset"}
_Q_DYNAMIC_SECTIONS = {"Clocks", "Utilization"}  # current clocks and utilisation: every value
_CSV_DYNAMIC = {"timestamp", "serial", "temperature.gpu", "temperature.gpu.tlimit", "temperature.memory",
                "power.draw", "power.draw.average", "power.draw.instant", "clocks.current.graphics",
                "clocks.current.sm", "clocks.current.memory", "clocks.current.video", "utilization.gpu",
                "utilization.memory", "utilization.encoder", "utilization.decoder", "utilization.jpeg",
                "utilization.ofa", "memory.used", "platform.module_id", "fan.speed"}  # fmt: skip


def normalise(text: str) -> str:
    """Blank the run-to-run figures of any nvidia-smi output: table, CSV or -q."""
    text = _DATE.sub("<date>", text)
    if text.startswith("\n==============NVSMI LOG"):
        return _normalise_q(text)
    lines = text.split("\n")
    if lines and ", " in lines[0] and not lines[0].startswith("|"):
        return _normalise_csv(lines)
    out = []
    for line in lines:
        for pattern, blank in _TABLE_FIGURES:
            line = pattern.sub(blank, line)
        out.append(line)
    return "\n".join(out)


def _normalise_csv(lines: list[str]) -> str:
    header = [h.split(" [")[0] for h in lines[0].split(", ")]
    out = [lines[0]]
    for line in lines[1:]:
        cells = line.split(", ")
        out.append(", ".join("<v>" if i < len(header) and header[i] in _CSV_DYNAMIC else c
                             for i, c in enumerate(cells)))  # fmt: skip
    return "\n".join(out)


def _normalise_q(text: str) -> str:
    out = []
    path: list[str] = []
    for line in text.split("\n"):
        depth = (len(line) - len(line.lstrip())) // 4
        label, sep, value = line.strip().partition(": ")
        label = label.rstrip()
        path = path[: max(0, depth - 1)] + [label]
        top = path[0] if path else ""
        dynamic = (label in _Q_DYNAMIC or top in _Q_DYNAMIC_SECTIONS or top.endswith("Samples")
                   or (top == "FB Memory Usage" and label == "Used"))  # fmt: skip
        out.append(line.split(": ", 1)[0] + ": <v>" if sep and dynamic else line)
    return "\n".join(out)
