"""Class mode's figure: from a learner's login to a lab set up on the learner's own cluster, through the real hub.

A temporary class (``labs.classroom.trial``: accounts made and removed, the hub on a free loopback port) with one
learner: log in, the hub starts the server, a kernel runs ``labs.start`` and the learner's cluster starts on
first use. Measured twice: the first login (a new cluster, from the etcd seed) and a login after the server was
stopped (the cluster restarts from the learner's state), both with the cluster started when the lab first needs
it (the class's default); and the first login of a class whose clusters start beside the server at login
(``--cluster-start login``), for comparison.
Class mode needs root (system accounts, PAM); without
it the figure is not measured and says so.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from labs.bench.figures import Figure, not_measured
from labs.classroom import hubclient, trial

LAB = "01-device-plugins"
FIRST = "class mode: login to lab-ready, first login (new lab cluster)"
AGAIN = "class mode: login to lab-ready, after the server was stopped"
AT_LOGIN = "class mode: login to lab-ready, first login, cluster started at login"
TARGET_S = 10.0


def planned() -> list[Figure]:
    return [Figure(FIRST, None, "s", TARGET_S), Figure(AGAIN, None, "s", TARGET_S), Figure(AT_LOGIN, None, "s", None)]


async def _again(url: str, user: str, password: str) -> tuple[float, float, hubclient.Executed]:
    async with hubclient.HubSession(url, user, password) as hub:
        await hub.login()
        await hub.stop_server()
    started = time.monotonic()
    spawned, _ready, run = await hubclient.login_to_lab_ready(url, user, password, LAB)
    return spawned, time.monotonic() - started, run


def _first(root: Path, cluster_start: str) -> tuple[float, float, hubclient.Executed]:
    with trial.temporary_class(root / f"class-bench-{cluster_start}", "gplbench", 1,
                               cluster_start=cluster_start) as cls:
        spawned, ready, done = hubclient.login_to_lab_ready_sync(cls.url, cls.learners[0], cls.password, LAB)
        if done.status != "ok":
            raise TimeoutError(f"labs.start failed in the learner's kernel: {done.output[-500:]}")
        return spawned, ready, done


def run(root: Path, out: list[Figure]) -> None:
    if os.geteuid() != 0:
        reason = "needs root (class mode makes system accounts and logs in through PAM): sudo gpulab bench --section class"
        out += [not_measured(f.name, f.unit, reason, f.target) for f in planned()]
        return
    with trial.temporary_class(root / "class-bench", "gplbench", 1) as cls:  # cluster_start "first-use", the default
        user = cls.learners[0]
        spawned, ready, done = hubclient.login_to_lab_ready_sync(cls.url, user, cls.password, LAB)
        if done.status != "ok":
            raise TimeoutError(f"labs.start failed in the learner's kernel: {done.output[-500:]}")
        out.append(Figure(FIRST, round(ready, 2), "s", TARGET_S,
                          note=f"hub login, server started in {spawned:.2f} s, then labs.start({LAB!r}) in a new "
                               f"kernel took {done.seconds:.2f} s (starting the learner's starter-fleet cluster, "
                               "setting the lab up)"))
        spawned, again, run = asyncio.run(_again(cls.url, user, cls.password))
        if run.status != "ok":
            raise TimeoutError("labs.start failed in the learner's kernel after a restart")
        out.append(Figure(AGAIN, round(again, 2), "s", TARGET_S,
                          note=f"the server stopped (and the cluster with it), then login again: server in "
                               f"{spawned:.2f} s, labs.start {run.seconds:.2f} s, the cluster restarted from the "
                               "learner's own state and the lab resumed, not set up again"))
    spawned, early, done = _first(root, "login")
    out.append(Figure(AT_LOGIN, round(early, 2), "s", None,
                      note=f"gpulab class init --cluster-start login, for comparison: server in {spawned:.2f} s "
                           f"(the cluster starting beside it), then labs.start {done.seconds:.2f} s"))
