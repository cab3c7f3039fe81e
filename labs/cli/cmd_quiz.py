"""``gpulab quiz``: list and validate quiz banks, and report learning gains over collected answer stores.

This is the boundary where the stand-alone ``quizzes`` package's errors become the course's ``CourseError``s,
so the CLI prints one message and exits 1 instead of a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import click

from cluster import errors as course_errors

import quizzes
from quizzes import analysis, bank, bankcheck, collect, coverage, errors, model, plot, render, report, validate

log = logging.getLogger(__name__)
COURSE_OUTCOMES = Path(__file__).resolve().parents[2] / "course" / "outcomes.yaml"
DEFAULT_PLOT = Path("quiz-report.png")
DEFAULT_ITEM_PLOT = Path("quiz-item-analysis.png")


def register(cli: click.Group) -> None:
    cli.add_command(quiz)


@contextmanager
def _course_errors() -> Iterator[None]:
    """Map quiz failures into the course-wide hierarchy (one message, exit code 1)."""
    try:
        yield
    except errors.BankError as exc:
        raise course_errors.ConfigError(exc.source, exc.problems, hint=exc.hint) from exc
    except errors.QuizError as exc:
        raise course_errors.CourseError(exc.message, hint=exc.hint) from exc


@click.group()
def quiz() -> None:
    """Quiz banks, their validation, and learning-gain reports."""


@quiz.command("list")
def list_banks() -> None:
    """List the built-in quiz banks with their item counts per phase."""
    with _course_errors():
        banks = quizzes.builtin_banks()
    rows = []
    for b in banks:
        policy = b.policy("post")
        rows.append([b.section, str(b.version), str(len(b.outcomes)), str(len(b.items_for("pre"))),
                     str(len(b.items_for("post"))), f"{policy.max_attempts} ({policy.counts.value})", b.title])  # fmt: skip
    click.echo(render.table(["section", "version", "outcomes", "pre items", "post items", "post attempts", "title"],
                            rows, left=(0, 6)))  # fmt: skip
    click.echo(f"\n{sum(len(b.items) for b in banks)} items in {len(banks)} banks; "
               f"show one with quizzes.show('<section>', phase='pre') in a notebook")  # fmt: skip


@quiz.command("validate")
@click.argument("files", nargs=-1, type=click.Path(path_type=Path))
def validate_banks(files: tuple[Path, ...]) -> None:
    """Check quiz bank files (default: the built-in banks and the seed coverage list).

    Every problem of every file is reported, each with its path in the file. Each bank also gets the bank
    check (quizzes.bankcheck): its figures are printed, and a bank a test-wise learner could pass without
    knowing the subject fails.
    """
    chosen = list(files) or bank.bank_paths()
    problems: list[str] = []
    loaded: list[model.Bank] = []
    for path in chosen:
        with _course_errors():
            found, issues = _problems(path)
        checked = bankcheck.check(found) if found is not None else None
        if found is not None and checked is not None and not issues:
            loaded.append(found)
            status = "ok" if checked.passed else "cued"
            broken = f"; bank check: {len(checked.failures)} rule(s) broken" if checked.failures else ""
            click.echo(f"{status:<7} {path} ({len(found.items)} items: {len(found.items_for('pre'))} pre, "
                       f"{len(found.items_for('post'))} post{broken})")  # fmt: skip
        else:
            click.echo(f"invalid {path} ({len(issues)} problem(s))")
        problems += [f"{path}: {p}" for p in issues]
        if checked is not None:
            click.echo(bankcheck.text(checked))
            problems += [f"{path}: bank check {f.rule}: {f.message}" for f in checked.failures]
    problems += validate.check_all(loaded)
    if not files:
        with _course_errors():
            questions = coverage.load()
        gaps = coverage.check(questions, loaded)
        problems += [f"{coverage.COVERAGE_FILE}: {p}" for p in gaps]
        click.echo(f"{'ok' if not gaps else 'invalid':<7} {coverage.COVERAGE_FILE} ({len(questions)} seed questions)")
        problems += _course_outcomes(loaded)
    if problems:
        raise course_errors.ConfigError("the set of quiz banks", problems, hint="fix the fields named above and run "
                                        "gpulab quiz validate again")  # fmt: skip


def _course_outcomes(banks: Sequence[model.Bank]) -> list[str]:
    """Rule 6 of the bank check over the course's learning outcomes (``kind: outcome`` in course/outcomes.yaml)."""
    if not COURSE_OUTCOMES.is_file():
        return []  # an installed package without the course folder has only the banks' own outcomes
    with _course_errors():
        doc = bank.read_yaml(COURSE_OUTCOMES)
    mapped: dict[str, list[str]] = {}
    seeds = doc.get("seeds") if isinstance(doc, dict) else None
    for seed in seeds if isinstance(seeds, list) else []:
        entries = seed.get("entries") if isinstance(seed, dict) else None
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and entry.get("kind") == "outcome" and isinstance(entry.get("quiz"), list):
                mapped[str(entry.get("id"))] = [str(i) for i in entry["quiz"]]
    gaps = bankcheck.course_outcome_gaps(mapped, banks)
    click.echo(f"{'ok' if not gaps else 'invalid':<7} {COURSE_OUTCOMES} ({len(mapped)} learning outcomes, "
               f"{len(mapped) - len(gaps)} with a pre and a post item)")  # fmt: skip
    return [f"{COURSE_OUTCOMES}: bank check outcome-phases: {g}" for g in gaps]


def _problems(path: Path) -> tuple[model.Bank | None, list[str]]:
    try:
        return bank.problems_of(path)
    except errors.BankError as exc:  # unreadable or not YAML: still report it with the others
        return None, exc.problems


@quiz.command("report")
@click.argument("stores", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), help="Write per-section and per-item rows here.")
@click.option("--plot", "plot_path", type=click.Path(path_type=Path), is_flag=False, flag_value=DEFAULT_PLOT,
              help=f"Write a PNG chart of pre vs post here (--plot alone: {DEFAULT_PLOT}).")
@click.option("--item-plot", "item_plot_path", type=click.Path(path_type=Path), is_flag=False,
              flag_value=DEFAULT_ITEM_PLOT, help="Write the item-analysis PNG here: gain per learning outcome and "
              f"difficulty against discrimination per item (--item-plot alone: {DEFAULT_ITEM_PLOT}).")
@click.option("--bank", "bank_files", multiple=True, type=click.Path(path_type=Path),
              help="Use these bank files instead of the built-in banks (repeatable).")
@click.option("--learner", help="Show only this learner's pre score, post score and gain per section.")  # fmt: skip
def report_cmd(stores: tuple[Path, ...], csv_path: Path | None, plot_path: Path | None, item_plot_path: Path | None,
               bank_files: tuple[Path, ...], learner: str | None) -> None:  # fmt: skip
    """Aggregate learners' answer stores into per-section and per-item statistics.

    STORES are SQLite files written by the quiz widget, or folders searched for *.sqlite3 files (for example
    an nbgrader submitted/ folder). Every response is graded again from the bank. A store that cannot be read,
    malformed rows, and rows a store holds for a learner other than its owner are left out and reported at the
    end (exit code 1); the rest of the class is reported.
    """
    with _course_errors():
        banks = bank.load_banks(bank_files) if bank_files else list(quizzes.builtin_banks())
    paths = list(_expand(stores))
    collected = collect.collect(paths, banks)
    answers, skipped = list(collected.answers), collected.problems
    if not collected.readable:
        raise course_errors.ConfigError("the quiz stores given", skipped or [f"no *.sqlite3 file in {', '.join(map(str, stores))}"],
                                        hint="pass the quiz-answers.sqlite3 files collected from learners")  # fmt: skip
    if learner is not None:
        if learner not in {a.learner for a in answers}:
            raise course_errors.CourseError(f"no answers from learner '{learner}' in the stores given",
                                            hint="gpulab quiz report STORES... lists the learners found")  # fmt: skip
        click.echo(render.learner_text(report.learner_view(banks, answers, learner)))
        if skipped:
            raise course_errors.ConfigError("some quiz stores", skipped, hint="the view above leaves out what is "
                                            "listed here")  # fmt: skip
        return
    result = report.aggregate(banks, answers)
    items = analysis.analyse(banks, answers)
    click.echo(render.class_text(result, items))
    with _course_errors():
        if csv_path:
            render.write_csv(result, csv_path, items)
            click.echo(f"\nwrote {csv_path}")
        if plot_path or item_plot_path:
            if plot_path:
                plot.pre_post_chart(result, plot_path)
                click.echo(f"wrote {plot_path}")
            if item_plot_path:
                plot.item_analysis_chart(items, item_plot_path)
                click.echo(f"wrote {item_plot_path}")
    if skipped:
        raise course_errors.ConfigError("some quiz stores", skipped, hint="the report above leaves out what is "
                                        "listed here; the rest of each store counts")  # fmt: skip


def _expand(paths: Sequence[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            yield from sorted(path.rglob("*.sqlite3"))
        else:
            yield path
