"""The simulated GPU stack's answer to ``nvidia-smi`` in a pod on kind, over one unix socket per node.

On kind the kubelets are real, so ``kubectl exec POD -- nvidia-smi`` runs a program in the container itself. gpulab's
node plugin (``cluster/gosrc/kindplugin``) mounts that program into every container it gives devices, as NVIDIA's
container toolkit does: ``/usr/bin/nvidia-smi``, which is the plugin's own binary acting as a client, and the
node's socket folder. The client sends its arguments and the container's ``NVIDIA_VISIBLE_DEVICES`` here, as one
JSON line ``{"args": [...], "visible": "GPU-…" | null}``; the answer is one JSON object ``{"stdout", "stderr",
"exit_code"}``, computed by the same code as ``kubectl exec … nvidia-smi`` on ``local`` (``gpuview``,
``programs.nvidia_smi``) from the node object as the stack last saw it. The socket is
``<devices dir>/<node>/nvidia-smi/smi.sock`` on the host, a folder kind mounts into the node
(``cluster.sim.gpu.devicefile.NODE_DIR``): a unix socket, so nothing leaves the machine (``nodesockets``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cluster.sim.kubelet import gpuview, nodesockets, programs

log = logging.getLogger("gpulab.nvidia-smi")

DIR_NAME = "nvidia-smi"  # <devices dir>/<node>/nvidia-smi: the folder the node plugin mounts into GPU containers
SOCKET_NAME = "smi.sock"
MAX_REQUEST = 64 * 1024


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


class SmiSockets(nodesockets.NodeSockets):
    """One nvidia-smi socket per node under ``root``, answering from ``nodes`` (name -> Node, kept current by the
    stack's informer)."""

    def __init__(self, root: Path, nodes: Mapping[str, dict[str, Any]]) -> None:
        super().__init__(root, DIR_NAME, SOCKET_NAME, self._serve, "nvidia-smi", limit=MAX_REQUEST)
        self.nodes = nodes

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
