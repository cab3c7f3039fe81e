"""The terminal implementation of ``cluster.progress.Progress``: a rich progress bar on stderr."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn


class RichProgress:
    def __init__(self, console: Console | None = None) -> None:
        self._console = console or Console(stderr=True)
        # A live bar only where someone watches it redraw: not in logs, CI or a notebook's saved output
        # (labs.shell runs gpulab with TTY_INTERACTIVE=0, which rich honours; colours stay).
        self._live = self._console.is_terminal and self._console.is_interactive
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._label = ""
        self._plain_total: float | None = None
        self._plain_done = 0.0
        self._plain_next = 0.1

    def start(self, task: str, total: float | None = None) -> None:
        self.finish()
        self._label = task
        if not self._live:
            # Logs and CI: plain lines, one per 10 % (or per detail when the total is unknown).
            self._plain_total, self._plain_done, self._plain_next = total, 0.0, 0.1
            self._console.print(f">> {task}" + (f" ({total:.0f} steps)" if total else ""), highlight=False)
            return
        self._bar = Progress(SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(),
                             TextColumn("{task.fields[detail]}"), TimeElapsedColumn(), console=self._console,
                             transient=False)
        self._bar.start()
        self._task = self._bar.add_task(task, total=total, detail="")

    def advance(self, amount: float = 1.0, *, detail: str | None = None) -> None:
        if not self._live:
            self._plain_done += amount
            total = self._plain_total
            if total and self._plain_done / total >= self._plain_next:
                self._console.print(f"   {self._label}: {min(100, 100 * self._plain_done / total):.0f}%"
                                    + (f" ({detail})" if detail else ""), highlight=False)
                self._plain_next += 0.1
            return
        if self._bar is not None and self._task is not None:
            if detail:
                self._bar.update(self._task, advance=amount, detail=detail[-50:])
            else:
                self._bar.update(self._task, advance=amount)

    def finish(self, message: str | None = None) -> None:
        if not self._live:
            if self._label:
                self._console.print(f"   {self._label}: {message or 'done'}", highlight=False)
            self._label = ""
            return
        if self._bar is not None and self._task is not None:
            total = self._bar.tasks[0].total
            self._bar.update(self._task, completed=total if total is not None else 1, total=total or 1,
                             detail=message or "done")
            self._bar.stop()
        self._bar, self._task = None, None
