"""Predictions: recorded with a time before the reveal, read back safely, and compared with the cluster.

The rule is judged on a bundle view (``live_factories``), the recorder on a temporary lab folder; the loader
refuses a prediction check in a lab that does not carry ``predictions.yaml``.
"""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from cluster import errors
from labs import evidence, loader, paths, predict
from labs.checks.live import PredictionRule
from live_factories import bundle_data, make_node, make_pod, view_of
from test_lab_spec_loader import VALID, make_lab

pytestmark = pytest.mark.unit

EARLY = datetime(2026, 11, 26, 10, 0, tzinfo=timezone.utc)
LATE = datetime(2026, 11, 26, 12, 0, tzinfo=timezone.utc)


def rule(scoring: str = "recorded", before: bool = True) -> PredictionRule:
    return PredictionRule("t4-shared", predict.FILE, ("Node", "", "t4-0"),
                          paths.parse("status.capacity[nvidia.com/gpu.shared]"),
                          ("Pod", "lab", "worker-5") if before else None, scoring)


def judge(r: PredictionRule, folder: Path | None, *, pod_created: str | None = "2026-11-26T11:00:00Z") -> Any:
    node = make_node("t4-0", gpus=4, resource="nvidia.com/gpu.shared")
    pods = []
    if pod_created:
        pod = make_pod("worker-5", gpus=1)
        pod["metadata"]["creationTimestamp"] = pod_created
        pods.append(pod)
    files = evidence.read_files(folder, (predict.FILE,)) if folder else {}
    ev = evidence.Evidence(files, (), None, view_of(bundle_data(nodes=[node], pods=pods)))  # type: ignore[arg-type]
    return r.evaluate(ev)


def test_record_then_read_back_with_its_time(tmp_path: Path) -> None:
    made = predict.record(tmp_path, "t4-shared", 4, when=EARLY)
    predict.record(tmp_path, "a100-shared", predict.value_of("16"), when=EARLY)
    got, problem = predict.read((tmp_path / predict.FILE).read_bytes())
    assert problem == "" and got["t4-shared"] == made and got["a100-shared"].value == 16
    assert str(made) == "recorded t4-shared = 4 at 10:00:00 UTC"
    assert (tmp_path / predict.FILE).read_text().startswith("# Your predictions")


def test_bad_keys_values_and_files_are_refused_in_words(tmp_path: Path) -> None:
    with pytest.raises(predict.PredictionError, match="asks for no prediction 'x-y'; it asks for: t4-shared"):
        predict.record(tmp_path, "x-y", 1, keys=("t4-shared",))
    with pytest.raises(predict.PredictionError, match="not a prediction key"):
        predict.record(tmp_path, "../etc", 1)
    with pytest.raises(predict.PredictionError, match="a number, true/false or a short text"):
        predict.record(tmp_path, "k", {"a": 1})
    with pytest.raises(predict.PredictionError, match="1 to 200 characters"):
        predict.value_of("9" * 201)
    assert predict.value_of("a: b") == "a: b" and predict.value_of("true") is True
    (tmp_path / predict.FILE).write_text("k: [unclosed\n")
    with pytest.raises(predict.PredictionError, match="cannot be read"):
        predict.record(tmp_path, "k", 1)
    (tmp_path / predict.FILE).write_text("k: {value: 1}\n")
    assert "must have a value and the time" in predict.read((tmp_path / predict.FILE).read_bytes())[1]
    assert isinstance(predict.PredictionError("x"), errors.CourseError)


def test_a_symlinked_predictions_file_is_not_written_through(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.yaml"
    target.write_text("keep: me\n")
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / predict.FILE).symlink_to(target)
    with pytest.raises(predict.PredictionError, match="symbolic link"):
        predict.record(tmp_path / "lab", "k", 1)
    assert target.read_text() == "keep: me\n"


def test_no_prediction_fails_and_says_how_to_record(tmp_path: Path) -> None:
    out = judge(rule(), tmp_path)
    assert not out.passed and "lab.predict('t4-shared', ...)" in out.message


def test_a_prediction_recorded_after_the_reveal_does_not_count(tmp_path: Path) -> None:
    predict.record(tmp_path, "t4-shared", 4, when=LATE)
    out = judge(rule(), tmp_path)
    assert not out.passed and "after Pod lab/worker-5 showed the answer" in out.message


def test_right_and_wrong_predictions_are_compared_with_the_cluster(tmp_path: Path) -> None:
    predict.record(tmp_path, "t4-shared", 4, when=EARLY)
    right = judge(rule("correct"), tmp_path)
    assert right.passed and "you predicted 4" in right.message and ": right" in right.message
    predict.record(tmp_path, "t4-shared", 1, when=EARLY)
    wrong = judge(rule("recorded"), tmp_path)
    assert wrong.passed and "not what happened" in wrong.message  # recorded in time: the guess itself counts
    assert not judge(rule("correct"), tmp_path).passed


def test_the_reveal_object_missing_means_not_yet_revealed(tmp_path: Path) -> None:
    predict.record(tmp_path, "t4-shared", 4, when=LATE)
    assert judge(rule(), tmp_path, pod_created=None).passed


def test_the_loader_wants_predictions_yaml_among_the_lab_files(tmp_path: Path) -> None:
    spec = copy.deepcopy(VALID)
    spec["spec"]["tasks"][0]["checks"].append(
        {"id": "guess", "hint": "Read: x.", "prediction": {"key": "k", "of": {"kind": "Node", "name": "t4-0",
                                                                            "path": "status.capacity[nvidia.com/gpu]"},
                                                         "before": {"kind": "Pod", "name": "p"}, "scoring": "maybe"}})
    with pytest.raises(errors.ConfigError) as info:
        loader.load(make_lab(tmp_path, spec))
    found = info.value.problems
    assert any("lists predictions.yaml in spec.files" in p for p in found)
    assert any(p.startswith("spec.tasks[0].checks[4].prediction.before.namespace") for p in found)
    assert any(p.startswith("spec.tasks[0].checks[4].prediction.scoring: must be one of recorded, correct")
               for p in found)
