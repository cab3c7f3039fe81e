"""A small progress protocol so the library stays quiet: the CLI plugs in a rich bar, notebooks a widget."""

from __future__ import annotations

import logging
from typing import Protocol

log = logging.getLogger(__name__)


class Progress(Protocol):
    def start(self, task: str, total: float | None = None) -> None: ...

    def advance(self, amount: float = 1.0, *, detail: str | None = None) -> None: ...

    def finish(self, message: str | None = None) -> None: ...


class LogProgress:
    """Default: progress goes to the log at INFO level."""

    def __init__(self) -> None:
        self._task = ""
        self._done = 0.0

    def start(self, task: str, total: float | None = None) -> None:
        self._task, self._done = task, 0.0
        log.info("%s ...", task)

    def advance(self, amount: float = 1.0, *, detail: str | None = None) -> None:
        self._done += amount
        if detail:
            log.info("%s: %s", self._task, detail)

    def finish(self, message: str | None = None) -> None:
        log.info("%s: %s", self._task, message or "done")
