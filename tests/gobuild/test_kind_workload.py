"""The kind node image's stand-in workload (``.ci/kind/src/workload``) prints the GPU stack's log lines for its
container: its Go tests (lines to their streams, a reconnect asking from where it stopped, a refusal tried again, no
socket folder no following) pass, and the built binary, against the stack's real log socket server
(``cluster.sim.kubelet.logsocket``), prints the container's instance's lines on stdout and stderr as they were
written, then one written while it runs. The peer's cgroup is the one thing this host cannot give (the process is
not in a pod), so the server reads it from a /proc folder the test writes for the binary's PID. Go builds come from
the module cache, so this is the ``build`` tier."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from cluster import gobuild, settings
from cluster.sim.kubelet import logsocket, logstore

SRC = Path(__file__).resolve().parents[2] / ".ci" / "kind" / "src"
UID = "0b5a3c1e-4d2f-4a6b-9c8d-7e6f5a4b3c2d"
CID = "c" * 64
NODE = "l40s-0"


def _go(*args: str, cwd: Path = SRC) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(gobuild.go_binary()), *args], cwd=cwd, capture_output=True, text=True, timeout=600,
                          check=False, env=gobuild.go_env(settings.cache_root()))


def test_the_workloads_go_tests_pass() -> None:
    vet = _go("vet", "./workload/")
    assert vet.returncode == 0, vet.stdout + vet.stderr
    proc = _go("test", "-count=1", "./workload/")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok" in proc.stdout


def test_the_built_stand_in_prints_its_containers_lines_from_the_stacks_socket(tmp_path: Path) -> None:
    binary = tmp_path / "sleep"
    built = _go("build", "-trimpath", "-o", str(binary), "./workload")
    assert built.returncode == 0, built.stdout + built.stderr
    root = Path(tempfile.mkdtemp(prefix="wl", dir="/tmp"))  # short: a socket address holds 107 bytes
    store = logstore.LogStore(root / "logs")
    pod: dict[str, Any] = {"metadata": {"namespace": "gpu-operator", "name": "nvidia-device-plugin-daemonset-x",
                                        "uid": UID},
                           "spec": {"nodeName": NODE},
                           "status": {"containerStatuses": [{"name": "config-manager",
                                                             "containerID": f"containerd://{CID}",
                                                             "restartCount": 0}]}}
    ref = logstore.ContainerRef("gpu-operator", pod["metadata"]["name"], UID, "config-manager", 0)
    store.write(ref, "Starting nvidia-device-plugin")
    store.write(ref, "I1202 10:00:00.000000       1 main.go:200] Waiting for change to label", stream="stderr")

    async def main() -> tuple[bytes, bytes]:
        sockets = logsocket.LogSockets(root / "devices", store, lambda node: [pod] if node == NODE else [],
                                       proc=root / "proc")
        store.on_write = sockets.wrote
        sockets.socket_dir(NODE).mkdir(parents=True)  # the folder first: the client waits for its socket
        proc = await asyncio.create_subprocess_exec(
            str(binary), "infinity", env={"GPULAB_LOG_SOCKET_DIR": str(sockets.socket_dir(NODE))},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        assert proc.stdout is not None and proc.stderr is not None
        (root / "proc" / str(proc.pid)).mkdir(parents=True)
        (root / "proc" / str(proc.pid) / "cgroup").write_text(f"1:cpu:/kubepods/besteffort/pod{UID}/{CID}\n")
        await sockets.ensure(NODE)
        try:
            first = await asyncio.wait_for(proc.stdout.readline(), 20)
            err = await asyncio.wait_for(proc.stderr.readline(), 20)
            store.write(ref, "Label change detected: nvidia.com/device-plugin.config=x2", stream="stderr")
            later = await asyncio.wait_for(proc.stderr.readline(), 5)
        finally:
            proc.kill()
            await proc.wait()
            await sockets.close()
            shutil.rmtree(root, ignore_errors=True)
        return first, err + later

    stdout, stderr = asyncio.run(main())
    assert stdout == b"Starting nvidia-device-plugin\n"
    assert stderr == (b"I1202 10:00:00.000000       1 main.go:200] Waiting for change to label\n"
                      b"Label change detected: nvidia.com/device-plugin.config=x2\n")
