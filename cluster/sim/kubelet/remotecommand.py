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
# An interactive shell's input line (its number) -> what it printed and whether the shell exits there.
Line = Callable[[str, int], tuple[programs.Outcome, bool]]


@dataclass(frozen=True)
class Shell:
    """A shell started to read its commands from the exec's input (``kubectl exec -it POD -- bash``)."""

    name: str  # "sh" (dash) or "bash"
    prompt: bytes  # shown before each line when the input is a terminal
    run_line: Line


class Session:
    """One exec's WebSocket, after the 101: output, status, close (or, for a shell with input, a read loop)."""

    def __init__(self, protocol: str, opts: Options, run: Run, shell: Shell | None = None) -> None:
        self.protocol = protocol
        self.opts = opts
        self.run = run
        self.shell = shell if opts.stdin else None
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
        if self.shell is not None:
            code = await self._repl(self.shell, reader, writer)
            if code is None:
                return  # the client went away
            await self._finish(writer, programs.Outcome(exit_code=code))
            return
        # The client's messages (stdin, resize, the stream-close signal, ping, close) are read and dropped while the
        # command runs: no other simulated program reads input. A close from the client ends the session.
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
            await self._finish(writer, outcome)
        finally:
            listening.cancel()
            with contextlib.suppress(asyncio.CancelledError, websocket.Closed):
                await listening

    async def _drain_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await websocket.read_message(reader, writer)

    async def _finish(self, writer: asyncio.StreamWriter, outcome: programs.Outcome) -> None:
        status = _status(outcome, self.protocol, self.opts.command)
        if status is not None:
            writer.write(self._message(ERROR, status))
        writer.write(websocket.close_frame(websocket.NORMAL))
        await writer.drain()

    async def _emit(self, writer: asyncio.StreamWriter, outcome: programs.Outcome) -> None:
        out, err = outcome.stdout, outcome.stderr
        if self.opts.tty:
            out, err = (out + err).replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"), b""
        for channel, data, wanted in ((STDOUT, out, self.opts.stdout), (STDERR, err, self.opts.stderr)):
            if data and wanted:
                writer.write(self._message(channel, data))
        await writer.drain()

    async def _input(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes | None:
        """The next bytes of the exec's input; b"" at its end (v5's close of stdin); None when the client left."""
        while True:
            try:
                msg = await websocket.read_message(reader, writer)
            except websocket.Closed:
                return None
            data = msg.data
            if not data:
                continue
            channel = data[0] - 0x30 if self.base64 else data[0]
            payload = base64.b64decode(data[1:]) if self.base64 else data[1:]
            if channel == STREAM_CLOSE - (0x30 if self.base64 else 0) and self.protocol == V5:
                if payload[:1] == bytes([STDIN]):
                    return b""
                continue
            if channel == STDIN and payload:
                return payload

    async def _repl(self, shell: Shell, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> int | None:
        """Read lines and run them until ``exit`` or the end of input; the exit code, or None if the client left.
        On a terminal, the tty's line discipline is played too: echo, backspace, ^C, ^U, ^D on an empty line."""
        tty, code, number = self.opts.tty, 0, 0
        buf, pending = bytearray(), b""

        async def run(text: str) -> bool:
            nonlocal code, number
            number += 1
            outcome, stop = shell.run_line(text, 0 if tty and shell.name == "bash" else number)
            await self._emit(writer, outcome)
            code = outcome.exit_code
            return stop

        if tty:
            await self._emit(writer, programs.Outcome(shell.prompt))
        while True:
            data = await self._input(reader, writer)
            if data is None:
                return None
            if not data:  # end of input: the rest of a line, then the shell ends
                if pending.strip() and await run(pending.decode(errors="replace")):
                    return code
                if tty and shell.name == "bash":
                    await self._emit(writer, programs.Outcome(b"exit\n"))
                return code
            if not tty:
                pending += data
                while b"\n" in pending:
                    raw, pending = pending.split(b"\n", 1)
                    if await run(raw.decode(errors="replace")):
                        return code
                continue
            echo = bytearray()
            escape = 0
            for byte in data:
                if escape:  # an escape sequence (arrow keys): ESC, '[', then the final byte; not line editing
                    escape = escape + 1 if escape == 1 and byte == 0x5B else 0
                    continue
                if byte == 0x1B:
                    escape = 1
                elif byte in (0x0D, 0x0A):
                    writer.write(self._message(STDOUT, bytes(echo) + b"\r\n"))
                    echo.clear()
                    line = buf.decode(errors="replace")
                    buf.clear()
                    if await run(line):
                        return code
                    await self._emit(writer, programs.Outcome(shell.prompt))
                elif byte in (0x7F, 0x08):
                    if buf:
                        buf.pop()
                        echo += b"\b \b"
                elif byte == 0x15:  # ^U
                    echo += b"\b \b" * len(buf)
                    buf.clear()
                elif byte == 0x03:  # ^C: the line is dropped
                    echo += b"^C\r\n" + shell.prompt
                    buf.clear()
                    code = 130
                elif byte == 0x04 and not buf:  # ^D on an empty line: end of input
                    if echo:
                        writer.write(self._message(STDOUT, bytes(echo)))
                    if shell.name == "bash":
                        await self._emit(writer, programs.Outcome(b"exit\n"))
                    return code
                elif byte >= 0x20:
                    buf.append(byte)
                    echo.append(byte)
            if echo:
                writer.write(self._message(STDOUT, bytes(echo)))
                await writer.drain()
