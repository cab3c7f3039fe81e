"""Turning report values into text: the terminal tables, the learner view, and the CSV file.

Nothing here computes a score; it only formats what ``quizzes.report`` returns.
"""

from __future__ import annotations

import csv
import html
from collections.abc import Sequence
from pathlib import Path

from quizzes import errors, wording
from quizzes.report import ClassReport, ItemStats, SectionResult

CSV_FIELDS = (
    "level", "section", "phase", "item", "outcome", "type", "learners", "responses", "mean_pre", "mean_post",
    "class_gain", "mean_learner_gain", "difficulty", "top_distractor", "choices",
)  # fmt: skip


def pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def gain(value: float | None) -> str:
    return "-" if value is None else f"{value:+.2f}"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, left: Sequence[int] = (0,)) -> str:
    """A plain, fixed-width text table; columns in ``left`` are left-aligned, the others right-aligned."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def section_table(report: ClassReport) -> str:
    rows = [[s.section, str(s.learners_pre), pct(s.mean_pre), str(s.learners_post), pct(s.mean_post),
             gain(s.class_gain), gain(s.mean_learner_gain)] for s in report.sections]  # fmt: skip
    return table(["section", "n pre", "pre", "n post", "post", "class gain", "mean gain"], rows)


def item_table(report: ClassReport, *, limit: int | None = None) -> str:
    """Items by difficulty, hardest first; ``choices`` shows how many learners picked each option."""
    answered = sorted((i for i in report.items if i.responses), key=lambda i: (i.difficulty or 0.0, i.item))
    chosen = answered[:limit] if limit else answered
    rows = [[i.item, i.phase, str(i.responses), pct(i.difficulty), i.top_distractor or "-", _choices(i)]
            for i in chosen]  # fmt: skip
    return table(["item", "phase", "n", "difficulty", "top distractor", "choices"], rows, left=(0, 1, 4, 5))


def class_text(report: ClassReport) -> str:
    parts = [
        f"{len(report.learners)} learner(s): {', '.join(report.learners) or 'none'}",
        "",
        "Per section (scores are mean shares of points; gain = (post - pre) / (1 - pre))",
        section_table(report),
        "",
        "Per item (difficulty = mean first-attempt score; lower is harder)",
        item_table(report),
    ]
    if report.unknown_items:
        parts += ["", f"note: {report.unknown_items} stored answer(s) belong to items no bank defines"]
    return "\n".join(parts)


def learner_text(results: Sequence[SectionResult]) -> str:
    rows = [[r.section, f"{pct(r.pre)} ({r.answered_pre}/{r.items_pre})", f"{pct(r.post)} ({r.answered_post}/"
             f"{r.items_post})", gain(r.gain)] for r in results]  # fmt: skip
    return table(["section", "pre (answered)", "post (answered)", "normalised gain"], rows)


def learner_html(results: Sequence[SectionResult]) -> str:
    head = "<tr><th>Section</th><th>Pre</th><th>Post</th><th>Normalised gain</th></tr>"
    body = "".join(f"<tr><td>{html.escape(r.title)}</td><td>{pct(r.pre)}</td><td>{pct(r.post)}</td>"
                   f"<td>{gain(r.gain)}</td></tr>" for r in results)  # fmt: skip
    return f"<table class='gpulab-quiz-results'><caption>{wording.RESULTS_CAPTION}</caption>{head}{body}</table>"


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> str:
    """A CSV cell a spreadsheet shows as text: a cell starting with = + - @ tab or CR (which Excel, LibreOffice
    and Google Sheets read as a formula) gets a leading apostrophe, unless it is a plain number such as -0.25.
    Learner ids and responses come from learners' stores, so any of them may be a formula.
    """
    text = "" if value is None else str(value)
    if text.startswith(_FORMULA_START) and not _is_number(text):
        return "'" + text
    return text


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return text.strip() == text and text.lower().lstrip("+-") not in ("nan", "inf", "infinity")


class _SafeWriter:
    """``csv.DictWriter`` whose every cell goes through ``csv_cell``."""

    def __init__(self, writer: csv.DictWriter[str]) -> None:
        self._writer = writer

    def writeheader(self) -> None:
        self._writer.writeheader()

    def writerow(self, row: dict[str, object]) -> None:
        self._writer.writerow({k: csv_cell(v) for k, v in row.items()})


def write_csv(report: ClassReport, path: Path) -> None:
    """One row per section (level=section) and per item and phase (level=item)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = _SafeWriter(csv.DictWriter(handle, fieldnames=CSV_FIELDS))
            writer.writeheader()
            for s in report.sections:
                writer.writerow({"level": "section", "section": s.section, "learners": s.matched,
                                 "mean_pre": _num(s.mean_pre), "mean_post": _num(s.mean_post),
                                 "class_gain": _num(s.class_gain), "mean_learner_gain": _num(s.mean_learner_gain)})  # fmt: skip
            for i in report.items:
                writer.writerow({"level": "item", "section": i.section, "phase": i.phase, "item": i.item,
                                 "outcome": i.outcome, "type": i.type, "responses": i.responses,
                                 "difficulty": _num(i.difficulty), "top_distractor": i.top_distractor,
                                 "choices": _choices(i)})  # fmt: skip
    except OSError as exc:
        raise errors.QuizError(f"cannot write {path}: {exc.strerror or exc}") from exc


def _choices(item: ItemStats) -> str:
    return " ".join(f"{k}={v}" for k, v in item.choices)


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"
