"""The agents' asynchronous API client (aiohttp) against a small local HTTP server: errors, params, watch lines."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from cluster import errors
from cluster.kube.client import AsyncClient
from cluster.kube.kubeconfig import Connection

BIG = "x" * (1 << 20)  # a watch event larger than aiohttp's default line buffer


async def _handler(request: web.Request) -> web.StreamResponse:
    if request.path == "/api/v1/namespaces/default/pods/missing":
        return web.json_response({"kind": "Status", "reason": "NotFound", "message": 'pods "missing" not found'},
                                 status=404)
    if request.path == "/api/v1/namespaces/default/pods" and request.method == "POST":
        return web.json_response({"kind": "Status", "reason": "AlreadyExists", "message": "already exists"},
                                 status=409)
    if request.path == "/broken":
        return web.Response(text="upstream exploded", status=502)
    if request.path == "/echo":
        body = await request.text()
        return web.json_response({"method": request.method, "query": dict(request.query),
                                  "contentType": request.headers.get("Content-Type"), "body": body})
    if request.path == "/api/v1/nodes" and request.query.get("watch") == "true":
        resp = web.StreamResponse()
        resp.content_type = "application/json"
        await resp.prepare(request)
        first = json.dumps({"type": "ADDED", "object": {"metadata": {"name": "a"}}}).encode() + b"\n"
        await resp.write(first[:10])  # one event split across writes
        await asyncio.sleep(0.01)
        await resp.write(first[10:])
        await resp.write(json.dumps({"type": "MODIFIED", "object": {"metadata": {"name": "b"}, "pad": BIG}}).encode()
                         + b"\n\n")
        await resp.write(json.dumps({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}}).encode())
        await resp.write_eof()
        return resp
    return web.json_response({"items": []})


def _client(server: str) -> AsyncClient:
    return AsyncClient(Connection(server=server, ca_file=None, insecure=True), timeout=5)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_error_statuses_become_our_exceptions_with_the_api_message() -> None:
    async def go() -> None:
        async for base in _serve():
            c = _client(base)
            with pytest.raises(errors.NotFound, match='pods "missing" not found'):
                await c.get("/api/v1/namespaces/default/pods/missing")
            with pytest.raises(errors.Conflict, match="already exists"):
                await c.create("/api/v1/namespaces/default/pods", {"metadata": {"name": "p"}})
            with pytest.raises(errors.ApiError, match="502.*upstream exploded"):
                await c.get("/broken")
            await c.aclose()
    run(go())


def test_params_bodies_and_content_types_are_sent_as_the_api_expects() -> None:
    async def go() -> None:
        async for base in _serve():
            c = _client(base)
            got = await c.get("/echo", watch=True, limit=5, labelSelector="a=b")
            assert got["query"] == {"watch": "true", "limit": "5", "labelSelector": "a=b"}
            got = await c.patch("/echo", {"spec": {"x": 1}})
            assert got["method"] == "PATCH" and got["contentType"] == "application/merge-patch+json"
            assert json.loads(got["body"]) == {"spec": {"x": 1}}
            await c.aclose()
    run(go())


def test_watch_reassembles_split_and_oversized_event_lines() -> None:
    async def go() -> list[dict[str, Any]]:
        async for base in _serve():
            c = _client(base)
            events = [e async for e in c.watch("/api/v1/nodes", resource_version="1")]
            await c.aclose()
            return events
        raise AssertionError("no server")
    events = run(go())
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "BOOKMARK"]
    assert events[1]["object"]["pad"] == BIG


def test_an_unreachable_server_is_one_clear_cluster_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, never listening: connection refused

        async def go() -> None:
            c = _client(f"http://127.0.0.1:{port}")
            with pytest.raises(errors.ClusterError, match=f"cannot reach the API server at http://127.0.0.1:{port}"):
                await c.get("/api/v1/nodes")
            with pytest.raises(errors.ClusterError, match="cannot reach"):
                async for _ in c.watch("/api/v1/nodes"):
                    pass
            await c.aclose()
        run(go())


async def _serve() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", _handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    sockets = site._server.sockets if site._server else []  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{sockets[0].getsockname()[1]}"
    finally:
        await runner.cleanup()
