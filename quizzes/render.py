"""Turning report values into text: the terminal tables, the learner view, and the CSV file.

Nothing here computes a score; it only formats what ``quizzes.report`` returns.
"""

from __future__ import annotations

import csv
import html
from collections.abc import Sequence
from pathlib import Path

from quizzes import errors, wording
from quizzes.analysis import Analysis, ItemAnalysis
from quizzes.report import ClassReport, ItemStats, SectionResult

CSV_FIELDS = (
    "level", "section", "phase", "item", "outcome", "type", "learner", "learners", "responses", "mean_pre",
    "mean_post", "class_gain", "mean_learner_gain", "pre", "post", "gain", "difficulty", "point_biserial",
    "upper_lower", "negative_discrimination", "top_distractor", "distractors", "choices",
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


def ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:+.2f}"


def analysis_table(analysis: Analysis) -> str:
    """Item analysis, items with negative discrimination first, then in bank order."""
    answered = [i for i in analysis.items if i.responses]
    ordered = [i for i in answered if i.negative] + [i for i in answered if not i.negative]
    rows = [[i.item, i.phase, str(i.responses), pct(i.difficulty), ratio(i.point_biserial), ratio(i.upper_lower),
             "NEGATIVE" if i.negative else "", _distractors(i)] for i in ordered]  # fmt: skip
    return table(["item", "phase", "n", "difficulty", "r_pb", "D 27%", "flag", "distractors chosen"], rows,
                 left=(0, 1, 6, 7))  # fmt: skip


def outcome_table(analysis: Analysis) -> str:
    rows = [[o.section, o.outcome, str(o.matched), pct(o.mean_pre), pct(o.mean_post), gain(o.class_gain),
             gain(o.mean_learner_gain)] for o in analysis.outcomes]  # fmt: skip
    return table(["section", "outcome", "n", "pre", "post", "class gain", "mean gain"], rows, left=(0, 1))


def learner_table(analysis: Analysis) -> str:
    """One row per learner over every section they took before and after (``all``)."""
    rows = [[lg.learner, pct(lg.pre), pct(lg.post), gain(lg.gain)] for lg in analysis.learners if lg.section == "all"]
    return table(["learner", "pre", "post", "normalised gain"], rows)


def class_text(report: ClassReport, analysis: Analysis | None = None) -> str:
    parts = [
        f"{len(report.learners)} learner(s): {', '.join(report.learners) or 'none'}",
        "",
        "Per section (scores are mean shares of points; gain = (post - pre) / (1 - pre))",
        section_table(report),
    ]
    if analysis is None:
        parts += ["", "Per item (difficulty = mean first-attempt score; lower is harder)", item_table(report)]
    else:
        parts += [
            "",
            "Per item (difficulty = mean first-attempt score, lower is harder; r_pb = point-biserial with the rest\n"
            "of the quiz; D 27% = upper minus lower 27%; NEGATIVE = weaker learners did better: check the key\n"
            "and the wording)",
            analysis_table(analysis),
            "",
            "Per learning outcome (gain = (post - pre) / (100% - pre); '-' where pre is already 100%)",
            outcome_table(analysis),
            "",
            "Per learner (every section taken before and after)",
            learner_table(analysis),
        ]
        if analysis.flagged:
            parts += ["", f"{len(analysis.flagged)} item(s) with negative discrimination: "
                      + ", ".join(f"{i.item} ({i.phase})" for i in analysis.flagged)]  # fmt: skip
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


def write_csv(report: ClassReport, path: Path, analysis: Analysis | None = None) -> None:
    """One row per section (level=section) and per item and phase (level=item); with ``analysis`` also the
    item analysis on the item rows, one row per outcome (level=outcome) and per learner and section
    (level=learner, section ``all`` for the learner's overall gain)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = _SafeWriter(csv.DictWriter(handle, fieldnames=CSV_FIELDS))
            writer.writeheader()
            for s in report.sections:
                writer.writerow({"level": "section", "section": s.section, "learners": s.matched,
                                 "mean_pre": _num(s.mean_pre), "mean_post": _num(s.mean_post),
                                 "class_gain": _num(s.class_gain), "mean_learner_gain": _num(s.mean_learner_gain)})  # fmt: skip
            stats = {(a.section, a.phase, a.item): a for a in analysis.items} if analysis else {}
            for i in report.items:
                row: dict[str, object] = {
                    "level": "item", "section": i.section, "phase": i.phase, "item": i.item, "outcome": i.outcome,
                    "type": i.type, "responses": i.responses, "difficulty": _num(i.difficulty),
                    "top_distractor": i.top_distractor, "choices": _choices(i)}  # fmt: skip
                found = stats.get((i.section, i.phase, i.item))
                if found is not None:
                    row.update({"point_biserial": _num(found.point_biserial), "upper_lower": _num(found.upper_lower),
                                "negative_discrimination": int(found.negative), "distractors": _distractors(found)})  # fmt: skip
                writer.writerow(row)
            for o in analysis.outcomes if analysis else ():
                writer.writerow({"level": "outcome", "section": o.section, "outcome": o.outcome, "learners": o.matched,
                                 "mean_pre": _num(o.mean_pre), "mean_post": _num(o.mean_post),
                                 "class_gain": _num(o.class_gain), "mean_learner_gain": _num(o.mean_learner_gain)})  # fmt: skip
            for lg in analysis.learners if analysis else ():
                writer.writerow({"level": "learner", "section": lg.section, "learner": lg.learner, "pre": _num(lg.pre),
                                 "post": _num(lg.post), "gain": _num(lg.gain)})  # fmt: skip
    except OSError as exc:
        raise errors.QuizError(f"cannot write {path}: {exc.strerror or exc}") from exc


def _distractors(item: ItemAnalysis) -> str:
    return " ".join(f"{k}={v}" for k, v in item.distractors) or "-"


def _choices(item: ItemStats) -> str:
    return " ".join(f"{k}={v}" for k, v in item.choices)


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"
