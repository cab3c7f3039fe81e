"""The GPU stack's log socket for kind (``cluster.sim.kubelet.logsocket``): the stack learns which container
connects from the kernel (the peer's cgroup names its pod UID and container ID, with either cgroup driver) and the
pod's status (that container ID's restart count is the log instance); it sends that instance's lines from the offset
the client asks, follows new ones as the stack writes them, and refuses a process outside a pod, a container its pod's
status does not name (on this node) and a malformed request. On kind the stack itself starts each container
instance's log with its program's start-up lines (``stack.start_container_logs``)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.sim.gpu import stack
from cluster.sim.kubelet import logsocket, logstore

UID = "0b5a3c1e-4d2f-4a6b-9c8d-7e6f5a4b3c2d"
CID = "f" * 8 + "0123456789abcdef" * 3 + "01234567"
NODE = "a100-1"


def _pod(cid: str = CID, restarts: int = 2, node: str = NODE, init: bool = False) -> dict[str, Any]:
    status = {"name": "nvidia-mig-manager", "containerID": f"containerd://{cid}", "restartCount": restarts,
              "state": {"running": {}}}
    key = "initContainerStatuses" if init else "containerStatuses"
    return {"metadata": {"namespace": "gpu-operator", "name": "nvidia-mig-manager-x7k2p", "uid": UID},
            "spec": {"nodeName": node, "containers": [{"name": "nvidia-mig-manager"}]}, "status": {key: [status]}}


def test_the_cgroup_names_the_pod_and_container_with_either_driver() -> None:
    cgroupfs = f"12:memory:/docker/abc/kubepods/besteffort/pod{UID}/{CID}\n0::/\n"
    systemd = ("11:pids:/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
               f"kubelet-kubepods-besteffort-pod{UID.replace('-', '_')}.slice/cri-containerd-{CID}.scope\n")
    assert logsocket.identify(cgroupfs) == (UID, CID)
    assert logsocket.identify(systemd) == (UID, CID)
    assert logsocket.identify("0::/user.slice/user-0.slice/session-1.scope\n") is None
    assert logsocket.identify(f"1:cpu:/kubepods/pod{UID}\n") is None  # the pod's own cgroup: no container
    guaranteed = f"0::/system.slice/docker-{'a' * 64}.scope/kubelet/kubepods/pod{UID}/{CID}\n"  # kind's node, v2
    assert logsocket.identify(guaranteed) == (UID, CID)
    # The same names in a cgroup a user made (a subtree systemd delegates to them), or below a container's own
    # cgroup, name no pod.
    assert logsocket.identify(f"0::/user.slice/user-1000.slice/user@1000.service/pod{UID}/{CID}\n") is None
    assert logsocket.identify(f"0::/kubepods/besteffort/pod{UID}/{CID}/mine\n") is None
    assert logsocket.identify(f"0::/kubepods/besteffort/pod{UID}/x/{CID}\n") is None


def test_the_pods_status_gives_the_instance() -> None:
    assert logsocket.instance([_pod()], UID, CID) == logstore.ContainerRef(
        "gpu-operator", "nvidia-mig-manager-x7k2p", UID, "nvidia-mig-manager", 2)
    assert logsocket.instance([_pod(init=True, restarts=0)], UID, CID) is not None
    assert logsocket.instance([_pod()], UID, "e" * 64) is None
    assert logsocket.instance([_pod()], "another-uid", CID) is None


def test_frames_are_whole_lines_with_the_offset_after_each() -> None:
    data = logstore.cri_line(1, "stdout", "one") + logstore.cri_line(2, "stderr", "two") + b"2026-01-01T00:00:00Z std"
    out, end = logsocket.frames(data, 0)
    first = len(logstore.cri_line(1, "stdout", "one"))
    assert out == [{"stream": "stdout", "text": "one\n", "offset": first},
                   {"stream": "stderr", "text": "two\n", "offset": end}]
    assert data[end:] == b"2026-01-01T00:00:00Z std"  # unfinished: sent once it ends
    assert logsocket.frames(data, first) == (out[1:], end)


@pytest.fixture
def root() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ls", dir="/tmp"))  # short: a socket address holds 107 bytes
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _on(pods: list[dict[str, Any]]) -> logsocket.PodsOn:
    """The stack's pods-by-node index (``world.pods_on``)."""
    return lambda node: [p for p in pods if p["spec"]["nodeName"] == node]


def _proc(root: Path, cgroup: str) -> Path:
    """A /proc where this process (the test's client: the socket's peer) lives in ``cgroup``."""
    proc = root / "proc"
    (proc / str(os.getpid())).mkdir(parents=True)
    (proc / str(os.getpid()) / "cgroup").write_text(cgroup)
    return proc


async def _connect(path: Path, request: bytes) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_unix_connection(str(path))
    writer.write(request)
    await writer.drain()
    return reader, writer


async def _frame(reader: asyncio.StreamReader) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(await asyncio.wait_for(reader.readline(), 5))
    return found


def test_a_container_gets_its_instances_lines_and_follows_new_ones(root: Path) -> None:
    store = logstore.LogStore(root / "logs")
    pods = [_pod()]
    ref = logsocket.instance(pods, UID, CID)
    assert ref is not None
    store.write(ref, "Waiting for change to 'nvidia.com/mig.config' label", stream="stderr")
    store.write(ref.instance(1), "the instance before: not this container's")
    store.write(ref, "Updating to MIG config: all-1g.10gb", stream="stdout")

    async def main() -> tuple[list[dict[str, Any]], float, list[dict[str, Any]], float]:
        sockets = logsocket.LogSockets(root / "devices", store, _on(pods),
                                       proc=_proc(root, f"1:cpu:/kubepods/pod{UID}/{CID}\n"))
        store.on_write = sockets.wrote
        await sockets.ensure(NODE)
        assert oct(sockets.path(NODE).stat().st_mode & 0o777) == "0o666"
        reader, writer = await _connect(sockets.path(NODE), b'{"offset": 0}\n')
        got = [await _frame(reader), await _frame(reader)]
        started = time.monotonic()
        store.write(ref, "written while it follows")
        got.append(await _frame(reader))
        waited = time.monotonic() - started
        writer.close()
        # the stack restarted: the client asks from where it stopped
        again_reader, again = await _connect(sockets.path(NODE), json.dumps({"offset": got[1]["offset"]}).encode()
                                             + b"\n")
        resumed = [await _frame(again_reader)]
        started = time.monotonic()
        await sockets.close()  # a follower does not hold the socket open
        closing = time.monotonic() - started
        assert await asyncio.wait_for(again_reader.read(), 5) == b""
        assert not sockets.path(NODE).exists()
        return got, waited, resumed, closing

    got, waited, resumed, closing = asyncio.run(main())
    assert [(f["stream"], f["text"]) for f in got] == [
        ("stderr", "Waiting for change to 'nvidia.com/mig.config' label\n"),
        ("stdout", "Updating to MIG config: all-1g.10gb\n"), ("stdout", "written while it follows\n")]
    assert waited < 1 < logsocket.RECHECK  # woken by the write, not by the periodic look
    assert got[-1]["offset"] == len(store.read(ref))
    assert resumed == got[2:]
    assert closing < 2


def _refusal(root: Path, cgroup: str, request: bytes, pods: list[dict[str, Any]]) -> dict[str, Any]:
    store = logstore.LogStore(root / "logs")

    async def main() -> dict[str, Any]:
        sockets = logsocket.LogSockets(root / "devices", store, _on(pods),
                                       proc=_proc(root, cgroup))
        await sockets.ensure(NODE)
        try:
            reader, writer = await _connect(sockets.path(NODE), request)
            frame = await _frame(reader)
            assert await asyncio.wait_for(reader.read(), 5) == b""  # and the end
            writer.close()
            return frame
        finally:
            await sockets.close()
    return asyncio.run(main())


def test_a_process_outside_a_pod_gets_nothing(root: Path) -> None:
    said = _refusal(root, "0::/user.slice/session-3.scope\n", b'{"offset": 0}\n', [_pod()])
    assert said == {"error": "not a container of a pod"}


def test_a_malformed_request_is_refused(root: Path) -> None:
    for bad in (b"hello\n", b'{"offset": -1}\n', b'{"offset": true}\n', b"[]\n"):
        shutil.rmtree(root / "proc", ignore_errors=True)
        said = _refusal(root, f"1:cpu:/kubepods/pod{UID}/{CID}\n", bad, [_pod()])
        assert said == {"error": 'malformed request: want one line {"offset": N}'}, bad


def test_a_container_no_pod_on_this_node_names_gets_nothing(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logsocket, "IDENTIFY_WAIT", 0.3)
    said = _refusal(root, f"1:cpu:/kubepods/pod{UID}/{CID}\n", b'{"offset": 0}\n', [_pod(node="t4-0")])
    assert said == {"error": f"no pod on {NODE} has container {CID[:12]} in its status"}


def _operand_pod(restarts: int = 0, cid: str = CID) -> dict[str, Any]:
    return {"metadata": {"namespace": "gpu-operator", "name": "nvidia-device-plugin-daemonset-9xq4w", "uid": UID,
                         "labels": {"app": "nvidia-device-plugin-daemonset"}},
            "spec": {"nodeName": NODE, "containers": [{"name": "nvidia-device-plugin"}]},
            "status": {"containerStatuses": [{"name": "nvidia-device-plugin", "containerID": f"containerd://{cid}",
                                              "restartCount": restarts, "state": {"running": {}}}]}}


def test_on_kind_the_stack_starts_each_instances_log_with_the_programs_first_lines(tmp_path: Path) -> None:
    store = logstore.LogStore(tmp_path)
    pod = _operand_pod()
    ref = logstore.ContainerRef("gpu-operator", pod["metadata"]["name"], UID, "nvidia-device-plugin", 0)
    waiting = {**pod, "status": {"containerStatuses": [{"name": "nvidia-device-plugin", "restartCount": 0,
                                                         "state": {"waiting": {"reason": "ContainerCreating"}}}]}}
    stack.start_container_logs(store, "ADDED", waiting)
    assert not store.path(ref).exists()  # no container yet
    stack.start_container_logs(store, "MODIFIED", pod)
    first = store.read(ref)
    assert first.split(b"\n")[0].endswith(b" stdout F Starting nvidia-device-plugin")
    assert b"Starting FS watcher for /var/lib/kubelet/device-plugins" in first
    store.write(ref, "a later line")
    stack.start_container_logs(store, "MODIFIED", pod)  # the same instance again (or the stack restarted)
    assert store.read(ref).count(b"Starting nvidia-device-plugin") == 1
    stack.start_container_logs(store, "MODIFIED", _operand_pod(restarts=1, cid="e" * 64))
    assert store.read(ref.instance(1)).count(b"Starting nvidia-device-plugin") == 1
    stack.start_container_logs(store, "DELETED", pod)
    assert not store.path(ref).parent.exists()


def test_another_pods_container_gets_its_own_lines_never_this_ones(root: Path) -> None:
    """Two pods on one node: what the stack logs for one is never sent to a process of the other, whatever
    offset it asks from."""
    other_uid, other_cid = "1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f", "e" * 64
    mine, theirs = _pod(), _pod(cid=other_cid)
    theirs["metadata"] = {**theirs["metadata"], "uid": other_uid, "name": "learners-job"}
    store = logstore.LogStore(root / "logs")
    pods = [mine, theirs]
    ref, other = logsocket.instance(pods, UID, CID), logsocket.instance(pods, other_uid, other_cid)
    assert ref is not None and other is not None
    store.write(ref, "a line of the MIG manager's")
    store.write(other, "the job's own line")

    async def main() -> list[dict[str, Any]]:
        sockets = logsocket.LogSockets(root / "devices", store, _on(pods),
                                       proc=_proc(root, f"0::/kubepods/besteffort/pod{other_uid}/{other_cid}\n"))
        await sockets.ensure(NODE)
        try:
            got = []
            for offset in (0, 10**12):  # past its end: read as a rotated log, from its start
                reader, writer = await _connect(sockets.path(NODE), json.dumps({"offset": offset}).encode() + b"\n")
                got.append(await _frame(reader))
                writer.close()
            return got
        finally:
            await sockets.close()
    got = asyncio.run(main())
    assert [f["text"] for f in got] == ["the job's own line\n", "the job's own line\n"], got


def test_hostile_clients_get_nothing_and_leave_the_socket_serving(root: Path) -> None:
    """A process in a container owns its end of the socket: a request past the limit is refused, one that never
    ends its line does not hold up the next client, and the next honest request is answered."""
    store = logstore.LogStore(root / "logs")
    pods = [_pod()]
    ref = logsocket.instance(pods, UID, CID)
    assert ref is not None
    store.write(ref, "honest")

    async def main() -> tuple[dict[str, Any], dict[str, Any], float]:
        sockets = logsocket.LogSockets(root / "devices", store, _on(pods),
                                       proc=_proc(root, f"0::/kubepods/pod{UID}/{CID}\n"))
        await sockets.ensure(NODE)
        path = sockets.path(NODE)
        try:
            reader, writer = await _connect(path, b'{"offset": ' + b"9" * (logsocket.MAX_REQUEST + 1024) + b"}\n")
            flood = await _frame(reader)
            writer.close()
            _, silent = await _connect(path, b'{"offset": ')  # never finishes its line
            started = asyncio.get_running_loop().time()
            reader, writer = await _connect(path, b'{"offset": 0}\n')
            honest = await _frame(reader)
            waited = asyncio.get_running_loop().time() - started
            writer.close()
            silent.close()
            return flood, honest, waited
        finally:
            await sockets.close()
    flood, honest, waited = asyncio.run(main())
    assert flood == {"error": 'malformed request: want one line {"offset": N}'}
    assert honest["text"] == "honest\n" and waited < 5
