"""``gpulab lint``: run every static rule on manifests and print findings for people or scripts.

Exit code 0 whenever linting ran, whatever it found (scripts read the JSON counts); 1 only when gpulab
itself could not run (for example an unusable ``--fleet``), as one message.
"""

from __future__ import annotations

import sys

import click
from rich.console import Console

from cluster import backends
from cluster.kube.client import Client
from graders import context, dryrun, lint
from graders.render import json as json_render
from graders.render import terminal


def register(cli: click.Group) -> None:
    cli.add_command(lint_command)


@click.command("lint")
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--fleet", "fleet_spec", default="starter", show_default=True, metavar="NAME|FILE",
              help="The fleet to check against: a built-in fleet name (starter, ...), a gpulab Fleet spec file, "
                   "or `kubectl get nodes -o json` output.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: findings, errors, warnings.")
@click.option("--no-cel", is_flag=True, help="Do not run the CEL compiler on DRA selectors (static checks still run).")
@click.option("--quiet", "-q", is_flag=True, help="Terminal output: hide information notes.")
@click.option("--list-rules", is_flag=True, help="List the rules and exit.")
@click.option("--server", is_flag=True,
              help="Also dry-run every object on the lab cluster (dryRun=All) and report the API server's own words.")
def lint_command(paths: tuple[str, ...], fleet_spec: str, as_json: bool, no_cel: bool, quiet: bool,
                 list_rules: bool, server: bool) -> None:
    """Check GPU manifests in PATHS (files or folders of *.yaml, *.yml, *.json).

    Every finding names the file and line, the rule, what is wrong (quoting the apiserver where it would
    refuse the manifest), a hint, and the course section to read.
    """
    console = Console(highlight=False)
    if list_rules:
        for rule_id, summary, keys in lint.rule_catalog():
            console.print(f"[bold]{rule_id}[/bold]  {summary}  [dim]({len(keys)} messages)[/dim]", soft_wrap=True)
        return
    if not paths:
        raise click.UsageError("give at least one file or folder to lint")
    fleet = context.resolve(fleet_spec)
    result = lint.lint_paths(list(paths), fleet, compile_cel=not no_cel)
    if server:
        with Client.from_kubeconfig(backends.current().kubeconfig()) as client:
            result = dryrun.with_server(result, client, list(paths))
    if as_json:
        sys.stdout.write(json_render.lint(result))
    else:
        terminal.print_lint(result, console, show_info=not quiet)
