"""``nvidia-smi`` with no arguments (the summary table, its MIG devices table and process panel) and ``-L``.

Layouts are driver 580's: the GPU table as recorded on H100 and H200 (``tests/fixtures/nvidia-smi``), the MIG rows
as NVIDIA's MIG user guide v580 prints an H100 in MIG mode (``docs/nvidia-mig-guide-v580-h100-3g40gb-x2.txt``).
In MIG mode the GPU row shows ``On`` under Volatile Uncorr. ECC and ``N/A`` utilisation. A container cannot name
the processes of other PID namespaces, so its process panel has no rows: empty when the GPU has processes,
``No running processes found`` when it has none (NVIDIA/nvidia-docker#1460).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from cluster.gpu import inventory
from cluster.gpu.nvidia_smi import _facts as facts
from cluster.gpu.nvidia_smi import board, view

WIDTH = 89  # between the outer borders
_GPU_COLS = (41, 24, 22)
_MIG_COLS = (18, 34, 11, 23)
_COMPUTE = {"Default": "Default", "Exclusive_Process": "E. Process", "Exclusive_Thread": "E. Thread",
            "Prohibited": "Prohibited"}  # fmt: skip


def clock(now: datetime) -> str:
    """The first line: ``Sat Nov 28 06:24:17 2026`` and seven spaces (ctime's day is space-padded)."""
    return f"{now:%a %b} {now.day:>2} {now:%H:%M:%S %Y}" + " " * 7


def _rule(cols: Sequence[int], fill: str = "-", joint: str = "+") -> str:
    return joint + joint.join(fill * c for c in cols) + joint


def _row(cols: Sequence[int], cells: Sequence[str]) -> str:
    return "|" + "|".join(cell.ljust(width)[:width] for width, cell in zip(cols, cells)) + "|"


def _double(cols: Sequence[int]) -> str:
    """The rule under a table's header: ``|===+===|``."""
    return "|" + "+".join("=" * c for c in cols) + "|"


def _spread(left: str, right: str, width: int) -> str:
    return left + right.rjust(width - len(left))


def header(v: view.View) -> list[str]:
    driver = v.driver_version
    title = f" NVIDIA-SMI {driver:<23}Driver Version: {driver:<15}CUDA Version: {v.cuda_version:<9}"
    return [_rule([WIDTH]), "|" + title.ljust(WIDTH) + "|"]


def _name(name: str) -> str:
    return name if len(name) <= 27 else name[:24] + "..."


def _gpu_rows(v: view.View, gpu: view.Gpu) -> list[str]:
    info, model, known = gpu.info, gpu.model, board.facts(gpu.model)
    ecc = "On" if info.mig_enabled else "0"
    temp = "N/A" if known.idle_temp_c is None else f"{known.idle_temp_c}C"
    limit = "N/A " if known.power_limit_w is None else f"{known.power_limit_w:>4}W"
    draw = "N/A " if known.idle_power_w is None else f"{round(known.idle_power_w)}W"
    used, total = facts.memory_used_mib(info), model.memory_mib
    util = "N/A" if info.mig_enabled else "0%"
    mig = ("Enabled" if info.mig_enabled else "Disabled") if info.mig_capable else "N/A"
    persistence = "On " if v.host.board.persistence else "Off"
    first = (f"{gpu.index:>4}  {_name(model.nvml_name):<31}{persistence} ", f"   {gpu.bus_id} Off ", f"{ecc:>21} ")
    second = (_spread(f" N/A  {temp:>4}    P0", f"{draw} / {limit} ", 41),
              f"{used:>8}MiB / {total:>6}MiB ", f"{util:>8}{_COMPUTE.get(info.compute_mode, info.compute_mode):>13} ")
    third = ("", "", f"{mig:>21} ")
    return [_row(_GPU_COLS, cells) for cells in (first, second, third)]


def gpu_table(v: view.View, gpus: Sequence[view.Gpu]) -> list[str]:
    """The GPU table: header block, then three rows per GPU."""
    lines = [_rule(_GPU_COLS)]
    lines += [_row(_GPU_COLS, (" GPU  Name                 Persistence-M ", " Bus-Id          Disp.A ",
                               " Volatile Uncorr. ECC ")),
              _row(_GPU_COLS, (" Fan  Temp   Perf          Pwr:Usage/Cap ", "           Memory-Usage ",
                               " GPU-Util  Compute M. ")),
              _row(_GPU_COLS, ("", "", "               MIG M. ")),
              _double(_GPU_COLS)]  # fmt: skip
    for gpu in gpus:
        lines += _gpu_rows(v, gpu)
        lines.append(_rule(_GPU_COLS))
    return lines


def _mig_bar1(gpu: view.Gpu, mig: inventory.MigDevice) -> str:
    per_slice = board.facts(gpu.model).mig_bar1_per_slice_mib
    return "N/A" if per_slice is None else f"{per_slice * mig.placement_size}MiB"


def mig_table(gpus: Sequence[view.Gpu]) -> list[str]:
    """The MIG devices table, or nothing when no visible GPU is in MIG mode."""
    if not any(g.info.mig_enabled for g in gpus):
        return []
    lines = ["", _rule([WIDTH]), "|" + " MIG devices:".ljust(WIDTH) + "|", _rule(_MIG_COLS)]
    lines += [_row(_MIG_COLS, (" GPU  GI  CI  MIG ", "              Shared Memory-Usage ", "        Vol",
                               "        Shared         ")),
              _row(_MIG_COLS, ("      ID  ID  Dev ", "                Shared BAR1-Usage ", " SM     Unc",
                               " CE ENC  DEC  OFA  JPG ")),
              _row(_MIG_COLS, ("", "", "        ECC", "")),
              _double(_MIG_COLS)]  # fmt: skip
    devices = [(g, m, i) for g in gpus if g.info.mig_enabled for i, m in enumerate(g.mig_devices)]
    if not devices:
        return [*lines[:-1], _rule([WIDTH], "=", "|"), "|" + "  No MIG devices found".ljust(WIDTH) + "|",
                _rule([WIDTH])]
    for gpu, mig, index in devices:
        e = mig.engines
        memory = f"{0:>6}MiB / {mig.memory_mib:>5}MiB    "
        bar1 = f"{0:>6}MiB / {_mig_bar1(gpu, mig):>8}    "
        lines.append(_row(_MIG_COLS, (f"{gpu.index:>3}{mig.gi_id:>5}{mig.ci_id:>4}{index:>4}  ", memory.rjust(34),
                                      f" {mig.multiprocessors:<3}{0:>6} ",
                                      f"{e.copy:>3}{e.encoder:>4}{e.decoder:>5}{e.ofa:>5}{e.jpeg:>5} ")))
        lines.append(_row(_MIG_COLS, ("", bar1.rjust(34), "", "")))
        lines.append(_rule(_MIG_COLS))
    return lines


def processes(gpus: Sequence[view.Gpu]) -> list[str]:
    lines = ["", _rule([WIDTH]), "|" + " Processes:".ljust(WIDTH) + "|",
             "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |",
             "|        ID   ID                                                               Usage      |",
             _rule([WIDTH], "=", "|")]  # fmt: skip
    if not any(g.info.processes for g in gpus):
        lines.append("|" + "  No running processes found".ljust(WIDTH) + "|")
    lines.append(_rule([WIDTH]))
    return lines


def summary(v: view.View, gpus: Sequence[view.Gpu], now: datetime) -> str:
    """``nvidia-smi`` (and ``-i``): the clock line, header, GPU table, MIG devices and process panel."""
    lines = [clock(now), *header(v), *gpu_table(v, gpus), *mig_table(gpus), *processes(gpus)]
    return "".join(line + "\n" for line in lines)


def listing(gpus: Sequence[view.Gpu]) -> str:
    """``nvidia-smi -L``: each GPU, then its visible MIG devices numbered as NVML numbers them for the container."""
    lines = []
    for gpu in gpus:
        lines.append(f"GPU {gpu.index}: {gpu.model.nvml_name} (UUID: {gpu.info.uuid})")
        for index, mig in enumerate(gpu.mig_devices):
            lines.append(f"  MIG {mig.profile:<11} Device {index:>2}: (UUID: {mig.uuid})")
    return "".join(line + "\n" for line in lines)
