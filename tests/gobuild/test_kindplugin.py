"""gpulab's device plugin for kind nodes (``cluster/gosrc/kindplugin``) against a stand-in kubelet: its Go test
registers each resource over the kubelet device-plugin API, follows the devices file in ListAndWatch (a GPU turning
unhealthy, a resource leaving the file), refuses a second shared replica in Allocate, mounts nvidia-smi (itself)
and the node's socket folder into the container, and registers again after the kubelet restarts; run as
``nvidia-smi`` it prints what the GPU stack's socket answers. Built from the Go module proxy in a wrapper module of its own, so it is in the ``build`` tier.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from cluster import gobuild, settings
from cluster.gpu import catalog, inventory
from cluster.progress import LogProgress
from cluster.sim import nodes
from cluster.sim.kubelet import gpuview, programs, smisocket


def test_node_plugin_go_tests_pass() -> None:
    built = gobuild.build_standalone(settings.cache_root(), "kindplugin", LogProgress())
    assert built.exists()
    work = built.parent.parent
    proc = subprocess.run([str(gobuild.go_binary()), "test", "-count=1", "./..."], cwd=work, capture_output=True,
                          text=True, timeout=600, check=False, env=gobuild.go_env(settings.cache_root()))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok" in proc.stdout


def test_the_plugin_binary_as_nvidia_smi_asks_the_stacks_socket(tmp_path: Path) -> None:
    """The binary Allocate mounts at /usr/bin/nvidia-smi, run under that name against the GPU stack's socket
    server (``cluster.sim.kubelet.smisocket``), prints what the stack answers: stdout and exit code as the local
    kubelet endpoint's nvidia-smi gives for the same node and devices."""
    built = gobuild.build_standalone(settings.cache_root(), "kindplugin", LogProgress())
    smi = tmp_path / "nvidia-smi"
    smi.symlink_to(built)
    inv = inventory.simulated_inventory("h100-0", catalog.MODELS["H100-80GB-HBM3"], 8)
    node = {"metadata": {"name": "h100-0", "annotations": {nodes.HARDWARE_ANNOTATION: json.dumps(
        {"gpus": 8, "model": "H100-80GB-HBM3", "numaNodes": 2, "nvlink": True})}}, "status": {"capacity": {"cpu": "96"}}}
    root = Path(tempfile.mkdtemp(prefix="smi", dir="/tmp"))  # short: the client binds no long path
    visible = f"{inv.gpus[1].uuid},{inv.gpus[3].uuid}"
    query = ["--query-gpu=gpu_name,gpu_uuid,memory.total", "--format=csv,noheader"]

    async def main() -> list[tuple[int, bytes, bytes]]:
        sockets = smisocket.SmiSockets(root, {"h100-0": node})
        await sockets.ensure("h100-0")
        env = {"PATH": "/usr/bin:/bin", "NVIDIA_VISIBLE_DEVICES": visible,
               "GPULAB_NVIDIA_SMI_SOCKET": str(sockets.path("h100-0"))}
        out = []
        try:
            for args in (["-L"], query, ["--bogus"]):
                proc = await asyncio.create_subprocess_exec(str(smi), *args, env=env, stdout=asyncio.subprocess.PIPE,
                                                            stderr=asyncio.subprocess.PIPE)
                stdout, stderr = await asyncio.wait_for(proc.communicate(), 30)
                out.append((proc.returncode or 0, stdout, stderr))
            await sockets.close()
            proc = await asyncio.create_subprocess_exec(str(smi), "-L", env=env, stdout=asyncio.subprocess.PIPE)
            stdout, _ = await asyncio.wait_for(proc.communicate(), 30)
            out.append((proc.returncode or 0, stdout, b""))
        finally:
            await sockets.close()
            shutil.rmtree(root, ignore_errors=True)
        return out

    results = asyncio.run(main())
    now = datetime.now(timezone.utc)
    for (code, stdout, stderr), args in zip(results, (["-L"], query, ["--bogus"])):
        want = programs.nvidia_smi(gpuview.container(node, visible), args, now)
        assert (code, stdout, stderr) == (want.exit_code, want.stdout, want.stderr), args
    assert results[0][1].count(b"GPU ") == 2 and results[2][0] != 0
    assert results[3][:2] == (programs.NO_DRIVER_EXIT, programs.NO_DRIVER)  # the stack gone: no driver to reach
