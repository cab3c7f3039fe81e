"""The server side of WebSocket (RFC 6455) on asyncio streams, for the simulated kubelets' ``exec``.

Only what a kubelet's streaming endpoint needs: the opening handshake's accept key, reading the client's frames
(always masked, section 5.1; fragmented messages joined; ping answered with pong; close answered with close), and
writing unmasked frames. No extensions are negotiated (a client offering ``permessage-deflate`` gets none, as
from Go's ``golang.org/x/net/websocket`` that the kubelet's ``wsstream`` uses). A message larger than
``MAX_MESSAGE`` or a protocol error closes the connection with the RFC's status code.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import struct
from dataclasses import dataclass

__all__ = ["BINARY", "CLOSE", "Closed", "Message", "TEXT", "accept_key", "frame", "read_message"]

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
MAX_MESSAGE = 1 << 20  # stdin of an exec; a real kubelet reads without a limit, a simulated one needs none
NORMAL, PROTOCOL_ERROR, TOO_BIG = 1000, 1002, 1009


class Closed(Exception):
    """The peer closed the connection (or broke the protocol, and we closed it)."""


@dataclass(frozen=True)
class Message:
    opcode: int  # TEXT or BINARY
    data: bytes


def accept_key(key: str) -> str:
    """``Sec-WebSocket-Accept`` for a client's ``Sec-WebSocket-Key`` (RFC 6455 section 4.2.2)."""
    return base64.b64encode(hashlib.sha1((key.strip() + GUID).encode("latin-1")).digest()).decode()


def valid_key(key: str) -> bool:
    """A key is 16 random bytes in base64 (section 4.1)."""
    try:
        return len(base64.b64decode(key.strip(), validate=True)) == 16
    except ValueError:
        return False


def frame(opcode: int, payload: bytes = b"") -> bytes:
    """One final, unmasked frame (a server never masks)."""
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 127, n)
    return head + payload


def close_frame(code: int, reason: str = "") -> bytes:
    return frame(CLOSE, struct.pack("!H", code) + reason.encode()[:120])


async def _frame(reader: asyncio.StreamReader) -> tuple[bool, int, bytes]:
    b0, b1 = await reader.readexactly(2)
    if b0 & 0x70:
        raise _Violation(PROTOCOL_ERROR, "reserved bits set")
    if not b1 & 0x80:
        raise _Violation(PROTOCOL_ERROR, "client frame not masked")
    n = b1 & 0x7F
    if n == 126:
        (n,) = struct.unpack("!H", await reader.readexactly(2))
    elif n == 127:
        (n,) = struct.unpack("!Q", await reader.readexactly(8))
    if n > MAX_MESSAGE:
        raise _Violation(TOO_BIG, "message too big")
    mask = await reader.readexactly(4)
    data = bytearray(await reader.readexactly(n))
    for i in range(n):
        data[i] ^= mask[i % 4]
    return bool(b0 & 0x80), b0 & 0x0F, bytes(data)


class _Violation(Exception):
    def __init__(self, code: int, why: str) -> None:
        super().__init__(why)
        self.code = code


async def read_message(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Message:
    """The next data message; control frames are handled on the way. ``Closed`` when the peer closes or breaks
    the protocol (our close frame is sent first)."""
    parts: list[bytes] = []
    opcode = 0
    try:
        while True:
            fin, op, data = await _frame(reader)
            if op == PING:
                writer.write(frame(PONG, data[:125]))
                await writer.drain()
                continue
            if op == PONG:
                continue
            if op == CLOSE:
                code = data[:2] if len(data) >= 2 else struct.pack("!H", NORMAL)
                writer.write(frame(CLOSE, code))
                await writer.drain()
                raise Closed("closed by the peer")
            if op not in (CONTINUATION, TEXT, BINARY) or (op == CONTINUATION) != bool(parts):
                raise _Violation(PROTOCOL_ERROR, "unexpected frame")
            if op != CONTINUATION:
                opcode = op
            parts.append(data)
            if sum(map(len, parts)) > MAX_MESSAGE:
                raise _Violation(TOO_BIG, "message too big")
            if fin:
                return Message(opcode, b"".join(parts))
    except _Violation as exc:
        writer.write(close_frame(exc.code, str(exc)))
        await writer.drain()
        raise Closed(str(exc)) from None
    except (asyncio.IncompleteReadError, ConnectionError) as exc:
        raise Closed("connection lost") from exc
