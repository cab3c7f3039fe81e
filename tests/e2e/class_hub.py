"""The class-mode tests' class: ``labs.classroom.trial.temporary_class`` (real accounts, the real hub and proxy),
after checking what it needs; without it the tests skip on a developer machine and fail under CI."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from prerequisites import require

from cluster import binaries
from labs.classroom import hubconfig, trial

CHROMIUM = os.environ.get("GPULAB_CHROMIUM", "/usr/bin/chromium")
Hub = trial.TrialClass


def prerequisites(browser: bool) -> None:
    require(os.geteuid() == 0, "class mode makes system accounts and runs servers as them: run the tests as root")
    require(binaries.cached() is not None, "control-plane binaries are missing; run: gpulab binaries ensure")
    try:
        hubconfig.proxy_command()
    except Exception as exc:  # noqa: BLE001
        require(False, f"configurable-http-proxy is missing ({exc}); run: make proxy")
    if browser:
        require(Path(CHROMIUM).is_file(), f"Chromium not found at {CHROMIUM}; apt-get install chromium")


@contextmanager
def running_class(root: Path, prefix: str, learners: int, *, cull_after: int = 3600, cull_every: int = 300,
                  browser: bool = False) -> Iterator[Hub]:
    prerequisites(browser)
    with trial.temporary_class(root, prefix, learners, cull_after=cull_after, cull_every=cull_every) as hub:
        yield hub
