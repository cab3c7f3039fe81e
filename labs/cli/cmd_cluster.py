"""Cluster commands: up, down, status, kubeconfig, env, doctor, binaries, node heartbeat."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from cluster import backends, binaries, errors, fleet as fleet_mod, nvidiabuild, settings, versions
from cluster.backends import guard
from cluster.gpu import clusterpolicy_crd
from cluster.backends.base import ClusterStatus
from cluster.kube.client import Client
from labs.cli.richprogress import RichProgress

_KEY_LABELS = ("gpulab.dev/pool", "nvidia.com/gpu.product", "nvidia.com/gpu.count", "nvidia.com/gpu.memory",
               "nvidia.com/mig.capable", "nvidia.com/mig.config.state", "nvidia.com/gpu.replicas")


def _console() -> Console:
    """A console that does not squeeze tables to 80 columns when the output is a pipe or a notebook."""
    console = Console()
    return console if console.is_terminal else Console(width=160)


def _fleet(value: str | None) -> fleet_mod.Fleet | None:
    return fleet_mod.load(value) if value else None


def print_status(st: ClusterStatus, console: Console) -> None:
    console.print(f"[bold]backend[/] {st.backend}   [bold]api[/] {st.api_server or '-'}   "
                  f"[bold]fleet[/] {st.fleet or '-'}")
    if st.components:
        comp = Table("component", "state", "pid", title="components", title_justify="left")
        for c in st.components:
            where = f" ({c.detail})" if c.detail else ""
            comp.add_row(c.name, f"[green]running[/]{where}" if c.running else "[red]NOT RUNNING[/]", str(c.pid or "-"))
        console.print(comp)
    if st.nodes:
        table = Table("node", "ready", "cpu", "memory", "extended resources (capacity/allocatable)", "taints",
                      "labels", title="nodes", title_justify="left")
        for n in st.nodes:
            ext = "\n".join(f"{k}={n.capacity[k]}/{n.allocatable.get(k, '0')}" for k in sorted(n.capacity)
                            if "/" in k) or "-"
            labels = "\n".join(f"{k.split('/')[-1]}={n.labels[k]}" for k in _KEY_LABELS if k in n.labels)
            ready = "[green]Ready[/]" if n.ready else "[red]NotReady[/]"
            if not n.heartbeat:
                ready += " (heartbeat off)"
            table.add_row(n.name, ready, n.allocatable.get("cpu", ""), n.allocatable.get("memory", ""), ext,
                          "\n".join(n.taints) or "-", labels or "-")
        console.print(table)
    for p in st.problems:
        console.print(f"[red]problem:[/] {p}")


def register(cli: click.Group) -> None:
    @cli.command()
    @click.option("--backend", type=click.Choice(backends.NAMES), default=None,
                  help="local (default), kind (needs Docker), or attach (an existing cluster).")
    @click.option("--fleet", "fleet_name", default=None, help="Built-in fleet name or fleet YAML file (default: starter).")
    @click.option("--retain", is_flag=True, help="Keep a half-built cluster when bring-up fails (for debugging).")
    @click.option("--kubeconfig", "kubeconfig_path", default=None, help="attach: the kubeconfig to use.")
    @click.option("--context", default=None, help="attach: the kubeconfig context to use.")
    def up(backend: str | None, fleet_name: str | None, retain: bool, kubeconfig_path: str | None,
           context: str | None) -> None:
        """Start the lab cluster (a no-op when it is already up; restarts whatever died)."""
        fl = _fleet(fleet_name)
        if kubeconfig_path or context:
            if backend not in (None, "attach"):
                raise click.UsageError(f"--kubeconfig and --context belong to --backend attach, not {backend}")
            be = backends.attach(kubeconfig_path, context)
        else:
            be = backends.get(backend) if backend else backends.current()
        st = be.up(fl, RichProgress(), retain=retain)
        console = _console()
        print_status(st, console)
        console.print(f"\nkubeconfig: {be.kubeconfig()}\nuse it with:  eval \"$(gpulab env)\"")

    @cli.command()
    @click.option("--purge", is_flag=True, help="Also delete the cluster's state (etcd data, PKI, logs).")
    def down(purge: bool) -> None:
        """Stop the lab cluster."""
        be = backends.current()
        be.down(purge=purge)
        if be.name == "attach":
            click.echo("forgot the attached cluster's kubeconfig; the cluster itself was not touched")
        else:
            click.echo(f"{be.name} cluster stopped" + (" and its state deleted" if purge else ""))

    @cli.command()
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
    def status(as_json: bool) -> None:
        """Show components, nodes (readiness, capacity, allocatable, taints, key labels) and problems."""
        st = backends.current().status()
        if as_json:
            click.echo(st.to_json())
        else:
            print_status(st, _console())
        if not st.healthy:
            sys.exit(2)

    @cli.command("kubeconfig")
    @click.option("--tenant", default=None, metavar="NAMESPACE", help="A kubeconfig limited to this namespace.")
    def kubeconfig_cmd(tenant: str | None) -> None:
        """Print the path of the admin (or a tenant's) kubeconfig."""
        be = backends.current()
        click.echo(str(be.tenant_kubeconfig(tenant) if tenant else be.kubeconfig()))

    @cli.command()
    @click.option("--tenant", default=None, metavar="NAMESPACE")
    def env(tenant: str | None) -> None:
        """Print shell exports so kubectl talks to the lab cluster: eval "$(gpulab env)"."""
        be = backends.current()
        path = be.tenant_kubeconfig(tenant) if tenant else be.kubeconfig()
        lines = [f"export KUBECONFIG={shlex.quote(str(path))}"]
        found = binaries.cached()
        if found:
            lines.append(f"export PATH={shlex.quote(str(found.directory))}:\"$PATH\"")
        click.echo("\n".join(lines))

    @cli.command()
    def doctor() -> None:
        """What is present, what is missing, and the next command to run."""
        console = Console()
        table = Table("check", "state", "next step")
        go = shutil.which("go") or ("/usr/local/go/bin/go" if os.path.exists("/usr/local/go/bin/go") else None)
        found = binaries.cached()
        table.add_row("Python", sys.version.split()[0], "")
        table.add_row("Go (to build the binaries)", go or "[red]missing[/]",
                      "" if go or found else "install Go >= 1.26")
        for name in backends.NAMES:
            for check, state, step in backends.get(name).doctor():
                table.add_row(check, state, step)
        detection = backends.detect()
        table.add_row("backend", detection.backend.name, detection.explain())
        st = detection.backend.status()
        table.add_row(f"{st.backend} cluster", "[green]healthy[/]" if st.healthy else "; ".join(st.problems[:3]),
                      "" if st.healthy else "gpulab up")
        console.print(table)

    @cli.group("binaries")
    def binaries_group() -> None:
        """The pinned control-plane binaries (cache, download, or build from Go modules)."""

    @binaries_group.command("ensure")
    @click.option("--force", is_flag=True, help="Ignore the cache and fetch or build again.")
    @click.option("--source", "sources", multiple=True, type=click.Choice(binaries.SOURCES),
                  help="Restrict the sources tried (repeatable); default: cache, download, build.")
    def ensure(force: bool, sources: tuple[str, ...]) -> None:
        """Make sure the binaries are in the user cache; prints where they are."""
        found = binaries.ensure(RichProgress(), sources=sources or binaries.SOURCES, force=force)
        click.echo(f"{found.directory} (source: {found.source})")
        click.echo(backends.get("local").prepare(RichProgress()))

    @binaries_group.command("path")
    def path() -> None:
        """Print the binaries directory, or exit 1 when they are missing."""
        found = binaries.cached()
        if not found:
            raise errors.BinariesUnavailable("the binaries are not in the cache", hint="gpulab binaries ensure")
        click.echo(str(found.directory))

    @binaries_group.command("crd")
    @click.option("--check", is_flag=True, help="Compare with the committed CRD instead of printing; exit 1 if it differs.")
    def crd(check: bool) -> None:
        """Regenerate NVIDIA's ClusterPolicy CRD with the pinned controller-gen (needs Go and the module proxy).

        Prints the file to commit as cluster/gpu/crds/nvidia.com_clusterpolicies.yaml."""
        text = nvidiabuild.crd_header() + nvidiabuild.generate_clusterpolicy_crd(settings.cache_root(), RichProgress())
        if not check:
            click.echo(text, nl=False)
            return
        if text != clusterpolicy_crd.CRD_PATH.read_text():
            raise errors.ConfigError(str(clusterpolicy_crd.CRD_PATH), ["differs from what controller-gen generates"],
                                     hint="gpulab binaries crd > cluster/gpu/crds/nvidia.com_clusterpolicies.yaml")
        click.echo(f"{clusterpolicy_crd.CRD_PATH}: identical to controller-gen {versions.CONTROLLER_TOOLS_VERSION}'s output")

    @cli.group()
    def node() -> None:
        """Act on simulated nodes."""

    @node.command()
    @click.argument("name")
    @click.argument("state", type=click.Choice(["on", "off"]))
    def heartbeat(name: str, state: str) -> None:
        """Stop or resume a simulated node's kubelet heartbeat (NotReady comes from the node lifecycle controller)."""
        be = backends.current()
        guard.refuse_if_attach(be, f"turn the heartbeat of node {name} {state} (an annotation on the node)")
        with Client.from_kubeconfig(be.kubeconfig()) as client:
            value = None if state == "on" else "stopped"
            client.patch(f"/api/v1/nodes/{name}", {"metadata": {"annotations": {"gpulab.dev/heartbeat": value}}})
        click.echo(f"heartbeat of {name}: {state}")

    @cli.command("logs")
    @click.argument("dest", type=click.Path(path_type=Path))
    def logs(dest: Path) -> None:
        """Copy every component's log into DEST."""
        files = backends.current().collect_logs(dest)
        click.echo(json.dumps([str(f) for f in files], indent=2))
