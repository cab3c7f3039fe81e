"""Containers' logs are kept as a kubelet keeps them: one CRI-format file per container instance in the
``/var/log/pods`` layout, bounded, the running and the previous instance kept, gone with the pod."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.sim.kubelet import logquery, logstore

UID = "0b4e28ba-2fa1-11d2-883f-b9a761bde3fb"


def _ref(restart: int = 0, container: str = "main") -> logstore.ContainerRef:
    return logstore.ContainerRef("lab-01", "render", UID, container, restart)


def test_lines_go_to_the_kubelets_layout_in_the_cri_format(tmp_path: Path) -> None:
    store = logstore.LogStore(tmp_path)
    store.write(_ref(), "first\nsecond\n", at_ns=5)
    store.write(_ref(), "oops", stream="stderr", at_ns=6)
    path = tmp_path / f"lab-01_render_{UID}" / "main" / "0.log"
    assert path.read_bytes() == (b"1970-01-01T00:00:00.000000005Z stdout F first\n"
                                 b"1970-01-01T00:00:00.000000005Z stdout F second\n"
                                 b"1970-01-01T00:00:00.000000006Z stderr F oops\n")
    assert store.read(_ref()) == path.read_bytes()
    assert store.read(_ref(1)) == b""  # an instance that wrote nothing reads empty
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_a_file_that_would_pass_the_bound_is_rotated_and_reads_see_the_new_one(tmp_path: Path) -> None:
    store = logstore.LogStore(tmp_path, max_bytes=200)
    for i in range(10):
        store.write(_ref(), f"line {i}", at_ns=i)
    current = store.read(_ref())
    rotated = store.path(_ref()).with_name("0.log.1").read_bytes()
    assert len(current) <= 200 and len(rotated) <= 200
    assert logquery.cut(current, logquery.LogOptions(), 0).endswith(b"line 9\n")
    assert sorted(p.name for p in store.path(_ref()).parent.iterdir()) == ["0.log", "0.log.1"]


def test_a_restart_keeps_the_previous_instance_and_drops_older_ones(tmp_path: Path) -> None:
    store = logstore.LogStore(tmp_path)
    for restart in range(4):
        store.start(_ref(restart))
        store.write(_ref(restart), f"instance {restart}")
    folder = store.path(_ref()).parent
    assert sorted(p.name for p in folder.iterdir()) == ["2.log", "3.log"]
    assert b"instance 2" in store.read(_ref(2))


def test_a_pods_logs_go_with_it_and_prune_removes_those_of_pods_gone_meanwhile(tmp_path: Path) -> None:
    store = logstore.LogStore(tmp_path)
    other = logstore.ContainerRef("lab-01", "other", "1" * 8, "main")
    store.write(_ref(), "x")
    store.write(other, "y")
    store.remove_pod("lab-01", "render", UID)
    assert not store.path(_ref()).exists() and store.read(other)
    assert store.prune(["something-else"]) == ["lab-01_other_11111111"]
    assert list(tmp_path.iterdir()) == []
    assert logstore.LogStore(tmp_path / "never-made").prune([]) == []


@pytest.mark.parametrize("ref", [logstore.ContainerRef("../x", "p", UID, "c"),
                                 logstore.ContainerRef("ns", "p", UID, "a/b"),
                                 logstore.ContainerRef("ns", "p", UID, "c", -1),
                                 logstore.ContainerRef("ns", "P", UID, "c")])
def test_names_that_are_not_kubernetes_names_never_make_a_path(tmp_path: Path, ref: logstore.ContainerRef) -> None:
    with pytest.raises(ValueError):
        logstore.LogStore(tmp_path).write(ref, "x")
    with pytest.raises(ValueError):
        logstore.LogStore(tmp_path).write(_ref(), "x", stream="stdin")


def test_container_ids_name_instances_and_are_found_back() -> None:
    ids = [logstore.container_id(UID, "main", k) for k in range(3)]
    assert len(set(ids)) == 3 and all(len(i) == 64 for i in ids)
    assert logstore.restart_of(UID, "main", f"containerd://{ids[1]}", 2) == 1
    assert logstore.restart_of(UID, "main", "containerd://" + "0" * 64, 2) is None


@pytest.mark.parametrize("text,ns", [("1970-01-01T00:00:00Z", 0), ("1970-01-01T00:00:01.5Z", 1_500_000_000),
                                     ("1970-01-01T01:00:00+01:00", 0), ("1969-12-31T23:00:00-01:00", 0),
                                     ("2024-02-29T00:00:00.123456789Z", 1709164800123456789),
                                     ("2024-02-30T00:00:00Z", None), ("2024-01-01T00:00:00", None),
                                     ("2024-01-01T24:00:00Z", None)])
def test_rfc3339_times_are_read_as_go_reads_them(text: str, ns: int | None) -> None:
    assert logstore.parse_stamp(text) == ns
    if ns is not None:
        assert logstore.parse_stamp(logstore.format_stamp(ns)) == ns
