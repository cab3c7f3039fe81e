"""The course notebooks' saved outputs: made from a real run, and checked against what the cells print today.

A notebook reads well without a cluster only when every code cell shows what it prints. ``execute`` runs a
notebook headless (nbclient) against a started lab cluster; ``write`` saves its outputs into the course file;
``drift`` compares the saved outputs with a fresh run's and names every cell whose output changed.

What a run cannot repeat is masked before comparing, never the substance: terminal colour codes, rollout
progress lines, the width of table rules, ages (``12s``, ``3m4s``), times and
dates, UIDs, resourceVersions, loopback ports, temporary paths, the random suffixes Kubernetes gives pod names,
measured durations, and widget model ids. Images are compared by kind (a figure is still drawn), not pixel by
pixel, since fonts and anti-aliasing differ between machines. A widget's view is compared by kind too, but its text
and HTML forms are what a learner reads on opening the notebook before running it (``quizzes.saved_view``), so
they are compared like any output, and ``write`` refuses an output that would show a widget's repr there. A cell tagged ``gpulab-volatile`` shows a moment of
a transition (operand pods restarting after a fault) and is compared by the kinds of its outputs only.
``gpulab course outputs`` writes and checks; ``tests/notebooks/test_execute.py`` runs the check in CI, where one
or two drifted cells in a notebook are reported and more fail (``RACES_TOLERATED``).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import re
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster import settings

COURSE = Path(__file__).resolve().parent.parent / "course"
# A cell tagged so shows a moment of a transition (operand pods restarting after a fault): its saved output is
# what one run saw, and a fresh run is compared with it by the kinds of output only.
VOLATILE_TAG = "gpulab-volatile"
# Two runs of the course still differ in a cell or two by chance (the scheduler choosing between equal nodes, a
# GPU running out of memory a moment sooner). The check fails when the code differs from the saved notebook's, or
# when more cells than this drift in one notebook (stale outputs change many); fewer are reported, not failed.
RACES_TOLERATED = 2
CELL_TIMEOUT_S = 300
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
VOLATILE_MIMES = (WIDGET_VIEW,)
# ipywidgets' own text form of a widget, its repr: `VBox(children=(HTML(value='<style>...`, `Output()`.
_WIDGET_REPR = re.compile(r"^[A-Z]\w*\((?:\w+=|\))")
IMAGE_MIMES = ("image/png", "image/jpeg", "image/svg+xml")

_MASKS: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p), r) for p, r in (
    (r"\x1b\[[0-9;?]*[A-Za-z]", ""),
    (r"(running\s*│\s*)\d+", r"\1<pid>"),
    (r"[━─═]+", "━"),  # table rules: their width follows the widest cell (a pid, an age)
    (r"(?m)^Waiting for (?:deployment|daemon set|statefulset|rollout) .*\n?", ""),
    (r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", "<uid>"),
    (r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?", "<time>"),
    (r"\b\d{1,2}:\d{2}:\d{2}(?:\.\d+)?\b", "<time>"),
    (r"\b\d{4}-\d{2}-\d{2}\b", "<date>"),
    (r"(?m)^([IWEF])\d{4} <time>", r"\1<mmdd> <time>"),  # klog's header: severity, month and day, then the time
    (r"(?:/tmp|/var/tmp|/private/var)/[^\s'\"<>:]*", "<tmp>"),
    (r"\b(?:127\.0\.0\.1|localhost):\d{2,5}\b", "<loopback>"),
    (r"(?i)\bresourceVersion[\"']?\s*[:=]\s*[\"']?\d+[\"']?", "resourceVersion: <rv>"),
    (r"\b(?P<base>[a-z0-9]([-a-z0-9]*[a-z0-9])?)-[bcdfghjklmnpqrstvwxz2456789]{5}\b", r"\g<base>-<sfx>"),
    (r"\b\d{1,3}(?:\.\d{1,3}){3}\b", "<ip>"),
    (r"(?<![\w.-])\d+(?:\.\d+)?\s?(?:ms|µs|us|s|sec|seconds|min|minutes)(?![\w-])", "<dur>"),
    (r"(?<![\w.-])(?:\d+d)?(?:\d+h)?(?:\d+m)?\d+[smhd](?:\d+[smh])?(?![\w-])", "<dur>"),
    (r"model_id[\"']?\s*:\s*[\"'][0-9a-f]{32}[\"']", "model_id: <id>"),
    (r"[ \t]+", " "),
))


def mask(text: str) -> str:
    """``text`` with what a second run could not repeat replaced by placeholders."""
    for pattern, repl in _MASKS:
        text = pattern.sub(repl, text)
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def comparable(output: dict[str, Any]) -> Any:
    """One output as the check compares it."""
    kind = output.get("output_type")
    if kind == "stream":
        return ["stream", output.get("name"), mask(_text(output.get("text", "")))]
    if kind == "error":
        return ["error", output.get("ename"), mask(str(output.get("evalue", "")))]
    data = output.get("data", {})
    shown: dict[str, Any] = {}
    for mime, value in sorted(data.items()):
        if mime in IMAGE_MIMES or mime in VOLATILE_MIMES:
            shown[mime] = "<present>"
        elif mime.endswith("json") and not isinstance(value, str):
            shown[mime] = mask(json.dumps(value, sort_keys=True))
        else:
            shown[mime] = mask(_text(value))
    return ["display", shown]


def _merged(outputs: Iterable[dict[str, Any]]) -> list[Any]:
    """Comparable outputs with consecutive stream chunks of one stream joined (how they split is chance)."""
    out: list[Any] = []
    for o in outputs:
        item = comparable(o)
        if item[0] == "stream" and out and out[-1][0] == "stream" and out[-1][1] == item[1]:
            out[-1] = ["stream", item[1], mask(out[-1][2] + "\n" + item[2])]
        else:
            out.append(item)
    return out


@dataclass(frozen=True)
class Drift:
    """A code cell whose saved output is not what it prints now."""

    notebook: str
    cell: int  # index among all cells
    saved: str
    now: str

    def __str__(self) -> str:
        return f"{self.notebook} cell {self.cell}: saved output\n{self.saved[:600]}\n--- but it now prints\n{self.now[:600]}"


def _code_cells(nb: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    return [(i, c) for i, c in enumerate(nb["cells"]) if c.get("cell_type") == "code"]


def drift(name: str, saved: dict[str, Any], fresh: dict[str, Any]) -> list[Drift]:
    """Every code cell whose (masked) outputs differ between the saved notebook and a fresh run of it."""
    a, b = _code_cells(saved), _code_cells(fresh)
    if [_text(c["source"]) for _, c in a] != [_text(c["source"]) for _, c in b]:
        return [Drift(name, -1, "the saved notebook's code", "differs from the notebook that ran")]
    out = []
    for (i, old), (_, new) in zip(a, b):
        x, y = _merged(old.get("outputs", [])), _merged(new.get("outputs", []))
        if VOLATILE_TAG in (old.get("metadata") or {}).get("tags", []):
            x, y = [o[:2] for o in x], [o[:2] for o in y]
        if x != y:
            out.append(Drift(name, i, json.dumps(x, indent=1), json.dumps(y, indent=1)))
    return out


def execute(path: Path, workdir: Path, env: dict[str, str], *, timeout: int = CELL_TIMEOUT_S) -> tuple[Any, float]:
    """Run ``path`` headless in ``workdir`` with a kernel whose environment is ``env`` (``course_run``)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(str(path), as_version=4)  # type: ignore[no-untyped-call]
    workdir.mkdir(parents=True, exist_ok=True)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", store_widget_state=True,
                            resources={"metadata": {"path": str(workdir)}})
    started = time.monotonic()
    client.execute(env=env)
    return nb, time.monotonic() - started


def write(path: Path, executed: Any) -> None:
    """Save ``executed``'s outputs into the course notebook at ``path`` (its sources must be the same)."""
    import nbformat

    current = nbformat.read(str(path), as_version=4)  # type: ignore[no-untyped-call]
    if [c.source for c in current.cells] != [c.source for c in executed.cells]:
        raise ValueError(f"{path.name} changed while it ran; run again")
    for index, (cell, ran) in enumerate(zip(current.cells, executed.cells)):
        if cell.cell_type == "code":
            shows_repr = [o for o in ran.outputs if widget_repr_shown(o)]
            if shows_repr:
                raise ValueError(f"{path.name} cell {index}: a widget's saved text is its repr "
                                 f"({_text(shows_repr[0]['data']['text/plain'])[:60]!r}); give the object it "
                                 "displays a _repr_mimebundle_ with a fallback (quizzes.saved_view)")
            cell.outputs = [_clean(o) for o in ran.outputs]
            cell.execution_count = ran.execution_count
            cell.metadata.pop("execution", None)
    widgets = executed.metadata.get("widgets")
    if widgets:
        current.metadata["widgets"] = copy.deepcopy(widgets)
    nbformat.write(current, str(path))  # type: ignore[no-untyped-call]


def widget_repr_shown(output: dict[str, Any]) -> bool:
    """Whether ``output`` is a widget whose text form, what a notebook not drawing the widget shows, is
    ipywidgets' repr rather than a fallback written for people."""
    data = output.get("data") or {}
    return WIDGET_VIEW in data and bool(_WIDGET_REPR.match(_text(data.get("text/plain", ""))))


def _clean(output: Any) -> Any:
    """An output as saved: as it ran (display outputs keep their ``metadata``, which the format requires)."""
    out = copy.deepcopy(output)
    if out.get("output_type") in ("display_data", "execute_result"):
        out.setdefault("metadata", {})
    return out


LEARNER = "notebook-outputs"  # fixed, so quiz shuffles (seeded by learner) repeat


def run_settings(root: Path, learner: str = LEARNER) -> settings.Settings:
    """State root, labs folder and quiz store of one run of the course; the kernels get them as environment."""
    return dataclasses.replace(settings.current(), state_dir=root / "state", labs_dir=root / "labs",
                               quiz_db=root / "quiz-answers.sqlite3", learner=learner)


@contextlib.contextmanager
def course_run(root: Path | None = None, learner: str = LEARNER) -> Iterator[tuple[Path, dict[str, str]]]:
    """(working folder, kernel environment) for running the course in order as a learner would: the first
    notebook brings the lab cluster up itself (``gpulab("up")``), in a private state root that is purged at the
    end, with a private quiz store and labs folder."""
    from cluster.backends.local import LocalBackend

    with contextlib.ExitStack() as stack:
        base = root or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gpulab-nb-")))
        chosen = run_settings(base, learner)
        env = chosen.environ()
        env.pop("KUBECONFIG", None)  # the notebooks find the cluster through the state root, not the caller's
        try:
            yield base / "work", env
        finally:
            LocalBackend("gpulab", chosen.state_dir or base / "state").down(purge=True)


def notebooks(course: Path = COURSE) -> list[Path]:
    return sorted(course.glob("[0-9][0-9]*-*.ipynb")) if course.is_dir() else []
