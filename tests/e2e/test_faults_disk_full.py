"""A full disk under the state dir gives one clear error and corrupts nothing; freeing space lets `gpulab up`
carry on with every object intact.

The state dir lives on a small tmpfs mounted for the test (so "full" is the kernel's own ENOSPC, not a
simulation); mounting needs root, and the tests say so and skip where they do not run as root. A filler file
takes the free space; removing it is "freeing space".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster.kube.client import Client
from prerequisites import require

GPULAB = str(Path(sys.executable).parent / "gpulab")


@pytest.fixture
def small_fs(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Path]:
    require(os.geteuid() == 0,
            "mounting a small tmpfs for the state dir needs root; this machine runs the tests as a user")
    size = getattr(request, "param", "8m")
    mount = tmp_path / "fs"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run([GPULAB, "down", "--purge"], env=_env(mount), capture_output=True, timeout=120)
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], check=False)


def _env(state: Path) -> dict[str, str]:
    return dict(os.environ, GPULAB_STATE_DIR=str(state))


def gpulab(state: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GPULAB, *args], env=_env(state), capture_output=True, text=True, timeout=timeout)


def one_clear_error(proc: subprocess.CompletedProcess[str], *needles: str, any_of: tuple[str, ...] = ()) -> None:
    """Exit 1, no traceback, exactly one ``error:`` line (progress lines may come before it), holding every
    one of ``needles`` and at least one of ``any_of``."""
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    errors_ = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors_) == 1, proc.stderr
    message = proc.stderr[proc.stderr.index("error: "):]
    for needle in needles:
        assert needle in message, message
    assert not any_of or any(n in message for n in any_of), message


def fill(fs: Path) -> Path:
    """Take every free byte of ``fs`` with one file; returns it (delete it to free the space)."""
    filler = fs / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (1 << 20, 4096, 1):
            try:
                while os.write(fd, b"\0" * size):
                    pass
            except OSError:
                continue
    finally:
        os.close(fd)
    assert os.statvfs(fs).f_bavail == 0
    return filler


def test_up_on_a_nearly_full_disk_says_so_and_leaves_nothing_behind(small_fs: Path) -> None:
    proc = gpulab(small_fs, "up")
    one_clear_error(proc, "MiB free", str(small_fs), "GPULAB_STATE_DIR")
    assert proc.stderr.startswith("error: "), "refused before any step started"
    assert list(small_fs.iterdir()) == []


@pytest.mark.parametrize("small_fs", ["320m"], indirect=True)
def test_full_disk_under_a_running_cluster_gives_clear_errors_and_up_recovers(small_fs: Path) -> None:
    up = gpulab(small_fs, "up")
    assert up.returncode == 0, up.stderr
    state = small_fs / "gpulab"
    with Client.from_kubeconfig(state / "admin.kubeconfig") as admin:
        admin.create("/api/v1/namespaces/default/configmaps",
                     {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "before-full"}, "data": {"k": "v"}})
    kept = {p: p.read_bytes() for p in [state / "state.json", state / "admin.kubeconfig",
                                         *sorted((state / "kubeconfigs").iterdir())]}

    # The tenant's objects exist before the disk fills, so the second call only has to write its kubeconfig
    # file. While the disk is full the API server may also stall (etcd cannot grow its files): either way the
    # learner gets one message, never a traceback.
    tenant_file = state / "tenants" / "team-full.kubeconfig"
    assert gpulab(small_fs, "kubeconfig", "--tenant", "team-full").returncode == 0
    tenant_file.unlink()

    filler = fill(small_fs)
    tenant = gpulab(small_fs, "kubeconfig", "--tenant", "team-full")
    one_clear_error(tenant, any_of=(f"cannot write the cluster state under {state}: no space left on the device",
                                    "cannot reach the API server"))
    assert not tenant_file.exists()

    assert gpulab(small_fs, "down").returncode == 0
    # Stopping etcd can free its preallocated WAL segment, so the restart is refused either by the free-space
    # check or by the first write that finds no room; both name the state dir and the disk.
    restart = gpulab(small_fs, "up")
    one_clear_error(restart, str(state), any_of=("MiB free", "no space left on the device"))
    assert {p: p.read_bytes() for p in kept} == kept, "state files changed while the disk was full"
    json.loads((state / "state.json").read_text())

    filler.unlink()
    again = gpulab(small_fs, "up")
    assert again.returncode == 0, again.stderr
    assert json.loads(gpulab(small_fs, "status", "--json").stdout)["healthy"] is True
    with Client.from_kubeconfig(state / "admin.kubeconfig") as admin:
        assert admin.get("/api/v1/namespaces/default/configmaps/before-full")["data"] == {"k": "v"}
    assert gpulab(small_fs, "kubeconfig", "--tenant", "team-full").returncode == 0
