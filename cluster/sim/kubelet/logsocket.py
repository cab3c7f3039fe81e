"""The GPU stack's container log lines for the containers of a kind node, over one unix socket per node.

On ``local`` the stack writes what its operand containers print (start-up lines, the config-manager's and the MIG
manager's lines) into the kubelet's log store (``logstore``), which our kubelet endpoint serves. On kind the kubelets
are real: ``kubectl logs`` reads what the container itself printed, and the container runs gpulab's stand-in image.
So the stack keeps the same store on the host and serves it here: the stand-in (``.ci/kind/src/workload``) connects
to ``<devices dir>/<node>/pod-logs/logs.sock``, which every container on a worker sees read-only at
``CONTAINER_DIR`` (the node's containerd adds that bind to its base runtime spec: kindplugin ``--base-spec-mount``),
and prints the lines it is sent on its own stdout and stderr, where the real kubelet logs them.

The container does not say who it is: the stack finds out from the connection, as the kernel tells it. The peer's
process (``SO_PEERCRED``) sits in the kubelet's cgroup for its pod and container (``pod<uid>`` and the container's
ID, with either cgroup driver), and the pod's status, as the stack's informer saw it, names that container ID with
its restart count, which is the store's instance. A process outside a pod of that node gets nothing. Protocol: the
client sends one JSON line ``{"offset": N}`` (how much of its instance's log it has printed already: 0 when it
starts, more when it reconnects after the stack restarted); the server answers with JSON lines ``{"stream":
"stdout"|"stderr", "text": "...\\n", "offset": M}``, one per log line, following the log until the client goes; or
one line ``{"error": "..."}`` and the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import socket
import struct
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from cluster.sim.kubelet import logquery, logstore, nodesockets

log = logging.getLogger("gpulab.container-logs")

DIR_NAME = "pod-logs"  # <devices dir>/<node>/pod-logs: the folder every container of the node sees
SOCKET_NAME = "logs.sock"
CONTAINER_DIR = "/run/gpulab/logs"  # where the node's containers see it (kindplugin --base-spec-mount)
IDENTIFY_WAIT = 30.0  # how long a new container may wait for its pod's status to name it
RECHECK = 5.0  # a follower reads its file at least this often (a write from another process, a rotation)
MAX_REQUEST = 4096
_UID = r"[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}"
_POD_UID = re.compile(rf"(?:[a-z0-9_-]*-)?pod({_UID})(?:\.slice)?")  # cgroupfs: pod<uid>; systemd: ...-pod<uid, '_'>.slice
_CONTAINER_ID = re.compile(r"(?:[a-z-]*-)?([0-9a-f]{64})(?:\.scope)?")  # cgroupfs: <id>; systemd: cri-containerd-<id>.scope

PodsOn = Callable[[str], Iterable[dict[str, Any]]]


def identify(cgroup: str) -> tuple[str, str] | None:
    """The pod UID and container ID that a process's ``/proc/<pid>/cgroup`` names, or None (not a pod's container).
    Only the kubelet's layout counts: a container's cgroup is the last part of the path, right below its pod's,
    which is below the kubelet's ``kubepods`` (so a cgroup that a user made in a subtree delegated to them, with
    the same names elsewhere, names no pod)."""
    for line in cgroup.splitlines():
        parts = line.split(":", 2)[-1].rstrip("/").split("/")
        if len(parts) < 3:
            continue
        pod, container = _POD_UID.fullmatch(parts[-2]), _CONTAINER_ID.fullmatch(parts[-1])
        if pod and container and any("kubepods" in part for part in parts[:-1]):
            return pod.group(1).replace("_", "-"), container.group(1)
    return None


def instance(pods: Iterable[dict[str, Any]], uid: str, cid: str) -> logstore.ContainerRef | None:
    """The container instance whose runtime ID is ``cid`` in the pod ``uid``, as the pod's status names it."""
    for pod in pods:
        meta = pod.get("metadata") or {}
        if meta.get("uid") != uid:
            continue
        status = pod.get("status") or {}
        for cs in list(status.get("initContainerStatuses") or []) + list(status.get("containerStatuses") or []):
            if str(cs.get("containerID", "")).split("://", 1)[-1] == cid:
                return logstore.ContainerRef(meta["namespace"], meta["name"], uid, str(cs["name"]),
                                             int(cs.get("restartCount", 0)))
    return None


def frames(data: bytes, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The complete lines of a CRI log file after ``offset``, as frames, and where the next line starts."""
    out: list[dict[str, Any]] = []
    pos = offset
    while (end := data.find(b"\n", pos)) >= 0:
        line = logquery.parse(data[pos:end + 1])
        pos = end + 1
        if line is not None:
            out.append({"stream": line.stream, "text": line.text.decode("utf-8", "replace"), "offset": pos})
    return out, pos


def peer_pid(sock: socket.socket) -> int:
    """The connecting process's ID, as the kernel recorded it at ``connect`` (``SO_PEERCRED``)."""
    pid, _uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                          struct.calcsize("3i")))
    return int(pid)


class LogSockets(nodesockets.NodeSockets):
    """One log socket per node under ``root``, serving ``store``; ``pods_on(node)`` gives the node's pods as the
    stack's informer has them. ``wrote`` is the store's ``on_write``."""

    def __init__(self, root: Path, store: logstore.LogStore, pods_on: PodsOn, proc: Path = Path("/proc")) -> None:
        super().__init__(root, DIR_NAME, SOCKET_NAME, self._serve, "container log", limit=MAX_REQUEST)
        self.store = store
        self.pods_on = pods_on
        self.proc = proc
        self._followers: dict[logstore.ContainerRef, set[asyncio.Event]] = {}

    def wrote(self, ref: logstore.ContainerRef) -> None:
        for woken in self._followers.get(ref, ()):
            woken.set()

    def peer(self, writer: asyncio.StreamWriter) -> tuple[str, str] | None:
        sock = writer.get_extra_info("socket")
        try:
            return identify((self.proc / str(peer_pid(sock)) / "cgroup").read_text())
        except (OSError, ValueError, struct.error):
            return None

    async def _instance(self, node: str, uid: str, cid: str) -> logstore.ContainerRef | None:
        """The instance once the pod's status names the container (a container starts before the kubelet says so)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + IDENTIFY_WAIT
        while (ref := instance(self.pods_on(node), uid, cid)) is None and loop.time() < until:
            await asyncio.sleep(0.25)
        return ref

    async def _serve(self, node: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                request = json.loads(await asyncio.wait_for(reader.readline(), 10))
            except ValueError:
                request = None
            offset = request.get("offset") if isinstance(request, dict) else None
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
                await _send(writer, {"error": 'malformed request: want one line {"offset": N}'})
                return
            who = self.peer(writer)
            if who is None:
                await _send(writer, {"error": "not a container of a pod"})
                return
            ref = await self._instance(node, *who)
            if ref is None:
                await _send(writer, {"error": f"no pod on {node} has container {who[1][:12]} in its status"})
                return
            await self._follow(ref, offset, reader, writer)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as exc:
            log.debug("container log request on %s: %s", node, exc)

    async def _follow(self, ref: logstore.ContainerRef, offset: int, reader: asyncio.StreamReader,
                      writer: asyncio.StreamWriter) -> None:
        woken = asyncio.Event()
        self._followers.setdefault(ref, set()).add(woken)
        gone = asyncio.ensure_future(reader.read(1))  # the client sends nothing more: any read's end is its leaving
        try:
            while True:
                woken.clear()
                data = self.store.read(ref)
                if len(data) < offset:  # rotated: the current file is a new one
                    offset = 0
                out, offset = frames(data, offset)
                for frame in out:
                    writer.write(json.dumps(frame).encode() + b"\n")
                await writer.drain()
                wait = asyncio.ensure_future(woken.wait())
                await asyncio.wait({gone, wait}, timeout=RECHECK, return_when=asyncio.FIRST_COMPLETED)
                wait.cancel()
                if gone.done():
                    return
        finally:
            gone.cancel()
            followers = self._followers.get(ref, set())
            followers.discard(woken)
            if not followers:
                self._followers.pop(ref, None)


async def _send(writer: asyncio.StreamWriter, frame: dict[str, Any]) -> None:
    writer.write(json.dumps(frame).encode() + b"\n")
    with contextlib.suppress(OSError):
        await writer.drain()
