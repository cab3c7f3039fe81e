"""The typed state record (``cluster/staterecord.py``): what each backend writes reads back the same, a record
with a field of the wrong type is refused naming the field, and fields a newer gpulab wrote survive a rewrite."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cluster import staterecord
from cluster.staterecord import StateRecord


@pytest.mark.parametrize("record", [
    StateRecord("local", fleet="starter", ports={"apiserver": 6443, "etcd": 2379}, kubernetes="v1.36.3"),
    StateRecord("kind", fleet="starter", kind_cluster="gpulab", kind_version="v0.32.0", node_image="kindest/node:x",
                created=True, nodes={"h100-0": "gpulab-worker"}),
    StateRecord("attach", kubeconfig="/home/a/.kube/config", context=None),
])
def test_each_backends_record_reads_back_as_written(tmp_path: Path, record: StateRecord) -> None:
    staterecord.write(tmp_path, record)
    assert staterecord.read(tmp_path) == record


def test_a_kind_record_keeps_created_false_and_others_never_carry_it(tmp_path: Path) -> None:
    staterecord.write(tmp_path, StateRecord("kind", created=False))
    assert json.loads((tmp_path / "state.json").read_text()) == {"backend": "kind", "created": False}
    staterecord.write(tmp_path, StateRecord("local", ports={"apiserver": 1}))
    assert "created" not in json.loads((tmp_path / "state.json").read_text())


def test_fields_a_newer_gpulab_wrote_survive_a_rewrite(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text(json.dumps({"backend": "local", "ports": {"apiserver": 1},
                                                     "future": {"x": 1}}))
    rec = staterecord.read(tmp_path)
    assert rec is not None and rec.extra == {"future": {"x": 1}}
    staterecord.write(tmp_path, rec.replace(fleet="starter"))
    assert json.loads((tmp_path / "state.json").read_text())["future"] == {"x": 1}


def test_no_file_is_no_record(tmp_path: Path) -> None:
    assert staterecord.read(tmp_path) is None and staterecord.read_or_none(tmp_path) is None


@pytest.mark.parametrize(("text", "named"), [
    ("{not json", "not JSON"),
    ("[]", "holds list"),
    ('{"backend": "minikube"}', "'minikube'"),
    ('{"backend": "local", "ports": {"apiserver": "6443"}}', "'ports'"),
    ('{"backend": "local", "ports": {"apiserver": 70000}}', "'ports'"),
    ('{"backend": "local", "ports": {"apiserver": true}}', "'ports'"),
    ('{"backend": "kind", "created": "yes"}', "'created'"),
    ('{"backend": "kind", "nodes": {"h100-0": 3}}', "'nodes'"),
    ('{"backend": "attach", "kubeconfig": ["a"]}', "'kubeconfig'"),
])
def test_a_record_that_is_not_one_is_refused_naming_why(tmp_path: Path, text: str, named: str) -> None:
    (tmp_path / "state.json").write_text(text)
    with pytest.raises(staterecord.Unreadable) as exc:
        staterecord.read(tmp_path)
    assert named in exc.value.message and "gpulab down --purge" in (exc.value.hint or "")
    assert staterecord.read_or_none(tmp_path) is None


def test_a_huge_file_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_bytes(b" " * (2 << 20) + b"{}")
    with pytest.raises(staterecord.Unreadable, match="larger than"):
        staterecord.read(tmp_path)


def test_a_folder_in_place_of_the_file_is_unreadable_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "state.json").mkdir()
    with pytest.raises(staterecord.Unreadable, match="cannot read"):
        staterecord.read(tmp_path)
