"""Resume, not reset (issue 25, item 6), on the real control plane: in class mode the idle culler stops the
learner's server and with it the lab cluster (``singleuser.stop_cluster``: stopped, its state kept); the learner
runs the notebook's ``labs.start`` cell again, the cluster starts on demand with the learner's objects, and the
lab resumes with the score it had (it was set up afresh before: 13/13 became 5/13). Only ``reset``, ``fresh``,
``stop``, another lab set up in between or a purged cluster set it up afresh.

The tests stop, purge and start the session's cluster; each leaves it running, with no lab in progress.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import labs
from cluster import fleet as fleet_mod
from cluster.progress import LogProgress
from cluster.testing import LocalCluster, wait_for
from labs import resume
from labs.classroom import singleuser

pytestmark = pytest.mark.e2e

LAB, OTHER = "01-device-plugins", "04b-operator-time-slicing"


@pytest.fixture
def cluster(local_cluster: LocalCluster) -> Iterator[LocalCluster]:
    """The session's cluster, running again after the test whatever it did to it, and with no lab in progress."""
    try:
        yield local_cluster
    finally:
        backend = local_cluster.backend
        if not backend.exists():
            backend.up(fleet_mod.load("starter"), LogProgress())
        elif not all(c.running for c in backend.components()):
            backend.up(None, LogProgress())
        for lab_id in (OTHER, LAB):
            labs.Lab(labs.get(lab_id), Path("unused"), local_cluster.kubeconfig).stop()
            _stopped(local_cluster, lab_id)


def _stopped(cluster: LocalCluster, lab_id: str) -> None:
    """Wait until the stopped lab's namespaces are gone (a lab started while they end is refused)."""
    with cluster.client() as client:
        for ns in labs.get(lab_id).scope.namespaces:
            wait_for(lambda: not client.exists(f"/api/v1/namespaces/{ns}"), timeout=60, interval=0.5,
                     what=f"namespace {ns} deleted")


def _solved(cluster: LocalCluster, work: Path) -> tuple[labs.Lab, dict[str, Any], labs.Report]:
    """The lab set up afresh (with the state of its cluster-side objects then), solved and checked."""
    lab = labs.start(LAB, workdir=work, kubeconfig=cluster.kubeconfig, fresh=True)
    at_start = lab.snapshot()
    lab.solve()
    report = lab.check(wait=120)
    assert report.passed, _failing(report)
    return lab, at_start, report


def _failing(report: labs.Report) -> list[str]:
    return [c.id for c in report.checks if not c.passed]


def _back_at_start(lab: labs.Lab, at_start: dict[str, Any]) -> None:
    wait_for(lambda: lab.snapshot() == at_start, timeout=60, interval=0.5, what=f"lab {lab.id} back at its start")


def test_after_the_culler_stopped_the_cluster_starting_the_lab_again_resumes_it(
        cluster: LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    work = tmp_path / "work"
    lab, _, solved = _solved(cluster, work)
    mine = {name: lab.file(name).read_bytes() for name in lab.spec.files}

    assert singleuser.stop_cluster()  # what `gpulab class singleuser` does when the culler stops the server
    assert not any(c.running for c in cluster.backend.components())
    monkeypatch.setenv("GPULAB_CLUSTER_ON_DEMAND", "1")  # the spawner's class mode: the first lab step starts it
    with caplog.at_level(logging.WARNING, logger="labs.runtime"):
        again = labs.start(LAB, workdir=work)  # the notebook's start cell, in the new server's kernel
    assert all(c.running for c in cluster.backend.components()), "the cluster was not started on demand"
    resumed = again.check(wait=60)
    assert (resumed.passed, resumed.score) == (True, solved.score), _failing(resumed)
    assert {name: again.file(name).read_bytes() for name in lab.spec.files} == mine
    assert again.resumed
    assert f"lab {LAB} is resumed" in caplog.text and f"gpulab lab reset {LAB}" in caplog.text

    # The command line resumes it too, and says so in one line.
    out = cluster.gpulab("lab", "start", LAB, "--dir", str(work))
    assert f"lab {LAB} is ready" in out.stdout
    told = [line for line in out.stderr.splitlines() if "is resumed" in line]
    assert len(told) == 1 and f"gpulab lab reset {LAB}" in told[0] and "Traceback" not in out.stderr, out.stderr
    assert labs.attach(LAB, kubeconfig=cluster.kubeconfig).check(wait=60).score == solved.score
    out = cluster.gpulab("lab", "start", LAB, "--dir", str(work), "--fresh")  # starting over
    assert "is resumed" not in out.stderr and lab.file(lab.spec.files[0]).read_bytes() == \
        lab.spec.starter(lab.spec.files[0]).read_bytes()
    assert not labs.attach(LAB, kubeconfig=cluster.kubeconfig).check(wait=1).passed


def test_reset_and_fresh_start_over_a_lab_in_progress(cluster: LocalCluster, tmp_path: Path) -> None:
    lab, at_start, solved = _solved(cluster, tmp_path / "work")
    lab.reset()
    _back_at_start(lab, at_start)
    assert lab.check(wait=1).score < solved.score

    lab, at_start, solved = _solved(cluster, tmp_path / "work")
    fresh = labs.start(LAB, workdir=lab.workdir, kubeconfig=cluster.kubeconfig, fresh=True)
    _back_at_start(fresh, at_start)


def test_a_lab_stopped_or_followed_by_another_lab_is_set_up_afresh(cluster: LocalCluster, tmp_path: Path) -> None:
    work = tmp_path / "work"
    lab, at_start, solved = _solved(cluster, work)
    lab.stop()
    _stopped(cluster, LAB)
    again = labs.start(LAB, workdir=work, kubeconfig=cluster.kubeconfig)
    _back_at_start(again, at_start)
    assert again.check(wait=1).score < solved.score  # the learner's files are still the solved ones

    lab, at_start, solved = _solved(cluster, work)
    labs.start(OTHER, workdir=tmp_path / OTHER, kubeconfig=cluster.kubeconfig)
    again = labs.start(LAB, workdir=work, kubeconfig=cluster.kubeconfig)
    _back_at_start(again, at_start)
    assert again.check(wait=1).score < solved.score


def test_a_purged_and_recreated_cluster_has_no_lab_in_progress(cluster: LocalCluster, tmp_path: Path) -> None:
    work = tmp_path / "work"
    labs.start(LAB, workdir=work, kubeconfig=cluster.kubeconfig, fresh=True)
    with cluster.client() as client:
        assert resume.read(client) is not None
    cluster.backend.down(purge=True)
    assert (cluster.state_root / "labs" / f"{LAB}.json").is_file()  # the state dir's record outlives a purge
    cluster.backend.up(fleet_mod.load("starter"), LogProgress())
    with cluster.client() as client:
        assert resume.read(client) is None
    assert not labs.start(LAB, workdir=work, kubeconfig=cluster.kubeconfig).resumed
