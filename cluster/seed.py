"""The etcd bootstrap seed: what a fresh kube-apiserver writes into an empty etcd, made once and reused.

On its first start against an empty etcd the API server spends about a second (on two cores) creating ~180
objects: the bootstrap RBAC roles and bindings, the API priority and fairness defaults, the system priority
classes, one APIService per group, the four system namespaces and the ``kubernetes`` Service. Every later start
only reads them back and finds nothing to change. So the first fresh cluster of a binary version runs etcd and the
API server once in a scratch directory, stops them cleanly and keeps etcd's data directory (sparse: ~300 KiB of
a 64 MiB write-ahead log) in the user cache; later fresh clusters start from a copy of it.

The seed also carries gpulab's two identity ClusterRoleBindings (``gpulab:cluster-admins`` and
``gpulab:sim-agents``, to ``cluster-admin``), made by the seed's maker with a break-glass certificate, so a fresh
cluster needs none. They name certificate groups, which only the cluster's own CA can sign into a certificate.

etcd runs with client-certificate authentication (the seed's maker too; nothing of TLS is stored in etcd's data)
and the API server encrypts Secrets with a key of each cluster's own: a seed holding a Secret would carry data
encrypted with the maker's key, so ``check_no_secrets`` refuses to keep such a seed (a fresh API server writes
none).

The seed holds nothing secret and nothing tied to one cluster except two things that are repaired on start:
the client CA in ``kube-system/extension-apiserver-authentication`` (the API server merges CAs into it, so the
seed's CA, whose key is deleted with the scratch directory, is pruned by ``prune_client_ca``) and the seed
API server's identity Lease (it expires and the API server's own garbage collector deletes it). A visible side
effect: the system namespaces are as old as the seed.

The seed is keyed by the binary versions and by the API server's flags (paths and ports left out), so a changed
flag or version makes a new one. Any failure to make or copy a seed falls back to an empty etcd.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from cluster import binaries, errors, versions
from cluster.kube.client import Client

log = logging.getLogger(__name__)

SEED_REVISION = 2  # bump when what goes into a seed changes in a way the flags do not show
# 2: etcd behind client certificates; the seed carries gpulab's identity ClusterRoleBindings
_CHUNK = 1 << 20
STALE_PARTIAL_SECONDS = 900


_PER_CLUSTER_FLAGS = ("--secure-port",)


def _flag_fingerprint(apiserver_argv: Sequence[str]) -> str:
    """A hash of the API server's flags with per-cluster values (paths, loopback URLs, its port) left out."""
    kept = []
    for arg in apiserver_argv[1:]:
        flag, sep, value = arg.partition("=")
        if sep and (value.startswith("/") or "127.0.0.1:" in value or flag in _PER_CLUSTER_FLAGS):
            value = "<local>"
        kept.append(f"{flag}={value}" if sep else flag)
    text = "\n".join([versions.KUBERNETES_VERSION, versions.ETCD_VERSION, str(SEED_REVISION), *sorted(kept)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def seeds_dir() -> Path:
    """Where seeds are kept (``cluster.binaries.seeds_dir``, the public name of the folder)."""
    return binaries.seeds_dir()


def seed_path(apiserver_argv: Sequence[str]) -> Path:
    return seeds_dir() / f"etcd-k8s-{versions.KUBERNETES_VERSION}-{_flag_fingerprint(apiserver_argv)}"


def sparse_copy(src: Path, dst: Path, *, allocate: bool = False) -> None:
    """Copy a directory tree, leaving runs of zero bytes as holes (etcd preallocates its WAL with zeros).

    With ``allocate`` the copies get all their blocks reserved (``posix_fallocate``, cheap: no zeros written where
    the filesystem supports it), as etcd's own preallocation does: a WAL with holes could fail to take a write
    when the disk fills, where a preallocated one does not."""
    for root, _dirs, files in os.walk(src):
        here = Path(root)
        out = dst / here.relative_to(src)
        out.mkdir(parents=True, exist_ok=True, mode=0o700)
        for name in files:
            with open(here / name, "rb") as fin, open(out / name, "wb") as fout:
                size = 0
                while chunk := fin.read(_CHUNK):
                    size += len(chunk)
                    if chunk.count(0) == len(chunk):
                        fout.seek(len(chunk), os.SEEK_CUR)
                    else:
                        fout.write(chunk)
                fout.truncate(size)
                if allocate and size and hasattr(os, "posix_fallocate"):
                    os.posix_fallocate(fout.fileno(), 0, size)
            os.chmod(out / name, 0o600)


def restore(seed: Path, data_dir: Path) -> bool:
    """Copy the seed into an etcd data dir that does not exist yet; False (and nothing left behind) on failure."""
    if not (seed / "member" / "snap" / "db").is_file():
        return False
    partial = data_dir.with_name(data_dir.name + ".partial")
    try:
        shutil.rmtree(partial, ignore_errors=True)
        sparse_copy(seed, partial, allocate=True)
        partial.rename(data_dir)
        os.chmod(data_dir, 0o700)
    except OSError as exc:
        log.warning("could not copy the etcd seed (%s); starting from an empty etcd", exc)
        shutil.rmtree(partial, ignore_errors=True)
        shutil.rmtree(data_dir, ignore_errors=True)
        return False
    return True


def store(data_dir: Path, seed: Path) -> None:
    """Keep a cleanly stopped etcd data dir as the seed (atomically; a concurrent maker's copy wins)."""
    seed.parent.mkdir(parents=True, exist_ok=True)
    for stale in seed.parent.glob(".partial-*"):  # left by a maker that was killed mid-copy
        try:
            if time.time() - stale.stat().st_mtime > STALE_PARTIAL_SECONDS:
                shutil.rmtree(stale, ignore_errors=True)
        except OSError:
            pass
    tmp = Path(tempfile.mkdtemp(prefix=".partial-", dir=seed.parent))
    try:
        sparse_copy(data_dir, tmp / "etcd")
        try:
            (tmp / "etcd").rename(seed)
        except OSError:
            if not seed.exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def prune_client_ca(client: Client, ca_pem: str) -> bool:
    """Leave only this cluster's CA in the API server's published client-CA bundle; True if it had to change.

    The API server merges its client CA into what the ConfigMap already holds (so CAs can be rotated), which
    after a seeded start means the seed's CA too. Nobody holds that CA's key, but nothing should trust it.
    """
    path = "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication"
    for _ in range(5):
        cm = client.get(path)
        data = cm.setdefault("data", {})
        if data.get("client-ca-file", "").strip() == ca_pem.strip():
            return False
        data["client-ca-file"] = ca_pem
        try:
            client.replace(path, cm)
            return True
        except errors.Conflict:
            continue
    raise errors.ClusterError("could not update kube-system/extension-apiserver-authentication (kept changing)")


def check_no_secrets(client: Client) -> None:
    """Refuse to keep a seed that holds Secrets: they would be encrypted with the seed maker's key, which no other
    cluster has (each cluster's API server encrypts Secrets at rest with its own key)."""
    found = client.get("/api/v1/secrets", limit=1).get("items") or []
    if found:
        meta = found[0].get("metadata", {})
        raise errors.ClusterError(f"the etcd seed would carry a Secret ({meta.get('namespace')}/{meta.get('name')}), "
                                  "encrypted with a key other clusters do not have; not keeping it")
