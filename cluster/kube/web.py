"""A browser-like async HTTP session (cookies kept, WebSocket channels) for web apps beside the cluster.

Class mode drives JupyterHub and Jupyter Server through it as a learner's browser does (log in with a form,
follow the hub's OAuth redirects, open a kernel's channels). It lives in ``cluster.kube`` because that is the one
package that imports an HTTP library (an import-linter contract). Failures are ``http.HttpError``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp

from cluster.kube.http import HttpError

__all__ = ["Reply", "WebSession", "WebSocket"]


@dataclass(frozen=True)
class Reply:
    status: int
    path: str  # the path of the last URL (after redirects, when followed)
    body: bytes

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError as exc:
            raise HttpError(f"{self.path}: HTTP {self.status} with a body that is not JSON") from exc


class WebSocket:
    """One open WebSocket: send text frames, read text frames until the server closes it."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws = ws

    async def send(self, text: str) -> None:
        await self._ws.send_str(text)

    async def messages(self) -> AsyncIterator[str]:
        async for message in self._ws:
            if message.type == aiohttp.WSMsgType.TEXT:
                yield str(message.data)
            elif message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
                return


class WebSession:
    """``async with WebSession() as web``: requests share one cookie jar (cookies of 127.0.0.1 included)."""

    def __init__(self) -> None:
        self._http: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> WebSession:
        self._http = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._http is not None:
            await self._http.close()

    @property
    def _session(self) -> aiohttp.ClientSession:
        assert self._http is not None, "use WebSession in an async with block"
        return self._http

    def cookies(self, name: str) -> list[tuple[str, str]]:
        """(path, value) of each cookie called ``name`` in the jar."""
        return [(cookie["path"] or "/", cookie.value) for cookie in self._session.cookie_jar if cookie.key == name]

    async def request(self, method: str, url: str, *, form: Mapping[str, str] | None = None,
                      body: Any = None, headers: Mapping[str, str] | None = None,
                      follow: bool = True) -> Reply:
        """One request; ``form`` is sent form-encoded, ``body`` as JSON."""
        try:
            async with self._session.request(method, url, data=form, json=body, headers=headers,
                                             allow_redirects=follow) as resp:
                return Reply(resp.status, resp.url.path, await resp.read())
        except aiohttp.ClientError as exc:
            raise HttpError(f"{method} {url}: {exc}") from exc

    @asynccontextmanager
    async def websocket(self, url: str, *, headers: Mapping[str, str] | None = None) -> AsyncIterator[WebSocket]:
        try:
            async with self._session.ws_connect(url, headers=headers, max_msg_size=0) as ws:
                yield WebSocket(ws)
        except aiohttp.ClientError as exc:
            raise HttpError(f"WebSocket {url}: {exc}") from exc
