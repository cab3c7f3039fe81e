"""``gpulab course nbgrader-demo`` (the nbgrader round trip), ``nbgrader-sources``, ``outputs`` and ``trust``."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from cluster import errors
from labs import catalog, course_nbgrader as cn


def _course_dir(value: str | None) -> Path:
    path = Path(value) if value else cn.default_course_dir()
    if not (path / "nbgrader_config.py").is_file():
        raise errors.ConfigError(str(path), ["is not an nbgrader course folder (no nbgrader_config.py)"],
                                 hint="pass --course-dir pointing at course/nbgrader of a gpulab checkout")  # fmt: skip
    return path


def _verdict(results: list[cn.StudentResult]) -> list[str]:
    """What would make the demo a lie: a solved lab without full marks, a mistake without partial marks."""
    problems = []
    for r in results:
        if r.student == cn.SOLVED and r.score != r.max_score:
            problems.append(f"{r.assignment}: the solved lab scored {r.score:g}/{r.max_score:g}, not full marks")
        if r.student == cn.WRONG and not 0 < r.score < r.max_score:
            problems.append(f"{r.assignment}: the submission with a mistake scored {r.score:g}/{r.max_score:g}, "
                            "not partial marks")  # fmt: skip
    return problems


def _print(results: list[cn.StudentResult], course_dir: Path, workdir: Path) -> None:
    console = Console(highlight=False)
    found = cn.mistakes(course_dir)
    table = Table("assignment", "student", "score", "per task", "feedback", title="nbgrader round trip",
                  title_justify="left")  # fmt: skip
    for r in results:
        tasks = ", ".join(f"{c.grade_id.removeprefix('task-')} {c.score:g}/{c.max_score:g}" for c in r.cells)
        colour = "green" if r.score == r.max_score else "yellow"
        table.add_row(r.assignment, r.student, f"[{colour}]{r.score:g}/{r.max_score:g}[/]", tasks,
                      str(r.feedback.relative_to(workdir)))  # fmt: skip
    console.print(table)
    for lab in dict.fromkeys(r.assignment for r in results):
        console.print(f"[dim]{cn.WRONG} in {lab}: {found[lab].about} ({found[lab].file})[/dim]")
    console.print(f"\ncourse copy, gradebook and feedback: {workdir}")


def register(cli: click.Group) -> None:
    cli.add_command(course_group)


@click.group("course")
def course_group() -> None:
    """The course's nbgrader assignments (one per lab)."""


@course_group.command("nbgrader-demo")
@click.option("--assignment", "assignments", multiple=True, metavar="LAB",
              help="Only these labs' assignments (repeatable); default: every lab.")
@click.option("--course-dir", default=None, help="The nbgrader course folder (default: course/nbgrader).")
@click.option("--workdir", default=None, help="Where to run it (default: a gpulab-nbgrader-demo temp folder).")
@click.option("--replay-on", "replay_on", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="Replay on this running cluster (a kubeconfig) instead of starting the grader's own.")
def demo_cmd(assignments: tuple[str, ...], course_dir: str | None, workdir: str | None,
             replay_on: Path | None) -> None:
    """generate_assignment -> a solved and a mistaken submission -> replay autograde -> generate_feedback."""
    source = _course_dir(course_dir)
    labs_wanted = list(assignments) or catalog.ids()
    for lab_id in labs_wanted:
        catalog.get(lab_id)
    target = Path(workdir) if workdir else Path(tempfile.gettempdir()) / "gpulab-nbgrader-demo"
    results = cn.round_trip(source, target, labs_wanted, lambda text: click.echo(f"... {text}"), replay_on=replay_on)
    _print(results, source, target)
    problems = _verdict(results)
    if problems:
        raise errors.CourseError("the round trip did not show full marks for solved labs and partial marks for "
                                 "mistakes:\n  " + "\n  ".join(problems))  # fmt: skip
    click.echo("solved labs got full marks; each submission with one mistake got partial marks")


@course_group.command("nbgrader-sources")
@click.argument("lab_ids", nargs=-1)
@click.option("--course-dir", default=None, help="The nbgrader course folder (default: course/nbgrader).")
def sources_cmd(lab_ids: tuple[str, ...], course_dir: str | None) -> None:
    """Rewrite source/<lab>/<lab>.ipynb from the lab specs (after a lab's tasks or points change)."""
    for path in cn.write_sources(_course_dir(course_dir), list(lab_ids) or None):
        click.echo(f"wrote {path}")


@course_group.command("trust")
@click.argument("folder", required=False, type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--data-dir", "store", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The Jupyter data folder whose signature store to write (default: this account's).")
def trust_cmd(folder: Path | None, store: Path | None) -> None:
    """Trust the course notebooks in FOLDER (default: the course's own) that are unchanged from the course's, so
    that JupyterLab draws their saved widgets before they run; a notebook that was changed is left untrusted."""
    from labs import nbtrust, nboutputs

    done = nbtrust.sign(folder or nboutputs.COURSE, store)
    click.echo(f"trusted {len(done.signed)} course notebook(s) for this account ({done.store / 'nbsignatures.db'})")
    for path in done.left:
        click.echo(f"left untrusted (not the course's own): {path}")


@course_group.command("outputs")
@click.option("--write", is_flag=True, help="Save each cell's outputs into the course notebooks.")
def outputs_cmd(write: bool) -> None:
    """Run every course notebook in order, as a learner would (the first brings a private cluster up); report where
    their saved outputs no longer match, or --write them."""
    from labs import nboutputs

    drifted: list[nboutputs.Drift] = []
    with nboutputs.course_run() as (work, env):
        for path in nboutputs.notebooks():
            try:
                ran, elapsed = nboutputs.execute(path, work, env)
            except Exception as exc:  # nbclient's CellExecutionError carries the cell and its traceback
                raise errors.CourseError(f"{path.name}: a cell failed: {str(exc)[-1500:]}",
                                         hint="fix the cell, then run gpulab course outputs again") from exc
            if write:
                nboutputs.write(path, ran)
            else:
                import json

                drifted.extend(nboutputs.drift(path.name, json.loads(path.read_text(encoding="utf-8")), ran))
            click.echo(f"{path.name}: ran in {elapsed:.0f} s{'; outputs saved' if write else ''}")
    for d in drifted:
        click.echo(str(d))
    if drifted:
        raise SystemExit(1)
