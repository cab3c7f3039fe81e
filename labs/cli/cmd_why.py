"""``gpulab why POD``: why a pod is not running, node by node, in plain words with the section to study.

Reads the lab cluster (or an evidence bundle with ``--bundle``). Exit code 0 whenever it could explain; 1 only
when gpulab itself could not run (no cluster, an unusable bundle), as one message.
"""

from __future__ import annotations

import sys

import click
from rich.console import Console

from cluster import backends
from cluster.kube.client import Client
from graders import bundle, explain
from graders.render import explain as render
from graders.view import LiveView


def register(cli: click.Group) -> None:
    cli.add_command(why_command)


@click.command("why")
@click.argument("pod")
@click.option("-n", "--namespace", default="default", show_default=True, help="The pod's namespace.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
@click.option("--bundle", "bundle_path", type=click.Path(dir_okay=False), default=None,
              help="Explain from an evidence bundle instead of the running cluster.")
def why_command(pod: str, namespace: str, as_json: bool, bundle_path: str | None) -> None:
    """Explain why POD is Pending or failed: what each node lacks, and what to read."""
    if bundle_path:
        result = explain.explain_pod(bundle.load(bundle_path).view(), namespace, pod)
    else:
        with Client.from_kubeconfig(backends.current().kubeconfig()) as client:
            result = explain.explain_pod(LiveView(client), namespace, pod)
    if as_json:
        sys.stdout.write(render.to_json(result))
    else:
        render.print_explanation(result, Console(highlight=False))
