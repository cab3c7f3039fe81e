"""The instructor's charts, drawn with matplotlib's Agg backend: mean pre and post score per section, and the
item analysis (normalised gain per learning outcome; difficulty against discrimination per item).

matplotlib is optional (the ``course`` extra) and imported only here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from quizzes import errors
from quizzes.analysis import Analysis
from quizzes.report import ClassReport


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError as exc:
        raise errors.QuizError("drawing the chart needs matplotlib", hint="pip install 'gpulab[course]'") from exc
    return pyplot


def _save(figure: Any, path: Path) -> None:
    """Lay out and write one chart as PNG; a path that cannot be written is a QuizError, not a traceback."""
    try:
        figure.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, format="png", dpi=120)
    except OSError as exc:
        raise errors.QuizError(f"cannot write {path}: {exc.strerror or exc}") from exc


def pre_post_chart(report: ClassReport, path: Path) -> None:
    """Write a grouped bar chart (PNG) of mean pre vs post score for every section."""
    pyplot = _pyplot()
    sections = list(report.sections)
    labels = [s.section for s in sections]
    pre = [100 * (s.mean_pre or 0.0) for s in sections]
    post = [100 * (s.mean_post or 0.0) for s in sections]
    positions = list(range(len(sections)))
    width = 0.38
    figure, axes = pyplot.subplots(figsize=(max(6.0, 1.3 * len(sections) + 2), 4.5))
    try:
        axes.bar([p - width / 2 for p in positions], pre, width, label="pre", color="#9aa5b1")
        bars = axes.bar([p + width / 2 for p in positions], post, width, label="post", color="#2f6f9f")
        for bar, stat in zip(bars, sections):
            if stat.class_gain is not None:
                axes.annotate(f"g={stat.class_gain:+.2f}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                              ha="center", va="bottom", fontsize=8)  # fmt: skip
        axes.set_xticks(positions, labels, rotation=20, ha="right")
        axes.set_ylim(0, 110)
        axes.set_ylabel("mean score (%)")
        axes.set_title(f"Quiz scores before and after each section ({len(report.learners)} learners)")
        axes.legend(loc="upper left")
        _save(figure, path)
    finally:
        pyplot.close(figure)


def item_analysis_chart(analysis: Analysis, path: Path) -> None:
    """Write a PNG with two panels: class normalised gain per learning outcome (bars; hatched where the gain is
    undefined because the class already scored 100 % before), and each item's difficulty against its
    point-biserial discrimination (pre hollow, post filled; negative discrimination in red and labelled)."""
    pyplot = _pyplot()
    outcomes = list(analysis.outcomes)
    items = [i for i in analysis.items if i.responses and i.difficulty is not None]
    height = max(4.5, 0.32 * len(outcomes) + 1.5)
    figure, (left, right) = pyplot.subplots(1, 2, figsize=(14, height), gridspec_kw={"width_ratios": [1.1, 1]})
    try:
        labels = [f"{o.section}: {o.outcome}" for o in outcomes]
        values = [o.class_gain if o.class_gain is not None else 0.0 for o in outcomes]
        colours = ["#2f6f9f" if (o.class_gain or 0.0) >= 0 else "#c0392b" for o in outcomes]
        bars = left.barh(range(len(outcomes)), values, color=colours)
        for bar, o in zip(bars, outcomes):
            middle = bar.get_y() + bar.get_height() / 2
            if o.class_gain is None:
                bar.set_hatch("//")
                bar.set_fill(False)
                left.annotate(f"n/a (n={o.matched})", (0.01, middle), va="center", fontsize=7)
            else:
                left.annotate(f" {o.class_gain:+.2f} (n={o.matched})", (max(o.class_gain, 0.0), middle),
                              va="center", fontsize=7)  # fmt: skip
        left.set_yticks(range(len(outcomes)), labels, fontsize=7)
        left.invert_yaxis()
        left.axvline(0, color="#555555", linewidth=0.8)
        left.set_xlim(min(-0.2, *values, 0.0) - 0.05, 1.05)
        left.set_xlabel("class normalised gain (post - pre) / (1 - pre)")
        left.set_title("Gain per learning outcome")
        for phase, face in (("pre", "none"), ("post", "#2f6f9f")):
            chosen = [i for i in items if i.phase == phase and not i.negative and i.point_biserial is not None]
            right.scatter([i.difficulty for i in chosen], [i.point_biserial for i in chosen], s=28,
                          facecolors=face, edgecolors="#2f6f9f", label=f"{phase} item")  # fmt: skip
        flagged = [i for i in items if i.negative and i.point_biserial is not None]
        right.scatter([i.difficulty for i in flagged], [i.point_biserial for i in flagged], s=40, color="#c0392b",
                      label="negative discrimination")  # fmt: skip
        for i in flagged:
            right.annotate(i.item, (i.difficulty or 0.0, i.point_biserial or 0.0), fontsize=7,
                           xytext=(4, -8), textcoords="offset points", color="#c0392b")  # fmt: skip
        right.axhline(0, color="#555555", linewidth=0.8)
        right.axhline(0.2, color="#999999", linewidth=0.8, linestyle="--")
        right.axvspan(0.3, 0.9, color="#eeeeee", zorder=0)
        right.set_xlim(-0.02, 1.02)
        right.set_ylim(-1.05, 1.05)
        right.set_xlabel("difficulty (share of first attempts right)")
        right.set_ylabel("discrimination (point-biserial with the rest score)")
        shown = sum(1 for i in items if i.point_biserial is not None)
        right.set_title(f"Difficulty against discrimination ({shown} of {len(items)} answered items have an r)\n"
                        "shaded: difficulty 0.3-0.9; dashed: r = 0.2", fontsize=10)  # fmt: skip
        right.legend(loc="lower left", fontsize=8)
        _save(figure, path)
    finally:
        pyplot.close(figure)
