"""Predictions: stamped in the cluster before the reveal, read back safely, and compared with the cluster.

The rule is judged on a bundle view that keeps creation times, as a cluster does (``live_factories``), the
recorder on a temporary lab folder and a recording client; "before the reveal" rests on the API server's
times (the prediction's stamp and the revealing object), never on the ``at`` the learner can write into
``predictions.yaml``. The loader refuses a prediction check in a lab that does not carry ``predictions.yaml``
or has no namespace for the stamps.
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
REVEALED = "2026-11-26T11:00:00Z"  # worker-5, the pod whose creation shows the answer


def rule(scoring: str = "recorded", before: bool = True) -> PredictionRule:
    return PredictionRule("t4-shared", predict.FILE, ("Node", "", "t4-0"),
                          paths.parse("status.capacity[nvidia.com/gpu.shared]"),
                          ("Pod", "lab", "worker-5") if before else None, scoring, "lab")


def stamp(value: object, at: datetime | None) -> dict[str, Any]:
    """The prediction's record as the API server keeps it: created at ``at`` (None: a bundle, with no times)."""
    made: dict[str, Any] = predict.stamp_object("lab", "t4-shared", value)
    if at is not None:
        made["metadata"]["creationTimestamp"] = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    return made


def judge(r: PredictionRule, folder: Path | None, *, pod_created: str | None = REVEALED,
          stamps: tuple[dict[str, Any], ...] = (), reveal: bool = True) -> Any:
    node = make_node("t4-0", gpus=4, resource="nvidia.com/gpu.shared")
    pods = []
    if reveal:
        pod = make_pod("worker-5", gpus=1)
        if pod_created:
            pod["metadata"]["creationTimestamp"] = pod_created
        pods.append(pod)
    data = bundle_data(nodes=[node], pods=pods)
    data["cluster"]["configMaps"] = list(stamps)
    files = evidence.read_files(folder, (predict.FILE,)) if folder else {}
    ev = evidence.Evidence(files, (), None, view_of(data))  # type: ignore[arg-type]
    return r.evaluate(ev)


class RecordingClient:
    """A stand-in API server: deletes and creates ConfigMaps, dating each creation ``now``."""

    def __init__(self, now: str = "2026-11-26T10:30:00Z") -> None:
        self.now = now
        self.calls: list[tuple[str, str, Any]] = []

    def delete(self, path: str, **_: Any) -> dict[str, Any]:
        self.calls.append(("delete", path, None))
        raise errors.NotFound(404, "NotFound", f"{path} not found")

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("create", path, body))
        made = copy.deepcopy(body)
        made["metadata"]["creationTimestamp"] = self.now  # what a client sends there is not kept
        return made


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
    out = judge(rule(), tmp_path, stamps=(stamp(4, LATE),))
    assert not out.passed and "recorded at 12:00:00 UTC (the API server's clock), after Pod lab/worker-5 showed " \
                              "the answer (created 11:00:00 UTC)" in out.message


def test_a_back_dated_prediction_does_not_count(tmp_path: Path) -> None:
    """The time in predictions.yaml is the learner's to write: back-dated before the reveal, it counted as made in
    time. Now only the API server's times decide: the stamp made after the reveal, or no stamp at all, fails."""
    predict.record(tmp_path, "t4-shared", 4, when=EARLY)  # as if written by hand after seeing the answer
    stamped_late = judge(rule(), tmp_path, stamps=(stamp(4, LATE),))
    assert not stamped_late.passed and "after Pod lab/worker-5 showed the answer" in stamped_late.message
    unstamped = judge(rule(), tmp_path)
    assert not unstamped.passed and "is not recorded in the cluster" in unstamped.message
    assert "the time in predictions.yaml is yours to write and does not count" in unstamped.message


def test_a_prediction_changed_after_its_stamp_does_not_count(tmp_path: Path) -> None:
    predict.record(tmp_path, "t4-shared", 4, when=EARLY)
    out = judge(rule(), tmp_path, stamps=(stamp(1, EARLY),))
    assert not out.passed and "predictions.yaml says 4 for 't4-shared', but the cluster's record of your " \
                              "prediction says 1" in out.message
    assert not judge(rule(), tmp_path, stamps=(stamp("4", EARLY),)).passed  # 4 is not "4"


def test_right_and_wrong_predictions_are_compared_with_the_cluster(tmp_path: Path) -> None:
    predict.record(tmp_path, "t4-shared", 4, when=EARLY)
    right = judge(rule("correct"), tmp_path, stamps=(stamp(4, EARLY),))
    assert right.passed and "you predicted 4" in right.message and ": right" in right.message
    predict.record(tmp_path, "t4-shared", 1, when=EARLY)
    wrong = judge(rule("recorded"), tmp_path, stamps=(stamp(1, EARLY),))
    assert wrong.passed and "not what happened" in wrong.message  # recorded in time: the guess itself counts
    assert not judge(rule("correct"), tmp_path, stamps=(stamp(1, EARLY),)).passed


def test_the_reveal_object_missing_means_not_yet_revealed(tmp_path: Path) -> None:
    predict.record(tmp_path, "t4-shared", 4, when=LATE)
    assert judge(rule(), tmp_path, reveal=False).passed


def test_a_view_without_times_does_not_judge_the_order(tmp_path: Path) -> None:
    """An evidence bundle drops creation times: it cannot show the order, and the rule does not pretend to."""
    predict.record(tmp_path, "t4-shared", 4, when=LATE)
    assert judge(rule(), tmp_path, pod_created=None).passed


def test_recording_stamps_the_prediction_and_keeps_the_servers_time(tmp_path: Path) -> None:
    client = RecordingClient(now="2026-11-26T10:30:00Z")
    server: Any = client  # answers what predict.stamp asks of a Client
    made = predict.record(tmp_path, "t4-shared", 4, keys=("t4-shared",), stamp_in=(server, "lab"))
    assert made.at == datetime(2026, 11, 26, 10, 30, tzinfo=timezone.utc)
    assert predict.read((tmp_path / predict.FILE).read_bytes())[0]["t4-shared"].at == made.at
    (delete, old, _), (create, path, body) = client.calls
    assert (delete, old) == ("delete", "/api/v1/namespaces/lab/configmaps/gpulab-prediction-t4-shared")
    assert (create, path) == ("create", "/api/v1/namespaces/lab/configmaps")
    assert body["immutable"] is True and body["data"] == {"value": "4"}
    assert predict.stamped({**body, "metadata": {"creationTimestamp": client.now}}) == (4, made.at)
    with pytest.raises(predict.PredictionError, match="not a prediction key"):
        predict.record(tmp_path, "Bad Key", 1, stamp_in=(server, "lab"))
    assert len(client.calls) == 2  # a refused prediction is never stamped


def test_solve_and_replay_stamp_the_files_predictions(tmp_path: Path) -> None:
    """A solve stamps the solution's predictions before its steps, with the server's times in the file; a replay
    gets the stamps of the handed-in file to apply before it redoes anything (a broken file gives none)."""
    predict.record(tmp_path, "t4-shared", 4, when=EARLY)
    predict.record(tmp_path, "a100-shared", "eight", when=EARLY)
    client: Any = RecordingClient(now="2026-11-26T10:45:00Z")
    asked = {"t4-shared": "lab", "a100-shared": "lab"}
    done = predict.stamp_file(client, tmp_path, asked)
    assert [(p.key, p.at.minute) for p in done] == [("a100-shared", 45), ("t4-shared", 45)]
    assert [c[2]["metadata"]["name"] for c in client.calls if c[0] == "create"] == [
        "gpulab-prediction-a100-shared", "gpulab-prediction-t4-shared"]
    assert predict.stamp_file(client, tmp_path / "none", asked) == []
    handed_in = (tmp_path / predict.FILE).read_bytes()
    objs = predict.replay_stamps(handed_in, {"t4-shared": "lab-02b", "a100-shared": "lab-02b"})
    assert [(o["metadata"]["namespace"], o["data"]) for o in objs] == [
        ("lab-02b", {"value": '"eight"'}), ("lab-02b", {"value": "4"})]
    assert len(predict.replay_stamps(handed_in, {"t4-shared": "lab"})) == 1  # only what the lab asks for
    assert predict.replay_stamps(b"k: [unclosed\n", asked) == [] and predict.replay_stamps(None, asked) == []


def test_every_lab_knows_where_its_prediction_stamps_live() -> None:
    from labs import catalog

    asked = {lab: PredictionRule.stamps_of(catalog.get(lab).checks) for lab in catalog.ids()}
    assert asked["01-device-plugins"] == {"l40s-allocatable": "lab-01", "big-train-phase": "lab-01"}
    assert asked["02b-operator-values"] == {"a100-gpus": "lab-02b"}
    assert all(ns == catalog.get(lab).scope.namespaces[0] for lab, keys in asked.items() for ns in keys.values())


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
    spec["spec"]["scope"]["namespaces"] = []
    with pytest.raises(errors.ConfigError) as info:
        loader.load(make_lab(tmp_path / "no-namespace", spec))
    assert any("spec.tasks[0].checks[4].prediction: a lab with predictions has a namespace" in p
               for p in info.value.problems)
