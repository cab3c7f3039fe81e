"""A full disk under the state dir is one ClusterError naming the dir and the cause (the unit half of the
disk-full fault tests; ``tests/e2e/test_faults_disk_full.py`` fills a real tmpfs)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from cluster import errors
from cluster.backends.base import StateDir, free_mib


def test_a_write_that_finds_no_space_is_a_cluster_error(tmp_path: Path) -> None:
    """/dev/full answers every write with the kernel's ENOSPC."""
    state = StateDir("gpulab", tmp_path)
    with pytest.raises(errors.ClusterError) as caught:
        with state.writing():
            with open("/dev/full", "w") as full:
                full.write("x")
                full.flush()
    text = str(caught.value)
    assert "no space left on the device" in text and str(state.dir) in text and "GPULAB_STATE_DIR" in text
    assert isinstance(caught.value.__cause__, OSError) and caught.value.__cause__.errno == errno.ENOSPC


def test_other_write_errors_are_not_disguised(tmp_path: Path) -> None:
    state = StateDir("gpulab", tmp_path)
    with pytest.raises(FileNotFoundError):
        with state.writing():
            (tmp_path / "no" / "such" / "dir" / "f").write_text("x")


def test_too_little_free_space_is_refused_before_writing(tmp_path: Path) -> None:
    state = StateDir("gpulab", tmp_path / "not-yet")
    need = int(free_mib(tmp_path)) + 1024
    with pytest.raises(errors.ClusterError, match=r"MiB free on the filesystem of .*not-yet/gpulab"):
        state.ensure_space(need, "a new local cluster")
    state.ensure_space(1, "a new local cluster")
    assert not (tmp_path / "not-yet").exists()


def test_free_space_of_a_missing_dir_is_its_nearest_parents(tmp_path: Path) -> None:
    statvfs = os.statvfs(tmp_path)
    expected = statvfs.f_bavail * statvfs.f_frsize / 2**20
    assert abs(free_mib(tmp_path / "a" / "b") - expected) < 64
