"""Print an ``Explanation`` for people (rich) or scripts (JSON); the explainer itself never prints."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from graders import explain
from graders.explain_messages import Point
from graders.render import json as json_render


def to_json(explanation: explain.Explanation) -> str:
    return json_render.dumps(explanation.to_dict())


def _read(point: Point) -> str:
    return f"[dim]read: {escape(point.section_title)} ({point.section})[/dim]"


def print_explanation(explanation: explain.Explanation, console: Console) -> None:
    console.print(f"[bold]{escape(explanation.summary.text)}[/bold]", soft_wrap=True)
    if explanation.evidence:
        console.print(f"  [dim]message:[/dim] “{escape(explanation.evidence)}”", soft_wrap=True)
    for verdict in explanation.nodes:
        head = f"  [bold]{escape(verdict.node)}[/bold] [dim](pool {escape(verdict.pool)})[/dim]"
        if verdict.fits:
            console.print(f"{head}  [green]✔ could take the pod[/green]", soft_wrap=True)
            continue
        console.print(head, soft_wrap=True)
        for i, reason in enumerate(verdict.reasons):
            mark = "[red]✘[/red]" if i == 0 else "[yellow]·[/yellow]"
            maybe = " [yellow](inferred)[/yellow]" if not reason.certain else ""
            console.print(f"    {mark} {escape(reason.text)}{maybe}  {_read(reason)}", soft_wrap=True)
    for note in explanation.notes:
        console.print(f"  [cyan]•[/cyan] {escape(note.text)}  {_read(note)}", soft_wrap=True)
    if not explanation.nodes and not explanation.notes:
        console.print(f"  {_read(explanation.summary)}", soft_wrap=True)
