"""The real H100 recording: `gpulab probe --json` run on an NVIDIA H100 80GB HBM3 (driver 580.159.04, CUDA 13.0).

Command (one device call, read-only): `python3 -m labs.cli.main probe --json > $OUT/h100-probe.json` after
installing the wheels under .wheels into /tmp/site (see the file's git log for the full command line).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cluster.gpu import advertise, catalog, inventory, inventory_json
from cluster.nvml import probe

pytestmark = pytest.mark.unit

DOC: dict[str, Any] = json.loads((Path(__file__).resolve().parents[1] / "fixtures/nvml/h100-real-probe.json").read_text())


def test_labels_derived_from_the_real_h100() -> None:
    """gpu-semantics §3 and §8: product NVIDIA-H100-80GB-HBM3, 81559 MiB, MIG capable, Hopper 9.0."""
    labels = DOC["advertisement"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["nvidia.com/gpu.memory"] == "81559"
    assert labels["nvidia.com/mig.capable"] == "true"
    assert labels["nvidia.com/gpu.family"] == "hopper"
    assert (labels["nvidia.com/gpu.compute.major"], labels["nvidia.com/gpu.compute.minor"]) == ("9", "0")
    assert labels["nvidia.com/cuda.driver-version.full"] == "580.159.04"
    assert labels["nvidia.com/cuda.runtime-version.full"] == "13.0"
    assert labels["nvidia.com/gpu.mode"] == "compute"
    assert DOC["advertisement"]["capacity"] == {"nvidia.com/gpu": 1}


def test_the_recording_replays_to_the_same_document() -> None:
    """Mapping the recorded NVML answers again gives the recorded inventory and advertisement."""
    result = probe.from_snapshot(DOC["probe"]["snapshot"])
    assert inventory_json.inventory_to_json(result.inventory) == DOC["probe"]["inventory"]
    ad = advertise.advertise(result.inventory, None, DOC["migStrategy"], machine=result.machine)
    assert {**ad.labels, **advertise.nfd_labels(result.inventory)} == DOC["advertisement"]["labels"]
    assert inventory_json.from_json(DOC["probe"]["inventory"]) == result.inventory


def test_state_seen_on_the_real_h100() -> None:
    """gpu-semantics §8: MIG mode [0, 0], no MIG devices, compute mode Default, no compute processes."""
    snap = DOC["probe"]["snapshot"]["devices"][0]
    assert snap["migMode"] == [0, 0] and snap["maxMigDeviceCount"] == 0
    assert snap["computeMode"] == 0 and snap["processes"] == []
    assert snap["pci"]["pciDeviceId"] == 0x233010DE


def test_catalog_h100_matches_what_nvml_reported() -> None:
    """The catalog's H100 (memory, SMs, profiles, placements) equals the model NVML described."""
    gpu = probe.from_snapshot(DOC["probe"]["snapshot"]).inventory.gpus[0]
    assert gpu.model == catalog.MODELS["H100-80GB-HBM3"]


def test_engine_table_matches_the_real_profiles() -> None:
    """Hopper engine counts used for simulated MIG devices are the ones NVML reported per profile."""
    h100 = catalog.MODELS["H100-80GB-HBM3"]
    for p in probe.from_snapshot(DOC["probe"]["snapshot"]).gpus[0].profiles:
        profile = h100.profile(p.name)
        assert profile is not None
        assert inventory.profile_engines(h100, profile) == p.engines, p.name
