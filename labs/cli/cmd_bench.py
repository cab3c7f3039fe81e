"""``gpulab bench``: every speed and memory figure beside its target, as a table or one JSON document.

The benchmark reports; it does not judge the build. Exit code 0 when every section ran (targets met or not),
1 when a section failed (the JSON still comes out, with the failure in ``errors``).
"""

from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.table import Table

from labs.bench import suite
from labs.bench.figures import Report
from labs.cli.richprogress import RichProgress

_MET = {True: "[green]met[/]", False: "[red]MISSED[/]", None: "-"}


def print_report(report: Report, console: Console) -> None:
    table = Table("figure", "value", "target", "met?", "note", title="gpulab bench" + (" --quick" if report.quick
                                                                                       else ""),
                  title_justify="left")
    for f in report.figures:
        table.add_row(f.name, f.value_text(), f.target_text(), _MET[f.met], f.note)
    console.print(table)
    ref = Table("figure", "value", "source", "context",
                title="for comparison only: kind's figures, NOT MEASURED HERE", title_justify="left")
    for r in report.references:
        ref.add_row(r.name, "-" if r.value is None else f"{r.value:g} {r.unit}", r.source, r.note)
    console.print(ref)
    m = report.machine
    console.print(f"machine: {m.get('cpus')} CPU(s), Python {m.get('python')}, load average "
                  f"{m.get('load_average_1m')} at the start; {report.seconds:.0f} s in all")
    missed = report.missed()
    if missed:
        console.print("[red]targets missed:[/] " + "; ".join(f.name for f in missed))
    for e in report.errors:
        console.print(f"[red]error:[/] {e}")


def register(cli: click.Group) -> None:
    @cli.command("bench")
    @click.option("--quick", is_flag=True, help="Smaller fleets and fewer submissions (about a minute); "
                                                "the figure names say so.")
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON document instead of the table.")
    @click.option("--section", "sections", multiple=True, type=click.Choice(suite.SECTIONS),
                  help="Run only these sections (repeatable); default: all.")
    def bench(quick: bool, as_json: bool, sections: tuple[str, ...]) -> None:
        """Measure start-up, scale, reconcile, lab, grading and memory figures against their targets.

        Clusters are brought up in a temporary state dir and removed afterwards; your own cluster is not
        touched. Published kind figures are shown beside ours for comparison, marked as not measured here.
        """
        report = suite.run(quick, sections=sections or suite.SECTIONS, prog=RichProgress())
        if as_json:
            click.echo(report.dumps())
        else:
            console = Console()
            print_report(report, console if console.is_terminal else Console(width=200))
        if report.errors:
            sys.exit(1)
