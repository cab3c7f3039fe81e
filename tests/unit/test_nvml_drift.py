"""Drift between a Node object and what its GPUs should advertise (issue 4: MIG, mig.config.state, replicas,
allocatable), each with a fix."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cluster.gpu import advertise, catalog, inventory, mig
from cluster.gpu import device_plugin_config as dpc
from cluster.nvml import drift

pytestmark = pytest.mark.unit

A100 = catalog.MODELS["A100-SXM4-80GB"]


def node(labels: dict[str, str], capacity: dict[str, str], allocatable: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": "gpu-1", "labels": labels},
            "status": {"capacity": {"cpu": "8", **capacity}, "allocatable": {"cpu": "8", **(allocatable or capacity)}}}


def mig_host() -> inventory.NodeInventory:
    fit = mig.fit(A100, {"1g.10gb": 7})
    return inventory.simulated_inventory("gpu-1", A100, 2, layouts={0: fit.placements, 1: fit.placements})


def matching(inv: inventory.NodeInventory, config: dpc.DevicePluginConfig | None, strategy: str) -> dict[str, Any]:
    ad = advertise.advertise(inv, config, strategy)
    return node(ad.labels, {k: str(v) for k, v in ad.capacity.items()})


def kinds(found: list[drift.Drift]) -> list[str]:
    return [d.kind for d in found]


def test_agreeing_node_has_no_drift() -> None:
    """A node whose labels and resources match the derivation reports nothing."""
    inv = mig_host()
    assert drift.drift(matching(inv, None, "mixed"), inv, None, "mixed") == []


def test_mig_enabled_but_whole_gpus_advertised() -> None:
    """gpu-semantics §2 none: MIG is on, yet the node advertises whole GPUs -> drift with a strategy fix."""
    inv = mig_host()
    found = drift.drift(matching(inv, None, "none"), inv, None, "none")
    assert kinds(found) == ["mig-whole-gpus"]
    assert "14 MIG device(s)" in found[0].message and "strategy" in found[0].fix


@pytest.mark.parametrize(("state", "kind"), [("pending", "mig-config-stuck"), ("rebooting", "mig-config-stuck"), ("failed", "mig-config-failed")])
def test_mig_config_state_stuck_or_failed(state: str, kind: str) -> None:
    """gpu-semantics §3 mig.config.state: pending/rebooting are stuck, failed names the config."""
    inv = mig_host()
    n = matching(inv, None, "mixed")
    n["metadata"]["labels"].update({drift.MIG_STATE: state, drift.MIG_CONFIG: "all-1g.10gb"})
    found = drift.drift(n, inv, None, "mixed")
    assert kinds(found) == [kind] and "all-1g.10gb" in found[0].message
    n["metadata"]["labels"][drift.MIG_STATE] = "success"
    assert drift.drift(n, inv, None, "mixed") == []


def test_replicas_label_not_matching_config() -> None:
    """gpu-semantics §3 gpu.replicas: a label left from an older config is drift; the capacity differs too."""
    inv = inventory.simulated_inventory("gpu-1", A100, 2)
    old = matching(inv, None, "none")
    config = dpc.load("sharing: {timeSlicing: {resources: [{name: gpu, replicas: 4}]}}\n")
    found = drift.drift(old, inv, config, "none")
    assert kinds(found) == ["replicas-label", "capacity"]
    assert "nvidia.com/gpu.replicas=1" in found[0].message and "gives 4" in found[0].message
    assert "nvidia.com/gpu=8" in found[1].message


def test_allocatable_below_capacity_with_healthy_gpus() -> None:
    """Issue 3 faults: allocatable below capacity although NVML sees every GPU healthy."""
    inv = inventory.simulated_inventory("gpu-1", A100, 2)
    n = node(advertise.advertise(inv, None, "none").labels, {"nvidia.com/gpu": "2"}, {"nvidia.com/gpu": "1"})
    found = drift.drift(n, inv, None, "none")
    assert kinds(found) == ["allocatable-below-capacity"] and "nvidia.com/gpu 1/2" in found[0].message
    sick = advertise.with_health(inv, {1})
    assert drift.drift(n, sick, None, "none") == []  # an unhealthy GPU explains it


def test_pending_mig_mode_change() -> None:
    """gpu-semantics §5 MIG mode [current, pending]: a pending change waits for a GPU reset."""
    inv = inventory.simulated_inventory("gpu-1", A100, 1)
    pending = dataclasses.replace(inv, gpus=(dataclasses.replace(inv.gpus[0], mig_pending=True),))
    found = drift.drift(matching(inv, None, "none"), pending, None, "none")
    assert kinds(found) == ["mig-mode-pending"]


def test_plugin_error_is_reported() -> None:
    """gpu-semantics §2 single: a layout the plugin rejects shows as drift with the plugin's line."""
    fit = mig.fit(A100, {"1g.10gb": 2, "2g.20gb": 1})
    inv = inventory.simulated_inventory("gpu-1", A100, 1, layouts={0: fit.placements})
    found = drift.drift(node({}, {}), inv, None, "single")
    assert kinds(found) == ["plugin-error"] and "more than one MIG device type" in found[0].message


def test_cli_node_drift_through_kubectl(tmp_path: Path) -> None:
    """`gpulab probe --node N --kubeconfig K` runs `kubectl --kubeconfig K get node N -o json` from PATH."""
    root = Path(__file__).resolve().parents[2]
    fixture = root / "tests/fixtures/nvml/a100-80gb-mig-mixed.json"
    node_json = tmp_path / "node.json"
    node_json.write_text(json.dumps(node({"nvidia.com/mig.config.state": "failed", "nvidia.com/mig.config": "all-3g.20gb"},
                                         {"nvidia.com/gpu": "2"})))
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/args\ncat {node_json}\n')
    kubectl.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run([sys.executable, "-m", "labs.cli.main", "probe", "--json", "--replay", str(fixture), "--node", "gpu-1",
                           "--kubeconfig", "/tmp/kc"], capture_output=True, text=True, cwd=root, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "args").read_text().split() == ["--kubeconfig", "/tmp/kc", "get", "node", "gpu-1", "-o", "json"]
    assert [d["kind"] for d in json.loads(done.stdout)["drift"]] == ["mig-whole-gpus", "mig-config-failed"]
