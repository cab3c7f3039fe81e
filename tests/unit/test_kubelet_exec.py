"""``kubectl exec`` at a simulated node's kubelet endpoint: the WebSocket upgrade and the remote-command protocols
as a 1.36 kubelet serves them (v5 through its stream translator, v4 and older through the runtime's streaming
server), the kubelet's refusals, and what runs in the container (``nvidia-smi`` seeing the devices the device
manager's checkpoint gave it; anything missing from the image failing in the runtime)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import struct
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from cluster import pki as pki_mod
from cluster.gpu import catalog, inventory
from cluster.gpu.nvidia_smi import cli as smi_cli, view as smi_view
from cluster.kube import websocket
from cluster.sim import checkpoint, nodes, pod_agent
from cluster.sim.gpu import names
from cluster.sim.kubelet import logstore, programs, remotecommand, server
from cluster.supervisor import free_port

NODE, IP = "h100-0", "127.1.0.1"
UID = "5d1f9f0e-0000-4000-8000-0000000000e1"
MODEL = catalog.MODELS["H100-80GB-HBM3"]
INV = inventory.simulated_inventory(NODE, MODEL, 8)


def _node() -> dict[str, Any]:
    registry = {"resources": {"nvidia.com/gpu": [[g.uuid, g.uuid, g.index, True] for g in INV.gpus]},
                "policy": "distributed"}
    return {"metadata": {"name": NODE, "annotations": {
                nodes.HARDWARE_ANNOTATION: json.dumps({"gpus": 8, "model": MODEL.key, "numaNodes": 2, "nvlink": True}),
                names.DEVICE_REGISTRY: json.dumps(registry)}},
            "status": {"capacity": {"cpu": "96"}}}


def _pod(name: str = "trainer", env: list[dict[str, str]] | None = None, running: bool = True) -> dict[str, Any]:
    state = {"running": {}} if running else {"waiting": {"reason": "ContainerCreating"}}
    return {"metadata": {"name": name, "namespace": "lab-01", "uid": UID},
            "spec": {"nodeName": NODE, "containers": [{"name": "main", **({"env": env} if env else {})}]},
            "status": {"containerStatuses": [{"name": "main", "state": state, "restartCount": 0,
                                              "containerID": pod_agent.runtime_id(UID, "main", 0)}]}}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> pki_mod.Pki:
    return pki_mod.ensure(tmp_path_factory.mktemp("pki"), [(NODE, IP)])


class Kubelet:
    def __init__(self, pki: pki_mod.Pki, root: Path) -> None:
        self.pki = pki
        self.pods: dict[str, dict[str, Any]] = {"lab-01/trainer": _pod()}
        self.devices = checkpoint.DeviceCheckpoint()
        self.port = free_port(host=IP)
        self.server = server.KubeletServer(self.pods, logstore.LogStore(root), port=self.port,
                                           pki_dir=pki.kubelet_dir, client_ca=pki.ca_cert,
                                           nodes={NODE: _node()}, devices=self.devices)

    def give(self, *gpus: int) -> None:
        self.devices.record(NODE, UID, {"main": [("nvidia.com/gpu", INV.gpus[i].uuid) for i in gpus]})

    def run(self, coro: Any) -> Any:
        async def main() -> Any:
            await self.server.start([(NODE, IP)])
            try:
                return await asyncio.wait_for(coro(), 20)
            finally:
                await self.server.close()
        return asyncio.run(main())


@pytest.fixture
def kubelet(pki: pki_mod.Pki, tmp_path: Path) -> Iterator[Kubelet]:
    yield Kubelet(pki, tmp_path)


def _masked(opcode: int, payload: bytes) -> bytes:
    mask = os.urandom(4)
    n = len(payload)
    head = struct.pack("!BB", 0x80 | opcode, 0x80 | n) if n < 126 else struct.pack("!BBH", 0x80 | opcode, 0xFE, n)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


class Result:
    def __init__(self, head: bytes, messages: list[tuple[int, bytes]]) -> None:
        self.head = head
        self.status = int(head.split(b" ")[1])
        self.messages = messages

    def channel(self, n: int) -> bytes:
        return b"".join(data for ch, data in self.messages if ch == n)

    def status_json(self) -> dict[str, Any]:
        return dict(json.loads(self.channel(remotecommand.ERROR)))


async def _exec(k: Kubelet, command: list[str], *, protocol: str = remotecommand.V5, query: str = "output=1&error=1",
                path: str = "/exec/lab-01/trainer/main", headers: dict[str, str] | None = None,
                close_after: bytes | None = None, send: tuple[bytes, ...] = ()) -> Result:
    ctx = __import__("ssl").create_default_context(cafile=str(k.pki.ca_cert))
    ctx.load_cert_chain(str(k.pki.client_cert("apiserver-kubelet-client")),
                        str(k.pki.client_key("apiserver-kubelet-client")))
    reader, writer = await asyncio.open_connection(IP, k.port, ssl=ctx, server_hostname=IP)
    q = "&".join([*(f"command={quote(c)}" for c in command), query])
    hdrs = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode(), "Sec-WebSocket-Protocol": protocol,
            **(headers or {})}
    writer.write((f"GET {path}?{q} HTTP/1.1\r\nHost: {IP}\r\n" + "".join(f"{a}: {b}\r\n" for a, b in hdrs.items())
                  + "\r\n").encode())
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    messages: list[tuple[int, bytes]] = []
    if b" 101 " not in head.split(b"\r\n")[0]:
        body = await reader.read()
        writer.close()
        return Result(head + body, [])
    assert websocket.accept_key(hdrs["Sec-WebSocket-Key"]).encode() in head
    for message in send:
        writer.write(_masked(websocket.BINARY, message))
    if close_after is not None:
        writer.write(_masked(websocket.BINARY, close_after))
    while True:
        b0, b1 = await reader.readexactly(2)
        n = b1 & 0x7F
        if n == 126:
            (n,) = struct.unpack("!H", await reader.readexactly(2))
        elif n == 127:
            (n,) = struct.unpack("!Q", await reader.readexactly(8))
        data = await reader.readexactly(n)
        op = b0 & 0x0F
        if op == websocket.CLOSE:
            writer.write(_masked(websocket.CLOSE, data[:2]))
            writer.close()
            return Result(head, messages)
        if op == websocket.TEXT:  # base64 protocols
            messages.append((data[0] - 0x30, base64.b64decode(data[1:])))
        else:
            messages.append((data[0], data[1:]))


def _expected(args: list[str], visible: str) -> bytes:
    host = smi_view.simulated_host(INV, cpus=96, numa_nodes=2, nvlink=True)
    view = smi_view.container(host, visible)
    assert view is not None
    return smi_cli.run(view, args, datetime.now(timezone.utc)).stdout.encode()


def test_nvidia_smi_sees_the_gpus_the_device_manager_gave_the_container(kubelet: Kubelet) -> None:
    kubelet.give(2, 5)
    r = kubelet.run(lambda: _exec(kubelet, ["nvidia-smi", "-L"]))
    assert r.status == 101 and b"Sec-WebSocket-Protocol: v5.channel.k8s.io" in r.head
    assert r.messages[0] == (remotecommand.STDOUT, b"")  # the empty message on the lowest writable channel
    out = r.channel(remotecommand.STDOUT)
    assert out == _expected(["-L"], f"{INV.gpus[2].uuid},{INV.gpus[5].uuid}")
    assert out.count(b"GPU ") == 2 and INV.gpus[2].uuid.encode() in out and INV.gpus[0].uuid.encode() not in out
    assert r.status_json() == {"metadata": {}, "status": "Success"}
    query = ["nvidia-smi", "--query-gpu=gpu_name,gpu_uuid,memory.total", "--format=csv,noheader"]
    r = kubelet.run(lambda: _exec(kubelet, query))
    assert r.channel(remotecommand.STDOUT) == _expected(query[1:], f"{INV.gpus[2].uuid},{INV.gpus[5].uuid}")


def test_a_non_zero_exit_is_the_translators_status_on_v5_and_the_runtimes_on_v4(kubelet: Kubelet) -> None:
    kubelet.give(0)
    r = kubelet.run(lambda: _exec(kubelet, ["nvidia-smi", "--bogus"]))
    assert r.channel(remotecommand.STDOUT).startswith(b"ERROR: Option --bogus is not recognized.")
    assert r.status_json() == {
        "metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
        "message": "command terminated with non-zero exit code: command terminated with exit code 255",
        "details": {"causes": [{"reason": "ExitCode", "message": "255"}]}}
    r = kubelet.run(lambda: _exec(kubelet, ["nvidia-smi", "--bogus"], protocol=remotecommand.V4_BASE64))
    assert b"Sec-WebSocket-Protocol: v4.base64.channel.k8s.io" in r.head
    assert r.status_json()["message"] == ("command terminated with non-zero exit code: error executing command "
                                          "[nvidia-smi --bogus], exit code 255")
    r = kubelet.run(lambda: _exec(kubelet, ["nvidia-smi", "--bogus"], protocol=remotecommand.V1))
    assert r.channel(remotecommand.ERROR).startswith(b"command terminated with non-zero exit code: ")


def test_a_program_missing_from_the_image_fails_in_the_runtime(kubelet: Kubelet) -> None:
    """No GPU for this container: no nvidia-smi injected either."""
    for program, why in (("nvidia-smi", 'exec: "nvidia-smi": executable file not found in $PATH: unknown'),
                         ("/opt/tool", 'exec: "/opt/tool": stat /opt/tool: no such file or directory: unknown')):
        r = kubelet.run(lambda: _exec(kubelet, [program, "-L"]))
        status = r.status_json()
        assert status["reason"] == "InternalError" and status["code"] == 500
        message = status["message"]
        assert message.startswith("Internal error occurred: Internal error occurred: error executing command in "
                                  "container: failed to exec in container: failed to start exec \"")
        assert message.endswith(f"OCI runtime exec failed: exec failed: unable to start container process: {why}")
        assert r.channel(remotecommand.STDOUT) == b""
    r = kubelet.run(lambda: _exec(kubelet, ["ls"], protocol=remotecommand.V4))
    assert r.status_json()["message"].startswith("Internal error occurred: error executing command in container: ")


def test_visible_devices_come_from_the_checkpoint_else_the_containers_own_env(kubelet: Kubelet) -> None:
    kubelet.pods["lab-01/trainer"] = _pod(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])
    r = kubelet.run(lambda: _exec(kubelet, ["nvidia-smi", "-L"]))
    assert r.channel(remotecommand.STDOUT).count(b"GPU ") == 8  # the env-var hole: every GPU of the node
    kubelet.give(7)
    r = kubelet.run(lambda: _exec(kubelet, ["nvidia-smi", "-L"]))
    assert r.channel(remotecommand.STDOUT) == _expected(["-L"], INV.gpus[7].uuid)


def test_a_shell_runs_the_simple_commands_it_has_and_not_the_others(kubelet: Kubelet) -> None:
    kubelet.give(1)
    r = kubelet.run(lambda: _exec(kubelet, ["sh", "-c", "nvidia-smi -L && echo ok; grep x || exit 3"]))
    assert r.channel(remotecommand.STDOUT) == _expected(["-L"], INV.gpus[1].uuid) + b"ok\n"
    assert r.channel(remotecommand.STDERR) == b"sh: 1: grep: not found\n"
    assert r.status_json()["details"]["causes"][0]["message"] == "3"
    r = kubelet.run(lambda: _exec(kubelet, ["bash", "-c", "nvidia-smi -L | wc -l"]))
    assert r.channel(remotecommand.STDERR) == b"bash: line 1: nvidia-smi: command not found\n"


def test_a_tty_merges_stderr_and_ends_lines_with_crlf(kubelet: Kubelet) -> None:
    kubelet.give(0)
    r = kubelet.run(lambda: _exec(kubelet, ["nvidia-smi", "-L"], query="output=1&tty=1&input=1",
                                  close_after=bytes([remotecommand.STREAM_CLOSE, remotecommand.STDIN])))
    out = r.channel(remotecommand.STDOUT)
    assert out == _expected(["-L"], INV.gpus[0].uuid).replace(b"\n", b"\r\n")
    assert r.status_json()["status"] == "Success"


def test_the_kubelets_refusals(kubelet: Kubelet) -> None:
    kubelet.pods["lab-01/waiting"] = _pod("waiting", running=False)

    async def test() -> list[Result]:
        return [await _exec(kubelet, ["nvidia-smi"], query="tty=1"),  # no stream asked (tty drops nothing here)
                await _exec(kubelet, ["nvidia-smi"], path="/exec/lab-01/gone/main"),
                await _exec(kubelet, ["nvidia-smi"], path="/exec/lab-01/waiting/main"),
                await _exec(kubelet, ["nvidia-smi"], protocol="v9.channel.k8s.io"),
                await _exec(kubelet, ["nvidia-smi"], headers={"Upgrade": "SPDY/3.1"}),
                await _exec(kubelet, ["nvidia-smi"], path=f"/exec/lab-01/trainer/not-{UID}/main")]
    no_stream, gone, waiting, protocol, spdy, other_uid = kubelet.run(test)
    assert no_stream.status == 400 and no_stream.head.endswith(b"you must specify at least 1 of stdin, stdout, stderr")
    assert gone.status == 404 and gone.head.endswith(b"pod does not exist")
    assert waiting.status == 500 and waiting.head.endswith(b'container not found ("main")')
    assert protocol.status == 403
    assert spdy.status == 400 and b"WebSocket only" in spdy.head
    assert other_uid.status == 404


def test_programs_alone() -> None:
    none = programs.Container(None)
    assert programs.run(["echo", "hi"], none, datetime.now(timezone.utc)).error is not None
    expanded = programs.run(["sh", "-c", "echo $HOME"], none, datetime.now(timezone.utc))
    assert expanded.stderr == b"sh: 1: echo: not found\n" and expanded.exit_code == 127
    assert programs.run(["sh", "-c", "exit 300"], none, datetime.now(timezone.utc)).exit_code == 300 & 0xFF
    assert programs.run(["sh"], none, datetime.now(timezone.utc)) == programs.Outcome()  # no input: ends at once
    assert programs.run(["sh", "run.sh"], none, datetime.now(timezone.utc)).exit_code == 2
    host = smi_view.simulated_host(INV, cpus=96, numa_nodes=2, nvlink=True)
    broken = programs.Container(smi_view.container(host, "all"), driver_ok=False)
    out = programs.run(["nvidia-smi"], broken, datetime.now(timezone.utc))
    assert out.exit_code == 9 and out.stdout.startswith(b"NVIDIA-SMI has failed because it couldn't communicate")


def test_an_interactive_shell_on_a_terminal(kubelet: Kubelet) -> None:
    """``kubectl exec -it trainer -- bash``: the prompt, the terminal's echo, a command's output, ``exit 3``."""
    kubelet.give(4)
    keys = (b"\x00nvidia-smi -LX\x7f\r", b"\x00foo\r", b"\x00exit 3\r")
    r = kubelet.run(lambda: _exec(kubelet, ["bash"], query="input=1&output=1&tty=1", send=keys))
    out = r.channel(remotecommand.STDOUT)
    listing = _expected(["-L"], INV.gpus[4].uuid).replace(b"\n", b"\r\n")
    assert out == (b"root@trainer:/# nvidia-smi -LX\b \b\r\n" + listing + b"root@trainer:/# foo\r\n"
                   b"bash: foo: command not found\r\nroot@trainer:/# exit 3\r\n")
    assert r.status_json()["details"]["causes"][0]["message"] == "3"


def test_a_shell_reading_piped_input_until_its_end(kubelet: Kubelet) -> None:
    """``kubectl exec -i trainer -- sh < script``: no prompt, no echo; the input's end ends the shell."""
    r = kubelet.run(lambda: _exec(kubelet, ["sh"], query="input=1&output=1&error=1",
                                  send=(b"\x00echo one\nfo", b"\x00o\necho two"),
                                  close_after=bytes([remotecommand.STREAM_CLOSE, remotecommand.STDIN])))
    assert r.channel(remotecommand.STDOUT) == b"one\ntwo\n"
    assert r.channel(remotecommand.STDERR) == b"sh: 2: foo: not found\n"
    assert r.status_json() == {"metadata": {}, "status": "Success"}
    quiet = kubelet.run(lambda: _exec(kubelet, ["bash"]))  # no input at all: the shell ends at once
    assert quiet.status_json()["status"] == "Success" and quiet.channel(remotecommand.STDOUT) == b""


def _recorded(name: str) -> str:
    import re

    text = (Path(__file__).resolve().parents[1] / "fixtures" / "kubectl-exec" / name).read_text()
    return re.sub(r'exec "[0-9a-f]{64}"', 'exec "<id>"', text)


def test_the_runtime_errors_match_a_real_node(kubelet: Kubelet) -> None:
    """kubectl prints ``error: `` and the status message, then exits 1: as recorded on a real 1.36 node (kind)."""
    import re

    for program, name in (("nvidia-smi", "kind-missing-in-path.txt"), ("/opt/tool", "kind-missing-path.txt")):
        r = kubelet.run(lambda: _exec(kubelet, [program] + (["-L"] if program == "nvidia-smi" else [])))
        printed = re.sub(r'exec "[0-9a-f]{64}"', 'exec "<id>"', f"error: {r.status_json()['message']}\nrc=1\n")
        assert printed == _recorded(name)


def test_a_container_not_running_matches_a_real_node(kubelet: Kubelet) -> None:
    kubelet.pods["lab-01/waits"] = _pod("waits", running=False)
    r = kubelet.run(lambda: _exec(kubelet, ["nvidia-smi"], path="/exec/lab-01/waits/main"))
    body = r.head.split(b"\r\n\r\n", 1)[1].decode()
    assert f"error: unable to upgrade connection: {body}\nrc=1\n" == _recorded(
        "kind-container-not-running.txt").replace('"waits"', '"main"')
