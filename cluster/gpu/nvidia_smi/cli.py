"""``nvidia-smi ARGS`` in a container: parse the arguments as driver 580's tool does and render the answer.

``run(view, args, now)`` returns stdout and the exit code; the real tool prints its errors on stdout too. Parsing
follows what the recorded tool did (``tests/fixtures/nvidia-smi/*/commands.tsv``): an unknown option exits 255
(``ERROR: Option X is not recognized...``), an option the chosen command does not take exits 2 (``... is not valid
for this command...``), and ``-i`` naming no visible GPU prints ``No devices were found`` and exits 6. Options the
real tool has but this simulator does not render (loops, log files, XML, ``dmon``, help texts, settings) answer
``not simulated`` with exit 3; MIG changes answer ``not supported here`` with exit 4, because a container lacks
the ``mig/config`` capability they need. The caller handles a container that has no ``nvidia-smi`` at all
(``view.container`` returned None).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from cluster.gpu.nvidia_smi import _details as details
from cluster.gpu.nvidia_smi import _migtables as migtables
from cluster.gpu.nvidia_smi import _query as query
from cluster.gpu.nvidia_smi import _table as table
from cluster.gpu.nvidia_smi import _topo as topo
from cluster.gpu.nvidia_smi import view

NOT_SIMULATED = 3
NOT_PERMITTED = 4
NO_DEVICES = "No devices were found\n"
_TAKES_VALUE = {"-i": "--id", "-d": "--display", "-f": "--filename", "-l": "--loop", "-lms": "--loop-ms"}
_LONG_VALUE = {"--id", "--display", "--filename", "--loop", "--loop-ms", "--query-gpu", "--query-compute-apps",
               "--format", "--query-supported-clocks", "--query-accounted-apps", "--query-retired-pages",
               "--query-remapped-rows", "--debug"}  # fmt: skip
_FLAGS = {"-h": "--help", "-L": "--list-gpus", "-B": "--list-excluded-gpus", "-q": "--query", "-x": "--xml-format",
          "-u": "--unit", "-col": "--columns"}  # fmt: skip
_LONG_FLAGS = {"--version", "--help-query-gpu", "--help-query-compute-apps", "--help-query-supported-clocks",
               "--help-query-accounted-apps", "--help-query-retired-pages", "--help-query-remapped-rows"}
_SETTINGS = {"-pm", "--persistence-mode", "-e", "--ecc-config", "-p", "--reset-ecc-errors", "-c", "--compute-mode",
             "--gom", "-r", "--gpu-reset", "-vm", "--virt-mode", "-lgc", "--lock-gpu-clocks", "-m", "--mode", "-rgc",
             "--reset-gpu-clocks", "-lmc", "--lock-memory-clocks", "-rmc", "--reset-memory-clocks", "-lmcd",
             "--lock-memory-clocks-deferred", "-rmcd", "--reset-memory-clocks-deferred", "-ac",
             "--applications-clocks", "-rac", "--reset-applications-clocks", "-pl", "--power-limit", "-sc", "--scope",
             "-cc", "--cuda-clocks", "-am", "--accounting-mode", "-caa", "--clear-accounted-apps",
             "--auto-boost-default", "--auto-boost-permission", "-gtt", "--gpu-target-temp", "-den",
             "--dram-encryption", "--set-hostname", "--get-hostname", "-eow", "--error-on-warning", "-t",
             "--toggle-led", "--dtd"}  # fmt: skip
_OTHER_COMMANDS = {"dmon", "daemon", "replay", "pmon", "drain", "c2c", "clocks", "encodersessions", "fbcsessions",
                   "vgpu", "conf-compute", "gpm", "pci", "power-hint", "power-smoothing", "power-profiles",
                   "boost-slider", "nvlink"}  # fmt: skip


@dataclass(frozen=True)
class Result:
    stdout: str
    exit_code: int = 0


def not_recognized(token: str) -> Result:
    return Result(f"ERROR: Option {token} is not recognized. Please run 'nvidia-smi -h'.\n\n", 255)


def missing_value(token: str) -> Result:
    return Result(f"ERROR: Option {token} is missing its value. Please run 'nvidia-smi -h' for help.\n\n", 255)


def not_recognized_here(token: str) -> Result:
    """What ``--query-gpu`` says of an option it does not take (recorded for ``-q``)."""
    return Result(f"ERROR: Option {token} is not recognized. Please run 'nvidia-smi -h' for help.\n\n", 2)


def invalid_combination(option: str, purpose: str) -> Result:
    return Result(f"Invalid combination of input arguments. Specify -q/--query and {option} to run {purpose}.  "
                  "Please run 'nvidia-smi -h' for help.\n\n", 2)


def not_valid(token: str) -> Result:
    return Result(f"ERROR: Option {token} is not valid for this command. Please run 'nvidia-smi -h' for help.\n\n", 2)


def not_simulated(what: str) -> Result:
    return Result(f"gpulab: `nvidia-smi {what}` is not simulated: the lab's GPUs are simulated, and this simulator "
                  "renders the summary table, -L, --query-gpu, --query-compute-apps, -q [-d], --version, topo -m/-mp, "
                  "nvlink -s and mig -lgip/-lgipp/-lgi/-lci.\n", NOT_SIMULATED)  # fmt: skip


@dataclass(frozen=True)
class _Args:
    """Parsed top-level options: each as (the token as typed, its value), in argv order."""

    options: tuple[tuple[str, str | None], ...]

    def get(self, name: str) -> str | None:
        return next((value for token, value in self.options if _canonical(token) == name), None)

    def has(self, name: str) -> bool:
        return any(_canonical(token) == name for token, _ in self.options)


def _canonical(token: str) -> str:
    name = token.split("=", 1)[0]
    return _TAKES_VALUE.get(name) or _FLAGS.get(name) or name


def _parse(args: Sequence[str]) -> _Args | Result:
    options: list[tuple[str, str | None]] = []
    i = 0
    while i < len(args):
        token = args[i]
        name = token.split("=", 1)[0]
        takes = name in _TAKES_VALUE or name in _LONG_VALUE
        if token in _SETTINGS or name in _SETTINGS:
            return not_simulated(" ".join(args))
        if not takes and token not in _FLAGS and token not in _FLAGS.values() and token not in _LONG_FLAGS:
            return not_recognized(token)
        if takes and "=" not in token:
            if i + 1 >= len(args):
                return missing_value(token)
            options.append((token, args[i + 1]))
            i += 2
            continue
        options.append((token, token.split("=", 1)[1] if takes else None))
        i += 1
    return _Args(tuple(options))


def _select(v: view.View, ids: str | None) -> tuple[view.Gpu, ...]:
    """``-i``: indexes, UUIDs or bus ids, comma-separated; what names no visible GPU selects nothing."""
    if ids is None:
        return v.gpus
    chosen = []
    for want in ids.split(","):
        for gpu in v.gpus:
            if want in (str(gpu.index), gpu.info.uuid, gpu.bus_id) and gpu not in chosen:
                chosen.append(gpu)
    return tuple(sorted(chosen, key=lambda g: g.index))


def _only(a: _Args, allowed: set[str], refuse: Callable[[str], Result] = not_valid) -> Result | None:
    """The first option the command does not take, as the real tool reports it."""
    for token, _ in a.options:
        if _canonical(token) not in allowed:
            return refuse(token)
    return None


def run(v: view.View, args: Sequence[str], now: datetime) -> Result:
    """Answer ``nvidia-smi *args`` (without the program name) for the container whose view is ``v``."""
    if args and args[0] in ("mig", "topo"):
        return _mig(v, args[1:]) if args[0] == "mig" else _topo(v, args[1:])
    if args and args[0] == "nvlink" and args[1:2] in (["-s"], ["--status"]):
        return _nvlink(v, args[1:])
    if args and args[0] in _OTHER_COMMANDS:
        return not_simulated(" ".join(args))
    parsed = _parse(args)
    if isinstance(parsed, Result):
        return parsed
    if not v.gpus and not parsed.has("--version"):
        return Result(NO_DEVICES, 6)  # NVIDIA_VISIBLE_DEVICES=none: the tools, no device
    return _top(v, parsed, args, now)


def _top(v: view.View, a: _Args, args: Sequence[str], now: datetime) -> Result:
    for name in ("--help", *sorted(_LONG_FLAGS), "--list-gpus", "--list-excluded-gpus"):
        if a.has(name):
            problem = _only(a, {name})
            if problem:
                return problem
            return _simple(v, name, args)
    if a.has("--format") and not (a.has("--query-gpu") or a.has("--query-compute-apps")):
        return not_recognized(next(t for t, _ in a.options if _canonical(t) == "--format"))
    if a.has("--query-gpu") or a.has("--query-compute-apps"):
        return _query(v, a, args, now)
    if a.has("--query"):
        return _details(v, a, args, now)
    if a.has("--display"):
        return invalid_combination("-d/--display", "a filtered query")
    if a.has("--xml-format"):
        return invalid_combination("-x/--xml-format", "an XML query")
    problem = _only(a, {"--id", "--filename", "--loop", "--loop-ms", "--columns"})
    if problem:
        return problem
    if a.has("--filename") or a.has("--loop") or a.has("--loop-ms") or a.has("--columns"):
        return not_simulated(" ".join(args))
    gpus = _select(v, a.get("--id"))
    if not gpus:
        return Result(NO_DEVICES, 6)
    return Result(table.summary(v, gpus, now))


def _simple(v: view.View, name: str, args: Sequence[str]) -> Result:
    if name == "--version":
        nvml = ".".join(v.driver_version.split(".")[:2])
        return Result(f"NVIDIA-SMI version  : {v.driver_version}\nNVML version        : {nvml}\n"
                      f"DRIVER version      : {v.driver_version}\nCUDA Version        : {v.cuda_version}\n")
    if name == "--list-gpus":
        return Result(table.listing(v.gpus))
    if name == "--list-excluded-gpus":
        return Result("No excluded devices found.\n")
    return not_simulated(" ".join(args))


def _query(v: view.View, a: _Args, args: Sequence[str], now: datetime) -> Result:
    problem = _only(a, {"--query-gpu", "--query-compute-apps", "--format", "--id", "--filename", "--loop",
                        "--loop-ms"}, not_recognized_here)  # fmt: skip
    if problem:
        return problem
    if a.has("--filename") or a.has("--loop") or a.has("--loop-ms"):
        return not_simulated(" ".join(args))
    formats = [value for token, value in a.options if _canonical(token) == "--format"]
    fmt = query.parse_format(formats[-1] if formats else None)
    gpus = _select(v, a.get("--id"))
    if not gpus:
        return Result(NO_DEVICES, 6)
    apps = a.get("--query-compute-apps")
    wanted = query.gpu_fields(a.get("--query-gpu") or "")
    if isinstance(wanted, str):
        return Result(wanted, 2)
    if fmt is None:
        return Result(query.BAD_FORMAT, 2)
    if apps is not None:
        return Result(*query.query_apps(apps, fmt))
    return Result(query.query_gpu(v, gpus, wanted, fmt, now))


def _details(v: view.View, a: _Args, args: Sequence[str], now: datetime) -> Result:
    problem = _only(a, {"--query", "--id", "--display", "--xml-format", "--unit", "--filename", "--loop",
                        "--loop-ms"})  # fmt: skip
    if problem:
        return problem
    groups: tuple[str, ...] | None = None
    display = a.get("--display")
    if display is not None:
        groups = details.display_groups(display)
        if groups is None:
            return Result(details.BAD_DISPLAY, 2)
        if any(g in details.UNRECORDED for g in groups):
            return not_simulated(" ".join(args))
    if any(a.has(o) for o in ("--xml-format", "--unit", "--filename", "--loop", "--loop-ms")):
        return not_simulated(" ".join(args))
    gpus = _select(v, a.get("--id"))
    if not gpus:
        return Result(NO_DEVICES, 6)
    return Result(details.report(v, gpus, now, groups))


def _sub_options(args: Sequence[str], known: dict[str, str]) -> tuple[list[str], str | None] | Result:
    """A subcommand's options (by long name) and its ``-i`` value; an unknown one is refused as the tool does."""
    names: list[str] = []
    ids = None
    i = 0
    while i < len(args):
        token = args[i]
        if token in ("-i", "--id"):
            if i + 1 >= len(args):
                return Result(f'Option "{token}" is not recognized.\n', 2)
            ids, i = args[i + 1], i + 2
            continue
        if token not in known:
            return Result(f'Option "{token}" is not recognized.\n', 2)
        names.append(known[token])
        i += 1
    return names, ids


_MIG_OPTIONS = {"-lgip": "lgip", "--list-gpu-instance-profiles": "lgip", "-lgipp": "lgipp",
                "--list-gpu-instance-possible-placements": "lgipp", "-lgi": "lgi", "--list-gpu-instances": "lgi",
                "-lci": "lci", "--list-compute-instances": "lci", "-lcip": "lcip",
                "--list-compute-instance-profiles": "lcip", "-h": "help", "--help": "help"}  # fmt: skip
_MIG_CHANGES = {"-cgi", "--create-gpu-instance", "-dgi", "--destroy-gpu-instance", "-cci", "--create-compute-instance",
                "-dci", "--destroy-compute-instance", "-C", "--default-compute-instance", "-gi", "--gpu-instance-id",
                "-ci", "--compute-instance-id"}  # fmt: skip


def _mig(v: view.View, args: Sequence[str]) -> Result:
    if any(token in _MIG_CHANGES for token in args):
        return Result(f"gpulab: `nvidia-smi mig {' '.join(args)}` is not supported here: a container lacks the "
                      "mig/config capability, so the driver refuses to create or destroy MIG instances from it; "
                      "MIG layouts change on the node (the MIG manager applies nvidia.com/mig.config).\n",
                      NOT_PERMITTED)  # fmt: skip
    parsed = _sub_options(args, _MIG_OPTIONS)
    if isinstance(parsed, Result):
        return parsed
    names, ids = parsed
    gpus = _select(v, ids)
    if not gpus:
        return Result(NO_DEVICES, 6)
    if not names or names[0] == "help":
        return not_simulated("mig " + " ".join(args))
    listing = {"lgip": migtables.profiles, "lgipp": migtables.placements, "lgi": migtables.gpu_instances,
               "lci": migtables.compute_instances}.get(names[0])  # fmt: skip
    if listing is None:  # -lcip: the compute-instance profile table is not simulated
        if not any(g.info.mig_enabled for g in gpus):
            return Result(migtables.NO_MIG)
        return not_simulated("mig " + " ".join(args))
    text, code = listing(gpus)
    return Result(text, code)


_TOPO_OPTIONS = {"-m": "matrix", "--matrix": "matrix", "-mp": "pci", "--matrix_pci": "pci", "-h": "help",
                 "--help": "help", "-c": "cpu", "--cpu": "cpu", "-n": "nearest", "--nearest_gpus": "nearest",
                 "-p": "path", "--gpu_path": "path", "-p2p": "p2p", "--p2pstatus": "p2p"}  # fmt: skip


def _topo(v: view.View, args: Sequence[str]) -> Result:
    parsed = _sub_options(args, _TOPO_OPTIONS)
    if isinstance(parsed, Result):
        return parsed
    names, ids = parsed
    if ids is not None and not {"nearest", "path"} & set(names):
        return Result("The -i command line argument must be used in conjunction with -n or -p.\n\n", 255)
    if names in (["matrix"], ["pci"]):
        return Result(topo.matrix(v, pci_only=names == ["pci"]))
    return not_simulated("topo " + " ".join(args))


def _nvlink(v: view.View, args: Sequence[str]) -> Result:
    parsed = _sub_options(args, {"-s": "status", "--status": "status"})
    if isinstance(parsed, Result):
        return parsed
    _, ids = parsed
    gpus = _select(v, ids)
    if not gpus:
        return Result(NO_DEVICES, 6)
    return Result(topo.nvlink_status(v, gpus))
