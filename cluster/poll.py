"""The one polling loop: look, then look again until the answer is good enough, time is up, or nothing changes.

Lab checks retried against a live cluster (``Lab.check``), the grader's read-again of failing checks after a replay
(``labs.grading``), the replay's own waits (``labs.replay.settle``) and a live check's ``wait=`` (``graders.live``)
all settle through ``until``; they differ only in what they look at and when they stop. This module knows nothing
of clusters, checks or labs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["until"]

T = TypeVar("T")


def _never() -> bool:
    return False


def until(first: T, again: Callable[[T], T], done: Callable[[T], bool], *, wait: float, interval: float,
          changed: Callable[[T], str] | None = None, quiet: float = float("inf"),
          busy: Callable[[], bool] = _never) -> T:
    """Starting from ``first`` (a look already taken), look ``again`` every ``interval`` s until ``done`` holds,
    ``wait`` s have passed since the call, or, with ``changed`` (what the look watches, as text), that text has not
    changed for ``quiet`` s while nothing is ``busy``. Returns the last look; never raises on running out of time.

    The last sleep is cut short at the deadline, so one look is always taken at the end of the wait."""
    now = time.monotonic()
    deadline = now + max(0.0, wait)
    last: str | None = None
    quiet_since = now
    result = first
    while not done(result):
        now = time.monotonic()
        if now >= deadline:
            break
        if changed is not None:
            seen = changed(result)
            if seen != last:
                last, quiet_since = seen, now
            elif now - quiet_since >= quiet and not busy():
                break
        time.sleep(min(interval, deadline - now))
        result = again(result)
    return result
