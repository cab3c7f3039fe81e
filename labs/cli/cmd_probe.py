"""``gpulab probe``: read this machine's GPUs through NVML and show what the GPU stack would advertise.

Exit codes: 0 done; 3 no usable NVIDIA GPU here (pynvml missing, no driver library, driver not loaded, no GPU),
always as one line, never a traceback; 1 any other gpulab error (a bad --config file, kubectl failing).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from cluster import errors, fleet as fleet_mod
from cluster.gpu import advertise
from cluster.gpu import device_plugin_config as dpc
from cluster.nvml import drift as drift_mod
from cluster.nvml import errors as nvml_errors
from cluster.nvml import node_source, probe as probe_mod, snapshot


def _load_config(path: str | None, strategy: str | None) -> tuple[dpc.DevicePluginConfig, str]:
    text = Path(path).read_text() if path else None
    config = dpc.load(text, source=path or "empty config")
    return config, strategy or config.flags.mig_strategy


def _replay(path: str) -> probe_mod.ProbeResult:
    """A recorded ``gpulab probe --json`` document, or a bare NVML snapshot."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise errors.ConfigError(path, [f"cannot read a recorded probe: {exc}"]) from exc
    recorded = doc.get("probe") if isinstance(doc, dict) else None
    snap = recorded.get("snapshot", doc) if isinstance(recorded, dict) else doc
    found = snapshot.problems(snap)
    if found:
        raise errors.ConfigError(path, found, hint="replay a file written by `gpulab probe --json`")
    try:
        return probe_mod.from_snapshot(snap)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        # The shape checks above cover the fields every GPU has; this catches a damaged MIG detail.
        raise errors.ConfigError(path, [f"devices: a recorded value has an unexpected shape "
                                        f"({type(exc).__name__}: {exc})"],
                                 hint="replay a file written by `gpulab probe --json`") from exc


def _document(result: probe_mod.ProbeResult, ad: advertise.Advertisement, strategy: str,
              drifts: list[drift_mod.Drift] | None) -> dict[str, Any]:
    return {
        "probe": result.to_json(),
        "migStrategy": strategy,
        "advertisement": {
            "capacity": ad.capacity,
            "allocatable": ad.allocatable,
            "labels": dict(sorted({**ad.labels, **advertise.nfd_labels(result.inventory)}.items())),
            "error": ad.error,
            "gfdError": ad.gfd_error,
            "warnings": list(ad.warnings),
        },
        "drift": None if drifts is None else [vars(d) for d in drifts],
    }


def _print(console: Console, result: probe_mod.ProbeResult, ad: advertise.Advertisement, strategy: str,
           drifts: list[drift_mod.Drift] | None) -> None:
    inv = result.inventory
    console.print(f"[bold]host[/] {inv.hostname}   [bold]driver[/] {inv.driver_version}   "
                  f"[bold]CUDA[/] {inv.cuda_driver_version[0]}.{inv.cuda_driver_version[1]}   [bold]machine[/] {result.machine}")
    table = Table("#", "GPU", "UUID", "memory MiB (used)", "CC", "MIG capable/current/pending", "compute mode", "processes",
                  title="GPUs", title_justify="left")
    for g, extra in zip(inv.gpus, result.gpus):
        mig = "/".join("yes" if v else "no" for v in (g.mig_capable, g.mig_enabled, g.mig_pending))
        procs = ", ".join(f"{p.pid} {p.name}{' [MPS server]' if p.is_mps_server else ''}" for p in g.processes) or "-"
        table.add_row(str(g.index), g.model.nvml_name, g.uuid, f"{g.model.memory_mib} ({extra.memory_used // 2**20})",
                      "{}.{}".format(*g.model.compute_capability), mig, g.compute_mode, procs)
    console.print(table)
    migs = [(g.index, m) for g in inv.gpus for m in g.mig_devices]
    if migs:
        t = Table("GPU", "profile", "UUID", "GI/CI", "placement", "memory MiB", "SMs", title="MIG devices", title_justify="left")
        for i, m in migs:
            t.add_row(str(i), m.profile, m.uuid, f"{m.gi_id}/{m.ci_id}", f"{m.placement_start}+{m.placement_size}",
                      str(m.memory_mib), str(m.multiprocessors))
        console.print(t)
    for extra in result.gpus:
        if extra.profiles:
            console.print(f"GPU {extra.index} could take: " + ", ".join(f"{p.name} x{p.instances}" for p in extra.profiles))
        for note in extra.notes:
            console.print(f"GPU {extra.index}: {note}")
    console.print(f"[bold]advertised with MIG strategy {strategy}[/]: " +
                  (", ".join(f"{k}={v} (allocatable {ad.allocatable.get(k, 0)})" for k, v in sorted(ad.capacity.items())) or "nothing"))
    for line in filter(None, (ad.error, ad.gfd_error, *ad.warnings)):
        console.print(f"[red]{line}[/]")
    labels = Table("label", "value", title="labels GFD/NFD would set", title_justify="left")
    for k, v in sorted({**ad.labels, **advertise.nfd_labels(inv)}.items()):
        labels.add_row(k, v)
    console.print(labels)
    for d in drifts or []:
        console.print(f"[yellow]drift[/] {d.kind}: {d.message}\n  [bold]fix:[/] {d.fix}")
    if drifts == []:
        console.print("[green]no drift:[/] the node agrees with NVML")


def register(cli: click.Group) -> None:
    @cli.command()
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of tables.")
    @click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
                  help="A device-plugin config file (version: v1) to derive resources and labels with.")
    @click.option("--mig-strategy", type=click.Choice(dpc.MIG_STRATEGIES), default=None,
                  help="The MIG strategy (default: the config's flags.migStrategy, else none).")
    @click.option("--node", "node_name", default=None, help="Compare with this Kubernetes node and report drift.")
    @click.option("--kubeconfig", default=None, help="Kubeconfig for --node (kubectl from PATH reads it).")
    @click.option("--replay", type=click.Path(exists=True, dir_okay=False), default=None,
                  help="Use recorded NVML answers (a saved `probe --json` document) instead of this machine's GPUs.")
    @click.option("--fleet-out", type=click.Path(dir_okay=False), default=None,
                  help="Also write a one-node fleet spec mirroring these GPUs (for `gpulab up --fleet FILE`).")
    def probe(as_json: bool, config_path: str | None, mig_strategy: str | None,
              node_name: str | None, kubeconfig: str | None, replay: str | None, fleet_out: str | None) -> None:
        """Read the GPUs through NVML (read-only) and show the labels and resources they would get.

        Exits with code 3, after one line, when this machine has no usable NVIDIA GPU.
        """
        if node_name and not kubeconfig:
            raise click.UsageError("--node needs --kubeconfig")
        config, strategy = _load_config(config_path, mig_strategy)
        try:
            result = _replay(replay) if replay else probe_mod.probe()
        except nvml_errors.NvmlUnavailable as exc:
            click.echo(f"gpulab probe: {exc.message}", err=True)
            # SystemExit, not ctx.exit: main() runs click with standalone_mode=False, which turns ctx.exit's
            # code into a return value that main() does not pass on.
            sys.exit(nvml_errors.EXIT_NO_GPU)
        ad = advertise.advertise(result.inventory, config, strategy, machine=result.machine)
        if fleet_out:
            mirrored = fleet_mod.from_inventory(result.inventory)
            Path(fleet_out).write_text(fleet_mod.dump(mirrored))
            click.echo(f"wrote fleet {mirrored.name!r} to {fleet_out}", err=True)
        drifts = None
        if node_name and kubeconfig:
            node = node_source.KubectlNodeSource(kubeconfig).get_node(node_name)
            drifts = drift_mod.drift(node, result.inventory, config, strategy)
        if as_json:
            json.dump(_document(result, ad, strategy, drifts), sys.stdout, indent=2)
            sys.stdout.write("\n")
            return
        _print(Console(), result, ad, strategy, drifts)
