"""GPU stack commands: ``gpulab gpu-operator install|uninstall|status`` and ``gpulab fault inject|clear``.

Every command that changes the cluster refuses on an attached cluster (``guard.refuse_if_attach``): there the
NVIDIA names are the real GPU stack's. ``status`` only reads, and works everywhere."""

from __future__ import annotations

from pathlib import Path

import click
import yaml
from rich.console import Console
from rich.table import Table

from cluster import backends, errors
from cluster.backends import guard
from cluster.kube.client import Client
from cluster import gpustack
from cluster.gpu import helm_values
from cluster.gpustack import names


def _client(change: str | None = None) -> Client:
    """A client for the current cluster; ``change`` (what the command would change) is refused on attach."""
    be = backends.current()
    if change:
        guard.refuse_if_attach(be, change)
    return Client.from_kubeconfig(be.kubeconfig())


def _print_status(st: gpustack.OperatorStatus, console: Console) -> None:
    if not st.installed:
        console.print("GPU Operator: [yellow]not installed[/] (gpulab gpu-operator install)")
    else:
        colour = "green" if st.state == "ready" else "red"
        console.print(f"GPU Operator: ClusterPolicy cluster-policy [{colour}]{st.state or 'pending'}[/]"
                      f"   metrics: {st.metrics_url or '-'}")
    table = Table("node", "GPUs", "mode", "plugin config", "mig.config (state)", "capacity / allocatable",
                  "faults", "operand pods not running", title="GPU nodes", title_justify="left")
    for n in st.nodes:
        res = "\n".join(f"{k}: {n.capacity[k]}/{n.allocatable.get(k, '0')}" for k in sorted(n.capacity)) or "-"
        bad = "\n".join(f"{pod}: {s}" for pod, s in sorted(n.operands.items()) if s != "Running") or "-"
        table.add_row(n.name, f"{n.gpus}x {n.model}", n.mode, n.plugin_config, f"{n.mig_config} ({n.mig_state})",
                      res, ", ".join(n.faults) or "-", bad)
    console.print(table)


def _rendered(sets: tuple[str, ...], value_files: tuple[str, ...]) -> helm_values.Rendered:
    files = []
    for name in value_files:
        try:
            files.append((name, Path(name).read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as exc:
            raise errors.ConfigError(name, [f"cannot read the values file: {exc}"]) from exc
    return helm_values.render(helm_values.values_from(files, sets), names.NAMESPACE)


def _echo_ignored(rendered: helm_values.Rendered) -> None:
    for path in rendered.ignored:
        click.echo(f"note: {path} is a chart value gpulab's simulated operator does not act on; ignored", err=True)


def register(cli: click.Group) -> None:
    @cli.group("gpu-operator")
    def gpu_operator() -> None:
        """The simulated NVIDIA GPU Operator (ClusterPolicy, operands, device plugin, MIG manager, DRA, DCGM)."""

    @gpu_operator.command()
    @click.option("--no-wait", is_flag=True, help="Return without waiting for the ClusterPolicy to be ready.")
    @click.option("--timeout", default=90.0, show_default=True, help="Seconds to wait for ready.")
    @click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                  help="A Helm chart value, e.g. --set devicePlugin.config.name=plugin-config (repeatable).")
    @click.option("-f", "--values", "value_files", multiple=True, type=click.Path(dir_okay=False),
                  help="A Helm values file for the gpu-operator chart (repeatable; --set wins).")
    @click.option("--dry-run", is_flag=True, help="Print the ClusterPolicy and ConfigMaps the values give; change nothing.")
    def install(no_wait: bool, timeout: float, sets: tuple[str, ...], value_files: tuple[str, ...],
                dry_run: bool) -> None:
        """Install the operator: namespace, ClusterPolicy CRD and default policy, MIG config, DRA classes.

        With --set / -f, the values map onto the ClusterPolicy as NVIDIA's Helm chart maps them
        (deployments/gpu-operator/templates/clusterpolicy.yaml); unknown value paths are refused."""
        rendered = _rendered(sets, value_files) if sets or value_files or dry_run else None
        if dry_run:
            assert rendered is not None
            docs = [*rendered.configmaps, helm_values.apply(gpustack.cluster_policy(), rendered)]
            click.echo(yaml.safe_dump_all(docs, sort_keys=False), nl=False)
            _echo_ignored(rendered)
            return
        with _client(f"install the GPU Operator (the {names.NAMESPACE} namespace, the {names.CRD_NAME} CRD, "
                     "the ClusterPolicy and the GPU nodes' labels)") as client:
            state = gpustack.install(client, wait=not no_wait, timeout=timeout, values=rendered)
        if rendered is not None:
            _echo_ignored(rendered)
        click.echo(f"gpu-operator installed; ClusterPolicy cluster-policy: {state or 'pending'}")

    @gpu_operator.command()
    def uninstall() -> None:
        """Remove the operator and everything it put on nodes (MIG layouts stay, like on real GPUs)."""
        with _client(f"uninstall the GPU Operator (deleting the {names.NAMESPACE} namespace, the "
                     f"{names.CRD_NAME} CRD and the GPU nodes' labels)") as client:
            gpustack.uninstall(client)
        click.echo("gpu-operator uninstalled")

    @gpu_operator.command("status")
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
    def status_cmd(as_json: bool) -> None:
        """Policy state, and per GPU node: mode, config, MIG state, resources, faults and failing operands."""
        with _client() as client:
            st = gpustack.status(client)
        if as_json:
            click.echo(gpustack.dumps(st))
        else:
            _print_status(st, Console())

    @cli.group()
    def fault() -> None:
        """Inject or clear simulated GPU faults (stored on the node; every component sees them).

        One kind per step of the operator's validation chain: driver-missing and nouveau-bound (driver),
        toolkit-misconfigured (toolkit) keep the device plugin from starting; cuda-validation-failing and
        plugin-validation-failing only stall the validator pod and the ClusterPolicy, the GPUs stay
        allocatable. gpu-unhealthy --gpu N marks one GPU unhealthy (allocatable drops, capacity stays).
        """

    kinds = click.Choice(gpustack.FAULT_KINDS)

    @fault.command()
    @click.argument("node")
    @click.argument("kind", type=kinds)
    @click.option("--gpu", type=int, default=None, help="gpu-unhealthy: which GPU (default 0).")
    def inject(node: str, kind: str, gpu: int | None) -> None:
        """Inject fault KIND on NODE."""
        with _client(f"inject fault {kind} on node {node}") as client:
            now = gpustack.set_fault(client, node, kind, gpu, True)
        click.echo(f"{node}: faults now {sorted(now.kinds) or 'none'}"
                   + (f", unhealthy GPUs {sorted(now.unhealthy)}" if now.unhealthy else ""))

    @fault.command()
    @click.argument("node")
    @click.argument("kind", type=kinds)
    @click.option("--gpu", type=int, default=None, help="gpu-unhealthy: which GPU (default: all).")
    def clear(node: str, kind: str, gpu: int | None) -> None:
        """Clear fault KIND on NODE."""
        with _client(f"clear fault {kind} on node {node}") as client:
            now = gpustack.set_fault(client, node, kind, gpu, False)
        click.echo(f"{node}: faults now {sorted(now.kinds) or 'none'}"
                   + (f", unhealthy GPUs {sorted(now.unhealthy)}" if now.unhealthy else ""))
