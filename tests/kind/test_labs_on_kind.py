"""Every lab on a real kind cluster: solve → check → reset, with real kubelets running the pods and the simulated
GPU stack acting through kind's API server. Every check must pass, except that a check only the pod agent's
kubelet-side admission can satisfy (``kind.DIFFERENCES``) must instead show the learner why kind differs, and a pod
whose `:latest` image the kubelet must pull fails to pull offline (``OFFLINE_PULLS``); the lab must come back
to its start state after reset."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import labs
from cluster.backends import kind as kind_mod
from cluster.backends.kind import KindBackend
from cluster.testing import wait_for


# CI has no registry. A pod whose image is tagged `:latest` gets imagePullPolicy Always, so the kubelet pulls it even
# though the node image holds a stand-in under that name: those pods are ErrImagePull or ImagePullBackOff here, and
# Running on a learner's kind with a network. Nothing else may fail.
OFFLINE_PULLS = {"04c-per-node-sharing": {"notebook-runs"}, "06-troubleshooting": {"notebook-runs"}}


@pytest.fixture
def started(kind_backend: KindBackend, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[labs.Lab]:
    lab = labs.start(request.param, workdir=tmp_path / "work", kubeconfig=kind_backend.kubeconfig(), fresh=True)
    try:
        yield lab
    finally:
        lab.stop()


@pytest.mark.parametrize("started", labs.list_labs(), indirect=True)
def test_lab_solve_check_reset_on_kind(started: labs.Lab, record_property: Any) -> None:
    lab = started
    at_start = lab.snapshot()
    untouched = lab.check(wait=1)
    assert not untouched.passed

    t0 = time.monotonic()
    lab.solve()
    solved = lab.check(wait=180)
    record_property("solve_check_seconds", round(time.monotonic() - t0, 1))
    failed = {c.id: c.message for c in solved.checks if not c.passed}
    offline = OFFLINE_PULLS.get(lab.id, set())
    assert set(failed) <= offline and all("ImagePull" in failed[c] for c in failed), failed
    why = kind_mod.differences(lab.id)
    assert set(why) <= {c.id for c in solved.checks}, f"DIFFERENCES names checks {lab.id} does not have"
    # a check kind cannot produce says so to the learner, with the reason, instead of failing
    shown = {c.id: c.message for c in solved.checks if c.id in why}
    assert all(message == why[cid] for cid, message in shown.items()), shown

    lab.reset()
    assert wait_for(lambda: lab.snapshot() == at_start, timeout=120, interval=1.0,
                    what=f"lab {lab.id} back at its start state on kind")
