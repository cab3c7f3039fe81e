"""``gpulab lab list|audit|show|start|apply|predict|check|solve|reset|submit|stop`` and ``gpulab grade``.

``gpulab grade`` is for instructors' scripts; it replays each submission on a cluster of its own (see
``labs.replay``): exit code 0 whenever grading ran, whatever the learner scored;
1 (one message, no traceback) only when grading itself could not run. ``--json`` prints exactly
``{"lab", "passed", "score", "max_score", "checks": [{"id", "passed", "points", "message", "hint"}]}``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape

import labs
from cluster import errors
from graders import Report
from graders.render import json as json_render
from graders.render import terminal
from labs import audit, grading, predict, runtime
from labs.classroom import solutions
from labs.grader_cluster import GraderCluster


def register(cli: click.Group) -> None:
    cli.add_command(lab_group)
    cli.add_command(grade_command)


@click.group("lab")
def lab_group() -> None:
    """Graded hands-on labs on the lab cluster (start, check, solve, reset, submit)."""


@lab_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def list_cmd(as_json: bool) -> None:
    """The labs, in course order."""
    specs = [labs.get(i) for i in labs.list_labs()]
    if as_json:
        click.echo(json.dumps([{"id": s.id, "title": s.title, "module": s.module, "tasks": len(s.tasks),
                                "max_score": s.max_score} for s in specs], indent=2))
        return
    console = Console(highlight=False)
    for s in specs:
        console.print(f"[bold]{s.id}[/bold]  {escape(s.title)}  [dim]({s.module}, {len(s.tasks)} tasks, "
                      f"{s.max_score:g} points)[/dim]", soft_wrap=True)


@lab_group.command("audit")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def audit_cmd(as_json: bool) -> None:
    """Per lab: checks, share reading the cluster, share of points from answers.yaml, copies of module cells."""
    for lab_id in labs.list_labs():  # the audit reads every solution and names what a notebook shows of it
        solutions.require(labs.get(lab_id).directory, "gpulab lab audit")

    figs = audit.all_figures()
    if as_json:
        click.echo(json.dumps([{"lab": f.lab, "checks": f.checks, "live_checks": f.live_checks, "points": f.points,
                                "answer_points": f.answer_points, "notebooks": list(f.notebooks),
                                "problems": f.problems} for f in figs], indent=2))
        return
    console = Console(highlight=False)
    console.print(f"{'lab':28} {'checks':>6} {'live':>5} {'answers':>8}  (limit {audit.MAX_ANSWER_SHARE:.0%})",
                  soft_wrap=True)
    for f in figs:
        console.print(f"{f.lab:28} {f.checks:6d} {f.live_share:5.0%} {f.answer_share:8.0%}")
        for problem in f.problems:
            console.print(f"  [red]{escape(problem)}[/red]", soft_wrap=True)


@lab_group.command("show")
@click.argument("lab_id")
def show_cmd(lab_id: str) -> None:
    """The lab's tasks, instructions and files."""
    spec = labs.get(lab_id)
    console = Console(highlight=False)
    console.print(f"[bold]Lab {spec.id}: {escape(spec.title)}[/bold]\n{escape(spec.summary)}\n", soft_wrap=True)
    for i, task in enumerate(spec.tasks, 1):
        points = sum(c.points for c in task.checks)
        console.print(f"[bold]{i}. {escape(task.title)}[/bold] [dim]({points:g} points)[/dim]")
        console.print(escape(task.instructions.rstrip()), soft_wrap=True)
        console.print()


@lab_group.command("start")
@click.argument("lab_id")
@click.option("--dir", "workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where your files go (default ./gpulab-labs/LAB_ID, or $GPULAB_LABS_DIR/LAB_ID).")
@click.option("--fresh", is_flag=True, help="Start over: set the lab up again even if it is in progress, and replace "
                                            "your files with the starter files (yours are backed up).")
def start_cmd(lab_id: str, workdir: Path | None, fresh: bool) -> None:
    """Set the lab up on the cluster and copy its starter files; a lab in progress on the cluster is resumed."""
    lab = labs.start(lab_id, workdir=workdir, fresh=fresh)
    click.echo(f"lab {lab.id} is ready; your files are in {lab.workdir}")
    click.echo(f"read the tasks with `gpulab lab show {lab.id}`; check your work with `gpulab lab check {lab.id}`")


@lab_group.command("apply")
@click.argument("lab_id")
@click.argument("files", nargs=-1)
def apply_cmd(lab_id: str, files: tuple[str, ...]) -> None:
    """kubectl-apply your FILES (default: all the lab's manifests) from the lab folder."""
    results = labs.attach(lab_id).apply(*files)
    for r in results:
        click.echo(f"{'ok ' if r.ok else 'ERR'} {r.ref}: {r.message}")


@lab_group.command("predict")
@click.argument("lab_id")
@click.argument("key")
@click.argument("value")
def predict_cmd(lab_id: str, key: str, value: str) -> None:
    """Record your prediction KEY = VALUE before you look (the lab's prediction checks compare it)."""
    made = labs.attach(lab_id).predict(key, predict.value_of(value))
    click.echo(f"{made}; now look, then `gpulab lab check {lab_id}`")


@lab_group.command("check")
@click.argument("lab_id")
@click.option("--wait", default=5.0, show_default=True, help="Seconds to wait for the cluster to catch up.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def check_cmd(lab_id: str, wait: float, as_json: bool) -> None:
    """Check your files and the cluster; failed checks come with a hint."""
    report = labs.attach(lab_id).check(wait=wait)
    if as_json:
        sys.stdout.write(json_render.report(report))
    else:
        terminal.print_report(report, Console(highlight=False))


@lab_group.command("solve")
@click.argument("lab_id")
def solve_cmd(lab_id: str) -> None:
    """Write the solution files (yours are backed up) and do what the tasks ask (not for learners in class mode)."""
    solutions.require(labs.get(lab_id).directory, "gpulab lab solve")
    lab = labs.attach(lab_id)
    lab.solve()
    click.echo(f"lab {lab.id} solved; `gpulab lab check {lab.id}` should now pass")


@lab_group.command("reset")
@click.argument("lab_id")
def reset_cmd(lab_id: str) -> None:
    """Put the cluster and your files back to the lab's start (your files are backed up)."""
    lab = labs.attach(lab_id)
    lab.reset()
    click.echo(f"lab {lab.id} is back at its start; backups are in {lab.workdir / runtime.BACKUPS}")


@lab_group.command("stop")
@click.argument("lab_id")
def stop_cmd(lab_id: str) -> None:
    """Leave the lab: delete what it created on the cluster and turn the GPU settings back (files stay)."""
    lab = labs.attach(lab_id)
    lab.stop()
    click.echo(f"lab {lab.id} stopped; your files are still in {lab.workdir}")


@lab_group.command("submit")
@click.argument("lab_id")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the bundle (default: evidence.json in the lab folder).")
def submit_cmd(lab_id: str, out: Path | None) -> None:
    """Write the evidence bundle: your files and what the checks read from the cluster."""
    path = labs.attach(lab_id).submit(out)
    click.echo(str(path))


@click.command("grade")
@click.argument("lab_id")
@click.option("--submission", type=click.Path(path_type=Path), default=None,
              help="A folder with the learner's files (and evidence.json), or a bundle file.")
@click.option("--bundle", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The evidence bundle whose actions are replayed with the files.")
@click.option("--live", is_flag=True, help="Grade the cluster checks on the live lab cluster.")
@click.option("--static", is_flag=True, help="Grade only the checks on files (no cluster, nothing replayed).")
@click.option("--replay-on", "replay_on", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="Replay on this cluster (a kubeconfig) instead of starting the grader's own.")
@click.option("--batch", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="A folder with one submission per subfolder (or *.json bundles); writes a CSV.")
@click.option("--csv", "csv_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="--batch: where to write the CSV (default DIR/grades-LAB_ID.csv).")
@click.option("--time-limit", type=click.FloatRange(1, 3600), default=grading.DEFAULT_TIME_LIMIT_S, show_default=True,
              help="Seconds one submission may take.")
@click.option("--memory-limit", type=click.IntRange(128, 65536), default=grading.DEFAULT_MEMORY_LIMIT_MB,
              show_default=True, help="MiB of memory one submission may use.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def grade_command(lab_id: str, submission: Path | None, bundle: Path | None, live: bool, static: bool,
                  replay_on: Path | None, batch: Path | None, csv_path: Path | None, time_limit: float,
                  memory_limit: int, as_json: bool) -> None:
    """Grade a submission of LAB_ID.

    The cluster checks are graded by replaying the learner's work (files and the bundle's actions) on a
    cluster the grader owns, started once for the whole run; never from the cluster state a bundle records.
    --static grades only the checks on files; --live reads the lab cluster.
    """
    if (submission is None) == (batch is None):
        raise click.UsageError("give either --submission PATH or --batch DIR")
    if sum((live, static, replay_on is not None)) > 1:
        raise click.UsageError("choose one of --live, --static and --replay-on")
    if batch is not None:
        if bundle or live:
            raise click.UsageError("--bundle and --live apply to one --submission, not to --batch")
        with _grader(lab_id, static, replay_on) as cluster:
            _batch(lab_id, batch, csv_path, as_json, cluster, time_limit, memory_limit)
        return
    assert submission is not None
    budget = grading.Budget(time_limit, memory_limit)
    if live:
        report = _bounded(submission, lambda: labs.grade(lab_id, submission, bundle=bundle, live=True), budget)
    else:
        # An unknown lab or a submission that cannot be read is one message before any cluster starts.
        grading.read_submission(labs.get(lab_id), submission, bundle)
        with _grader(lab_id, static, replay_on) as cluster:
            report = _bounded(submission, functools.partial(_grade_on, lab_id, submission, bundle, cluster), budget)
    if as_json:
        sys.stdout.write(json_render.report(report))
    else:
        terminal.print_report(report, Console(highlight=False))


def _grade_on(lab_id: str, submission: Path, bundle: Path | None, cluster: GraderCluster | None) -> Report:
    """In the budget's child: the grader's client is made there (a client does not survive a fork)."""
    if cluster is None:
        return labs.grade(lab_id, submission, bundle=bundle)
    with cluster.client() as client:
        return labs.grade(lab_id, submission, bundle=bundle, replay=client)


def _bounded(submission: Path, work: Callable[[], Report], budget: grading.Budget) -> Report:
    row = grading.within_budget(submission.name, work, budget)
    if row.report is None:
        raise errors.CourseError(f"{submission}: not graded: {row.error}")
    return row.report


@contextlib.contextmanager
def _grader(lab_id: str, static: bool, replay_on: Path | None) -> Iterator[GraderCluster | None]:
    if static:
        yield None
        return
    with GraderCluster(labs.get(lab_id).fleet, kubeconfig=replay_on) as cluster:
        yield cluster


def _batch(lab_id: str, folder: Path, csv_path: Path | None, as_json: bool, cluster: GraderCluster | None,
           time_limit: float, memory_limit: int) -> None:
    result = grading.grade_batch(lab_id, folder, csv_path, replay=cluster.client if cluster else None,
                                 time_limit_s=time_limit, memory_limit_mb=memory_limit)
    graded = [r for r in result.rows if r.report is not None]
    passed = sum(1 for r in graded if r.report is not None and r.report.passed)
    mean = sum(r.report.score for r in graded if r.report is not None) / len(graded) if graded else 0.0
    if as_json:
        click.echo(json.dumps({
            "lab": result.lab, "submissions": len(result.rows), "graded": len(graded), "passed": passed,
            "broken": result.broken, "csv": str(result.csv_path), "per_second": round(result.rate, 1),
            "results": [{"submission": r.submission, "score": r.report.score if r.report else None,
                         "max_score": r.report.max_score if r.report else None,
                         "passed": r.report.passed if r.report else None, "error": r.error} for r in result.rows],
        }, indent=2, sort_keys=True))
        return
    click.echo(f"{result.lab}: {len(result.rows)} submissions in {result.elapsed_s:.2f} s "
               f"({result.rate:.1f}/s): {passed} full marks, {len(graded) - passed} partial, "
               f"{result.broken} could not be graded; mean score {mean:.2f}")
    for row in result.rows:
        if row.report is None:
            click.echo(f"  broken: {row.submission}: {row.error}")
    click.echo(f"CSV: {result.csv_path}")
