"""The e2e tier: one real local control plane per test session, in a private state dir.

Tests get the ``local_cluster`` fixture (a ``cluster.testing.LocalCluster``) and must undo what they change (use
the ``namespace`` fixture for a namespace of their own). The binaries come from the user cache.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from cluster import errors, fleet as fleet_mod
from cluster.backends.local import LocalBackend
from cluster.progress import LogProgress
from cluster.testing import LocalCluster


@pytest.fixture(scope="session")
def local_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    root = tmp_path_factory.mktemp("gpulab-state")
    os.environ["GPULAB_STATE_DIR"] = str(root)
    backend = LocalBackend("gpulab", root)
    backend.up(fleet_mod.load("starter"), LogProgress())
    cluster = LocalCluster(backend, root)
    try:
        yield cluster
    finally:
        backend.down(purge=True)


@pytest.fixture
def namespace(local_cluster: LocalCluster) -> Iterator[str]:
    ns = local_cluster.namespace()
    yield ns
    with local_cluster.client() as c:
        try:
            c.delete(f"/api/v1/namespaces/{ns}")
        except errors.NotFound:
            pass
