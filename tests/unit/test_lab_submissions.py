"""Offline grading of lab submissions: every solution scores full marks, every untouched starter fails with
hints, and each typical wrong submission (``tests/fixtures/labs/<lab>/wrong-*/``) fails exactly the checks
its ``expected.yaml`` names, each with that check's own hint.

A wrong submission is stored as the files it changes; the test lays them over a copy of the solution, so the
fixture shows the mistake and nothing else. Cluster checks need a bundle or a cluster and are left out here
(static-only grading); the e2e tests cover them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

import labs
from cluster.gpu import cel
from prerequisites import require

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "labs"
CASES = sorted(p for p in FIXTURES.glob("*/wrong-*") if p.is_dir())


def _submission(lab_id: str, tmp_path: Path, overlay: Path | None = None) -> Path:
    spec = labs.get(lab_id)
    out = tmp_path / "submission"
    shutil.copytree(spec.directory / "solution", out)
    if overlay is not None:
        for f in overlay.iterdir():
            if f.name != "expected.yaml":
                assert f.name in spec.files, f"{f} is not a file of lab {lab_id}"
                shutil.copyfile(f, out / f.name)
    return out


@pytest.mark.parametrize("lab_id", labs.list_labs())
def test_solution_scores_full_marks_offline(lab_id: str, tmp_path: Path) -> None:
    """The solution files alone pass every static check."""
    report = labs.grade(lab_id, _submission(lab_id, tmp_path))
    failed = [(c.id, c.message) for c in report.checks if not c.passed]
    assert report.passed and report.score == report.max_score > 0, failed


@pytest.mark.parametrize("lab_id", labs.list_labs())
def test_untouched_starter_fails_with_hints(lab_id: str) -> None:
    """The starter files as handed out do not pass, and every failed check carries the lab's hint."""
    spec = labs.get(lab_id)
    report = labs.grade(lab_id, spec.directory / "starter")
    failed = [c for c in report.checks if not c.passed]
    assert failed and report.score < report.max_score
    hints = {c.id: c.hint for c in spec.checks}
    assert all(c.hint == hints[c.id] and "Read:" in c.hint for c in failed)


@pytest.mark.parametrize("lab_id", labs.list_labs())
def test_every_lab_has_three_typical_wrong_submissions(lab_id: str) -> None:
    assert len([c for c in CASES if c.parent.name == lab_id]) >= 3


@pytest.mark.parametrize("case", CASES, ids=[f"{c.parent.name}/{c.name}" for c in CASES])
def test_wrong_submission_fails_with_its_specific_hint(case: Path, tmp_path: Path) -> None:
    """Exactly the expected checks fail; each shows its own hint, and its message names the mistake."""
    lab_id = case.parent.name
    if lab_id == "05-dra":
        require(cel.find_binary() is not None,
                              "the CEL checker (celcheck) is not built: `gpulab binaries ensure` (DRA cases need it)")
    expected = yaml.safe_load((case / "expected.yaml").read_text())
    spec = labs.get(lab_id)
    report = labs.grade(lab_id, _submission(lab_id, tmp_path, case))
    failed = {c.id: c for c in report.checks if not c.passed}
    assert sorted(failed) == sorted(expected["failing"]), {i: c.message for i, c in failed.items()}
    hints = {c.id: c.hint for c in spec.checks}
    for check_id, check in failed.items():
        assert check.hint == hints[check_id]
    for check_id, fragment in (expected.get("says") or {}).items():
        assert fragment in failed[check_id].message, failed[check_id].message


def test_fixtures_name_real_checks() -> None:
    """A fixture that expects a check the lab does not have would pass for the wrong reason."""
    for case in CASES:
        ids = {c.id for c in labs.get(case.parent.name).checks}
        expected = yaml.safe_load((case / "expected.yaml").read_text())
        assert set(expected["failing"]) <= ids, case


BUNDLES = FIXTURES / "bundles"


@pytest.mark.parametrize("state", ["solved", "unsolved"])
@pytest.mark.parametrize("lab_id", labs.list_labs())
def test_a_bundles_recorded_cluster_state_is_never_scored_offline(lab_id: str, state: str) -> None:
    """Without the grader's cluster a bundle grades its files only: what its cluster section says is the
    learner's claim (anyone can write it), so the cluster checks are left out and a note says why.
    Replay grading of the same bundles: tests/e2e/test_replay_grading.py."""
    spec = labs.get(lab_id)
    report = labs.grade(lab_id, BUNDLES / f"{lab_id}.{state}.json")
    cluster = {c.id for c in spec.checks if c.cluster}
    assert cluster and not cluster & {c.id for c in report.checks}
    assert report.max_score == sum(c.points for c in spec.checks if not c.cluster)
    assert any("never from the cluster state written in your evidence bundle" in n for n in report.notes)
    if state == "solved":
        assert report.passed, [(c.id, c.message) for c in report.checks if not c.passed]


def test_a_bundle_of_another_lab_is_refused() -> None:
    from cluster import errors

    with pytest.raises(errors.ConfigError, match="is evidence for lab '03-scheduling', not 02-gpu-operator"):
        labs.grade("02-gpu-operator", BUNDLES / "03-scheduling.solved.json")


def test_offline_grading_is_deterministic_byte_for_byte() -> None:
    from graders.render import json as render

    first = render.report(labs.grade("04a-time-slicing", BUNDLES / "04a-time-slicing.unsolved.json"))
    second = render.report(labs.grade("04a-time-slicing", BUNDLES / "04a-time-slicing.unsolved.json"))
    assert first == second and '"score"' in first


def test_folder_files_win_over_the_bundle_copies(tmp_path: Path) -> None:
    """A folder with evidence.json: the file checks read the folder, not the bundle's copies."""
    sub = _submission("01-device-plugins", tmp_path)
    shutil.copyfile(BUNDLES / "01-device-plugins.solved.json", sub / "evidence.json")
    (sub / "answers.yaml").write_text((sub / "answers.yaml").read_text().replace(
        "insufficientResource: nvidia.com/gpu", "insufficientResource: gpu"))
    report = labs.grade("01-device-plugins", sub)
    assert [c.id for c in report.checks if not c.passed] == ["names-the-missing-resource"]
    assert len(report.checks) == len([c for c in labs.get("01-device-plugins").checks if not c.cluster])


@pytest.mark.parametrize("content", [
    b"a: &a [" + b"x," * 50 + b"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    b"d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n",  # billion laughs
    b"x" * (20 * 1024 * 1024),
    bytes(range(256)) * 10,
    b"[" * 10_000,
    "spec:\n  tolerations:\n  - k\u0435y: nvidia.com/gpu\n".encode(),  # a Cyrillic e in a key
])
def test_hostile_files_are_failed_checks_never_crashes(content: bytes, tmp_path: Path) -> None:
    import time

    sub = _submission("03-scheduling", tmp_path)
    for name in ("stuck.yaml", "answers.yaml", "quota.yaml"):
        (sub / name).write_bytes(content)
    started = time.perf_counter()
    report = labs.grade("03-scheduling", sub)
    assert time.perf_counter() - started < 5
    failed = {c.id for c in report.checks if not c.passed}
    assert {"stuck-tolerates-gpu-taint", "fractional-reason", "quota-allows-two"} <= failed
