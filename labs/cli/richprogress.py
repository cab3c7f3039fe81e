"""The terminal implementation of ``cluster.progress.Progress``: a rich progress bar on stderr."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn


class RichProgress:
    def __init__(self, console: Console | None = None) -> None:
        self._console = console or Console(stderr=True)
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._label = ""

    def start(self, task: str, total: float | None = None) -> None:
        self.finish()
        self._label = task
        self._bar = Progress(SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(),
                             TextColumn("{task.fields[detail]}"), TimeElapsedColumn(), console=self._console,
                             transient=False)
        self._bar.start()
        self._task = self._bar.add_task(task, total=total, detail="")

    def advance(self, amount: float = 1.0, *, detail: str | None = None) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, advance=amount, **({"detail": detail[-50:]} if detail else {}))

    def finish(self, message: str | None = None) -> None:
        if self._bar is not None and self._task is not None:
            total = self._bar.tasks[0].total
            self._bar.update(self._task, completed=total if total is not None else 1, total=total or 1,
                             detail=message or "done")
            self._bar.stop()
        self._bar, self._task = None, None
