"""A fleet mirrored from the real H100's recorded NVML inventory comes up on the local backend, and once the
operator is installed `gpulab status` shows that GPU's product, memory and MIG capability."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cluster import fleet
from cluster.backends.local import LocalBackend
from cluster.kube.client import Client
from cluster.progress import LogProgress
from cluster.sim.gpu import operator
from cluster.testing import wait_for

RECORDED = Path(__file__).parent.parent / "fixtures" / "nvml" / "h100-real-probe.json"


def test_mirrored_h100_fleet_shows_product_memory_and_mig_capability(tmp_path: Path) -> None:
    fleet_file = tmp_path / "mirror.yaml"
    gpulab = Path(sys.executable).parent / "gpulab"
    out = subprocess.run([str(gpulab), "probe", "--replay", str(RECORDED), "--fleet-out", str(fleet_file), "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    mirrored = fleet.load(str(fleet_file))
    assert mirrored.pools[0].gpu is not None and mirrored.pools[0].gpu.model.key == "H100-80GB-HBM3"

    root = tmp_path / "state"
    be = LocalBackend("gpulab", root)
    be.up(mirrored, LogProgress())
    try:
        node = mirrored.node_names()[0]
        with Client.from_kubeconfig(be.kubeconfig()) as client:
            operator.install(client, wait=True, timeout=120)
            wait_for(lambda: client.get(f"/api/v1/nodes/{node}")["metadata"]["labels"].get("nvidia.com/gpu.product"),
                     timeout=60, what="GFD labels on the mirrored node")
        env = dict(os.environ, GPULAB_STATE_DIR=str(root))
        status = subprocess.run([str(gpulab), "status", "--json"], capture_output=True, text=True, env=env, timeout=60)
        data = json.loads(status.stdout)
        got = next(n for n in data["nodes"] if n["name"] == node)
        assert got["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
        assert got["labels"]["nvidia.com/gpu.memory"] == "81559"
        assert got["labels"]["nvidia.com/mig.capable"] == "true"
        table = subprocess.run([str(gpulab), "status"], capture_output=True, text=True, env=env, timeout=60,
                               ).stdout
        assert "gpu.product=NVIDIA-H100-80GB-HBM3" in table
        assert "gpu.memory=81559" in table
        assert "mig.capable=true" in table
    finally:
        be.down(purge=True)
