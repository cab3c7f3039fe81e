"""A small HTTPS server on asyncio streams, for the endpoints gpulab serves itself (the simulated kubelets).

It lives in ``cluster.kube``, the package that speaks HTTP, and uses no HTTP library: the import contract keeps
those to the client modules, and a kubelet's endpoint needs only a little of HTTP/1.1. One request per
connection (every reply says ``Connection: close``; Go's transport in the API server opens another), a request
body is never read, and a reply is either whole (``Content-Length``) or streamed in chunks, each sent as soon as
it is produced (``Transfer-Encoding: chunked``), which is what following a container's log needs. A stream ends
when its producer does or when the client goes away. Or the reply switches protocols (101, ``Reply.upgrade``):
then the connection belongs to the handler's callable (WebSocket, ``cluster.kube.websocket``, for ``exec``).

TLS only, with client certificates as a kubelet takes them: a certificate is asked for but not required, and one
the client CA did not sign fails the handshake. Without a certificate the request still reaches the handler with
``client`` None, and the handler decides (a kubelet answers 401). This module decides nothing about what is
served or to whom, and it binds only the address it is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote

__all__ = ["ClientCert", "Handler", "Reply", "Request", "listen", "tls_context"]

log = logging.getLogger(__name__)

MAX_HEAD = 64 * 1024  # request line and headers; a kubelet allows 1 MiB, the API server sends a few hundred bytes
HANDSHAKE_SECONDS = 10.0
READ_SECONDS = 30.0
_REASONS = {101: "Switching Protocols", 200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
            405: "Method Not Allowed", 422: "Unprocessable Entity", 500: "Internal Server Error"}


@dataclass(frozen=True)
class ClientCert:
    """The verified client certificate's subject: who a kubelet takes the caller to be (user, groups)."""

    common_name: str
    organizations: tuple[str, ...] = ()


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # percent-decoded, without the query
    query: Mapping[str, tuple[str, ...]]
    headers: Mapping[str, str]  # names in lower case
    client: ClientCert | None
    local_address: str  # the address the connection came to (which simulated node)

    def param(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()
    # A streamed body: each item is sent as one chunk when produced. The iterator is closed when the client leaves.
    stream: AsyncIterator[bytes] | None = field(default=None, compare=False)
    # A protocol switch (status 101): after the head (``headers`` only), the connection is the callable's.
    upgrade: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]] | None = \
        field(default=None, compare=False)


Handler = Callable[[Request], Awaitable[Reply]]


def tls_context(cert_chain: Path, client_ca: Path) -> ssl.SSLContext:
    """A server context serving ``cert_chain`` (certificate, then its key, in one PEM file) that asks for a client
    certificate and verifies it against ``client_ca``. TLS 1.2 or newer; HTTP/1.1 only (no h2 in ALPN)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert_chain)
    ctx.load_verify_locations(cafile=str(client_ca))
    ctx.verify_mode = ssl.CERT_OPTIONAL
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


async def listen(host: str, port: int, context: ssl.SSLContext, handler: Handler) -> asyncio.AbstractServer:
    """Serve ``handler`` on ``host:port`` (``host`` must be an address, never a name) until the server is closed."""

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await _serve_one(reader, writer, handler)
        except (ConnectionError, ssl.SSLError, asyncio.IncompleteReadError, TimeoutError) as exc:
            log.debug("connection to %s:%d ended: %s", host, port, exc)
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError, TimeoutError):
                await asyncio.wait_for(writer.wait_closed(), 5)

    return await asyncio.start_server(on_connection, host, port, ssl=context, limit=MAX_HEAD,
                                      ssl_handshake_timeout=HANDSHAKE_SECONDS)


def _client_cert(peer: Any) -> ClientCert | None:
    """The subject of a verified peer certificate (``SSLSocket.getpeercert()``'s form), or None."""
    if not peer:
        return None
    cn, orgs = "", []
    for rdn in peer.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                cn = value
            elif key == "organizationName":
                orgs.append(value)
    return ClientCert(cn, tuple(orgs))


def parse_head(head: bytes) -> tuple[str, str, dict[str, tuple[str, ...]], dict[str, str]] | None:
    """(method, path, query, headers) of a request head, or None when it is not HTTP/1.x."""
    try:
        text = head.decode("latin-1")
        request_line, *lines = text.split("\r\n")
        method, target, version = request_line.split(" ")
    except ValueError:
        return None
    if not version.startswith("HTTP/1.") or not target.startswith("/"):
        return None
    raw_path, _, raw_query = target.partition("?")
    headers: dict[str, str] = {}
    for line in lines:
        if line:
            name, sep, value = line.partition(":")
            if not sep:
                return None
            key = name.strip().lower()  # a header sent twice is one comma-separated list (RFC 9110 5.3)
            headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    query = {k: tuple(v) for k, v in parse_qs(raw_query, keep_blank_values=True).items()}
    return method, unquote(raw_path), query, headers


async def _serve_one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, handler: Handler) -> None:
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_SECONDS)
    except asyncio.LimitOverrunError:
        await _write_whole(writer, Reply(400, b"request head too large"))
        return
    parsed = parse_head(head[:-4])
    if parsed is None:
        await _write_whole(writer, Reply(400, b"malformed HTTP request"))
        return
    method, path, query, headers = parsed
    sockname = writer.get_extra_info("sockname")
    request = Request(method, path, query, headers, _client_cert(writer.get_extra_info("peercert")),
                      str(sockname[0]) if sockname else "")
    try:
        reply = await handler(request)
    except Exception:  # a bug in one handler answers 500 and does not stop the server
        log.exception("handler for %s %s failed", method, path)
        reply = Reply(500, b"internal error")
    if reply.upgrade is not None and reply.status == 101:
        lines = ["HTTP/1.1 101 Switching Protocols", *(f"{k}: {v}" for k, v in reply.headers)]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        await writer.drain()
        await reply.upgrade(reader, writer)
    elif reply.stream is None:
        await _write_whole(writer, reply)
    else:
        await _write_stream(reader, writer, reply, reply.stream)


def _head(reply: Reply, framing: tuple[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Status')}",
             f"Content-Type: {reply.content_type}", f"{framing[0]}: {framing[1]}", "Connection: close",
             *(f"{k}: {v}" for k, v in reply.headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _write_whole(writer: asyncio.StreamWriter, reply: Reply) -> None:
    writer.write(_head(reply, ("Content-Length", str(len(reply.body)))) + reply.body)
    await writer.drain()


async def _write_stream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, reply: Reply,
                        stream: AsyncIterator[bytes]) -> None:
    writer.write(_head(reply, ("Transfer-Encoding", "chunked")))
    await writer.drain()

    async def pump() -> None:
        async for chunk in stream:
            if chunk:
                writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    # The client sends nothing more after its request, so a read that returns means it has gone (or misbehaves):
    # the stream stops then instead of at its next write, which for an idle followed log may be never.
    sending, gone = asyncio.ensure_future(pump()), asyncio.ensure_future(reader.read(1))
    try:
        await asyncio.wait({sending, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (sending, gone):
            task.cancel()
        sent, _ = await asyncio.gather(sending, gone, return_exceptions=True)
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()
    if isinstance(sent, Exception) and not isinstance(sent, (ConnectionError, ssl.SSLError)):
        log.error("a streamed reply failed after its head was sent", exc_info=sent)
