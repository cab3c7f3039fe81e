"""`gpulab class grade` on a class of real accounts with a hostile learner among honest ones.

Three learners fetch lab 06b and hand it in with nbgrader as themselves: two honest ones with solved evidence,
and one who edits the notebook's collect cell to print the instructor's private key and start a detached
process meant to outlive grading, hands in evidence with finalizers and a Deployment of 1,500 replicas, and
forges a newer submission in the second learner's name in the shared inbound. The instructor grades the class.
Each honest learner gets full marks, as when graded alone; the forgery is refused and named; nothing of the
hostile notebook runs (no secret in any feedback, no process left behind).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from class_hub import Hub, running_class

import labs
from labs.bench import grading_bench
from labs.classroom import accounts, layout, runtime

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

LAB = grading_bench.HOSTILE_LAB


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    with running_class(tmp_path_factory.mktemp("class-trust"), "gpltr", 3) as running:
        yield running


def _nbgrader(hub: Hub, user: str, *args: str) -> None:
    done = accounts.run_as(user, [str(runtime.bin_dir(hub.folder) / "nbgrader"), *args],
                           env={"JUPYTER_CONFIG_PATH": str(hub.folder / "jupyter")}, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def _hand_in(hub: Hub, user: str, evidence: Path, collect_source: str | None = None) -> None:
    _nbgrader(hub, user, "fetch_assignment", LAB)
    folder = accounts.home(user) / LAB
    (folder / "evidence.json").write_bytes(evidence.read_bytes())
    if collect_source is not None:
        path = folder / f"{LAB}.ipynb"
        nb = nbformat.read(str(path), as_version=4)
        next(c for c in nb.cells if c.get("id") == "collect").source = collect_source
        nbformat.write(nb, str(path))
    accounts.give(folder, user)
    _nbgrader(hub, user, "submit", LAB)


def test_a_hostile_learner_changes_no_other_grade_and_reads_nothing_of_the_instructor(hub: Hub,
                                                                                       tmp_path: Path) -> None:
    ann, bob, mallory = hub.learners
    released = hub.gpulab("class", "release", LAB)
    assert released.returncode == 0, released.stdout + released.stderr
    solved, _untouched = grading_bench.replay_bundles(LAB, tmp_path / "bundles")
    hostile = grading_bench.hostile_bundles(LAB, solved, tmp_path / "bundles")
    secret = accounts.home(hub.instructor) / ".ssh" / "id_canary"
    secret.parent.mkdir(mode=0o700, exist_ok=True)
    secret.write_text("CANARY-e2e-instructor-key\n", encoding="utf-8")
    secret.chmod(0o600)
    accounts.give(secret.parent, hub.instructor)
    marker = Path("/dev/shm") / f"gpulab-e2e-left-behind-{uuid.uuid4().hex}"

    _hand_in(hub, ann, solved)
    _hand_in(hub, bob, solved)
    _hand_in(hub, mallory, hostile["pod-flood"], (
        f"print(open({str(secret)!r}).read())\nimport subprocess\n"
        f"subprocess.Popen(['sh', '-c', 'sleep 2; touch {marker}'], start_new_session=True)\n"))
    # The forgery: a newer submission in bob's name, made by mallory in the shared inbound (nbgrader's own collect
    # would take it, as the newest, in place of bob's).
    inbound = layout.ClassDir(hub.folder).exchange / "gpulab" / "inbound"
    forged = inbound / f"{bob}+{LAB}+2099-01-01 00:00:00.000000 UTC+forged"
    accounts.run_as(mallory, ["mkdir", str(forged)])
    accounts.run_as(mallory, ["cp", str(inbound / next(p.name for p in inbound.iterdir()
                                                       if p.name.startswith(f"{mallory}+")) / f"{LAB}.ipynb"),
                              str(forged / f"{LAB}.ipynb")])
    accounts.run_as(mallory, ["sh", "-c", f"echo '2099-01-01 00:00:00.000000 UTC' > '{forged}/timestamp.txt'"])

    graded = hub.gpulab("class", "grade", LAB)
    out = graded.stdout + graded.stderr
    assert graded.returncode == 0, out
    assert f"refused {forged.name}" in out and f"belongs to {mallory}" in out, out

    from nbgrader.api import Gradebook

    course = accounts.home(hub.instructor) / "course"
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        scores = {u: (gb.find_submission(LAB, u).score, gb.find_submission(LAB, u).max_score)
                  for u in (ann, bob, mallory)}
    assert scores[ann] == scores[bob] and scores[ann][0] == scores[ann][1] > 0, scores
    assert labs.get(LAB).max_score > 0
    for user in (ann, bob, mallory):
        shown = (course / "autograded" / user / LAB / f"{LAB}.ipynb").read_text(encoding="utf-8")
        assert "CANARY-e2e" not in shown
        feedback = (course / "feedback" / user / LAB / f"{LAB}.html").read_text(encoding="utf-8")
        assert "CANARY-e2e" not in feedback
    hostile_nb = json.loads((course / "autograded" / mallory / LAB / f"{LAB}.ipynb").read_text(encoding="utf-8"))
    collect = next(c for c in hostile_nb["cells"] if c.get("id") == "collect")
    assert collect["outputs"] == [] and "subprocess.Popen" in "".join(collect["source"])
    import time

    time.sleep(3)
    try:
        assert not marker.exists(), "a process started by the hostile notebook outlived grading"
    finally:
        marker.unlink(missing_ok=True)
    assert not hub.processes_of(hub.instructor), hub.processes_of(hub.instructor)
