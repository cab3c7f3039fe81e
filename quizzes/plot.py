"""The instructor's chart: mean pre and post score per section, drawn with matplotlib's Agg backend.

matplotlib is optional (the ``course`` extra) and imported only here.
"""

from __future__ import annotations

from pathlib import Path

from quizzes import errors
from quizzes.report import ClassReport


def pre_post_chart(report: ClassReport, path: Path) -> None:
    """Write a grouped bar chart (PNG) of mean pre vs post score for every section."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot
    except ImportError as exc:
        raise errors.QuizError("drawing the chart needs matplotlib", hint="pip install 'gpulab[course]'") from exc
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
        figure.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, format="png", dpi=120)
    except OSError as exc:
        raise errors.QuizError(f"cannot write {path}: {exc.strerror or exc}") from exc
    finally:
        pyplot.close(figure)
