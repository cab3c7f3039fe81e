"""kind nodes Docker could not kill: their frozen cgroups are thawed, and only theirs."""

from __future__ import annotations

from pathlib import Path

from cluster.backends import kindthaw

OURS = "a" * 64
OTHER = "b" * 64


def _cgroup(path: Path, state: str) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "freezer.state").write_text(state + "\n")
    return path / "freezer.state"


def test_thaws_every_frozen_cgroup_inside_the_node_and_nothing_else(tmp_path: Path) -> None:
    top = _cgroup(tmp_path / "docker" / OURS, "THAWED")
    pod = _cgroup(tmp_path / "docker" / OURS / "kubelet.slice" / "pod1.slice" / "cri-containerd-x.scope", "FROZEN")
    freezing = _cgroup(tmp_path / "docker" / OURS / "kubelet.slice" / "pod2.slice", "FREEZING")
    other = _cgroup(tmp_path / "docker" / OTHER / "kubelet.slice", "FROZEN")
    systemd = _cgroup(tmp_path / "system.slice" / f"docker-{OURS}.scope" / "inner", "FROZEN")

    assert kindthaw.thaw([OURS], root=tmp_path) == 3
    assert [p.read_text().strip() for p in (top, pod, freezing, systemd)] == ["THAWED"] * 4
    assert other.read_text().strip() == "FROZEN"
    assert kindthaw.thaw([OURS], root=tmp_path) == 0


def test_no_freezer_hierarchy_or_odd_ids_thaw_nothing(tmp_path: Path) -> None:
    frozen = _cgroup(tmp_path / "docker" / "x", "FROZEN")
    assert kindthaw.thaw(["", "../docker/x", ".", OURS], root=tmp_path) == 0
    assert kindthaw.thaw([OURS], root=tmp_path / "absent") == 0
    assert frozen.read_text().strip() == "FROZEN"
