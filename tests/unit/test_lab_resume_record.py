"""Resume, not reset (issue 25, item 6): starting a lab that is in progress on the cluster resumes it; only
``reset``, ``start(..., fresh=True)`` and a lab stopped, replaced by another or never set up there set it up
afresh. The cluster here is a stand-in holding the record (``labs.resume``); the setup's own work is counted,
not done. ``tests/e2e/test_lab_resume.py`` runs the same on a real cluster stopped and started again."""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

import pytest

from cluster import errors
from cluster.backends import guard
from labs import catalog, resume, runtime, scope
from labs.spec import LabSpec

LAB, OTHER = "01-device-plugins", "04b-operator-time-slicing"


class FakeClient:
    """The few calls ``labs.resume`` makes, on a dict of objects by path."""

    def __init__(self, objects: dict[str, Any]) -> None:
        self.objects = objects

    def __enter__(self) -> FakeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def get(self, path: str) -> Any:
        if path not in self.objects:
            raise errors.NotFound(404, "NotFound", f"{path} not found")
        return copy.deepcopy(self.objects[path])

    def apply(self, path: str, body: Any) -> Any:
        self.objects[path] = copy.deepcopy(body)
        return body

    def delete(self, path: str) -> Any:
        if path not in self.objects:
            raise errors.NotFound(404, "NotFound", f"{path} not found")
        return self.objects.pop(path)


class Cluster:
    """What a lab did to the stand-in cluster: its objects, and the setups and stops run on it."""

    def __init__(self) -> None:
        self.objects: dict[str, Any] = {}
        self.setups: list[str] = []
        self.stops: list[str] = []


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Cluster:
    monkeypatch.setenv("GPULAB_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(guard, "owner", lambda kubeconfig=None: guard.Owner("local"))
    made = Cluster()
    monkeypatch.setattr(runtime.Lab, "client", lambda self: FakeClient(made.objects))
    monkeypatch.setattr(scope, "normalize", lambda client, sc: made.setups.append("normalize"))
    monkeypatch.setattr(scope, "leave", lambda client, sc: made.stops.append("leave"))
    monkeypatch.setattr(runtime.Lab, "_run", lambda self, client, todo, what, owner: made.setups.append(self.id))
    return made


def _start(lab_id: str, work: Path, *, fresh: bool = False) -> runtime.Lab:
    return runtime.start(lab_id, workdir=work / lab_id, fresh=fresh)


def test_a_lab_in_progress_is_resumed_and_the_learner_is_told_how_to_start_over(
        cluster: Cluster, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    first = _start(LAB, tmp_path)
    assert cluster.setups == ["normalize", LAB]
    with caplog.at_level(logging.WARNING, logger="labs.runtime"):
        again = _start(LAB, tmp_path)
    assert cluster.setups == ["normalize", LAB], "a lab in progress was set up again"
    assert again.resumed and not first.resumed
    said = [r.getMessage() for r in caplog.records if r.name == "labs.runtime"]
    assert len(said) == 1 and "\n" not in said[0], said
    assert f"lab {LAB} is resumed" in said[0] and "lab.reset()" in said[0] and f"gpulab lab reset {LAB}" in said[0]


def test_resuming_keeps_the_learners_files_and_copies_only_missing_starter_files(cluster: Cluster,
                                                                                   tmp_path: Path) -> None:
    lab = _start(LAB, tmp_path)
    edited, lost = lab.spec.files[0], lab.spec.files[-1]
    lab.file(edited).write_text("# my work\n")
    lab.file(lost).unlink()
    assert _start(LAB, tmp_path).resumed and cluster.setups == ["normalize", LAB]
    assert lab.file(edited).read_text() == "# my work\n"
    assert lab.file(lost).read_bytes() == lab.spec.starter(lost).read_bytes()
    assert not (lab.workdir / runtime.BACKUPS).exists()


def test_reset_and_fresh_start_over_and_the_lab_is_in_progress_again(cluster: Cluster, tmp_path: Path) -> None:
    lab = _start(LAB, tmp_path)
    lab.file(lab.spec.files[0]).write_text("# my work\n")
    lab.reset()
    assert cluster.setups == ["normalize", LAB] * 2
    assert lab.file(lab.spec.files[0]).read_bytes() == lab.spec.starter(lab.spec.files[0]).read_bytes()
    _start(LAB, tmp_path, fresh=True)
    assert cluster.setups == ["normalize", LAB] * 3
    _start(LAB, tmp_path)  # after a reset the lab is in progress from its start
    assert cluster.setups == ["normalize", LAB] * 3


def test_another_lab_set_up_in_between_means_the_first_is_set_up_afresh(cluster: Cluster, tmp_path: Path) -> None:
    _start(LAB, tmp_path)
    _start(OTHER, tmp_path)
    _start(LAB, tmp_path)
    assert cluster.setups == ["normalize", LAB, "normalize", OTHER, "normalize", LAB]


def test_stopping_any_lab_ends_the_lab_in_progress(cluster: Cluster, tmp_path: Path) -> None:
    lab = _start(LAB, tmp_path)
    lab.stop()
    assert cluster.stops == ["leave"] and resume.PATH not in cluster.objects
    _start(LAB, tmp_path)
    runtime.Lab(catalog.get(OTHER), tmp_path / OTHER).stop()  # leaving another lab may change this one's scope
    _start(LAB, tmp_path)
    assert cluster.setups == ["normalize", LAB] * 3


def test_a_setup_that_fails_half_way_leaves_no_lab_in_progress(cluster: Cluster, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    _start(LAB, tmp_path)

    def broken(self: runtime.Lab, *args: object) -> None:
        raise errors.ClusterError("the API server went away half-way")

    monkeypatch.setattr(runtime.Lab, "_run", broken)
    with pytest.raises(errors.ClusterError):
        _start(LAB, tmp_path, fresh=True)
    assert resume.PATH not in cluster.objects


def test_a_cluster_without_the_record_sets_the_lab_up(cluster: Cluster, tmp_path: Path) -> None:
    """A purged or new cluster: the record lived in the old cluster's data, so the state dir's files (kept by a
    purge) do not make the lab count as in progress."""
    _start(LAB, tmp_path)
    cluster.objects.clear()
    _start(LAB, tmp_path)
    assert cluster.setups == ["normalize", LAB] * 2


def _record(spec: LabSpec, **data: Any) -> dict[str, Any]:
    base = {"format": resume.FORMAT, "lab": spec.id, "version": str(spec.version), "setUpAt": "2026-01-01T00:00:00Z"}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": resume.NAME, "namespace": resume.NAMESPACE},
            "data": {k: v for k, v in {**base, **data}.items() if v is not None}}


@pytest.mark.parametrize("change", [
    {"format": "0"}, {"format": None}, {"lab": None}, {"lab": ""}, {"version": "two"}, {"version": None},
    {"setUpAt": None}, {"version": "-1"},
], ids=repr)
def test_a_record_that_cannot_be_read_counts_as_no_lab_in_progress(cluster: Cluster, tmp_path: Path,
                                                                    change: dict[str, Any]) -> None:
    spec = catalog.get(LAB)
    cluster.objects[resume.PATH] = _record(spec, **change)
    assert resume.read(FakeClient(cluster.objects)) is None  # type: ignore[arg-type]
    _start(LAB, tmp_path)  # no exception: set up as on a new cluster, and recorded anew
    assert cluster.setups == ["normalize", LAB]
    assert resume.read(FakeClient(cluster.objects)) == resume.Record(  # type: ignore[arg-type]
        LAB, spec.version, cluster.objects[resume.PATH]["data"]["setUpAt"])


def test_a_record_without_data_or_of_another_lab_version_counts_as_none(cluster: Cluster, tmp_path: Path) -> None:
    spec = catalog.get(LAB)
    cluster.objects[resume.PATH] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": resume.NAME}}
    assert resume.read(FakeClient(cluster.objects)) is None  # type: ignore[arg-type]
    cluster.objects[resume.PATH] = _record(spec, version=str(spec.version + 1))  # the lab's definition changed
    assert not resume.in_progress(FakeClient(cluster.objects), spec)  # type: ignore[arg-type]
    _start(LAB, tmp_path)
    assert cluster.setups == ["normalize", LAB]


def test_no_record_is_read_or_written_on_an_attached_cluster(cluster: Cluster, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A lab whose setup would change nothing cluster-wide may start on someone else's cluster; the record is a
    ConfigMap in kube-system, which gpulab must not write there."""
    spec = catalog.get(LAB)
    monkeypatch.setattr(guard, "owner", lambda kubeconfig=None: guard.Owner(guard.ATTACH))
    monkeypatch.setattr(runtime.Lab, "_refuse_on_attach", lambda self, what, changes: guard.Owner(guard.ATTACH))
    cluster.objects[resume.PATH] = _record(spec)
    lab = _start(LAB, tmp_path)
    assert cluster.setups == ["normalize", LAB]
    assert cluster.objects[resume.PATH] == _record(spec)
    lab.stop()
    assert cluster.objects[resume.PATH] == _record(spec)
