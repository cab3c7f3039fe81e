"""``gpulab class``: a JupyterHub on one host where every learner's server runs the learner's own lab cluster.

``init`` and ``add-learner`` make the class folder and the system accounts (root), ``up`` serves the hub on
127.0.0.1, ``release`` and ``grade`` run the instructor's nbgrader loop as the instructor's account, and
``report`` prints per-learner lab scores and the class's quiz statistics. See docs/class-mode.md.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cluster import errors
from labs.classroom import accounts, layout, reportservice, runtime, singleuser, solutions

if TYPE_CHECKING:
    from labs.classroom import report as class_report

# The nbgrader loop, provisioning and the report (catalog, graders, quizzes: most of a second to import) load
# with their commands: ``class singleuser`` starts every learner's server and should not wait for them.

_DIR = click.option("--dir", "folder", default=None, help=f"The class folder (default: ${layout.ENV} or "
                    f"{layout.DEFAULT_DIR}).")
_PASSWORD = click.option("--password", envvar="GPULAB_CLASS_PASSWORD", default=None,
                         help="Set this login password (or $GPULAB_CLASS_PASSWORD); without it the account's "
                              "password is left as it is.")


def register(cli: click.Group) -> None:
    cli.add_command(class_group)


@click.group("class")
def class_group() -> None:
    """Class mode on one host: JupyterHub, one account and one lab cluster per learner, nbgrader across the class."""


@class_group.command("init")
@_DIR
@click.option("--instructor", required=True, help="The instructor's account (created if missing; the hub's admin).")
@_PASSWORD
@click.option("--port", default=8000, show_default=True, help="The hub's port on 127.0.0.1.")
@click.option("--cull-after", default=3600, show_default=True, help="Seconds idle before a server (and its lab "
              "cluster) is stopped.")
@click.option("--cull-every", default=300, show_default=True, help="How often the idle culler looks, in seconds.")
@click.option("--cluster-start", type=click.Choice(layout.CLUSTER_STARTS), default=layout.DEFAULT_CLUSTER_START,
              show_default=True, help="When a learner's lab cluster starts: when a lab first needs it (no cluster "
              "for a learner who only reads), or beside their server at login (a lab is ready a few seconds sooner).")
def init_cmd(folder: str | None, instructor: str, password: str | None, port: int, cull_after: int,
             cull_every: int, cluster_start: str) -> None:
    """Create the class folder, the hub's config, the exchange and the instructor's account and course folder."""
    from labs.classroom import provision

    cd = layout.ClassDir(layout.class_dir(folder))
    provision.init(cd, instructor, password, port=port, cull_after=cull_after, cull_every=cull_every,
                   cluster_start=cluster_start)
    click.echo(f"class folder {cd.root}; instructor {instructor} (course folder ~{instructor}/course)")
    click.echo(f"lab solutions withheld from learners (group {layout.INSTRUCTORS_GROUP}, no access for others): "
               + ", ".join(str(p) for p in solutions.protected()))
    click.echo(f"next: gpulab class add-learner NAME --dir {cd.root}, then gpulab class up --dir {cd.root}")


@class_group.command("add-learner")
@click.argument("names", nargs=-1, required=True)
@_DIR
@_PASSWORD
def add_learner_cmd(names: tuple[str, ...], folder: str | None, password: str | None) -> None:
    """Create learner accounts (private homes with the course notebooks); they can log in at once."""
    from labs.classroom import provision

    cd = layout.ClassDir(layout.class_dir(folder))
    for name in names:
        provision.add_learner(cd, name, password)
        click.echo(f"learner {name}: home {accounts.home(name)} (0700)")


@class_group.command("up")
@_DIR
def up_cmd(folder: str | None) -> None:
    """Serve the class's JupyterHub on 127.0.0.1 (in the foreground; Ctrl-C stops it and every server)."""
    cd = layout.ClassDir(layout.class_dir(folder))
    settings = cd.settings()
    accounts.require_root("gpulab class up")
    solutions.withhold()  # again: a git pull since class init may have brought a solution in, readable by all
    hub = Path(sys.executable).parent / "jupyterhub"
    click.echo(f"JupyterHub for {len(settings.learners)} learner(s) at http://127.0.0.1:{settings.port}/", err=True)
    os.chdir(cd.hub_state)
    os.execv(str(hub), [str(hub), "-f", str(cd.hub_config)])


@class_group.command("singleuser", hidden=True, context_settings={"ignore_unknown_options": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def singleuser_cmd(args: tuple[str, ...]) -> None:
    """(Started by the hub) a learner's Jupyter server; stops the learner's lab cluster when it stops."""
    sys.exit(singleuser.run(args))


def _as_instructor(cd: layout.ClassDir, argv: list[str]) -> None:
    """Run this gpulab command again as the instructor's account (root only), showing its output."""
    settings = cd.settings()
    bindir = runtime.bin_dir(cd.root)
    jupyter_path, project_config = runtime.jupyter_paths()
    env = {"JUPYTER_CONFIG_PATH": f"{cd.jupyter_config}:{project_config}", "JUPYTER_PATH": jupyter_path,
           "GPULAB_CACHE_DIR": str(cd.cache), "PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin"}
    proc = accounts.run_as(settings.instructor, [str(bindir / "gpulab"), "class", *argv,
                                                 "--dir", str(cd.root)], env=env, check=False)
    click.echo(proc.stdout, nl=False)
    click.echo(proc.stderr, nl=False, err=True)
    if proc.returncode != 0:
        sys.exit(proc.returncode)


def _course(cd: layout.ClassDir) -> Path:
    course = Path.home() / "course"
    if not (course / "nbgrader_config.py").is_file():
        raise errors.ConfigError(str(course), ["is not the instructor's course folder"],
                                 hint=f"run this as the instructor ({cd.settings().instructor}) or as root")
    return course


@class_group.command("release")
@click.argument("lab_id")
@_DIR
def release_cmd(lab_id: str, folder: str | None) -> None:
    """Generate and release a lab's assignment to the class (as the instructor; root runs it as them)."""
    cd = layout.ClassDir(layout.class_dir(folder))
    if os.geteuid() == 0:
        return _as_instructor(cd, ["release", lab_id])
    from labs.classroom import loop

    released = loop.release(_course(cd), lab_id, lambda text: click.echo(f"... {text}"))
    click.echo(f"released {lab_id} ({', '.join(p.name for p in released.iterdir())}); learners fetch it from "
               "the Assignments tab")


@class_group.command("grade")
@click.argument("lab_id")
@_DIR
def grade_cmd(lab_id: str, folder: str | None) -> None:
    """Collect, grade by replay on the instructor's own cluster, flag similar submissions, release feedback."""
    cd = layout.ClassDir(layout.class_dir(folder))
    if os.geteuid() == 0:
        return _as_instructor(cd, ["grade", lab_id])
    from labs.classroom import loop, similarity

    course = _course(cd)
    graded = loop.grade(course, lab_id, lambda text: click.echo(f"... {text}"))
    for g in graded:
        got = sum(g.tasks.values())
        click.echo(f"{g.student}: {got:g} points" + (f" ({g.error})" if g.error else ""))
    found = similarity.load(course, lab_id)
    if found is not None:
        click.echo("\n".join([*similarity.describe(found), f"  details: {similarity.path(course, lab_id)}"]))
    click.echo(f"feedback released for {len(graded)} learner(s)")


def report_text(rep: class_report.ClassReport) -> str:
    from quizzes import render as quiz_render

    headers = ["learner", *rep.labs, "total"]
    rows = [[r.learner, *("-" if s.score is None else f"{s.score:g}/{s.max_score:g}" for s in r.labs),
             f"{r.total:g}"] for r in rep.rows]
    parts = [f"Class of {len(rep.learners)} learner(s); labs graded: {', '.join(rep.labs) or 'none yet'}",
             quiz_render.table(headers, rows), "",
             f"Quizzes: {rep.stores_found} answer store(s) found",
             quiz_render.class_text(rep.quiz, rep.items)]
    if rep.quiz_problems:
        parts += ["", "Left out of the quiz report:", *(f"  - {p}" for p in rep.quiz_problems)]
    return "\n".join(parts)


@class_group.command("report-service", hidden=True)
@_DIR
def report_service_cmd(folder: str | None) -> None:
    """(Started by the hub) the class report as a page for the hub's admins: /services/class-report/."""
    cd = layout.ClassDir(layout.class_dir(folder))
    from labs.classroom import report as class_report

    reportservice.serve(lambda: report_text(class_report.build(cd)))


@class_group.command("report")
@_DIR
def report_cmd(folder: str | None) -> None:
    """Per learner and per lab scores (gradebook) and quiz gains and item statistics (every learner's store)."""
    from labs.classroom import report as class_report

    cd = layout.ClassDir(layout.class_dir(folder))
    click.echo(report_text(class_report.build(cd)))
