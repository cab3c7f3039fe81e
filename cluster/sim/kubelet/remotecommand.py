"""The kubelet's ``exec`` streams over WebSocket, as the API server reaches them from ``kubectl exec`` (1.36).

A 1.36 kubelet declares ``ExtendWebSocketsToKubelet`` in ``Node.status.declaredFeatures``, and the API server then
proxies a WebSocket exec straight to it instead of translating it to SPDY (``pkg/registry/core/pod/rest/
subresources.go``). The kubelet serves ``v5.channel.k8s.io`` with the stream translator of
``k8s.io/apiserver/pkg/util/proxy`` (``websocket.go``, ``streamtranslator.go``) and the older protocols
(``v4.channel.k8s.io``, ``channel.k8s.io`` and their base64 forms, which other clients use) through the container
runtime's streaming server (``k8s.io/cri-streaming/pkg/streaming/remotecommand``). Both are reproduced here:

* The query: ``command`` (repeated), ``input``, ``output``, ``error``, ``tty`` (``remotecommand.NewOptions``:
  none of the three streams is a 400 ``you must specify at least 1 of stdin, stdout, stderr``; a tty drops
  stderr).
* The handshake (``wsstream.Conn``): a protocol the server lacks is ``403 Forbidden`` with no body.
* Each message is one byte of channel (0 stdin, 1 stdout, 2 stderr, 3 error, 4 resize) and the data; base64
  protocols send text, the channel as an ASCII digit. After the upgrade an empty message goes to the lowest
  writable channel; the command's output follows, then the status on channel 3 and a close frame. v5's
  stream-close signal (255, channel) is accepted.
* The status (``metav1.Status`` as JSON; v1 protocols send only a failure's message): success; a non-zero exit
  (``NonZeroExitCode`` with an ``ExitCode`` cause, the message wrapped once more by the translator for v5); a
  runtime failure (``InternalError``, wrapped twice for v5: once by the runtime's streaming server, once by the
  kubelet's translator, which is why ``kubectl exec`` prints "Internal error occurred: Internal error occurred:").
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cluster.kube import websocket
from cluster.sim.kubelet import programs

V5 = "v5.channel.k8s.io"
V4 = "v4.channel.k8s.io"
V4_BASE64 = "v4.base64.channel.k8s.io"
V1 = "channel.k8s.io"
V1_BASE64 = "base64.channel.k8s.io"
PROTOCOLS = (V5, V4, V4_BASE64, V1, V1_BASE64)  # and "" (no protocol asked): v1 binary
STDIN, STDOUT, STDERR, ERROR, RESIZE = range(5)
STREAM_CLOSE = 255
CHUNK = 32 * 1024


class OptionsError(ValueError):
    pass


@dataclass(frozen=True)
class Options:
    command: tuple[str, ...]
    stdin: bool
    stdout: bool
    stderr: bool
    tty: bool


def options(query: dict[str, tuple[str, ...]] | Any) -> Options:
    """``remotecommand.NewOptions`` plus the ``command`` parameters (``getExecRequestParams``)."""
    def flag(name: str) -> bool:
        values = query.get(name) or ()
        return bool(values) and values[0] == "1"

    tty, stdin, stdout, stderr = flag("tty"), flag("input"), flag("output"), flag("error")
    if tty and stderr:
        stderr = False
    if not (stdin or stdout or stderr):
        raise OptionsError("you must specify at least 1 of stdin, stdout, stderr")
    return Options(tuple(query.get("command") or ()), stdin, stdout, stderr, tty)


def negotiate(requested: str) -> str | None:
    """The subprotocol chosen from a ``Sec-WebSocket-Protocol`` header, or None (403): the first one the client
    lists that the server has (Go's x/net/websocket takes the client's order)."""
    asked = [p.strip() for p in requested.split(",") if p.strip()] or [""]
    for p in asked:
        if p == "" or p in PROTOCOLS:
            return p
    return None


def _status(outcome: programs.Outcome, protocol: str, command: Sequence[str]) -> bytes | None:
    """What goes on the error channel at the end, or None for nothing (v1's success)."""
    if outcome.error is not None:
        message = f"error executing command in container: {outcome.error}"
        if protocol == V5:  # the runtime's status becomes a plain error in the translator's SPDY client
            message = f"Internal error occurred: {message}"
        status: dict[str, Any] = {"metadata": {}, "status": "Failure", "message": f"Internal error occurred: {message}",
                                  "reason": "InternalError", "details": {"causes": [{"message": message}]},
                                  "code": 500}
    elif outcome.exit_code != 0:
        if protocol == V5:
            inner = f"command terminated with exit code {outcome.exit_code}"
        else:
            inner = f"error executing command [{' '.join(command)}], exit code {outcome.exit_code}"
        status = {"metadata": {}, "status": "Failure",
                  "message": f"command terminated with non-zero exit code: {inner}", "reason": "NonZeroExitCode",
                  "details": {"causes": [{"reason": "ExitCode", "message": str(outcome.exit_code)}]}}
    else:
        status = {"metadata": {}, "status": "Success"}
    if protocol in (V1, V1_BASE64, ""):
        return None if status["status"] == "Success" else str(status["message"]).encode()
    return json.dumps(status, separators=(",", ":")).encode()


Run = Callable[[Sequence[str]], Awaitable[programs.Outcome]]


class Session:
    """One exec's WebSocket, after the 101: output, status, close."""

    def __init__(self, protocol: str, opts: Options, run: Run) -> None:
        self.protocol = protocol
        self.opts = opts
        self.run = run
        self.base64 = "base64" in protocol

    def _message(self, channel: int, data: bytes) -> bytes:
        if self.base64:
            return websocket.frame(websocket.TEXT, bytes([0x30 + channel]) + base64.b64encode(data))
        return websocket.frame(websocket.BINARY, bytes([channel]) + data)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        opts = self.opts
        first = STDOUT if opts.stdout else STDERR if opts.stderr else ERROR
        writer.write(self._message(first, b""))
        await writer.drain()
        # The client's messages (stdin, resize, the stream-close signal, ping, close) are read and dropped while the
        # command runs: no simulated program reads input. A close from the client ends the session.
        listening = asyncio.ensure_future(self._drain_client(reader, writer))
        try:
            outcome = await self.run(opts.command)
            out, err = outcome.stdout, outcome.stderr
            if opts.tty:  # the terminal's output processing (onlcr), and stderr is the same terminal
                out = (out + err).replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
                err = b""
            for channel, data, wanted in ((STDOUT, out, opts.stdout), (STDERR, err, opts.stderr)):
                for i in range(0, len(data) if wanted else 0, CHUNK):
                    writer.write(self._message(channel, data[i:i + CHUNK]))
                    await writer.drain()
            status = _status(outcome, self.protocol, opts.command)
            if status is not None:
                writer.write(self._message(ERROR, status))
            writer.write(websocket.close_frame(websocket.NORMAL))
            await writer.drain()
        finally:
            listening.cancel()
            with contextlib.suppress(asyncio.CancelledError, websocket.Closed):
                await listening

    async def _drain_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await websocket.read_message(reader, writer)
