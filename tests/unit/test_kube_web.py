"""cluster.kube's plain-HTTP helpers used outside the Kubernetes API: the browser-like session class mode drives
JupyterHub with, the health probe of bring-up, and one-shot status checks; against a real local HTTP server."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cluster.kube import http, web


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path == "/login":
            self.send_response(200)
            self.send_header("Set-Cookie", "_xsrf=hub-token; Path=/hub/")
            self.send_header("Set-Cookie", "_xsrf=root-token; Path=/")
            body = b"form"
        elif self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "/api")
            body = b""
        elif self.path == "/api":
            self.send_response(200)
            body = json.dumps({"cookie": self.headers.get("Cookie", "")}).encode()
        else:
            self.send_response(503)
            body = b"starting"
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_web_session_keeps_cookies_follows_redirects_on_request_and_reads_json(server: str) -> None:
    async def go() -> tuple[list[tuple[str, str]], web.Reply, web.Reply]:
        async with web.WebSession() as session:
            await session.request("GET", f"{server}/login")
            not_followed = await session.request("GET", f"{server}/moved", follow=False)
            followed = await session.request("GET", f"{server}/moved")
            return session.cookies("_xsrf"), not_followed, followed

    cookies, not_followed, followed = asyncio.run(go())
    assert sorted(cookies) == [("/", "root-token"), ("/hub/", "hub-token")]
    assert not_followed.status == 302
    assert followed.status == 200 and followed.path == "/api"
    assert "_xsrf=root-token" in followed.json()["cookie"]


def test_web_session_says_which_url_failed(server: str) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/hub/login"

    async def go() -> None:
        async with web.WebSession() as session:
            await session.request("GET", url)

    with pytest.raises(http.HttpError, match=f"GET {url}"):
        asyncio.run(go())
    with pytest.raises(http.HttpError, match="not JSON"):
        web.Reply(200, "/x", b"<html>").json()


def test_status_and_probe(server: str) -> None:
    assert http.get_status(f"{server}/moved") == 302  # redirects are not followed
    with pytest.raises(http.HttpError):
        http.get_status(f"http://127.0.0.1:{_closed_port()}/")
    with http.probe() as probe:
        assert probe.check(f"{server}/api") == ""
        assert probe.check(f"{server}/readyz") == "HTTP 503: starting"
        assert probe.check(f"http://127.0.0.1:{_closed_port()}/") != ""
