"""The kind tier: one real kind cluster (kind's CLI, a real Docker engine, real kubelets and containerd in the node
containers) per session, built from the offline node image that ``.ci/kind/node-image.sh`` makes (``.ci/run`` runs
it before the tests). The simulated GPU stack runs on the host against kind's API server, as ``gpulab up --backend
kind`` runs it."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from prerequisites import require

from cluster import fleet as fleet_mod
from cluster.backends.kind import KindBackend
from cluster.progress import LogProgress

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "kind" / "node-image.sh"


@pytest.fixture(scope="module")  # torn down after the tier's file: an idle kind cluster keeps half a core busy
def kind_backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KindBackend]:
    ready = subprocess.run([str(SCRIPT), "--check"], capture_output=True, text=True, timeout=120, check=False)
    require(ready.returncode == 0, "the offline kind node image is not built or Docker is not answering: run "
                                   f"{SCRIPT} (CI's .ci/run does)")
    root = tmp_path_factory.mktemp("gpulab-kind-state")
    # Module-scoped, so pytest's context rather than the function-scoped monkeypatch: the tests that run after this
    # file in the same worker see the state dir they saw before.
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GPULAB_STATE_DIR", str(root))
        # One name per xdist worker: two of this tier's files may run at once (`make test` runs two workers), and
        # two kind clusters of one name would collide.
        worker = os.environ.get("PYTEST_XDIST_WORKER", "")
        default = f"gpulab-e2e-{worker}" if worker else "gpulab-e2e"
        backend = KindBackend(os.environ.get("GPULAB_KIND_CLUSTER", default), root)
        backend.up(fleet_mod.load("starter"), LogProgress())
        try:
            yield backend
        finally:
            backend.down(purge=True)
