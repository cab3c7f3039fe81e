"""Every lab proves itself on the real control plane: the untouched lab fails its check with hints; ``solve``
then ``check`` gives full marks; the evidence bundle, replayed on the cluster (reset, then the learner's files and
recorded actions), grades the same; ``reset`` brings back the start
state of every object the lab touches. One cluster for the session; each lab is stopped after its test.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import labs
from cluster.testing import LocalCluster, wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture
def started(local_cluster: LocalCluster, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[labs.Lab]:
    lab = labs.start(request.param, workdir=tmp_path / "work", kubeconfig=local_cluster.kubeconfig, fresh=True)
    try:
        yield lab
    finally:
        lab.stop()


def _failures(report: labs.Report) -> list[tuple[str, str]]:
    return [(c.id, c.message) for c in report.checks if not c.passed]


@pytest.mark.parametrize("started", labs.list_labs(), indirect=True)
def test_lab_proves_itself(started: labs.Lab, tmp_path: Path, record_property: Any) -> None:
    lab = started
    at_start = lab.snapshot()

    untouched = lab.check(wait=1)
    assert not untouched.passed and untouched.score < untouched.max_score
    failed = [c for c in untouched.checks if not c.passed]
    hints = {c.id: c.hint for c in lab.spec.checks}
    assert all(c.hint == hints[c.id] and "Read:" in c.hint for c in failed)
    assert any(c.cluster for c in lab.spec.checks if c.id in {f.id for f in failed})

    lab.solve()
    solved = lab.check(wait=120)
    assert solved.passed and solved.score == solved.max_score == lab.spec.max_score, _failures(solved)

    bundle = lab.submit(tmp_path / "evidence.json")
    with lab.client() as client:
        replayed = labs.grade(lab.id, bundle, replay=client)
    assert replayed.passed and replayed.score == solved.score, (_failures(replayed), replayed.notes)

    started_at = time.monotonic()
    lab.reset()
    reset_s = time.monotonic() - started_at
    record_property("reset_seconds", round(reset_s, 2))
    settled = wait_for(lambda: lab.snapshot() == at_start, timeout=60, interval=0.5,
                       what=f"lab {lab.id} back at its start state")
    assert settled
    assert (lab.workdir / lab.spec.files[0]).read_bytes() == lab.spec.starter(lab.spec.files[0]).read_bytes()
    assert reset_s < 60, f"reset took {reset_s:.1f} s"


def test_lab_cli_round_trip(local_cluster: LocalCluster, tmp_path: Path) -> None:
    """`gpulab lab start|check|solve|submit|reset|stop` and `gpulab grade` on the session cluster."""
    lab_id = "04b-operator-time-slicing"
    work = tmp_path / "work"
    out = local_cluster.gpulab("lab", "start", lab_id, "--dir", str(work)).stdout
    assert f"lab {lab_id} is ready" in out and (work / "time-slicing-config.yaml").is_file()
    first = local_cluster.gpulab("lab", "check", lab_id, "--wait", "1", "--json")
    assert first.returncode == 0 and json.loads(first.stdout)["passed"] is False
    local_cluster.gpulab("lab", "solve", lab_id)
    report = json.loads(local_cluster.gpulab("lab", "check", lab_id, "--wait", "60", "--json").stdout)
    assert report["passed"] and report["score"] == report["max_score"]
    bundle = local_cluster.gpulab("lab", "submit", lab_id).stdout.strip()
    assert bundle == str(work / "evidence.json")
    graded = json.loads(local_cluster.gpulab("grade", lab_id, "--submission", str(work), "--json").stdout)
    assert (graded["passed"], graded["score"], [c["id"] for c in graded["checks"]]) == \
        (True, report["score"], [c["id"] for c in report["checks"]])
    live = json.loads(local_cluster.gpulab("grade", lab_id, "--submission", str(work), "--live", "--json").stdout)
    assert live["passed"]
    local_cluster.gpulab("lab", "reset", lab_id)
    assert not (work / "evidence.json").exists() and list((work / ".gpulab-backup").glob("*/evidence.json"))
    local_cluster.gpulab("lab", "stop", lab_id)
