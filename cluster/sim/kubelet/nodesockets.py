"""One unix socket per kind node on the host, for the GPU stack's answers to programs inside the node's containers.

On kind the kubelets and containers are real, and the simulated GPU stack runs on the host. What a container asks
the stack (``nvidia-smi``: ``smisocket``; its GPU stack log lines: ``logsocket``) goes over a unix socket in the
node's devices folder, ``<devices dir>/<node>/<purpose>/<socket>``, which kind mounts into the node
(``cluster.sim.gpu.devicefile.NODE_DIR``) and the node mounts into containers read-only. A unix socket: nothing
leaves the machine. This module binds and tracks them; what each socket answers is its owner's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

log = logging.getLogger("gpulab.node-sockets")

_SUN_PATH_MAX = 107  # bytes of a unix socket's path (Linux sockaddr_un, less the NUL)
Handler = Callable[[str, asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def bind(path: Path) -> socket.socket:
    """A listening unix socket at ``path``, open to every user (a container may run as any uid); a path longer
    than a socket address can hold is bound through ``/proc/self/fd`` of its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if len(os.fsencode(str(path))) <= _SUN_PATH_MAX:
            sock.bind(str(path))
        else:
            fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
            try:
                sock.bind(f"/proc/self/fd/{fd}/{path.name}")
            finally:
                os.close(fd)
        os.chmod(path, 0o666)
        sock.listen(64)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class NodeSockets:
    """The sockets ``<root>/<node>/<dir_name>/<socket_name>`` of the nodes, each connection handed to
    ``handler(node, reader, writer)``; ``what`` names them in the stack's log."""

    def __init__(self, root: Path, dir_name: str, socket_name: str, handler: Handler, what: str,
                 limit: int = 64 * 1024) -> None:
        self.root = root
        self.dir_name = dir_name
        self.socket_name = socket_name
        self.handler = handler
        self.what = what
        self.limit = limit
        self._servers: dict[str, asyncio.AbstractServer] = {}
        self._open: dict[str, set[asyncio.StreamWriter]] = {}  # connections being served, closed with their socket

    def socket_dir(self, node: str) -> Path:
        return self.root / node / self.dir_name

    def path(self, node: str) -> Path:
        return self.socket_dir(node) / self.socket_name

    async def ensure(self, node: str) -> None:
        """Serve ``node``'s socket, unless it is served already (and its file is still there)."""
        if node in self._servers and self.path(node).exists():
            return
        await self.close(node)
        try:
            sock = bind(self.path(node))
        except OSError as exc:
            log.error("%s socket of %s not started: %s", self.what, node, exc)
            return
        self._servers[node] = await asyncio.start_unix_server(lambda r, w: self._tracked(node, r, w), sock=sock,
                                                              limit=self.limit)

    async def _tracked(self, node: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conns = self._open.setdefault(node, set())
        conns.add(writer)
        try:
            await self.handler(node, reader, writer)
        finally:
            conns.discard(writer)
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def close(self, node: str | None = None) -> None:
        """Stop ``node``'s socket (every one when None)."""
        for name in [node] if node is not None else list(self._servers):
            server = self._servers.pop(name, None)
            if server is None:
                continue
            server.close()
            with contextlib.suppress(FileNotFoundError):
                self.path(name).unlink()
            for writer in list(self._open.pop(name, ())):  # a follower would otherwise hold wait_closed (3.12+)
                writer.close()
            await server.wait_closed()
