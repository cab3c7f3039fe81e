"""Inventory value types: stable simulated UUIDs and a lossless JSON form (shared by probe and simulator)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from cluster import errors
from cluster.gpu import catalog, inventory, inventory_json, mig

pytestmark = pytest.mark.unit

H100 = catalog.MODELS["H100-80GB-HBM3"]


def test_uuids_are_stable_per_host_and_index() -> None:
    """Simulated nodes and "what NVML would report" agree: uuid5 of hostname + index."""
    a = inventory.simulated_inventory("gpu-node-1", H100, 2)
    b = inventory.simulated_inventory("gpu-node-1", H100, 2)
    c = inventory.simulated_inventory("gpu-node-2", H100, 2)
    assert [g.uuid for g in a.gpus] == [g.uuid for g in b.gpus]
    assert a.gpus[0].uuid != a.gpus[1].uuid != c.gpus[1].uuid
    assert a.gpus[0].uuid.startswith("GPU-") and len(a.gpus[0].uuid) == 40


def test_json_round_trip_with_mig_and_processes() -> None:
    """to_json/from_json keep every field, MIG devices and processes included."""
    fit = mig.fit(H100, {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1})
    inv = inventory.simulated_inventory("n", H100, 2, layouts={1: fit.placements})
    busy = dataclasses.replace(inv.gpus[0], processes=(inventory.Process(7, "nvidia-cuda-mps-server", 30),))
    inv = inventory.NodeInventory("n", (busy, inv.gpus[1]), inv.driver_version, inv.cuda_driver_version)
    again = inventory_json.from_json(json.loads(json.dumps(inventory_json.inventory_to_json(inv))))
    assert again == inv
    assert again.gpus[0].model is H100  # catalog identity kept
    assert again.gpus[0].mps_server_running and not again.gpus[1].mps_server_running


def test_from_json_reports_every_problem() -> None:
    """Bad inventory JSON is a ConfigError listing each problem, never a traceback."""
    with pytest.raises(errors.ConfigError) as info:
        inventory_json.from_json({"hostname": "x", "gpus": []})
    assert info.value.problems == ["driverVersion: required field is missing", "cudaDriverVersion: required field is missing"]
    good = inventory_json.inventory_to_json(inventory.simulated_inventory("n", H100, 1))
    good["gpus"][0]["computeMode"] = "Turbo"
    with pytest.raises(errors.ConfigError) as info:
        inventory_json.from_json(dict(good))
    assert "computeMode 'Turbo' is not one of" in info.value.problems[0]


def test_profile_slices_from_name() -> None:
    """gpu-semantics §5 profile string `<G>g.<GB>gb[+attrs]` or `<C>c.<G>g.<GB>gb`."""
    m = inventory.MigDevice("1c.3g.40gb", "MIG-x", 1, 0, 0, 4, 40448, 16)
    assert (m.ci_slices, m.gi_slices) == (1, 3)
    me = inventory.MigDevice("1g.10gb+me", "MIG-y", 1, 0, 0, 1, 9984, 16)
    assert (me.ci_slices, me.gi_slices, me.resource_suffix) == (1, 1, "1g.10gb.me")


def test_non_mig_model_ignores_layouts() -> None:
    """gpu-semantics §4: MIG only on capable models; a T4 never gets MIG devices."""
    t4 = inventory.simulated_inventory("t", catalog.MODELS["T4"], 1, layouts={0: ()})
    assert not t4.gpus[0].mig_capable and not t4.gpus[0].mig_enabled


def test_unknown_model_round_trips() -> None:
    """A model NVML reports but the catalog lacks survives JSON as itself."""
    odd = catalog.GpuModel("RTX-4090", "NVIDIA GeForce RTX 4090", 0x2684, 24564, (8, 9), 128, "Ada Lovelace", "GeForce")
    gpu = inventory.GpuInfo(0, "GPU-1", odd, False, False, False, pci_class=0x030000)
    inv = inventory.NodeInventory("w", (gpu,), "580.1", (13, 0))
    assert inventory_json.from_json(inventory_json.inventory_to_json(inv)) == inv
