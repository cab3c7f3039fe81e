"""A component that exits during start-up is reported with how it ended (exit code or signal)."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from cluster.supervisor import ProcessSpec, Supervisor


def _ended(sup: Supervisor, name: str) -> str:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        ended = sup.how_it_ended(name)
        if ended:
            return ended
        time.sleep(0.05)
    return ""


def test_exit_code_and_signal_are_reported(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path)
    sup.start(ProcessSpec("exits", (sys.executable, "-c", "import sys; sys.exit(3)")))
    assert _ended(sup, "exits") == "exit code 3"
    pid = sup.start(ProcessSpec("killed", (sys.executable, "-c", "import time; time.sleep(60)")))
    os.kill(pid, signal.SIGKILL)
    assert _ended(sup, "killed") == "killed by SIGKILL"


def test_nothing_to_say_for_a_running_or_unknown_process(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path)
    assert sup.how_it_ended("never-started") == ""
    sup.start(ProcessSpec("sleeper", (sys.executable, "-c", "import time; time.sleep(60)")))
    try:
        assert sup.how_it_ended("sleeper") == ""
    finally:
        sup.stop("sleeper")
