"""The simulated GPU stack's answer to ``nvidia-smi`` in a pod on kind, over one unix socket per node.

On kind the kubelets are real, so ``kubectl exec POD -- nvidia-smi`` runs a program in the container itself. gpulab's
node plugin (``cluster/gosrc/kindplugin``) mounts that program into every container it gives devices, as NVIDIA's
container toolkit does: ``/usr/bin/nvidia-smi``, which is the plugin's own binary acting as a client, and the
node's socket folder. The client sends its arguments and the container's ``NVIDIA_VISIBLE_DEVICES`` here, as one
JSON line ``{"args": [...], "visible": "GPU-…" | null}``; the answer is one JSON object ``{"stdout", "stderr",
"exit_code"}``, computed by the same code as ``kubectl exec … nvidia-smi`` on ``local`` (``gpuview``,
``programs.nvidia_smi``) from the node object as the stack last saw it. The socket is
``<devices dir>/<node>/nvidia-smi/smi.sock`` on the host, a folder kind mounts into the node
(``cluster.sim.gpu.devicefile.NODE_DIR``): a unix socket, so nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cluster.sim.kubelet import gpuview, programs

log = logging.getLogger("gpulab.nvidia-smi")

DIR_NAME = "nvidia-smi"  # <devices dir>/<node>/nvidia-smi: the folder the node plugin mounts into GPU containers
SOCKET_NAME = "smi.sock"
MAX_REQUEST = 64 * 1024
_SUN_PATH_MAX = 107  # bytes of a unix socket's path (Linux sockaddr_un, less the NUL)


def socket_dir(root: Path, node: str) -> Path:
    return root / node / DIR_NAME


def answer(node: Mapping[str, Any] | None, request: Mapping[str, Any], now: datetime) -> dict[str, Any]:
    """The reply to one request, for ``node`` (None: the stack does not know it)."""
    args = request.get("args")
    visible = request.get("visible")
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args) or \
            not (visible is None or isinstance(visible, str)):
        return {"stdout": "", "stderr": "gpulab: malformed nvidia-smi request\n", "exit_code": 2}
    done = programs.nvidia_smi(gpuview.container(node, visible), list(args), now)
    return {"stdout": done.stdout.decode("utf-8", "replace"), "stderr": done.stderr.decode("utf-8", "replace"),
            "exit_code": done.exit_code}


def _bind(path: Path) -> socket.socket:
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


class SmiSockets:
    """One nvidia-smi socket per node under ``root``, answering from ``nodes`` (name -> Node, kept current by the
    stack's informer)."""

    def __init__(self, root: Path, nodes: Mapping[str, dict[str, Any]]) -> None:
        self.root = root
        self.nodes = nodes
        self._servers: dict[str, asyncio.AbstractServer] = {}

    def path(self, node: str) -> Path:
        return socket_dir(self.root, node) / SOCKET_NAME

    async def ensure(self, node: str) -> None:
        """Serve ``node``'s socket, unless it is served already (and its file is still there)."""
        if node in self._servers and self.path(node).exists():
            return
        await self.close(node)
        try:
            sock = _bind(self.path(node))
        except OSError as exc:
            log.error("nvidia-smi socket of %s not started: %s", node, exc)
            return
        self._servers[node] = await asyncio.start_unix_server(lambda r, w: self._serve(node, r, w), sock=sock,
                                                              limit=MAX_REQUEST)

    async def close(self, node: str | None = None) -> None:
        """Stop ``node``'s socket (every one when None)."""
        for name in [node] if node is not None else list(self._servers):
            server = self._servers.pop(name, None)
            if server is None:
                continue
            server.close()
            await server.wait_closed()
            with contextlib.suppress(FileNotFoundError):
                self.path(name).unlink()

    async def _serve(self, node: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 10)
            try:
                request = json.loads(line)
            except ValueError:
                request = {}
            reply = answer(self.nodes.get(node), request if isinstance(request, dict) else {},
                           datetime.now(timezone.utc))
            writer.write(json.dumps(reply).encode() + b"\n")
            await writer.drain()
        except (OSError, ValueError, asyncio.TimeoutError, asyncio.IncompleteReadError) as exc:
            log.debug("nvidia-smi request on %s: %s", node, exc)
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
