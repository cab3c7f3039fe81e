"""The etcd bootstrap seed: its key, its sparse copy and its fallbacks (cluster/seed.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cluster import seed

APISERVER = ("/cache/bin/kube-apiserver", "--bind-address=127.0.0.1", "--secure-port=41234",
             "--etcd-servers=http://127.0.0.1:40000", "--tls-cert-file=/state/a/pki/apiserver.crt",
             "--service-cluster-ip-range=10.96.0.0/16", "--authorization-mode=Node,RBAC", "--v=1")


def _with(argv: tuple[str, ...], old: str, new: str) -> tuple[str, ...]:
    return tuple(new if a == old else a for a in argv)


def test_seed_key_ignores_ports_and_paths_of_one_cluster() -> None:
    other = ("/elsewhere/kube-apiserver", "--bind-address=127.0.0.1", "--secure-port=45555",
             "--etcd-servers=http://127.0.0.1:40999", "--tls-cert-file=/state/b/pki/apiserver.crt",
             "--service-cluster-ip-range=10.96.0.0/16", "--authorization-mode=Node,RBAC", "--v=1")
    assert seed.seed_path(APISERVER) == seed.seed_path(other)


@pytest.mark.parametrize("old,new", [
    ("--service-cluster-ip-range=10.96.0.0/16", "--service-cluster-ip-range=10.97.0.0/16"),
    ("--authorization-mode=Node,RBAC", "--authorization-mode=RBAC"),
    ("--v=1", "--v=2"),
])
def test_seed_key_changes_with_a_flag_that_shapes_bootstrap_objects(old: str, new: str) -> None:
    assert seed.seed_path(APISERVER) != seed.seed_path(_with(APISERVER, old, new))


def test_seed_key_changes_with_an_added_flag() -> None:
    added = (*APISERVER, "--enable-priority-and-fairness=false")
    assert seed.seed_path(APISERVER) != seed.seed_path(added)


def _fake_data_dir(root: Path) -> Path:
    """An etcd-like data dir: a small db and a WAL that is mostly preallocated zeros."""
    (root / "member" / "snap").mkdir(parents=True)
    (root / "member" / "wal").mkdir(parents=True)
    (root / "member" / "snap" / "db").write_bytes(b"bolt" * 1000)
    wal = bytearray(8 << 20)
    wal[:4096] = os.urandom(4096)
    wal[(3 << 20) + 7] = 1  # a lone byte in the middle of the zeros
    (root / "member" / "wal" / "0000000000000000-0000000000000000.wal").write_bytes(bytes(wal))
    return root


def test_sparse_copy_keeps_every_byte_and_leaves_zero_runs_as_holes(tmp_path: Path) -> None:
    src = _fake_data_dir(tmp_path / "src")
    seed.sparse_copy(src, tmp_path / "dst")
    for f in src.rglob("*"):
        if f.is_file():
            copy = tmp_path / "dst" / f.relative_to(src)
            assert copy.read_bytes() == f.read_bytes(), f
            assert copy.stat().st_mode & 0o777 == 0o600
    wal = "member/wal/0000000000000000-0000000000000000.wal"
    # Filesystems without holes (some tmpfs setups) allocate everything; where holes exist, they are used.
    if (src / wal).stat().st_blocks * 512 >= (8 << 20):
        assert (tmp_path / "dst" / wal).stat().st_blocks * 512 < (4 << 20)


def test_store_then_restore_round_trip(tmp_path: Path) -> None:
    src = _fake_data_dir(tmp_path / "src")
    kept = tmp_path / "cache" / "seeds" / "etcd-x"
    seed.store(src, kept)
    seed.store(src, kept)  # a second maker finds the seed already there: no error, no change
    dest = tmp_path / "cluster" / "etcd"
    dest.parent.mkdir()
    assert seed.restore(kept, dest)
    assert (dest / "member" / "snap" / "db").read_bytes() == (src / "member" / "snap" / "db").read_bytes()
    assert oct(dest.stat().st_mode & 0o777) == oct(0o700)
    wal = dest / "member" / "wal" / "0000000000000000-0000000000000000.wal"
    assert wal.read_bytes() == (src / "member" / "wal" / wal.name).read_bytes()
    if hasattr(os, "posix_fallocate"):  # the restored WAL is preallocated again, as etcd leaves its own
        assert wal.stat().st_blocks * 512 >= wal.stat().st_size
    assert not list(tmp_path.joinpath("cache", "seeds").glob(".partial-*"))


def test_restore_of_a_missing_or_broken_seed_leaves_no_data_dir(tmp_path: Path) -> None:
    dest = tmp_path / "etcd"
    assert not seed.restore(tmp_path / "no-such-seed", dest)
    broken = tmp_path / "broken"
    (broken / "member" / "wal").mkdir(parents=True)  # no snap/db: not a usable seed
    assert not seed.restore(broken, dest)
    assert not dest.exists()
    assert not dest.with_name("etcd.partial").exists()


def test_store_removes_partial_copies_left_by_a_killed_maker(tmp_path: Path) -> None:
    src = _fake_data_dir(tmp_path / "src")
    seeds = tmp_path / "seeds"
    old = seeds / ".partial-old"
    (old / "etcd").mkdir(parents=True)
    os.utime(old, (0, 0))
    fresh = seeds / ".partial-fresh"  # another maker copying right now: left alone
    fresh.mkdir()
    seed.store(src, seeds / "etcd-x")
    assert not old.exists() and fresh.exists() and (seeds / "etcd-x" / "member" / "snap" / "db").is_file()
