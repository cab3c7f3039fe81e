"""The GPU stack's nvidia-smi socket for kind (``cluster.sim.kubelet.smisocket``): a client sending ``nvidia-smi``'s
arguments and a container's ``NVIDIA_VISIBLE_DEVICES`` gets what ``kubectl exec … nvidia-smi`` prints on ``local``
for the same node and devices (one function, ``gpuview.container``, behind both), from the node as the stack last
saw it; a node without its driver, an unknown one, and a malformed request get the tool's or the socket's refusal.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cluster.gpu import catalog, inventory
from cluster.gpu.nvidia_smi import cli as smi_cli, view as smi_view
from cluster.sim import nodes
from cluster.sim.gpu import hoststate, names
from cluster.sim.kubelet import gpuview, programs, smisocket

NODE = "h100-0"
MODEL = catalog.MODELS["H100-80GB-HBM3"]
INV = inventory.simulated_inventory(NODE, MODEL, 8)


def _node(faults: dict[str, Any] | None = None) -> dict[str, Any]:
    ann = {nodes.HARDWARE_ANNOTATION: json.dumps({"gpus": 8, "model": MODEL.key, "numaNodes": 2, "nvlink": True})}
    if faults:
        ann[names.FAULTS] = json.dumps(faults)
    return {"metadata": {"name": NODE, "annotations": ann}, "status": {"capacity": {"cpu": "96"}}}


def _expected(args: list[str], visible: str) -> str:
    host = smi_view.simulated_host(INV, cpus=96, numa_nodes=2, nvlink=True)
    view = smi_view.container(host, visible)
    assert view is not None
    return smi_cli.run(view, args, datetime.now(timezone.utc)).stdout


async def _ask(path: Path, request: bytes) -> dict[str, Any]:
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)  # a path too long for an address: through its folder
    try:
        reader, writer = await asyncio.open_unix_connection(f"/proc/self/fd/{fd}/{path.name}")
    finally:
        os.close(fd)
    writer.write(request)
    await writer.drain()
    raw = await reader.read()
    writer.close()
    return json.loads(raw) if raw else {}


def _serve(root: Path, known: dict[str, dict[str, Any]], requests: list[bytes],
           node: str = NODE) -> tuple[list[dict[str, Any]], int]:
    async def main() -> tuple[list[dict[str, Any]], int]:
        sockets = smisocket.SmiSockets(root, known)
        await sockets.ensure(node)
        path = sockets.path(node)
        mode = stat.S_IMODE(os.stat(path).st_mode)
        try:
            return [await _ask(path, r) for r in requests], mode
        finally:
            await sockets.close()
            assert not path.exists()
    return asyncio.run(main())


def _request(args: list[str], visible: str | None) -> bytes:
    return json.dumps({"args": args, "visible": visible}).encode() + b"\n"


def test_the_socket_answers_as_the_local_kubelet_endpoint_does(tmp_path: Path) -> None:
    two = f"{INV.gpus[2].uuid},{INV.gpus[5].uuid}"
    query = ["--query-gpu=gpu_name,gpu_uuid,memory.total", "--format=csv,noheader"]
    replies, mode = _serve(tmp_path, {NODE: _node()}, [_request(["-L"], two), _request(query, two),
                                                        _request(["-L"], INV.gpus[0].uuid)])
    assert mode == 0o666  # a container may run as any user
    assert replies[0] == {"stdout": _expected(["-L"], two), "stderr": "", "exit_code": 0}
    assert replies[0]["stdout"].count("GPU ") == 2 and INV.gpus[0].uuid not in replies[0]["stdout"]
    assert replies[1]["stdout"] == _expected(query, two) and replies[1]["stdout"].endswith(", 81559 MiB\n")
    assert replies[2]["stdout"] == _expected(["-L"], INV.gpus[0].uuid)
    # the very function the local kubelet endpoint calls (cluster.sim.kubelet.server.KubeletServer.container)
    local = programs.nvidia_smi(gpuview.container(_node(), two), ["-L"], datetime.now(timezone.utc))
    assert local.stdout.decode() == replies[0]["stdout"]


def test_an_unknown_option_fails_as_the_tool_does(tmp_path: Path) -> None:
    [reply], _ = _serve(tmp_path, {NODE: _node()}, [_request(["--bogus"], "all")])
    want = smi_cli.run(smi_view.whole_node(smi_view.simulated_host(INV, cpus=96, numa_nodes=2, nvlink=True)),
                       ["--bogus"], datetime.now(timezone.utc))
    assert reply["exit_code"] == want.exit_code != 0 and reply["stdout"] == want.stdout


def test_no_driver_an_unknown_node_and_a_malformed_request(tmp_path: Path) -> None:
    broken = _node({"kinds": ["driver-missing"]})
    assert not hoststate.faults(broken).driver_ok
    replies, _ = _serve(tmp_path, {NODE: broken}, [_request(["-L"], "all")])
    assert replies[0] == {"stdout": programs.NO_DRIVER.decode(), "stderr": "", "exit_code": programs.NO_DRIVER_EXIT}
    replies, _ = _serve(tmp_path, {}, [_request(["-L"], "all")])
    assert replies[0]["exit_code"] == programs.NO_DRIVER_EXIT
    replies, _ = _serve(tmp_path, {NODE: _node()}, [b"not json\n", _request([1], "all")])  # type: ignore[list-item]
    assert all(r["exit_code"] == 2 and "malformed" in r["stderr"] for r in replies)


def test_a_socket_path_longer_than_an_address_holds(tmp_path: Path) -> None:
    root = tmp_path / ("x" * 60) / ("y" * 60)
    assert len(str(smisocket.socket_dir(root, NODE) / smisocket.SOCKET_NAME)) > 107
    replies, _ = _serve(root, {NODE: _node()}, [_request(["-L"], "all")])
    assert replies[0]["stdout"].count("GPU ") == 8


def test_hostile_clients_get_nothing_and_leave_the_socket_serving(tmp_path: Path) -> None:
    """A process in a GPU container owns its end of the socket: a request past the 64 KiB limit gets no answer, a
    connection that sends nothing does not hold up the next client, and the next honest request is answered."""
    async def main() -> tuple[dict[str, Any], dict[str, Any], float]:
        sockets = smisocket.SmiSockets(tmp_path, {NODE: _node()})
        await sockets.ensure(NODE)
        path = sockets.path(NODE)
        try:
            flood = await _ask(path, b"[" * (smisocket.MAX_REQUEST + 1024) + b"\n")
            _, silent = await asyncio.open_unix_connection(str(path))  # holds a connection open, sends nothing
            started = asyncio.get_running_loop().time()
            honest = await asyncio.wait_for(_ask(path, _request(["-L"], "all")), 5)
            waited = asyncio.get_running_loop().time() - started
            silent.close()
            return flood, honest, waited
        finally:
            await sockets.close()
    flood, honest, waited = asyncio.run(main())
    assert flood == {}
    assert honest["stdout"].count("GPU ") == 8 and waited < 5


def test_a_container_sees_only_its_own_nodes_devices(tmp_path: Path) -> None:
    """The socket answers for the node it belongs to: naming another node's GPU UUID shows no device of that
    node (nvidia-smi finds none), so a pod cannot read another node's GPUs through it."""
    other = inventory.simulated_inventory("h100-1", MODEL, 8)
    foreign = other.gpus[0].uuid
    assert foreign not in {g.uuid for g in INV.gpus}
    replies, _ = _serve(tmp_path, {NODE: _node()}, [_request(["-L"], foreign)])
    assert replies[0] == {"stdout": "No devices were found\n", "stderr": "", "exit_code": 6}
