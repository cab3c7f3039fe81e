"""The committed ClusterPolicy CRD is exactly what the pinned controller-gen generates from the pinned GPU
Operator's ``api/nvidia/v1`` types, and exactly what NVIDIA ships for that commit.

Go-building tier (beside ``test_faults_build``): it builds controller-gen through the Go module proxy into the
user cache's build folder (a minute or two the first time, then cached) with the shared Go caches.
"""

from __future__ import annotations

import pytest

from cluster import errors, gobuild, nvidiabuild, settings
from cluster.gpu import clusterpolicy_crd
from cluster.progress import LogProgress
from prerequisites import missing


@pytest.fixture(scope="module")
def generated() -> str:
    try:
        gobuild.go_binary()
    except errors.BinariesUnavailable as exc:
        missing(exc.message)
    return nvidiabuild.generate_clusterpolicy_crd(settings.cache_root(), LogProgress())


def test_committed_crd_is_controller_gen_output(generated: str) -> None:
    """Regenerating with the pinned tools gives the committed file's bytes (after its provenance header)."""
    committed = clusterpolicy_crd.CRD_PATH.read_text()
    assert committed.startswith(nvidiabuild.crd_header())
    assert committed[len(nvidiabuild.crd_header()):] == generated


def test_generated_crd_is_the_one_nvidia_ships(generated: str) -> None:
    """The same bytes as deployments/gpu-operator/crds in NVIDIA's module at the pinned commit."""
    assert nvidiabuild.shipped_clusterpolicy_crd(settings.cache_root()) == generated
